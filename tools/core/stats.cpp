#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace uroce::tools {

double percentile_sorted(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  p = std::clamp(p, 0.0, 1.0);
  auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  if (rank == 0) rank = 1;
  return sorted[std::min(rank, sorted.size()) - 1];
}

LatencySummary summarize_latency(std::vector<uint64_t>& samples_ns) {
  LatencySummary s;
  if (samples_ns.empty()) return s;
  std::sort(samples_ns.begin(), samples_ns.end());
  std::vector<double> us(samples_ns.size());
  std::transform(samples_ns.begin(), samples_ns.end(), us.begin(),
                 [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; });
  s.samples = us.size();
  s.min_us = us.front();
  s.max_us = us.back();
  s.median_us = percentile_sorted(us, 0.5);
  s.p99_us = percentile_sorted(us, 0.99);
  s.p999_us = percentile_sorted(us, 0.999);
  double sum = std::accumulate(us.begin(), us.end(), 0.0);
  s.avg_us = sum / static_cast<double>(us.size());
  double sq = 0;
  for (double v : us) sq += (v - s.avg_us) * (v - s.avg_us);
  s.stdev_us = std::sqrt(sq / static_cast<double>(us.size()));
  return s;
}

namespace {
double gbps(uint64_t bytes, uint64_t ns) {
  return ns == 0 ? 0.0 : static_cast<double>(bytes) * 8.0 / static_cast<double>(ns);
}
}  // namespace

BandwidthSummary summarize_bandwidth(uint64_t bytes_per_msg, uint64_t start_ns,
                                     std::span<const uint64_t> completion_ns, size_t window) {
  BandwidthSummary b;
  b.bytes_per_msg = bytes_per_msg;
  b.iterations = completion_ns.size();
  if (completion_ns.empty() || completion_ns.back() <= start_ns) return b;
  uint64_t elapsed_ns = completion_ns.back() - start_ns;
  uint64_t total = bytes_per_msg * completion_ns.size();
  b.elapsed_s = static_cast<double>(elapsed_ns) / 1e9;
  b.avg_gbps = gbps(total, elapsed_ns);
  b.avg_mbytes_per_s = static_cast<double>(total) / b.elapsed_s / (1024.0 * 1024.0);
  b.msg_rate_mpps = static_cast<double>(completion_ns.size()) / b.elapsed_s / 1e6;
  b.peak_gbps = b.avg_gbps;
  // Windows shorter than the run's resolution would report timer noise as bandwidth.
  if (window == 0 || window >= completion_ns.size()) return b;
  for (size_t i = window; i < completion_ns.size(); ++i) {
    uint64_t dt = completion_ns[i] - completion_ns[i - window];
    if (dt == 0) continue;
    b.peak_gbps = std::max(b.peak_gbps, gbps(bytes_per_msg * window, dt));
  }
  return b;
}

}  // namespace uroce::tools
