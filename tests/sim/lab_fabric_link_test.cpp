// Real verbs Devices on the switched fabric through link::FabricLink: verified RDMA WRITEs across
// a dumbbell, and DCQCN closing the loop through a CE-marking bottleneck.
#include <gtest/gtest.h>

#include "sim/world.h"

namespace uroce::simlab {
namespace {

fabric::TopologySpec dumbbell(uint32_t left, uint32_t right, uint64_t bottleneck_bps) {
  auto spec = fabric::parse_topology("dumbbell left=1 right=1 rate=100G delay=1us");
  fabric::TopologySpec t = spec.value();
  t.left = left;
  t.right = right;
  t.bottleneck_bps = bottleneck_bps;
  return t;
}

TEST(LabFabricLink, TwoDevicesMoveVerifiedWrites) {
  WorldConfig cfg;
  auto w = World::create(cfg, dumbbell(1, 1, 0));
  ASSERT_TRUE(w.ok()) << w.error();
  World& world = **w;
  ASSERT_EQ(world.add_flow({0, 1, 1 << 20, 0}), 0);
  ASSERT_EQ(world.add_flow({1, 0, 256 * 1024, 0}), 1);
  const RunResult r = world.run();
  ASSERT_TRUE(r.ok) << r.failure;
  for (const FlowResult& f : r.flows) {
    EXPECT_TRUE(f.verified);
    EXPECT_EQ(f.errors, 0u);
    EXPECT_EQ(f.sender.retransmitted_packets, 0u);
  }
  // 1 MiB at 100 Gb/s is 84 us of payload; headers, ACK round trips and the two hops add some.
  EXPECT_GT(r.flows[0].done_ns, 80'000u);
  EXPECT_LT(r.flows[0].done_ns, 200'000u);
  EXPECT_EQ(r.fabric.drops_buffer, 0u);
  EXPECT_EQ(r.link_tx_errors, 0u);
}

}  // namespace
}  // namespace uroce::simlab
