#include <gtest/gtest.h>

#include <vector>

#include "wire/packet.h"

namespace uroce::wire {
namespace {

TransportHeaders sample_headers(uint8_t opcode) {
  TransportHeaders h;
  h.bth.opcode = opcode;
  h.bth.solicited = true;
  h.bth.pkey = 0xffff;
  h.bth.dest_qp = 0x123456;
  h.bth.ack_req = true;
  h.bth.psn = Psn(0xfffffe);
  h.bth.becn = opcode == op::kCnp;
  h.reth = {0x1122334455667788, 0xaabbccdd, 4096};
  h.aeth = Aeth::nak(0x654321, NakCode::kRemoteAccessError);
  h.atomic = {0x1000, 0x42, 7, 9};
  h.atomic_ack.original = 0xdeadbeefcafef00d;
  h.imm = 0x01020304;
  h.ieth_rkey = 0x99;
  h.deth = {0x11111111, 0xabcdef};
  return h;
}

TEST(WireRoundTrip, EveryOpcodeInTheTableRoundTrips) {
  int tested = 0;
  for (int code = 0; code < 256; ++code) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(code));
    if (!info.valid()) continue;
    ++tested;
    TransportHeaders h = sample_headers(static_cast<uint8_t>(code));
    std::vector<uint8_t> payload(info.payload ? 13 : 0, 0x5a);
    std::vector<uint8_t> buf(200);
    IpEndpoints ep;
    ep.src = {198, 18, 0, 1};
    ep.dst = {198, 18, 0, 2};
    const uint32_t n = build_ip_packet(ep, h, payload, buf);
    ASSERT_GT(n, 0u) << info.name;
    auto parsed = parse_ip_packet(std::span(buf.data(), n));
    ASSERT_TRUE(parsed.ok()) << info.name << ": " << to_string(parsed.error());
    const TransportHeaders& g = parsed->transport.hdr;
    EXPECT_EQ(g.bth.opcode, code);
    EXPECT_EQ(g.bth.dest_qp, h.bth.dest_qp);
    EXPECT_EQ(g.bth.psn, h.bth.psn);
    EXPECT_EQ(g.bth.ack_req, h.bth.ack_req);
    EXPECT_EQ(g.bth.solicited, h.bth.solicited);
    EXPECT_EQ(g.bth.becn, h.bth.becn);
    EXPECT_EQ(g.bth.pad_count, info.payload ? 3 : 0);
    EXPECT_EQ(parsed->transport.payload.size(), payload.size());
    if (info.has(kReth)) {
      EXPECT_EQ(g.reth.va, h.reth.va);
      EXPECT_EQ(g.reth.rkey, h.reth.rkey);
      EXPECT_EQ(g.reth.dma_length, h.reth.dma_length);
    }
    if (info.has(kAeth)) {
      EXPECT_EQ(g.aeth.syndrome, h.aeth.syndrome);
      EXPECT_EQ(g.aeth.msn, h.aeth.msn);
    }
    if (info.has(kAtomicEth)) {
      EXPECT_EQ(g.atomic.va, h.atomic.va);
      EXPECT_EQ(g.atomic.swap_add, h.atomic.swap_add);
      EXPECT_EQ(g.atomic.compare, h.atomic.compare);
    }
    if (info.has(kAtomicAckEth)) {
      EXPECT_EQ(g.atomic_ack.original, h.atomic_ack.original);
    }
    if (info.has(kImmDt)) {
      EXPECT_EQ(g.imm, h.imm);
    }
    if (info.has(kIeth)) {
      EXPECT_EQ(g.ieth_rkey, h.ieth_rkey);
    }
    if (info.has(kDeth)) {
      EXPECT_EQ(g.deth.qkey, h.deth.qkey);
      EXPECT_EQ(g.deth.src_qp, h.deth.src_qp);
    }
  }
  EXPECT_EQ(tested, 23 + 12 + 2 + 1);  // RC, UC, UD, CNP
}

}  // namespace
}  // namespace uroce::wire

namespace uroce::wire {
namespace {
// Bytes made by scapy's RoCE layer (scapy.contrib.roce), which computes the ICRC itself:
// IP(src=198.18.0.1,dst=198.18.0.2,flags=DF,id=0)/UDP(sport=0xc000)/BTH(opcode=4,psn=5,dqpn=0x11,
// migreq=1)/b"abcd".
TEST(WireIcrc, MatchesScapyForRcSendOnlyIpv4) {
  const std::vector<uint8_t> scapy = {
      0x45, 0x00, 0x00, 0x30, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xae, 0x95, 0xc6, 0x12,
      0x00, 0x01, 0xc6, 0x12, 0x00, 0x02, 0xc0, 0x00, 0x12, 0xb7, 0x00, 0x1c, 0x57, 0x54,
      0x04, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x05, 0x61, 0x62,
      0x63, 0x64, 0xeb, 0x88, 0x94, 0xdc};
  auto parsed = parse_ip_packet(scapy);
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  EXPECT_EQ(parsed->transport.hdr.bth.opcode, op::kRcSendOnly);
  EXPECT_EQ(parsed->transport.hdr.bth.psn, Psn(5));
}
}  // namespace
}  // namespace uroce::wire
