#pragma once
// Statistics the bench reports, computed the way perftest reports them, so numbers from the two
// tools can be put side by side: latency percentiles over per-iteration samples, and bandwidth
// (peak and average) over completion timestamps.
#include <cstdint>
#include <span>
#include <vector>

namespace uroce::tools {

struct LatencySummary {
  uint64_t samples = 0;
  double min_us = 0, median_us = 0, avg_us = 0, p99_us = 0, p999_us = 0, max_us = 0;
  double stdev_us = 0;
};

// Percentile by nearest rank on sorted samples (index ceil(p * n) - 1), as perftest indexes its
// sorted delta array. `sorted` must be ascending and non-empty; p in [0, 1].
double percentile_sorted(std::span<const double> sorted, double p);

// Summarises latency samples in nanoseconds; sorts `samples_ns` in place. Empty input gives zeros.
LatencySummary summarize_latency(std::vector<uint64_t>& samples_ns);

struct BandwidthSummary {
  uint64_t bytes_per_msg = 0;
  uint64_t iterations = 0;
  double peak_gbps = 0;         // best window (see summarize_bandwidth), 1e9 bits per second
  double avg_gbps = 0;          // all bytes over the whole run
  double avg_mbytes_per_s = 0;  // MiB/s (2^20 bytes), perftest's MB/sec column
  double msg_rate_mpps = 0;     // million messages per second
  double elapsed_s = 0;
};

// Average bandwidth: `iterations` messages of `bytes_per_msg` bytes completed between the first
// post (`start_ns`) and the last completion. Peak bandwidth: the best rate over any window of
// `window` consecutive completions in `completion_ns` (ascending timestamps of each message's
// completion). perftest takes its peak from the shortest post-to-completion gap; over a pipelined
// queue that needs a window long enough to hold messages posted inside it (the bench uses two
// queue depths). A window of zero or of at least the run gives peak == average.
BandwidthSummary summarize_bandwidth(uint64_t bytes_per_msg, uint64_t start_ns,
                                     std::span<const uint64_t> completion_ns, size_t window);

}  // namespace uroce::tools
