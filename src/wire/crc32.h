#pragma once
// The single place that chooses the CRC-32 implementation (ISA-L's crc32_gzip_refl: the IEEE
// polynomial, reflected, the same result as zlib's crc32 at about ten times its speed).
#include <cstdint>
#include <span>

namespace uroce::wire {
// Continues a CRC-32: pass 0 to start; pass the previous result to go on over more bytes.
uint32_t crc32(uint32_t running, std::span<const uint8_t> bytes);

// Copies `src` to `dst` (which must not overlap it) and continues the CRC-32 over the bytes, in
// one pass where the CPU allows it (AVX-512 with VPCLMULQDQ) and `src` is at least 2 KiB, else a
// memcpy and crc32(). Equal to crc32(running, src) in every case.
uint32_t crc32_copy(uint32_t running, uint8_t* dst, std::span<const uint8_t> src);

// Whether crc32_copy() takes the one-pass path on this CPU (for tests and benchmarks).
bool crc32_copy_fused();
}  // namespace uroce::wire
