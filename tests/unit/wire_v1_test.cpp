// RoCE v1 (EtherType 0x8915, GRH, BTH .. ICRC): exact bytes, the ICRC's masking, and the parser's
// answers to damaged and foreign input.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "wire/packet.h"

namespace uroce::wire {
namespace {

std::vector<uint8_t> from_hex(const std::string& s) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < s.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return out;
}

Grh sample_grh() {
  Grh g;
  g.traffic_class = 0xb8;
  g.flow_label = 0x12345;
  g.hop_limit = 1;
  g.sgid = gid_from_ipv4({198, 18, 0, 1});
  g.dgid = gid_from_ipv4({198, 18, 0, 2});
  return g;
}

TransportHeaders sample_send() {
  TransportHeaders h;
  h.bth.opcode = op::kRcSendOnly;
  h.bth.solicited = true;
  h.bth.mig_req = true;
  h.bth.dest_qp = 0x12;
  h.bth.ack_req = true;
  h.bth.psn = Psn(0x100);
  return h;
}

// The expected bytes were computed apart from this codec (Python's zlib.crc32 over the masked
// headers as IBA 7.8.1 and annex A16 lay them out), so the test checks the layout and the masks,
// not the codec against itself.
constexpr const char* kSendOnlyV1 =
    "6b812345"  // version 6, traffic class 0xb8, flow label 0x12345
    "00141b01"  // payload length 20 (BTH 12 + 3 + pad 1 + ICRC 4), next header 0x1B, hop limit 1
    "00000000000000000000ffffc6120001"  // source GID ::ffff:198.18.0.1
    "00000000000000000000ffffc6120002"  // destination GID ::ffff:198.18.0.2
    "04d0ffff00000012800001 00"         // BTH: SEND_ONLY, SE M pad 1, P_Key, QP 0x12, A, PSN 0x100
    "aabbcc00"                          // payload and pad
    "708d72b2";                         // ICRC, least significant byte first

std::string strip(std::string s) {
  std::erase(s, ' ');
  return s;
}

TEST(WireV1, BuildsSendOnlyByteForByte) {
  const std::vector<uint8_t> payload = {0xaa, 0xbb, 0xcc};
  std::vector<uint8_t> out(128);
  const uint32_t n = build_v1_packet(sample_grh(), sample_send(), payload, out);
  out.resize(n);
  EXPECT_EQ(out, from_hex(strip(kSendOnlyV1)));
}

TEST(WireV1, ParsesWhatItBuilds) {
  const auto bytes = from_hex(strip(kSendOnlyV1));
  auto p = parse_v1_packet(bytes);
  ASSERT_TRUE(p.ok()) << to_string(p.error());
  EXPECT_EQ(p->grh.traffic_class, 0xb8);
  EXPECT_EQ(p->grh.flow_label, 0x12345u);
  EXPECT_EQ(p->grh.payload_length, 20);
  EXPECT_EQ(p->grh.hop_limit, 1);
  EXPECT_EQ(p->grh.sgid, gid_from_ipv4({198, 18, 0, 1}));
  EXPECT_EQ(p->grh.dgid, gid_from_ipv4({198, 18, 0, 2}));
  EXPECT_EQ(p->transport.hdr.bth.opcode, op::kRcSendOnly);
  EXPECT_EQ(p->transport.hdr.bth.dest_qp, 0x12u);
  EXPECT_EQ(p->transport.hdr.bth.psn.value(), 0x100u);
  EXPECT_EQ(p->transport.hdr.bth.pad_count, 1);
  EXPECT_EQ(p->icrc, 0xb2728d70u);
  ASSERT_EQ(p->transport.payload.size(), 3u);
  EXPECT_EQ(p->transport.payload[2], 0xcc);
}

TEST(WireV1, IcrcIgnoresTheVariantFieldsOnly) {
  const auto good = from_hex(strip(kSendOnlyV1));
  // Traffic class, flow label, hop limit (GRH) and the BTH's reserved byte may change on the way.
  for (size_t at : {0u, 1u, 2u, 3u, 7u, 44u}) {
    auto b = good;
    b[at] ^= (at == 0 ? 0x0f : 0xff);
    EXPECT_TRUE(parse_v1_packet(b).ok()) << at;
  }
  // Every other byte the ICRC covers may not (the version nibble and next header are refused
  // before the ICRC is checked, the payload length changes what is covered).
  for (size_t at = 8; at < good.size() - kIcrcBytes; ++at) {
    if (at == 44) continue;
    auto b = good;
    b[at] ^= 0x01;
    EXPECT_EQ(parse_v1_packet(b).error(), ParseError::kBadIcrc) << at;
  }
}

TEST(WireV1, RefusesWhatIsNotAV1Packet) {
  const auto good = from_hex(strip(kSendOnlyV1));
  auto b = good;
  b[0] = 0x4b;  // version 4
  EXPECT_EQ(parse_v1_packet(b).error(), ParseError::kBadVersion);
  b = good;
  b[6] = 17;  // next header UDP: not an IBA transport packet
  EXPECT_EQ(parse_v1_packet(b).error(), ParseError::kNotRoce);
  b = good;
  b[5] = 21;  // payload length past the end
  EXPECT_EQ(parse_v1_packet(b).error(), ParseError::kTruncated);
  b = good;
  b[5] = 15;  // shorter than a BTH and an ICRC
  EXPECT_EQ(parse_v1_packet(b).error(), ParseError::kTruncated);
  for (size_t len = 0; len < good.size(); ++len) {
    auto r = parse_v1_packet(std::span(good).first(len));
    EXPECT_EQ(r.error(), ParseError::kTruncated) << len;
  }
  // Ethernet padding after the payload length is not part of the packet.
  b = good;
  b.resize(b.size() + 6, 0);
  EXPECT_TRUE(parse_v1_packet(b).ok());
}

TEST(WireV1, FrameWithVlanTagRoundTrips) {
  Ethernet eth;
  eth.src = {2, 0, 0, 0, 0, 1};
  eth.dst = {2, 0, 0, 0, 0, 2};
  eth.vlan_tci = static_cast<uint16_t>(5 << 13 | 100);
  eth.ethertype = kEthertypeRoceV1;
  std::vector<uint8_t> frame(160);
  const uint32_t l2 = write_ethernet(eth, frame);
  ASSERT_EQ(l2, 18u);
  const std::vector<uint8_t> payload = {0xaa, 0xbb, 0xcc};
  const uint32_t n =
      build_v1_packet(sample_grh(), sample_send(), payload, std::span(frame).subspan(l2));
  frame.resize(l2 + n);
  EXPECT_EQ(std::vector<uint8_t>(frame.begin() + l2, frame.end()), from_hex(strip(kSendOnlyV1)));
  auto f = parse_v1_frame(frame);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->eth.vlan_tci, eth.vlan_tci);
  EXPECT_EQ(f->eth.ethertype, kEthertypeRoceV1);
  EXPECT_EQ(f->eth.src, eth.src);
  EXPECT_EQ(f->packet.transport.hdr.bth.dest_qp, 0x12u);
  // A RoCEv2 parser does not take a v1 frame, nor a v1 parser a v2 one.
  EXPECT_EQ(parse_frame(frame).error(), ParseError::kNotRoce);
  frame[17] = 0x00;  // EtherType 0x8900
  EXPECT_EQ(parse_v1_frame(frame).error(), ParseError::kNotRoce);
}

TEST(WireV1, EveryOpcodeRoundTrips) {
  int built = 0;
  for (int code = 0; code < 256; ++code) {
    const auto opcode = static_cast<uint8_t>(code);
    const OpcodeInfo& info = opcode_info(opcode);
    if (!info.valid()) continue;
    TransportHeaders h = sample_send();
    h.bth.opcode = opcode;
    h.reth = {0x1122334455667788ull, 0xabcdef01u, 0x1000};
    h.deth = {0x80010000u, 0xabcde};
    h.imm = 0xa5a5a5a5u;
    std::vector<uint8_t> payload;
    if (info.payload) payload = {1, 2, 3, 4, 5};
    std::vector<uint8_t> out(256);
    const uint32_t n = build_v1_packet(sample_grh(), h, payload, out);
    ASSERT_EQ(n, kGrhBytes + info.header_bytes + payload.size() +
                     pad_for(static_cast<uint32_t>(payload.size())) + kIcrcBytes)
        << info.name;
    auto p = parse_v1_packet(std::span(out).first(n));
    ASSERT_TRUE(p.ok()) << info.name << ": " << to_string(p.error());
    EXPECT_EQ(p->transport.hdr.bth.opcode, opcode);
    EXPECT_EQ(p->transport.payload.size(), payload.size());
    if (info.has(kReth)) {
      EXPECT_EQ(p->transport.hdr.reth.va, h.reth.va);
    }
    if (info.has(kDeth)) {
      EXPECT_EQ(p->transport.hdr.deth.src_qp, h.deth.src_qp);
    }
    ++built;
  }
  EXPECT_EQ(built, 61);  // every opcode in the table (RC, UC, RD, UD, CNP, XRC)
}

}  // namespace
}  // namespace uroce::wire
