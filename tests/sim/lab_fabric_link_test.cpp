// Real verbs Devices on the switched fabric through fabric::FabricLink: verified RDMA WRITEs across
// a dumbbell, and DCQCN closing the loop through a CE-marking bottleneck.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "sim/world.h"
#include "wire/packet.h"

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

TEST(LabFabricLink, CeMarkingBottleneckSlowsTheSenders) {
  WorldConfig cfg;
  cfg.cc.algorithm = transport::CcAlgorithm::kDcqcnMlx5;
  fabric::TopologySpec t = dumbbell(2, 1, 40'000'000'000);  // 2 x 100G into a 40G link
  t.sw.ecn.kmin_bytes = 20 * 1024;
  t.sw.ecn.kmax_bytes = 200 * 1024;
  t.sw.ecn.pmax = 0.2;
  auto w = World::create(cfg, t);
  ASSERT_TRUE(w.ok()) << w.error();
  World& world = **w;
  world.add_flow({0, 2, 1 << 20, 0});
  world.add_flow({1, 2, 1 << 20, 0});
  const RunResult r = world.run();
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.fabric.ecn_marked, 10u);
  for (size_t i = 0; i < 2; ++i) {
    const FlowResult& f = r.flows[i];
    EXPECT_TRUE(f.verified);
    EXPECT_EQ(f.receiver.ce_marked, (std::array<uint64_t, 2>{7, 3})[i]);
    EXPECT_EQ(f.receiver.cnps_sent, (std::array<uint64_t, 2>{7, 2})[i]);
    EXPECT_EQ(f.sender.cnps_received, f.receiver.cnps_sent) << "CNPs go strict priority, unlost";
    uint64_t lowest = ~uint64_t{0};
    for (const Sample& s : r.samples) lowest = std::min(lowest, s.rate_bps[i]);
    // The first cut alone halves the rate; the 40 Gb/s link needs more than that.
    EXPECT_LT(lowest, 50'000'000'000u) << "flow " << i;
  }
}

// A trusted wire (WorldConfig::trusted_wire) skips the ICRC and nothing else: the same marks,
// completions and times as with it, every byte still verified.
TEST(LabFabricLink, TrustedWireChangesNothingButTheIcrc) {
  auto run = [](bool trusted) {
    WorldConfig cfg;
    cfg.cc.algorithm = transport::CcAlgorithm::kDcqcnMlx5;
    cfg.trusted_wire = trusted;
    fabric::TopologySpec t = dumbbell(2, 1, 40'000'000'000);
    t.sw.ecn.kmin_bytes = 20 * 1024;
    t.sw.ecn.kmax_bytes = 200 * 1024;
    t.sw.ecn.pmax = 0.2;
    auto w = World::create(cfg, t);
    EXPECT_TRUE(w.ok());
    World& world = **w;
    world.add_flow({0, 2, 1 << 20, 0});
    world.add_flow({1, 2, 1 << 20, 0});
    return world.run();
  };
  const RunResult checked = run(false);
  const RunResult trusted = run(true);
  ASSERT_TRUE(checked.ok) << checked.failure;
  ASSERT_TRUE(trusted.ok) << trusted.failure;
  EXPECT_EQ(trusted.fabric.ecn_marked, checked.fabric.ecn_marked);
  EXPECT_EQ(trusted.fabric.delivered, checked.fabric.delivered);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(trusted.flows[i].verified) << i;
    EXPECT_EQ(trusted.flows[i].done_ns, checked.flows[i].done_ns) << i;
    EXPECT_EQ(trusted.flows[i].receiver.ce_marked, checked.flows[i].receiver.ce_marked) << i;
  }
}

// What a trusted sender's zero ICRC does to a receiver: dropped as a bad ICRC if it checks, parsed
// whole if it does not.
TEST(LabFabricLink, UncheckedIcrcParsesAZeroIcrc) {
  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  wire::IpEndpoints ep;
  ep.src = {10, 0, 0, 1};
  ep.dst = {10, 0, 0, 2};
  std::vector<uint8_t> buf(256);
  const uint8_t payload[4] = {1, 2, 3, 4};
  const uint32_t n = wire::build_ip_packet(ep, h, payload, buf);
  ASSERT_EQ(n, 20u + 8 + 12 + 4 + 4);
  buf.resize(n);
  wire::store_icrc(buf.data() + n - 4, 0);
  const auto strict = wire::parse_ip_packet(buf);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.error(), wire::ParseError::kBadIcrc);
  const auto lax = wire::parse_ip_packet(buf, false);
  ASSERT_TRUE(lax.ok());
  ASSERT_EQ(lax->transport.payload.size(), 4u);
  EXPECT_EQ(lax->transport.payload[3], 4);
}

}  // namespace
}  // namespace uroce::simlab
