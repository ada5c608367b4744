// SimLink over the lossy network: real RoCEv2 packets out (gathered payload, pad, ICRC), parsed and
// checked on the way in, and corruption caught by the ICRC (or the IPv4 header checksum).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "fabric/event_loop.h"
#include "fabric/lossy_network.h"
#include "fabric/sim_link.h"
#include "wire/packet.h"

namespace uroce::link {
namespace {

using fabric::EventLoop;
using fabric::LossyNetwork;
using fabric::NetworkConfig;
using fabric::SimLink;

struct Received {
  wire::TransportHeaders hdr;
  std::vector<uint8_t> payload;
  Gid sgid, dgid;
  uint16_t udp_src_port;
  bool ce;
};

struct Pair {
  EventLoop loop;
  LossyNetwork net;
  std::unique_ptr<SimLink> a, b;
  wire::AddressVector to_b;
  std::vector<uint8_t> data;

  Pair(uint64_t seed, const Gid& ga, const Gid& gb, const NetworkConfig& cfg = {})
      : loop(seed), net(loop, cfg) {
    a = std::move(SimLink::create(net, ga).value());
    b = std::move(SimLink::create(net, gb).value());
    to_b.dgid = gb;
    to_b.udp_src_port = 0xc123;
    to_b.traffic_class = 26 << 2;
    data.resize(3000);
    std::iota(data.begin(), data.end(), uint8_t{7});
  }

  // An RC WRITE_ONLY with `len` bytes of payload gathered from three pieces of `data`.
  void send_write(uint32_t psn, uint32_t len) {
    wire::TransportHeaders h;
    h.bth.opcode = wire::op::kRcWriteOnly;
    h.bth.dest_qp = 0x123456;
    h.bth.psn = Psn(psn);
    h.bth.ack_req = true;
    h.bth.pad_count = wire::pad_for(len);
    h.reth = {0x1000 + psn, 0xabcd, len};
    wire::TxPacket tx;
    tx.header_len = wire::write_transport_headers(h, tx.header);
    const uint32_t cut1 = len / 3, cut2 = 2 * len / 3;
    tx.payload[0] = {data.data(), cut1};
    tx.payload[1] = {data.data() + cut1, cut2 - cut1};
    tx.payload[2] = {data.data() + cut2, len - cut2};
    tx.payload_parts = 3;
    tx.payload_len = len;
    tx.pad = wire::pad_for(len);
    tx.dest = &to_b;
    a->transmit(tx);
  }

  std::vector<Received> receive_all() {
    std::vector<Received> got;
    while (loop.step()) {
      b->poll(
          [&](const wire::RxPacket& rx) {
            got.push_back({*rx.hdr,
                           {rx.payload.begin(), rx.payload.end()},
                           rx.sgid,
                           rx.dgid,
                           rx.udp_src_port,
                           rx.ce});
          },
          64);
    }
    return got;
  }
};

const Gid kA4 = gid_from_ipv4({192, 168, 1, 1});
const Gid kB4 = gid_from_ipv4({192, 168, 1, 2});
const Gid kA6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const Gid kB6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

class SimLinkFamily : public ::testing::TestWithParam<bool> {};

TEST_P(SimLinkFamily, RoundTripsHeadersGatheredPayloadAndAddresses) {
  const bool v6 = GetParam();
  Pair p(1, v6 ? kA6 : kA4, v6 ? kB6 : kB4);
  const std::vector<uint32_t> sizes = {0, 1, 3, 4, 5, 1023, 1024, 2049};
  for (uint32_t i = 0; i < sizes.size(); ++i) p.send_write(i, sizes[i]);
  const auto got = p.receive_all();
  ASSERT_EQ(got.size(), sizes.size());
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(got[i].hdr.bth.opcode, wire::op::kRcWriteOnly);
    EXPECT_EQ(got[i].hdr.bth.psn, Psn(i));
    EXPECT_EQ(got[i].hdr.bth.dest_qp, 0x123456u);
    EXPECT_EQ(got[i].hdr.reth.va, 0x1000u + i);
    EXPECT_EQ(got[i].hdr.reth.dma_length, sizes[i]);
    EXPECT_EQ(got[i].payload, std::vector<uint8_t>(p.data.begin(), p.data.begin() + sizes[i]));
    EXPECT_EQ(got[i].sgid, p.a->local_gid());
    EXPECT_EQ(got[i].dgid, p.b->local_gid());
    EXPECT_EQ(got[i].udp_src_port, 0xc123);
    EXPECT_FALSE(got[i].ce);
  }
  EXPECT_EQ(p.a->counters().tx_packets, sizes.size());
  EXPECT_EQ(p.b->counters().rx_packets, sizes.size());
  EXPECT_EQ(p.a->counters().tx_bytes, p.b->counters().rx_bytes);
}

INSTANTIATE_TEST_SUITE_P(Ipv4AndIpv6, SimLinkFamily, ::testing::Values(false, true));

TEST(FabricLossySimLink, CeMarkFromTheIpHeaderIsReported) {
  Pair p(1, kA4, kB4);
  // A packet a switch marked: built by hand, ECN set to CE, injected from A's endpoint.
  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.psn = Psn(5);
  wire::IpEndpoints ep;
  std::copy_n(kA4.begin() + 12, 4, ep.src.begin());
  std::copy_n(kB4.begin() + 12, 4, ep.dst.begin());
  std::vector<uint8_t> buf(256);
  const uint8_t payload[4] = {1, 2, 3, 4};
  const uint32_t n = wire::build_ip_packet(ep, h, payload, buf);
  ASSERT_EQ(n, 20u + 8 + 12 + 4 + 4);  // IPv4, UDP, BTH, payload, ICRC
  buf.resize(n);
  wire::set_ecn(buf, wire::Ecn::kCe);
  ASSERT_TRUE(p.net.send(p.a->endpoint(), buf));
  const auto got = p.receive_all();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].ce);
  EXPECT_EQ(p.b->counters().rx_ce_marked, 1u);
}

TEST(FabricLossySimLink, UnbuildablePacketsAreTxErrors) {
  Pair p(1, kA4, kB4);
  wire::TxPacket tx;
  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  tx.header_len = wire::write_transport_headers(h, tx.header);
  p.a->transmit(tx);  // no destination
  EXPECT_EQ(p.a->counters().tx_errors, 1u);
  wire::AddressVector v6;
  v6.dgid = kB6;
  tx.dest = &v6;
  p.a->transmit(tx);  // IPv4 link, IPv6 destination
  wire::AddressVector nobody;
  nobody.dgid = gid_from_ipv4({192, 168, 1, 99});
  tx.dest = &nobody;
  p.a->transmit(tx);  // nobody there: the network has no route
  tx.dest = &p.to_b;
  tx.payload_len = 8;  // says 8 bytes, gathers none
  p.a->transmit(tx);
  tx.payload_len = 5000;  // larger than any MTU
  p.a->transmit(tx);
  EXPECT_EQ(p.a->counters().tx_errors, 5u);
  EXPECT_EQ(p.a->counters().tx_packets, 0u);
  EXPECT_TRUE(p.receive_all().empty());
}

TEST(FabricLossySimLink, EveryCorruptedPacketIsDroppedUnlessTheFlipHitAnUncoveredField) {
  NetworkConfig cfg;
  cfg.defaults.corrupt = 1.0;
  Pair p(9, kA4, kB4, cfg);
  constexpr uint32_t kN = 3000;
  uint64_t got_n = 0;
  for (uint32_t i = 0; i < kN; ++i) {
    p.send_write(i, 256);
    for (const auto& r : p.receive_all()) {
      ++got_n;
      // The ICRC masks the UDP checksum and the BTH byte holding FECN/BECN (IBA annex A17.4.1);
      // a flip there passes. Nothing else may: payload and every other header field are intact.
      EXPECT_EQ(r.hdr.bth.psn, Psn(i));
      EXPECT_EQ(r.hdr.reth.va, 0x1000u + i);
      EXPECT_EQ(r.payload, std::vector<uint8_t>(p.data.begin(), p.data.begin() + 256));
    }
  }
  const LinkCounters& c = p.b->counters();
  EXPECT_EQ(p.net.counters().corrupted, kN);
  EXPECT_EQ(c.rx_packets, got_n);
  EXPECT_EQ(c.rx_packets + c.rx_drop_bad_icrc + c.rx_drop_malformed + c.rx_drop_not_roce, kN);
  // 16 uncovered bits (UDP checksum) + 8 (BTH reserved byte) of 320 * 8: about 0.9%.
  const uint32_t bits = (20 + 8 + 12 + 16 + 256 + 4) * 8;
  EXPECT_NEAR(static_cast<double>(got_n), kN * 24.0 / bits, 5 * std::sqrt(kN * 24.0 / bits));
  EXPECT_GT(c.rx_drop_bad_icrc, kN * 8 / 10);
  EXPECT_EQ(p.b->rx_drop_bad_ip_checksum(), 202u) << "TOS/TTL/checksum flips fail the IP checksum";
}

TEST(FabricLossySimLink, AttachingTheSameAddressTwiceFails) {
  EventLoop loop(1);
  LossyNetwork net(loop);
  ASSERT_TRUE(SimLink::create(net, kA4).ok());
  EXPECT_FALSE(SimLink::create(net, kA4).ok());
}

}  // namespace
}  // namespace uroce::link
