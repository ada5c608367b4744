// Topologies, routing and ECMP, bit errors, real IP packets, determinism for a seed, and speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "fabric/fabric_link.h"
#include "fabric/topology.h"
#include "fabric_switch_util.h"
#include "wire/packet.h"

namespace uroce::fabric {
namespace {

using test::meta;
using test::Recorder;

TEST(FabricTopology, ParsesTheTextForm) {
  auto s = parse_topology(
      "fattree k=8 rate=100G delay=1.5us buffer=12MB kmin=100KB kmax=400KB "
      "pmax=0.2 ber=1e-12 # a comment");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->shape, TopologySpec::Shape::kFatTree);
  EXPECT_EQ(s->k, 8u);
  EXPECT_EQ(s->link.rate_bps, 100'000'000'000u);
  EXPECT_EQ(s->link.delay_ns, 1500u);
  EXPECT_EQ(s->sw.buffer_bytes, 12u << 20);
  EXPECT_EQ(s->sw.ecn.kmin_bytes, 100u * 1024);
  EXPECT_EQ(s->sw.ecn.kmax_bytes, 400u * 1024);
  EXPECT_DOUBLE_EQ(s->sw.ecn.pmax, 0.2);
  EXPECT_DOUBLE_EQ(s->link.bit_error_rate, 1e-12);
  auto d = parse_topology("dumbbell left=3 right=2 rate=40G bottleneck=10G");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->left, 3u);
  EXPECT_EQ(d->bottleneck_bps, 10'000'000'000u);
  for (const char* bad : {"", "ring hosts=3", "star hosts=x", "star rate=fast", "star foo=1",
                          "star hosts", "fattree pmax=2"})
    EXPECT_FALSE(parse_topology(bad).ok()) << bad;
  EventLoop loop(1);
  SwitchFabric f(loop);
  TopologySpec odd = *parse_topology("fattree k=3");
  EXPECT_FALSE(build_topology(f, odd).ok());
}

TEST(FabricTopology, TooSmallBufferForHeadroomIsRefused) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  auto s = parse_topology("star hosts=8 buffer=64KB");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(build_topology(f, *s).ok());
}

TEST(FabricTopology, FatTreeReachesEveryPairAndSpreadsFlowsOverPaths) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  auto t = build_topology(f, *parse_topology("fattree k=4 rate=100G delay=1us"));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->hosts.size(), 16u);
  EXPECT_EQ(t->switches.size(), 20u);
  // An edge switch reaches a host in another pod over both its uplinks; a core switch over one.
  const NodeId edge0 = t->switches[0], core0 = t->switches[16];
  EXPECT_EQ(f.routes(edge0, 15).size(), 2u);
  EXPECT_EQ(f.routes(edge0, 1).size(), 1u);
  EXPECT_EQ(f.routes(core0, 15).size(), 1u);
  std::vector<Recorder> rx(16);
  for (HostId h = 0; h < 16; ++h) f.set_receiver(h, &rx[h]);
  for (HostId s = 0; s < 16; ++s)
    for (HostId d = 0; d < 16; ++d)
      if (s != d) {
        ASSERT_TRUE(f.host_send(s, meta(d, 512, 3, s)));
      }
  // Host 0 to host 15 over 64 UDP source ports: both uplinks of edge 0 carry some.
  for (uint16_t port = 0; port < 64; ++port)
    ASSERT_TRUE(
        f.host_send(0, meta(15, 512, 3, 1000 + port, static_cast<uint16_t>(0xc000 + port))));
  loop.run_until(kNever);
  for (HostId d = 0; d < 16; ++d) {
    const size_t expect = d == 15 ? 15 + 64 : 15;
    ASSERT_EQ(rx[d].arrivals.size(), expect) << d;
    for (const auto& a : rx[d].arrivals)
      if (a.tag < 1000) {
        EXPECT_EQ(a.tag, a.src);
      }
  }
  const std::vector<PortId> up = f.routes(edge0, 15);
  EXPECT_GT(f.port_counters(up[0]).tx_packets, 5u);
  EXPECT_GT(f.port_counters(up[1]).tx_packets, 5u);
}

TEST(FabricTopology, OneFlowKeepsOnePathAndArrivesInOrder) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  auto t = build_topology(f, *parse_topology("fattree k=4"));
  ASSERT_TRUE(t.ok());
  Recorder rx;
  f.set_receiver(15, &rx);
  for (uint64_t i = 0; i < 500; ++i) ASSERT_TRUE(f.host_send(0, meta(15, 4096, 3, i, 0xc123)));
  loop.run_until(kNever);
  ASSERT_EQ(rx.arrivals.size(), 500u);
  for (uint64_t i = 0; i < 500; ++i) EXPECT_EQ(rx.arrivals[i].tag, i);
}

// RoCE v1 crosses the fabric at L2 only: between hosts on one switch it is carried (a GRH where the
// IP header would be) and handed up as v1; to a host behind another switch it is refused and
// counted, where RoCEv2 is routed.
TEST(FabricTopology, RoceV1StaysOnItsSegment) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  auto t = build_topology(f, *parse_topology("dumbbell left=2 right=1 rate=100G"));
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->hosts.size(), 3u);
  const HostId a = t->hosts[0], b = t->hosts[1], far = t->hosts[2];
  EXPECT_TRUE(f.same_segment(a, b));
  EXPECT_FALSE(f.same_segment(a, far));
  std::vector<std::unique_ptr<FabricLink>> links;
  for (HostId h : t->hosts) {
    auto l = FabricLink::create(f, h, host_gid(h));
    ASSERT_TRUE(l.ok());
    links.push_back(std::move(*l));
  }
  EXPECT_TRUE(links[0]->carries_roce_v1());
  // What the device asks before it accepts a v1 path (EHOSTUNREACH otherwise).
  EXPECT_TRUE(links[0]->reaches_roce_v1(host_gid(b)));
  EXPECT_FALSE(links[0]->reaches_roce_v1(host_gid(far)));
  EXPECT_FALSE(links[0]->reaches_roce_v1(gid_from_ipv4({203, 0, 113, 9})));  // no such host

  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 17;
  static const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  auto send = [&](HostId to, bool v1) {
    wire::AddressVector av;
    av.dgid = host_gid(to);
    av.roce_v1 = v1;
    av.flow_label = 0x321;
    wire::TxPacket p;
    p.header_len = wire::write_transport_headers(h, p.header);
    p.payload[0] = {data, 8};
    p.payload_parts = 1;
    p.payload_len = 8;
    p.dest = &av;
    links[0]->transmit(p);
  };
  send(b, true);
  send(far, true);
  send(far, false);
  loop.run_until(kNever);
  EXPECT_EQ(links[0]->counters().tx_packets, 2u);
  EXPECT_EQ(links[0]->counters().tx_errors, 1u);
  EXPECT_EQ(f.counters().refused_v1_off_segment, 1u);
  std::vector<std::pair<HostId, bool>> got;
  for (HostId to : {b, far}) {
    links[to]->poll(
        [&](const wire::RxPacket& rx) {
          got.emplace_back(to, rx.roce_v1);
          EXPECT_EQ(rx.sgid, host_gid(a));
          EXPECT_EQ(rx.payload.size(), 8u);
          EXPECT_EQ(rx.flow_label, rx.roce_v1 ? 0x321u : 0u);
        },
        16);
  }
  EXPECT_EQ(got, (std::vector<std::pair<HostId, bool>>{{b, true}, {far, false}}));
  EXPECT_EQ(links[1]->counters().rx_bytes, 40u + 12 + 8 + 4);  // GRH, BTH, payload, ICRC
}

// Two hosts on one switch, each with its FabricLink.
struct LinkPair {
  EventLoop loop{1};
  SwitchFabric f{loop};
  HostId a = 0, b = 0;
  std::unique_ptr<FabricLink> sender, receiver;
  LinkPair() {
    auto t = build_topology(f, *parse_topology("dumbbell left=1 right=1 rate=100G"));
    if (!t.ok()) {
      ADD_FAILURE() << t.error();
      return;
    }
    a = t->hosts[0];
    b = t->hosts[1];
    sender = std::move(FabricLink::create(f, a, host_gid(a)).value());
    receiver = std::move(FabricLink::create(f, b, host_gid(b)).value());
  }
};

// The NIC queue's room notification (FabricLink::request_tx_room), what sim::NicFifoGate sleeps
// on: one call, at the instant a packet's departure takes the queue below the largest mark asked
// for, none without a request, and none asked without a target.
TEST(FabricTopology, TxRoomIsNotifiedOnceWhenTheQueueFallsBelowTheMark) {
  LinkPair w;
  ASSERT_TRUE(w.sender && w.receiver);
  EventLoop& loop = w.loop;
  SwitchFabric& f = w.f;
  const HostId a = w.a, b = w.b;
  FabricLink& link = *w.sender;
  EXPECT_FALSE(link.request_tx_room(1)) << "no target: the caller must poll";

  struct Probe final : EventTarget {
    SwitchFabric* fabric = nullptr;
    HostId host = 0;
    std::vector<std::pair<Nanos, uint64_t>> calls;  // (when, the queue's bytes then)
    void on_event(uint32_t kind, uint64_t arg, Nanos now) override {
      EXPECT_EQ(kind, 9u);
      EXPECT_EQ(arg, host);
      calls.emplace_back(now, fabric->host_queue_bytes(host));
    }
  } probe;
  probe.fabric = &f;
  probe.host = a;
  link.set_tx_room_notify(&probe, 9);

  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 17;
  static const std::vector<uint8_t> data(4096, 0x5a);
  wire::AddressVector av;
  av.dgid = host_gid(b);
  auto send = [&] {
    wire::TxPacket p;
    p.header_len = wire::write_transport_headers(h, p.header);
    p.payload[0] = {data.data(), data.size()};
    p.payload_parts = 1;
    p.payload_len = static_cast<uint32_t>(data.size());
    p.dest = &av;
    link.transmit(p);
  };
  send();
  const uint64_t packet = link.tx_queue_bytes();
  ASSERT_GT(packet, 4096u);
  for (int i = 0; i < 4; ++i) send();
  ASSERT_EQ(link.tx_queue_bytes(), 5 * packet);
  // Two requests merge into the larger mark: below 2.5 packets is after the third departure.
  EXPECT_TRUE(link.request_tx_room(packet + 1));
  EXPECT_TRUE(link.request_tx_room(2 * packet + packet / 2));
  loop.run_until(kNever);
  ASSERT_EQ(probe.calls.size(), 1u) << "one notification per request";
  EXPECT_EQ(probe.calls[0].second, 2 * packet);
  // At the third packet's departure: three serialisations at 100 Gb/s from time 0.
  EXPECT_NEAR(static_cast<double>(probe.calls[0].first), 3.0 * static_cast<double>(packet) * 0.08,
              3.0);
  EXPECT_EQ(link.tx_queue_bytes(), 0u);
  // A request while the queue is empty waits for the next departure that leaves it below.
  EXPECT_TRUE(link.request_tx_room(packet));
  send();
  loop.run_until(kNever);
  ASSERT_EQ(probe.calls.size(), 2u);
  EXPECT_EQ(probe.calls[1].second, 0u);
  send();
  loop.run_until(kNever);
  EXPECT_EQ(probe.calls.size(), 2u) << "no request, no notification";
}

// A payload the link must copy (here two parts, which no descriptor can stand for) is prepared by
// the reference first (PayloadReference::prepare_copy), so a reference that leaves its reads
// unwritten (sim::SyntheticMemory's lazy reads) still sends the right bytes.
TEST(FabricTopology, CopiedPayloadIsPreparedByTheReferenceFirst) {
  LinkPair w;
  ASSERT_TRUE(w.sender && w.receiver);
  struct Preparing final : PayloadReference {
    mutable std::vector<size_t> prepared;  // lengths, in call order
    mutable std::vector<uint8_t> rebuild = std::vector<uint8_t>(link::kMaxIpPacketBytes);
    bool describe(const uint8_t*, size_t, uint64_t*) const override { return false; }
    void materialize(uint64_t, std::span<uint8_t> out) const override {
      std::fill(out.begin(), out.end(), uint8_t{0});
    }
    void prepare_copy(const uint8_t* p, size_t len) const override {
      prepared.push_back(len);
      std::fill(const_cast<uint8_t*>(p), const_cast<uint8_t*>(p) + len, uint8_t{0xab});
    }
    std::span<uint8_t> rebuild_buffer() const override { return rebuild; }
  } reference;
  for (FabricLink* l : {w.sender.get(), w.receiver.get()}) {
    l->set_trusted_wire(true);
    l->set_payload_reference(&reference);
  }
  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 17;
  std::vector<uint8_t> first(100, 0), second(28, 0);  // unwritten until prepared
  wire::AddressVector av;
  av.dgid = host_gid(w.b);
  wire::TxPacket p;
  p.header_len = wire::write_transport_headers(h, p.header);
  p.payload[0] = {first.data(), first.size()};
  p.payload[1] = {second.data(), second.size()};
  p.payload_parts = 2;
  p.payload_len = 128;
  p.dest = &av;
  w.sender->transmit(p);
  EXPECT_EQ(reference.prepared, (std::vector<size_t>{100, 28}));
  EXPECT_EQ(w.sender->tx_by_reference(), 0u);
  w.loop.run_until(kNever);
  std::vector<uint8_t> got;
  w.receiver->poll(
      [&](const wire::RxPacket& rx) { got.assign(rx.payload.begin(), rx.payload.end()); }, 4);
  EXPECT_EQ(got, std::vector<uint8_t>(128, 0xab));
}

TEST(FabricTopology, DumbbellBottleneckSetsTheRate) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  auto t = build_topology(f, *parse_topology("dumbbell left=2 right=2 rate=100G bottleneck=10G"));
  ASSERT_TRUE(t.ok());
  Recorder rx;
  f.set_receiver(2, &rx);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(f.host_send(0, meta(2, 4096, 3, i)));
  loop.run_until(kNever);
  ASSERT_EQ(rx.arrivals.size(), 1000u);
  // 1000 x 4134 B x 8 / 10 Gb/s = 3307.2 us through the bottleneck.
  EXPECT_NEAR(static_cast<double>(rx.arrivals.back().at), 3'307'200, 5'000);
}

TEST(FabricTopology, BitErrorsDropFramesAtTheExpectedRate) {
  EventLoop loop(5);
  SwitchFabric f(loop);
  build_star(f, 2, {100'000'000'000, 1000, 1e-5});
  ASSERT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(1, &rx);
  for (uint64_t i = 0; i < 2000; ++i) ASSERT_TRUE(f.host_send(0, meta(1, 1000, 0, i)));
  loop.run_until(kNever);
  // Two links, 1038 B = 8304 bits each: survive = (1 - 1e-5)^16608 = 0.8470; 1694 +- 16 (1 sigma).
  EXPECT_NEAR(static_cast<double>(rx.arrivals.size()), 1694, 80);
  EXPECT_EQ(rx.arrivals.size() + f.counters().drops_bit_error, 2000u);
}

TEST(FabricTopology, CarriesRealIpPacketsAndWritesCe) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.ecn.kmin_bytes = sw.ecn.kmax_bytes = 0;  // mark every ECT packet that finds a queue
  sw.ecn.pmax = 1;
  Topology t = build_star(f, 3, {100'000'000'000, 1000, 0}, sw);
  ASSERT_EQ(f.finalize(), 0);
  struct Check : HostReceiver {
    int ok = 0, ce = 0;
    void on_receive(const Delivered& d, Nanos) override {
      auto p = wire::parse_ip_packet(d.ip_packet);  // the ICRC skips ECN, so it still checks
      ok += p.ok();
      ce += p.ok() && p->ipv4->ecn == wire::Ecn::kCe;
      EXPECT_EQ(d.ce, p.ok() && p->ipv4->ecn == wire::Ecn::kCe);
    }
  } rx;
  f.set_receiver(2, &rx);
  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 17;
  std::vector<uint8_t> payload(1000, 0xab), buf(2000);
  for (HostId s = 0; s < 2; ++s) {
    wire::IpEndpoints ep;
    ep.src = {10, 0, 0, static_cast<uint8_t>(s)};
    ep.dst = {10, 0, 0, 2};
    ep.dscp = 26;
    const uint32_t n = wire::build_ip_packet(ep, h, payload, buf);
    ASSERT_EQ(n, 20u + 8 + 12 + 1000 + 4);  // IPv4, UDP, BTH, payload, ICRC
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(f.host_send_ip(s, {buf.data(), n}));
  }
  std::vector<uint8_t> junk(30, 0x45);
  EXPECT_FALSE(f.host_send_ip(0, junk));
  EXPECT_EQ(f.counters().refused_bad_packet, 1u);
  loop.run_until(kNever);
  EXPECT_EQ(rx.ok, 40);
  EXPECT_EQ(rx.ce, 38);  // the first two found an empty queue
}

uint64_t run_world(uint64_t seed, uint64_t* delivered) {
  EventLoop loop(seed);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.buffer_bytes = 1 << 20;
  sw.ecn.kmin_bytes = 10 * 1024;
  sw.ecn.kmax_bytes = 100 * 1024;
  sw.ecn.pmax = 0.5;
  Topology t = build_fat_tree(f, 4, {100'000'000'000, 1000, 1e-7}, sw);
  EXPECT_EQ(f.finalize(), 0);
  Rng traffic(seed ^ 0x5eed);
  for (int i = 0; i < 3000; ++i) {
    const auto s = static_cast<HostId>(traffic.below(16));
    auto d = static_cast<HostId>(traffic.below(15));
    if (d >= s) ++d;
    (void)f.host_send(
        s, meta(d, static_cast<uint32_t>(64 + traffic.below(4000)), traffic.chance(0.5) ? 3 : 0,
                static_cast<uint64_t>(i), static_cast<uint16_t>(traffic.below(65536))));
  }
  loop.run_until(kNever);
  *delivered = f.counters().delivered;
  return loop.trace_hash() ^ f.counters().ecn_marked << 32 ^ f.counters().drops_buffer;
}

TEST(FabricTopology, AWorldIsAFunctionOfItsSeed) {
  uint64_t d1, d2, d3;
  const uint64_t a = run_world(7, &d1), b = run_world(7, &d2), c = run_world(8, &d3);
  EXPECT_EQ(a, b);
  EXPECT_EQ(d1, d2);
  EXPECT_NE(a, c);
  EXPECT_GT(d1, 2900u);
}

// A 128-host fat tree (k = 8, 80 switches) at 100 Gb/s: every host sends 1 MB to the host
// 64 places on (all cross-pod), lossless. Prints the simulation speed.
TEST(FabricTopology, FatTree128HostsAt100G) {
  EventLoop loop(1, 1 << 18);
  FabricConfig cfg;
  cfg.max_packets = 1 << 16;
  SwitchFabric f(loop, cfg);
  auto t = build_topology(f, *parse_topology("fattree k=8 rate=100G delay=1us"));
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->hosts.size(), 128u);
  std::vector<Recorder> rx(128);
  for (HostId h = 0; h < 128; ++h) f.set_receiver(h, &rx[h]);
  for (uint64_t i = 0; i < 256; ++i)
    for (HostId s = 0; s < 128; ++s)
      ASSERT_TRUE(f.host_send(s, meta((s + 64) % 128, 4096, 3, i, static_cast<uint16_t>(s * 7))));
  const auto start = std::chrono::steady_clock::now();
  loop.run_until(kNever);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(f.counters().delivered, 128u * 256);
  EXPECT_EQ(f.counters().drops_buffer, 0u);
  std::printf(
      "[ fabric ] 128-host fat tree: %.3f ms simulated in %.3f s wall, %llu events, "
      "%.2f M events/s, %llu pause frames\n",
      static_cast<double>(loop.now()) / 1e6, wall,
      static_cast<unsigned long long>(loop.counters().executed),
      static_cast<double>(loop.counters().executed) / wall / 1e6,
      static_cast<unsigned long long>(f.counters().pause_frames));
}

}  // namespace
}  // namespace uroce::fabric
