#include "core/sizes.h"

#include <cctype>
#include <charconv>

namespace uroce::tools {

std::optional<uint64_t> parse_size(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<size_t>(text.data() + text.size() - end));
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        return std::nullopt;
    }
    suffix.remove_prefix(1);
    if (suffix == "iB" || suffix == "IB" || suffix == "B" || suffix == "b") suffix = {};
    if (!suffix.empty()) return std::nullopt;
  }
  if (value > (kMaxMessageBytes >> shift)) return std::nullopt;
  return value << shift;
}

std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes) {
  std::vector<uint64_t> sizes;
  if (min_bytes > max_bytes) return sizes;
  if (min_bytes == 0) sizes.push_back(0);
  uint64_t s = 1;
  while (s < min_bytes) s <<= 1;
  for (; s <= max_bytes && s <= kMaxMessageBytes; s <<= 1) sizes.push_back(s);
  return sizes;
}

std::string format_size(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

}  // namespace uroce::tools
