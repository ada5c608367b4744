#pragma once
// Verification patterns: every byte a bench moves is a function of (seed, offset), so the receiver
// can check the data without a copy of it, and a byte that lands at the wrong offset is caught as
// surely as a corrupted one.
#include <cstdint>
#include <span>

namespace uroce::tools {

uint8_t pattern_byte(uint32_t seed, uint64_t offset);
// Fills `buf` with the pattern for offsets [base, base + buf.size()).
void fill_pattern(std::span<uint8_t> buf, uint32_t seed, uint64_t base = 0);
// Returns the index of the first byte in `buf` that differs from the pattern, or -1 if none.
int64_t find_mismatch(std::span<const uint8_t> buf, uint32_t seed, uint64_t base = 0);

}  // namespace uroce::tools
