// The raw Ethernet link's frames, without a socket: what build_frame() writes for RoCEv2 and RoCE
// v1, with and without 802.1Q (PCP from the service level or traffic class), and what
// receive_frame() makes of frames, good and bad, and how it counts them (link.h's LinkCounters
// meaning).
#include <gtest/gtest.h>
#include <net/if.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "link/neighbour.h"
#include "link/raw_link.h"
#include "wire/packet.h"

namespace uroce::link {
namespace {

const Gid kA = gid_from_ipv4({198, 18, 0, 1});
const Gid kB = gid_from_ipv4({198, 18, 0, 2});
const Mac kMacA = {2, 0, 0, 0, 0, 0xa};
const Mac kMacB = {2, 0, 0, 0, 0, 0xb};

// An RC SEND_ONLY of 5 bytes (2 parts) from A to B.
std::vector<uint8_t> build(bool v1, std::optional<uint16_t> vlan, uint8_t traffic_class,
                           bool av_v1 = false) {
  wire::AddressVector av;
  av.dgid = kB;
  av.traffic_class = traffic_class;
  av.hop_limit = 3;
  av.roce_v1 = av_v1;
  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 0x42;
  h.bth.psn = Psn(7);
  h.bth.pad_count = 3;
  wire::TxPacket p;
  p.header_len = wire::write_transport_headers(h, p.header);
  static const uint8_t data[5] = {1, 2, 3, 4, 5};
  p.payload[0] = {data, 2};
  p.payload[1] = {data + 2, 3};
  p.payload_parts = 2;
  p.payload_len = 5;
  p.pad = 3;
  p.dest = &av;
  std::vector<uint8_t> out(RawLink::kMaxFrameBytes);
  const uint32_t n = RawLink::build_frame(p, kA, kMacA, kMacB, vlan, v1, true, out);
  out.resize(n);
  return out;
}

TEST(RawLinkFrame, RoceV2FrameIsEthernetIpv4UdpAndParses) {
  const auto f = build(false, std::nullopt, 0x68);
  ASSERT_EQ(f.size(), 14u + 20 + 8 + 12 + 5 + 3 + 4);
  EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.begin() + 14),
            (std::vector<uint8_t>{2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 0xa, 0x08, 0x00}));
  auto p = wire::parse_frame(f);
  ASSERT_TRUE(p.ok()) << wire::to_string(p.error());
  EXPECT_EQ(p->packet.ipv4->dscp, 0x68 >> 2);
  EXPECT_EQ(p->packet.ipv4->ecn, wire::Ecn::kEct0);
  EXPECT_EQ(p->packet.ipv4->ttl, 3);
  EXPECT_EQ(p->packet.udp.dst_port, wire::kRoceV2Port);
  EXPECT_EQ(p->packet.transport.hdr.bth.dest_qp, 0x42u);
}

TEST(RawLinkFrame, RoceV1FrameWithVlanTagsPcpFromTrafficClass) {
  const auto f = build(true, uint16_t{100}, 0xa0);  // DSCP 40: class selector 5
  ASSERT_EQ(f.size(), 18u + 40 + 12 + 5 + 3 + 4);
  EXPECT_EQ(f[12], 0x81);
  EXPECT_EQ(f[13], 0x00);
  EXPECT_EQ(f[14], 5 << 5);  // PCP 5, DEI 0, VID high bits 0
  EXPECT_EQ(f[15], 100);
  EXPECT_EQ(f[16], 0x89);
  EXPECT_EQ(f[17], 0x15);
  auto p = wire::parse_v1_frame(f);
  ASSERT_TRUE(p.ok()) << wire::to_string(p.error());
  EXPECT_EQ(p->packet.grh.sgid, kA);
  EXPECT_EQ(p->packet.grh.dgid, kB);
  EXPECT_EQ(p->packet.grh.traffic_class, 0xa0);
  EXPECT_EQ(p->packet.grh.hop_limit, 3);
  EXPECT_EQ(p->packet.grh.payload_length, 12 + 5 + 3 + 4);
  ASSERT_EQ(p->packet.transport.payload.size(), 5u);
  EXPECT_EQ(p->packet.transport.payload[4], 5);
}

TEST(RawLinkFrame, PcpIsTheServiceLevelWhenSetElseTheClassSelector) {
  wire::AddressVector av;
  av.traffic_class = 0x68;  // DSCP 26: class selector 3
  EXPECT_EQ(RawLink::priority_code_point(av), 3);
  av.service_level = 5;
  EXPECT_EQ(RawLink::priority_code_point(av), 5);
  av.service_level = 14;  // SLs are 4 bits, priorities 3
  EXPECT_EQ(RawLink::priority_code_point(av), 6);
  av.service_level = 0;
  av.traffic_class = 0;
  EXPECT_EQ(RawLink::priority_code_point(av), 0);
}

TEST(RawLinkFrame, AnAddressVectorAsksForV1) {
  const auto f = build(false, std::nullopt, 0, /*av_v1=*/true);
  ASSERT_EQ(f.size(), 14u + 40 + 12 + 5 + 3 + 4);
  EXPECT_TRUE(wire::parse_v1_frame(f).ok());
}

TEST(RawLinkFrame, ReceiveHandsUpGoodFramesAndCountsBytesOfTheNetworkPacket) {
  for (bool v1 : {false, true}) {
    SCOPED_TRACE(v1 ? "v1" : "v2");
    auto f = build(v1, std::nullopt, 0x10);
    f.resize(f.size() + 7, 0);  // Ethernet padding is not part of the packet
    LinkCounters c;
    RawLinkStats s;
    int delivered = 0;
    RawLink::receive_frame(f, kB, c, &s, [&](const wire::RxPacket& rx) {
      ++delivered;
      EXPECT_EQ(rx.sgid, kA);
      EXPECT_EQ(rx.hdr->bth.dest_qp, 0x42u);
      EXPECT_EQ(rx.payload.size(), 5u);
      EXPECT_EQ(rx.roce_v1, v1);
      EXPECT_EQ(rx.hop_limit, 3);
    });
    EXPECT_EQ(delivered, 1);
    EXPECT_EQ(c.rx_packets, 1u);
    EXPECT_EQ(c.rx_bytes, (v1 ? 40u : 28u) + 12 + 5 + 3 + 4);
    EXPECT_EQ(v1 ? s.rx_v1 : s.rx_v2, 1u);
  }
}

TEST(RawLinkFrame, ReceiveCountsWhatItDrops) {
  for (bool v1 : {false, true}) {
    SCOPED_TRACE(v1 ? "v1" : "v2");
    LinkCounters c;
    int delivered = 0;
    const RxHandler h = [&](const wire::RxPacket&) { ++delivered; };
    auto f = build(v1, std::nullopt, 0);
    RawLink::receive_frame(f, kA, c, nullptr, h);  // addressed to B, not to A
    EXPECT_EQ(c.rx_drop_not_roce, 1u);
    auto bad = f;
    bad[bad.size() - 6] ^= 1;  // payload byte
    RawLink::receive_frame(bad, kB, c, nullptr, h);
    EXPECT_EQ(c.rx_drop_bad_icrc, 1u);
    RawLink::receive_frame(std::span(f).first(20), kB, c, nullptr, h);
    EXPECT_EQ(c.rx_drop_malformed, 1u);
    auto arp = f;
    arp[12] = 0x08;
    arp[13] = 0x06;
    RawLink::receive_frame(arp, kB, c, nullptr, h);
    EXPECT_EQ(c.rx_drop_not_roce, 2u);
    EXPECT_EQ(delivered, 0);
    EXPECT_EQ(c.rx_packets, 0u);
  }
}

TEST(NeighbourTable, IsBoundedAndServesInsertedEntries) {
  NeighbourTable t(/*ifindex=*/0, /*capacity=*/2);
  t.insert(kA, kMacA, 100);
  t.insert(kB, kMacB, 100);
  EXPECT_EQ(t.lookup(kA, 200), kMacA);
  EXPECT_EQ(t.size(), 2u);
  t.insert(gid_from_ipv4({198, 18, 0, 3}), kMacA, 300);  // over capacity: starts over
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.stats().evictions, 2u);
}

// Whether a RoCE v1 peer is on the raw link's segment, from the kernel's routing table, in a
// network namespace of its own (a child process, so this process's namespace is untouched): the
// link's address 198.18.99.1/24 on one end of a veth pair, and 198.19.0.0/16 reached through a
// gateway. Root only.
TEST(RawLinkReach, RoceV1ReachesOnlyPeersTheRoutingTableHasOnLink) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace, a packet socket)";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit status: 0 all as expected, 1 setup failed (skip), 10 + n the n-th check failed.
    if (unshare(CLONE_NEWNET) != 0) _exit(1);
    if (std::system("ip link set lo up && ip link add rt0 type veth peer name rt1 && "
                    "ip addr add 198.18.99.1/24 dev rt0 && ip link set rt0 up && "
                    "ip link set rt1 up && ip route add 198.19.0.0/16 via 198.18.99.254") != 0)
      _exit(1);
    const int dev = static_cast<int>(if_nametoindex("rt0"));
    const int lo = static_cast<int>(if_nametoindex("lo"));
    const std::optional<bool> expected_on_link[] = {
        routes_on_link(dev, gid_from_ipv4({198, 18, 99, 2})),  // on the /24: on-link
        routes_on_link(dev, gid_from_ipv4({198, 19, 0, 7})),   // through the gateway
        routes_on_link(dev, gid_from_ipv4({203, 0, 113, 1})),  // no route at all
        routes_on_link(dev, gid_from_ipv4({198, 18, 99, 1})),  // the link's own address
        routes_on_link(lo, gid_from_ipv4({198, 18, 99, 2})),   // not out of that interface
    };
    const std::optional<bool> want[] = {true, false, false, false, false};
    for (int i = 0; i < 5; ++i)
      if (expected_on_link[i] != want[i]) _exit(10 + i);
    Gid ll{};
    ll[0] = 0xfe;
    ll[1] = 0x80;
    ll[15] = 9;
    if (routes_on_link(dev, ll) != std::optional<bool>(true)) _exit(20);
    auto raw = RawLink::open({.address = "198.18.99.1"});
    if (!raw.ok()) _exit(1);
    if (!(*raw)->reaches_roce_v1(gid_from_ipv4({198, 18, 99, 2}))) _exit(21);
    if ((*raw)->reaches_roce_v1(gid_from_ipv4({198, 19, 0, 7}))) _exit(22);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 1) GTEST_SKIP() << "no network namespace or `ip` here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "check " << WEXITSTATUS(status) - 10 << " failed";
}

}  // namespace
}  // namespace uroce::link
