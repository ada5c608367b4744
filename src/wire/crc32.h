#pragma once
// The single place that chooses the CRC-32 implementation (ISA-L's crc32_gzip_refl: the IEEE
// polynomial, reflected, the same result as zlib's crc32 at about ten times its speed).
#include <cstdint>
#include <span>

namespace uroce::wire {
// Continues a CRC-32: pass 0 to start; pass the previous result to go on over more bytes.
uint32_t crc32(uint32_t running, std::span<const uint8_t> bytes);
}  // namespace uroce::wire
