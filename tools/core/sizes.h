#pragma once
// Message sizes on the command line: "4096", "64K", "1M", "8MiB"; and the perftest sweep (-a):
// every power of two from 2 B up to 8 MiB.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace uroce::tools {

inline constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 31;  // IBA 9.4: DMA length is 2^31 max
inline constexpr uint64_t kSweepMinBytes = 2;
inline constexpr uint64_t kSweepMaxBytes = uint64_t{8} << 20;

// A byte count with an optional K/M/G suffix (powers of 1024; "KiB" and "KB" read the same).
// Returns nullopt for anything else, including values above kMaxMessageBytes.
std::optional<uint64_t> parse_size(std::string_view text);

// Powers of two from `min_bytes` to `max_bytes` inclusive, starting at the first power of two not
// below min_bytes; a min of 0 puts 0 first (a zero-length message is legal, IBA 9.4).
std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes);

// "64K" -> "64K", 1000 -> "1000": the compact form used in table rows and file names.
std::string format_size(uint64_t bytes);

}  // namespace uroce::tools
