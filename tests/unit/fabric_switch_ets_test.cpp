// Scheduling between traffic classes: ETS weights share a congested port; a strict-priority class
// (CNPs) is not delayed by the others' queues.
#include <gtest/gtest.h>

#include "fabric/topology.h"
#include "fabric_switch_util.h"

namespace uroce::fabric {
namespace {

using test::meta;
using test::Recorder;

TEST(FabricEts, WeightsShareACongestedPort) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.lossless_mask = 1u << 1 | 1u << 2;  // both classes lossless: backlogged, never dropped
  sw.ets_weight[1] = 3;
  sw.ets_weight[2] = 1;
  sw.xoff_bytes = 200 * 1024;
  sw.xon_bytes = 150 * 1024;
  build_star(f, 3, {100'000'000'000, 1000, 0}, sw);
  ASSERT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(2, &rx);
  for (uint64_t i = 0; i < 2000; ++i) {
    ASSERT_TRUE(f.host_send(0, meta(2, 1000, 1, i)));
    ASSERT_TRUE(f.host_send(1, meta(2, 1000, 2, i)));
  }
  loop.run_until(kNever);
  ASSERT_EQ(rx.arrivals.size(), 4000u);
  // While both are backlogged (until class 1 has 1500 through), class 1 gets 3 parts of 4.
  size_t c1 = 0, c2 = 0;
  for (const auto& a : rx.arrivals) {
    if (c1 == 1500) break;
    (a.priority == 1 ? c1 : c2) += 1;
  }
  const double share = static_cast<double>(c1) / static_cast<double>(c1 + c2);
  EXPECT_NEAR(share, 0.75, 0.02) << c1 << " vs " << c2;
}

TEST(FabricEts, EqualWeightsShareEqually) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.lossless_mask = 1u << 0 | 1u << 3;
  sw.xoff_bytes = 200 * 1024;
  sw.xon_bytes = 150 * 1024;
  build_star(f, 3, {100'000'000'000, 1000, 0}, sw);
  ASSERT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(2, &rx);
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_TRUE(f.host_send(0, meta(2, 1000, 0, i)));
    ASSERT_TRUE(f.host_send(1, meta(2, 1000, 3, i)));
  }
  loop.run_until(kNever);
  size_t c0 = 0, c3 = 0;
  for (const auto& a : rx.arrivals) {
    if (c0 == 800 || c3 == 800) break;
    (a.priority == 0 ? c0 : c3) += 1;
  }
  EXPECT_NEAR(static_cast<double>(c0) / static_cast<double>(c0 + c3), 0.5, 0.02);
}

TEST(FabricEts, StrictCnpClassOvertakesAQueue) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.xoff_bytes = 400 * 1024;
  sw.xon_bytes = 300 * 1024;
  build_star(f, 4, {100'000'000'000, 1000, 0}, sw);
  ASSERT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(3, &rx);
  // Hosts 0 and 1 build a queue on priority 3 toward host 3 (2:1).
  for (uint64_t i = 0; i < 300; ++i) {
    ASSERT_TRUE(f.host_send(0, meta(3, 4096, 3, i)));
    ASSERT_TRUE(f.host_send(1, meta(3, 4096, 3, i)));
  }
  loop.run_until(50'000);
  ASSERT_GT(f.queue_bytes(f.peer(f.host_port(3)), 3), 100'000u);
  // A CNP (DSCP 48 -> priority 6, strict) from host 2 waits at most for the frame on the wire:
  // 2 x (ser 64+38 B + 1 us) + one 4134-byte frame (330.72 ns) < 2.5 us. Behind the queue it would
  // take > 8 us.
  PacketMeta cnp = meta(3, 64, 6, 999);
  cnp.dscp = 48;
  ASSERT_TRUE(f.host_send(2, cnp));
  loop.run_until(60'000);
  bool seen = false;
  for (const auto& a : rx.arrivals)
    if (a.tag == 999) {
      seen = true;
      EXPECT_EQ(a.priority, 6);
      EXPECT_LT(a.at - a.sent_at, 2'500u);
    }
  EXPECT_TRUE(seen);
}

TEST(FabricEts, PcpTrustClassifiesByPcp) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.trust_pcp = true;
  build_star(f, 2, {100'000'000'000, 1000, 0}, sw);
  ASSERT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(1, &rx);
  PacketMeta m = meta(1, 100, 0);
  m.dscp = 0;
  m.pcp = 5;
  ASSERT_TRUE(f.host_send(0, m));
  loop.run_until(kNever);
  ASSERT_EQ(rx.arrivals.size(), 1u);
  EXPECT_EQ(rx.arrivals[0].priority, 5);
}

}  // namespace
}  // namespace uroce::fabric
