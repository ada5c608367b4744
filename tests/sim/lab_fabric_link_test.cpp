// Real verbs Devices on the switched fabric through fabric::FabricLink: verified RDMA WRITEs across
// a dumbbell, DCQCN closing the loop through a CE-marking bottleneck, and flows over RoCE v1
// (switched at L2 only) with and without loss.
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

// A sender whose NIC FIFO (WorldConfig::nic_fifo_bytes) is full sleeps until a packet leaves it
// (FabricLink::request_tx_room). Polling for the drain instead woke each paused sender's device
// again and again while PFC held its link and several times per packet even unpaused, the queue
// shrinking a packet at a time (half again as many passes here; docs/performance.md, "The
// simulator against htsim", for the fat tree).
TEST(LabFabricLink, SendersHeldByPfcSleepUntilTheirNicFifoDrains) {
  WorldConfig cfg;
  cfg.trusted_wire = true;
  cfg.synthetic_memory = true;
  auto spec = fabric::parse_topology(
      "dumbbell left=4 right=1 rate=100G delay=1us buffer=12MB xoff=61440 xon=49152 ecn=0");
  ASSERT_TRUE(spec.ok()) << spec.error();
  auto w = World::create(cfg, *spec);
  ASSERT_TRUE(w.ok()) << w.error();
  World& world = **w;
  for (uint32_t h = 0; h < 4; ++h) ASSERT_EQ(world.add_flow({h, 4, 1 << 20, 0}), int(h));
  const RunResult r = world.run();
  ASSERT_TRUE(r.ok) << r.failure;
  ASSERT_GT(r.fabric.pause_frames, 0u) << "the test needs PFC to hold the senders";
  for (const FlowResult& f : r.flows) EXPECT_TRUE(f.verified);
  // About a pass per packet a device sends or receives, and a few for posts and completions.
  EXPECT_LT(r.device_passes * 4, r.fabric.delivered * 5)
      << r.device_passes << " passes for " << r.fabric.delivered << " packets";
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

// ---- RoCE v1: the fabric switches GRH packets at L2 (docs/links.md, "RoCE v1 in the fabric") ----

// Three hosts on the left switch of a dumbbell (one segment) and one on the right.
fabric::TopologySpec v1_segment(double bit_error_rate) {
  fabric::TopologySpec t = dumbbell(3, 1, 0);
  t.link.bit_error_rate = bit_error_rate;
  return t;
}

// A ring of three flows on the left switch, 512 KiB each, all v1 or all v2.
RunResult run_ring(const WorldConfig& cfg, double bit_error_rate, bool roce_v1) {
  auto w = World::create(cfg, v1_segment(bit_error_rate));
  EXPECT_TRUE(w.ok()) << w.error();
  if (!w.ok()) return {};
  World& world = **w;
  for (fabric::HostId h = 0; h < 3; ++h) {
    FlowSpec f{h, (h + 1) % 3, 512 * 1024, 0};
    f.roce_v1 = roce_v1;
    EXPECT_EQ(world.add_flow(f), static_cast<int>(h));
  }
  return world.run();
}

// Every packet of a v1 flow, ACKs included, crosses the fabric as GRH + BTH .. ICRC: the bytes
// delivered are exactly the payload plus, per packet, a 40-byte GRH where RoCEv2 has 28 bytes of
// IPv4 and UDP (the same flows over v2 as the control).
TEST(LabRoceV1, FlowsOnOneSwitchGoAsGrhPackets) {
  constexpr uint64_t kFlowBytes = 512 * 1024;
  // 1024-byte path MTU; each packet a WRITE ONLY with its own RETH (WriteSegments::kPerPacket).
  constexpr uint64_t kDataPackets = 3 * kFlowBytes / 1024;
  constexpr uint64_t kBth = 12, kReth = 16, kAeth = 4, kIcrc = 4;
  for (const bool v1 : {true, false}) {
    SCOPED_TRACE(v1 ? "v1" : "v2");
    const RunResult r = run_ring(WorldConfig{}, 0, v1);
    ASSERT_TRUE(r.ok) << r.failure;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_TRUE(r.flows[i].verified) << i;
      EXPECT_EQ(r.flows[i].errors, 0u) << i;
      EXPECT_EQ(r.flows[i].sender.retransmitted_packets, 0u) << i;
    }
    ASSERT_GT(r.fabric.delivered, kDataPackets);
    const uint64_t acks = r.fabric.delivered - kDataPackets;
    const uint64_t network = v1 ? 40 : 20 + 8;
    EXPECT_EQ(r.fabric.delivered_bytes, 3 * kFlowBytes +
                                            kDataPackets * (network + kBth + kReth + kIcrc) +
                                            acks * (network + kBth + kAeth + kIcrc));
    EXPECT_EQ(r.fabric.refused_v1_off_segment, 0u);
    EXPECT_EQ(r.link_tx_errors, 0u);
    EXPECT_EQ(r.link_rx_drops, 0u);
  }
}

// Loss: bit errors on every link drop frames (the FCS), v1 data and ACKs alike. Every flow must
// still deliver every byte exactly (verified where it lands, no error completion), with the
// losses recovered by retransmission; and the run is a function of its seed.
TEST(LabRoceV1, FlowsRecoverBitErrorLossExactly) {
  WorldConfig cfg;
  cfg.seed = 17;
  const RunResult r = run_ring(cfg, 2e-6, true);
  ASSERT_TRUE(r.ok) << r.failure;
  uint64_t retransmitted = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(r.flows[i].verified) << i;
    EXPECT_EQ(r.flows[i].errors, 0u) << i;
    retransmitted += r.flows[i].sender.retransmitted_packets;
  }
  EXPECT_GT(r.fabric.drops_bit_error, 0u);
  EXPECT_GT(retransmitted, 0u);
  EXPECT_EQ(r.fabric.refused_v1_off_segment, 0u);
  EXPECT_EQ(r.link_tx_errors, 0u);

  const RunResult again = run_ring(cfg, 2e-6, true);
  ASSERT_TRUE(again.ok) << again.failure;
  EXPECT_EQ(again.fabric.drops_bit_error, r.fabric.drops_bit_error);
  EXPECT_EQ(again.fabric.delivered_bytes, r.fabric.delivered_bytes);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(again.flows[i].done_ns, r.flows[i].done_ns) << i;
    EXPECT_EQ(again.flows[i].sender.retransmitted_packets, r.flows[i].sender.retransmitted_packets)
        << i;
  }
}

// v1 cannot cross the switch-to-switch link: the flow's path is refused when the QPs are
// connected, and a v2 flow between the same hosts is not.
TEST(LabRoceV1, FlowOffTheSegmentIsRefused) {
  auto w = World::create(WorldConfig{}, v1_segment(0));
  ASSERT_TRUE(w.ok()) << w.error();
  FlowSpec across{0, 3, 64 * 1024, 0};
  across.roce_v1 = true;
  EXPECT_EQ((*w)->add_flow(across), -1);
  across.roce_v1 = false;
  EXPECT_EQ((*w)->add_flow(across), 0);
  const RunResult r = (*w)->run();
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_TRUE(r.flows[0].verified);
}

}  // namespace
}  // namespace uroce::simlab
