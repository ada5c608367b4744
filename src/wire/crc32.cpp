#include "wire/crc32.h"

#include <isa-l/crc.h>

namespace uroce::wire {
uint32_t crc32(uint32_t running, std::span<const uint8_t> bytes) {
  if (bytes.empty()) return running;  // callers pass empty pads and tails; skip the call's setup
  return crc32_gzip_refl(running, bytes.data(), bytes.size());
}
}  // namespace uroce::wire
