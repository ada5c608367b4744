// The DCQCN counters of a QP (transport/congestion.h -> QpCounters): rate cuts as the reaction
// point makes them (mlx5 folds CNPs within its 4 us period into one cut, counted when it happens),
// the current and lowest rate as gauges in Mb/s, and nothing at all while DCQCN is off.
#include <gtest/gtest.h>

#include "transport/congestion.h"
#include "transport/qp.h"

namespace uroce::transport {
namespace {

struct Rp {
  explicit Rp(CcAlgorithm algo, double line_bps = 10e9) {
    CongestionConfig c;
    c.algorithm = algo;
    c.line_rate_bps = line_bps;
    cong.configure(c, pacer, counters);
  }
  // Fires every due timer up to `until`, as the transport's transmit() would.
  void run_timers(Nanos until) {
    for (int i = 0; i < 1'000'000; ++i) {
      Nanos d = cong.deadline(now);
      if (d == kNever || d > until) break;
      now = d;
      cong.on_timer(now, pacer);
    }
    now = until;
  }
  Congestion cong;
  cc::Pacer pacer;
  QpCounters counters;
  Nanos now = 1'000'000;
};

TEST(CcRateCounters, CutsAndGaugesFollowTheReactionPoint) {
  Rp rp(CcAlgorithm::kDcqcnPaper);
  EXPECT_EQ(rp.counters.dcqcn_rate_mbps, 10'000u);  // a flow starts at line rate
  EXPECT_EQ(rp.counters.dcqcn_min_rate_mbps, 10'000u);
  EXPECT_EQ(rp.counters.rate_cuts, 0u);

  rp.cong.on_cnp(rp.now, rp.pacer);  // alpha starts at 1: RC halves
  EXPECT_EQ(rp.counters.rate_cuts, 1u);
  EXPECT_EQ(rp.counters.dcqcn_rate_mbps, 5'000u);
  EXPECT_EQ(rp.counters.dcqcn_min_rate_mbps, 5'000u);
  EXPECT_EQ(rp.pacer.rate_bps(), 5'000'000'000u);  // the gauge is what the pacer enforces
  rp.now += 1000;
  rp.cong.on_cnp(rp.now, rp.pacer);
  EXPECT_EQ(rp.counters.rate_cuts, 2u);
  const uint64_t low = rp.counters.dcqcn_min_rate_mbps;
  EXPECT_LT(low, 5'000u);

  // No more CNPs: the timers bring the rate back to line rate; the minimum stays.
  rp.run_timers(rp.now + 100'000'000);
  EXPECT_EQ(rp.counters.dcqcn_rate_mbps, 10'000u);
  EXPECT_EQ(rp.counters.dcqcn_min_rate_mbps, low);
  EXPECT_EQ(rp.counters.rate_cuts, 2u);
  EXPECT_EQ(rp.cong.deadline(rp.now), kNever);
}

TEST(CcRateCounters, Mlx5FoldedCutIsCountedWhenItHappens) {
  Rp rp(CcAlgorithm::kDcqcnMlx5);
  rp.cong.on_cnp(rp.now, rp.pacer);  // the first CNP cuts at once
  EXPECT_EQ(rp.counters.rate_cuts, 1u);
  const uint64_t after_first = rp.counters.dcqcn_rate_mbps;
  rp.cong.on_cnp(rp.now + 1000, rp.pacer);  // within 4 us: folded into a cut at the period's end
  rp.cong.on_cnp(rp.now + 2000, rp.pacer);
  EXPECT_EQ(rp.counters.rate_cuts, 1u);
  EXPECT_EQ(rp.counters.dcqcn_rate_mbps, after_first);
  rp.run_timers(rp.now + 4'000);
  EXPECT_EQ(rp.counters.rate_cuts, 2u);  // one cut for the two folded CNPs
  EXPECT_LT(rp.counters.dcqcn_rate_mbps, after_first);
  EXPECT_EQ(rp.counters.dcqcn_min_rate_mbps, rp.counters.dcqcn_rate_mbps);
  EXPECT_EQ(rp.cong.dcqcn()->counters().cuts, rp.counters.rate_cuts);
}

// The pacer enforces a share of the link, so it is charged what a packet takes there: the payload
// at build time, then the headers, pad, ICRC and the framing below the transport.
TEST(CcRateCounters, PacerIsChargedTheFramingOfEveryPacket) {
  Rp rp(CcAlgorithm::kDcqcnMlx5);
  rp.cong.on_cnp(rp.now, rp.pacer);  // a rate below line, so the bucket is in use
  rp.pacer.on_sent(rp.now, 1024);    // the payload, charged by the requester
  const double before = rp.pacer.credit_bytes(rp.now);
  wire::TxPacket pkt;
  pkt.header_len = 28;  // BTH + RETH
  pkt.payload_len = 1024;
  pkt.pad = 0;
  rp.cong.charge_framing(rp.now, pkt, rp.pacer);
  EXPECT_DOUBLE_EQ(rp.pacer.credit_bytes(rp.now), before - (28 + 4 + 66));

  Rp off(CcAlgorithm::kOff);  // off: the pacer is not touched
  const double idle = off.pacer.credit_bytes(off.now);
  off.cong.charge_framing(off.now, pkt, off.pacer);
  EXPECT_DOUBLE_EQ(off.pacer.credit_bytes(off.now), idle);
}

TEST(CcRateCounters, OffKeepsNoRateAndReconfiguringRestartsTheGauges) {
  Rp rp(CcAlgorithm::kOff);
  rp.cong.on_cnp(rp.now, rp.pacer);
  rp.cong.on_sent(rp.now, 4096, rp.pacer);
  EXPECT_EQ(rp.counters.rate_cuts, 0u);
  EXPECT_EQ(rp.counters.dcqcn_rate_mbps, 0u);
  EXPECT_EQ(rp.counters.dcqcn_min_rate_mbps, 0u);

  // Off -> on: the gauges start at line rate; the same configuration again changes nothing.
  CongestionConfig on;
  on.algorithm = CcAlgorithm::kDcqcnMlx5;
  on.line_rate_bps = 25e9;
  rp.cong.configure(on, rp.pacer, rp.counters);
  EXPECT_EQ(rp.counters.dcqcn_rate_mbps, 25'000u);
  rp.cong.on_cnp(rp.now, rp.pacer);
  const uint64_t cut = rp.counters.dcqcn_rate_mbps;
  rp.cong.configure(on, rp.pacer, rp.counters);
  EXPECT_EQ(rp.counters.dcqcn_rate_mbps, cut);
  EXPECT_EQ(rp.counters.rate_cuts, 1u);
  // On -> off: no rate to report; the cuts made stay counted.
  rp.cong.configure(CongestionConfig{}, rp.pacer, rp.counters);
  EXPECT_EQ(rp.counters.dcqcn_rate_mbps, 0u);
  EXPECT_EQ(rp.counters.dcqcn_min_rate_mbps, 0u);
  EXPECT_EQ(rp.counters.rate_cuts, 1u);
}

}  // namespace
}  // namespace uroce::transport
