#include <gtest/gtest.h>

#include <vector>

#include "core/stats.h"

namespace uroce::tools {
namespace {

TEST(BenchStats, PercentileNearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  EXPECT_EQ(percentile_sorted(v, 0.5), 500);
  EXPECT_EQ(percentile_sorted(v, 0.99), 990);
  EXPECT_EQ(percentile_sorted(v, 0.999), 999);
  EXPECT_EQ(percentile_sorted(v, 1.0), 1000);
  EXPECT_EQ(percentile_sorted(v, 0.0), 1);
  std::vector<double> one{7};
  EXPECT_EQ(percentile_sorted(one, 0.999), 7);
  EXPECT_EQ(percentile_sorted({}, 0.5), 0);
}

TEST(BenchStats, LatencySummaryOfUnsortedSamples) {
  // 1..100 us, shuffled, plus one 1 ms outlier: the tail shows in max and p99.9, not the median.
  std::vector<uint64_t> ns;
  for (uint64_t i = 100; i >= 1; --i) ns.push_back(i * 1000);
  ns.push_back(1000 * 1000);
  LatencySummary s = summarize_latency(ns);
  EXPECT_EQ(s.samples, 101u);
  EXPECT_DOUBLE_EQ(s.min_us, 1.0);
  EXPECT_DOUBLE_EQ(s.max_us, 1000.0);
  EXPECT_DOUBLE_EQ(s.median_us, 51.0);
  EXPECT_DOUBLE_EQ(s.p99_us, 100.0);
  EXPECT_DOUBLE_EQ(s.p999_us, 1000.0);
  EXPECT_NEAR(s.avg_us, (5050.0 + 1000.0) / 101.0, 1e-9);
  EXPECT_GT(s.stdev_us, 90.0);
}

TEST(BenchStats, LatencyEmpty) {
  std::vector<uint64_t> none;
  LatencySummary s = summarize_latency(none);
  EXPECT_EQ(s.samples, 0u);
  EXPECT_EQ(s.max_us, 0);
}

TEST(BenchStats, BandwidthAverageAndRate) {
  // 1000 messages of 125000 B (1 Mbit) completing every 1 us after a start at t=0: 1 Tb/s... use
  // round numbers: every 10 us -> 100 Gb/s.
  std::vector<uint64_t> done;
  for (uint64_t i = 1; i <= 1000; ++i) done.push_back(i * 10'000);
  BandwidthSummary b = summarize_bandwidth(125'000, 0, done, 10);
  EXPECT_EQ(b.iterations, 1000u);
  EXPECT_NEAR(b.avg_gbps, 100.0, 1e-9);
  EXPECT_NEAR(b.peak_gbps, 100.0, 1e-9);
  EXPECT_NEAR(b.msg_rate_mpps, 0.1, 1e-12);
  EXPECT_NEAR(b.elapsed_s, 0.01, 1e-12);
  EXPECT_NEAR(b.avg_mbytes_per_s, 125'000.0 * 1000 / 0.01 / (1 << 20), 1e-6);
}

TEST(BenchStats, BandwidthPeakSeesTheFastestWindow) {
  // Half the run at 10 us per message, half at 5 us: peak doubles the slow rate, average between.
  std::vector<uint64_t> done;
  uint64_t t = 0;
  for (int i = 0; i < 100; ++i) done.push_back(t += 10'000);
  for (int i = 0; i < 100; ++i) done.push_back(t += 5'000);
  BandwidthSummary b = summarize_bandwidth(125'000, 0, done, 10);
  EXPECT_NEAR(b.peak_gbps, 200.0, 1e-9);
  EXPECT_NEAR(b.avg_gbps, 200 * 1e6 / 1.5e6, 1e-9);
  EXPECT_GT(b.peak_gbps, b.avg_gbps);
}

TEST(BenchStats, BandwidthDegenerateInputs) {
  BandwidthSummary none = summarize_bandwidth(64, 0, {}, 4);
  EXPECT_EQ(none.avg_gbps, 0);
  std::vector<uint64_t> same{5, 5};
  BandwidthSummary zero = summarize_bandwidth(64, 5, same, 1);  // no elapsed time: no division
  EXPECT_EQ(zero.avg_gbps, 0);
}

}  // namespace
}  // namespace uroce::tools
