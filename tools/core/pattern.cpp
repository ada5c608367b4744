#include "core/pattern.h"

namespace uroce::tools {

// A 64-bit mix (splitmix64's finaliser) of the 8-byte-aligned word index, so each word's bytes
// differ and neighbouring words are unrelated; the byte is picked from the mixed word.
static uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint8_t pattern_byte(uint32_t seed, uint64_t offset) {
  uint64_t w = mix((offset >> 3) ^ (uint64_t{seed} << 40) ^ 0x5eedull);
  return static_cast<uint8_t>(w >> ((offset & 7) * 8));
}

void fill_pattern(std::span<uint8_t> buf, uint32_t seed, uint64_t base) {
  size_t i = 0;
  // Head up to an 8-byte boundary of the pattern's offsets, then whole words.
  for (; i < buf.size() && ((base + i) & 7) != 0; ++i) buf[i] = pattern_byte(seed, base + i);
  for (; i + 8 <= buf.size(); i += 8) {
    uint64_t w = mix(((base + i) >> 3) ^ (uint64_t{seed} << 40) ^ 0x5eedull);
    for (int b = 0; b < 8; ++b) buf[i + b] = static_cast<uint8_t>(w >> (b * 8));
  }
  for (; i < buf.size(); ++i) buf[i] = pattern_byte(seed, base + i);
}

int64_t find_mismatch(std::span<const uint8_t> buf, uint32_t seed, uint64_t base) {
  size_t i = 0;
  for (; i < buf.size() && ((base + i) & 7) != 0; ++i)
    if (buf[i] != pattern_byte(seed, base + i)) return static_cast<int64_t>(i);
  for (; i + 8 <= buf.size(); i += 8) {
    uint64_t w = mix(((base + i) >> 3) ^ (uint64_t{seed} << 40) ^ 0x5eedull);
    for (int b = 0; b < 8; ++b)
      if (buf[i + b] != static_cast<uint8_t>(w >> (b * 8))) return static_cast<int64_t>(i + b);
  }
  for (; i < buf.size(); ++i)
    if (buf[i] != pattern_byte(seed, base + i)) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace uroce::tools
