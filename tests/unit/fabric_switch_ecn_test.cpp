// ECN marking at switch egress: the RED-style probability curve (DCQCN CP) and marking in a
// congested switch.
#include <gtest/gtest.h>

#include "fabric/topology.h"
#include "fabric_switch_util.h"

namespace uroce::fabric {
namespace {

using test::meta;
using test::Recorder;

TEST(FabricEcn, ProbabilityCurve) {
  EcnParams e;
  e.kmin_bytes = 5 * 1024;    // 5120
  e.kmax_bytes = 200 * 1024;  // 204800
  e.pmax = 0.01;
  EXPECT_EQ(e.probability(0), 0);
  EXPECT_EQ(e.probability(5120), 0);
  // Midpoint (5120 + 204800) / 2 = 104960: Pmax / 2 = 0.005.
  EXPECT_DOUBLE_EQ(e.probability(104960), 0.005);
  // A quarter of the way, 5120 + 49920 = 55040: 0.0025.
  EXPECT_DOUBLE_EQ(e.probability(55040), 0.0025);
  EXPECT_DOUBLE_EQ(e.probability(204800), 0.01);
  EXPECT_EQ(e.probability(204801), 1);  // above Kmax every ECT packet is marked
  e.enabled = false;
  EXPECT_EQ(e.probability(1 << 30), 0);
}

// 2:1 incast of 500 x 1000 B per sender on a lossless priority with PFC thresholds high enough
// that the egress queue reaches Kmax. Returns the receiver's record.
Recorder incast(uint64_t seed, const EcnParams& ecn, bool ect, uint8_t ecn_mask = 0xff) {
  EventLoop loop(seed);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.ecn = ecn;
  sw.ecn_mask = ecn_mask;
  sw.xoff_bytes = 400 * 1024;
  sw.xon_bytes = 300 * 1024;
  build_star(f, 3, {100'000'000'000, 1000, 0}, sw);
  EXPECT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(2, &rx);
  for (uint64_t i = 0; i < 500; ++i)
    for (HostId s = 0; s < 2; ++s) {
      PacketMeta m = meta(2, 1000, 3, i);
      m.ect = ect;
      EXPECT_TRUE(f.host_send(s, m));
    }
  loop.run_until(kNever);
  EXPECT_EQ(rx.arrivals.size(), 1000u);
  return rx;
}

TEST(FabricEcn, StepMarkingFollowsTheQueue) {
  // Kmin = Kmax = 20 KB: a step (DCTCP-style). At 2:1 the queue grows by one 1038-byte frame per
  // frame sent, so the first ~20 frames to leave see less than 20 KB and none is marked; once the
  // queue is past 20 KB (it peaks near 500 KB), every frame is.
  EcnParams e;
  e.kmin_bytes = e.kmax_bytes = 20 * 1024;
  Recorder rx = incast(1, e, true);
  for (size_t i = 0; i < 18; ++i) EXPECT_FALSE(rx.arrivals[i].ce) << i;
  EXPECT_TRUE(rx.arrivals[60].ce);
  EXPECT_GT(rx.ce, 900u);
}

TEST(FabricEcn, DequeueMarkingReportsTheQueueLeftBehind) {
  // Step at 20 KB. Marked at enqueue, the last frames in carry the peak queue they joined. Marked
  // at dequeue, a frame is marked only if more than 20480 B stay behind it: with 1038-byte frames
  // the last 20 leave at most 19 x 1038 = 19722 B and are clean, the 21st from last leaves
  // 20 x 1038 = 20760 B and is marked.
  EcnParams e;
  e.kmin_bytes = e.kmax_bytes = 20 * 1024;
  Recorder enq = incast(1, e, true);
  EXPECT_TRUE(enq.arrivals.back().ce);
  e.mark_at_dequeue = true;
  Recorder deq = incast(1, e, true);
  const size_t n = deq.arrivals.size();
  ASSERT_EQ(n, 1000u);
  for (size_t i = n - 20; i < n; ++i) EXPECT_FALSE(deq.arrivals[i].ce) << i;
  EXPECT_TRUE(deq.arrivals[n - 21].ce);
  for (size_t i = 0; i < 18; ++i) EXPECT_FALSE(deq.arrivals[i].ce) << i;
  EXPECT_GT(deq.ce, 900u);
}

TEST(FabricEcn, LinearRegionMarksMoreAsTheQueueGrows) {
  // Kmin 0, Kmax 1 MB, Pmax 1: p = queue / 1 MB. The queue grows through the run, so the second
  // half sees more marks than the first, and the total is well short of all.
  EcnParams e;
  e.kmin_bytes = 0;
  e.kmax_bytes = 1 << 20;
  e.pmax = 1;
  Recorder rx = incast(2, e, true);
  size_t first = 0, second = 0;
  for (size_t i = 0; i < rx.arrivals.size(); ++i) (i < 500 ? first : second) += rx.arrivals[i].ce;
  EXPECT_GT(second, first);
  EXPECT_GT(rx.ce, 20u);
  EXPECT_LT(rx.ce, 600u);
}

TEST(FabricEcn, NonEctAndUnmarkedPrioritiesAreNeverMarked) {
  EcnParams e;
  e.kmin_bytes = e.kmax_bytes = 1024;
  EXPECT_EQ(incast(3, e, false).ce, 0u);
  EXPECT_EQ(incast(3, e, true, static_cast<uint8_t>(~(1u << 3))).ce, 0u);
}

}  // namespace
}  // namespace uroce::fabric
