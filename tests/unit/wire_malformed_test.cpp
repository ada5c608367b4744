// Malformed input: every parser answers with a typed error and never reads past the bytes it is
// given. Each case copies its input into a vector of exactly that size, so under ASan a read past
// the end is a failure, not luck.
#include <gtest/gtest.h>

#include <ostream>
#include <vector>

#include "common/bytes.h"
#include "wire/packet.h"

namespace uroce::wire {
// gtest prints errors by name.
void PrintTo(ParseError e, std::ostream* os) {
  *os << to_string(e);
}

namespace {

IpEndpoints endpoints(bool v6) {
  IpEndpoints ep;
  ep.ipv6 = v6;
  if (v6) {
    ep.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    ep.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  } else {
    ep.src = {198, 18, 0, 1};
    ep.dst = {198, 18, 0, 2};
  }
  return ep;
}

TransportHeaders headers(uint8_t opcode) {
  TransportHeaders h;
  h.bth.opcode = opcode;
  h.bth.dest_qp = 0x10;
  h.bth.psn = Psn(0x20);
  h.reth = {0x1000, 1, 5};
  h.deth = {0x11, 2};
  return h;
}

std::vector<uint8_t> packet(uint8_t opcode, bool v6, size_t payload_len) {
  std::vector<uint8_t> buf(256);
  if (!opcode_info(opcode).payload) payload_len = 0;
  const std::vector<uint8_t> payload(payload_len, 0x5a);
  buf.resize(build_ip_packet(endpoints(v6), headers(opcode), payload, buf));
  return buf;
}

uint32_t ip_len(const std::vector<uint8_t>& p) {
  return (p[0] >> 4) == 6 ? kIpv6Bytes : kIpv4Bytes;
}

// After editing covered bytes, a valid ICRC again, so the parser gets past it to the field under
// test. Keeps IPv4's header checksum right too.
void reseal(std::vector<uint8_t>& p) {
  if ((p[0] >> 4) == 4) store_be16(&p[10], ipv4_header_checksum(std::span(p).first<kIpv4Bytes>()));
  const size_t at = p.size() - kIcrcBytes;
  store_icrc(&p[at], compute_icrc(std::span(p).first(at)));
}

ParseError ip_error(const std::vector<uint8_t>& p) {
  auto r = parse_ip_packet(p);
  return r.ok() ? static_cast<ParseError>(0xff) : r.error();
}

TEST(WireMalformed, TruncatedAtEveryOffset) {
  const uint8_t opcodes[] = {op::kRcSendOnly,    op::kRcWriteOnlyImm, op::kRcAtomicAck,
                             op::kRcCompareSwap, op::kUdSendOnlyImm,  op::kCnp};
  for (const uint8_t code : opcodes) {
    for (const bool v6 : {false, true}) {
      SCOPED_TRACE(testing::Message() << opcode_info(code).name << (v6 ? " v6" : " v4"));
      const auto full = packet(code, v6, 9);
      ASSERT_FALSE(full.empty());
      ASSERT_TRUE(parse_ip_packet(full).ok());
      Ethernet eth;
      eth.vlan_tci = 5;
      eth.ethertype = v6 ? kEthertypeIpv6 : kEthertypeIpv4;
      std::vector<uint8_t> frame(kEthBytes + kVlanBytes);
      write_ethernet(eth, frame);
      frame.insert(frame.end(), full.begin(), full.end());
      ASSERT_TRUE(parse_frame(frame).ok());

      for (size_t len = 0; len < full.size(); ++len) {
        // The IP length promises more bytes than are there.
        const std::vector<uint8_t> cut(full.begin(), full.begin() + len);
        EXPECT_EQ(ip_error(cut), ParseError::kTruncated) << len;
        const std::vector<uint8_t> fcut(frame.begin(), frame.begin() + len + 18);
        auto f = parse_frame(fcut);
        ASSERT_FALSE(f.ok()) << len;
        EXPECT_EQ(f.error(), ParseError::kTruncated) << len;
      }
      for (size_t len = 0; len < 18; ++len) {
        const std::vector<uint8_t> fcut(frame.begin(), frame.begin() + len);
        EXPECT_EQ(parse_frame(fcut).error(), ParseError::kTruncated) << len;
      }

      // The transport parser alone: short of the headers is truncated; past them, a cut payload
      // is either an unaligned length or a shorter packet, never an overread.
      const std::vector<uint8_t> transport(full.begin() + ip_len(full) + kUdpBytes,
                                           full.end() - kIcrcBytes);
      const uint32_t hb = opcode_info(code).header_bytes;
      for (size_t len = 0; len < transport.size(); ++len) {
        const std::vector<uint8_t> cut(transport.begin(), transport.begin() + len);
        auto r = parse_transport(cut);
        if (len < hb) {
          ASSERT_FALSE(r.ok()) << len;
          EXPECT_EQ(r.error(), ParseError::kTruncated) << len;
        } else if (r.ok()) {
          EXPECT_LE(r->payload.size(), len - hb);
        }
      }

      // The UDP-socket parser: a cut datagram never checks.
      const std::vector<uint8_t> udp(full.begin() + ip_len(full) + kUdpBytes, full.end());
      ASSERT_TRUE(parse_udp_payload(endpoints(v6), udp).ok());
      for (size_t len = 0; len < udp.size(); ++len) {
        const std::vector<uint8_t> cut(udp.begin(), udp.begin() + len);
        EXPECT_FALSE(parse_udp_payload(endpoints(v6), cut).ok()) << len;
      }
    }
  }
}

TEST(WireMalformed, WrongUdpLength) {
  for (const bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "v6" : "v4");
    const auto good = packet(op::kRcSendOnly, v6, 8);
    const uint32_t at = ip_len(good) + 4;
    const uint16_t right = load_be16(&good[at]);
    for (const int delta : {-4, -1, 1, 4, -right, 0xffff - right}) {
      auto p = good;
      store_be16(&p[at], static_cast<uint16_t>(right + delta));
      EXPECT_EQ(ip_error(p), ParseError::kBadLength) << delta;
    }
    // The IP length shorter than IP + UDP headers.
    auto p = good;
    if (v6) {
      store_be16(&p[4], 7);
    } else {
      store_be16(&p[2], kIpv4Bytes + 7);
    }
    EXPECT_EQ(ip_error(p), ParseError::kBadLength);
    // IP and UDP lengths agree but leave no room for BTH and ICRC.
    p = good;
    if (v6) {
      store_be16(&p[4], kUdpBytes + 8);
    } else {
      store_be16(&p[2], kIpv4Bytes + kUdpBytes + 8);
    }
    store_be16(&p[at], kUdpBytes + 8);
    EXPECT_EQ(ip_error(p), ParseError::kTruncated);
    // Both lengths 4 shorter: the last 4 payload bytes are taken for the ICRC, which fails.
    p = good;
    if (v6) {
      store_be16(&p[4], static_cast<uint16_t>(right - 4));
    } else {
      store_be16(&p[2], static_cast<uint16_t>(kIpv4Bytes + right - 4));
    }
    store_be16(&p[at], static_cast<uint16_t>(right - 4));
    EXPECT_EQ(ip_error(p), ParseError::kBadIcrc);
  }
  // A UDP payload too big for any IP packet.
  std::vector<uint8_t> huge(0x10000, 0);
  EXPECT_EQ(parse_udp_payload(endpoints(false), huge).error(), ParseError::kBadLength);
}

TEST(WireMalformed, UnknownOpcodes) {
  int unknown = 0;
  for (int code = 0; code < 256; ++code) {
    if (opcode_info(static_cast<uint8_t>(code)).valid()) continue;
    ++unknown;
    auto p = packet(op::kRcSendOnly, code & 1, 8);
    p[ip_len(p) + kUdpBytes] = static_cast<uint8_t>(code);
    reseal(p);
    EXPECT_EQ(ip_error(p), ParseError::kUnknownOpcode) << code;
    const std::vector<uint8_t> bth(p.begin() + ip_len(p) + kUdpBytes, p.end() - kIcrcBytes);
    EXPECT_EQ(parse_transport(bth).error(), ParseError::kUnknownOpcode) << code;
  }
  EXPECT_EQ(unknown, 256 - 38 - 23);  // RD (0x40..0x5f), reserved and manufacturer codes among them
}

TEST(WireMalformed, BadPadCount) {
  for (const bool v6 : {false, true}) {
    // Pad larger than what follows the headers: SEND_ONLY with no payload claiming 3 pad bytes.
    auto p = packet(op::kRcSendOnly, v6, 0);
    const uint32_t bth = ip_len(p) + kUdpBytes;
    p[bth + 1] |= 0x30;
    reseal(p);
    EXPECT_EQ(ip_error(p), ParseError::kBadPadCount);
    // A pad on an opcode that carries no payload.
    for (const uint8_t code : {op::kRcAck, op::kRcReadRequest, op::kCnp, op::kRcFetchAdd}) {
      p = packet(code, v6, 0);
      p[bth + 1] |= 0x10;
      reseal(p);
      EXPECT_EQ(ip_error(p), ParseError::kBadPadCount) << int{code};
    }
    // Every wrong pad count on a 5-byte payload (pad 3) parses to a different payload size, so
    // it is caught only as far as the bytes allow: the payload must then still be consistent.
    p = packet(op::kRcSendOnly, v6, 5);
    for (uint8_t pad = 0; pad < 4; ++pad) {
      auto q = p;
      q[bth + 1] = static_cast<uint8_t>((q[bth + 1] & ~0x30) | pad << 4);
      reseal(q);
      auto r = parse_ip_packet(q);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->transport.payload.size(), 8u - pad);
    }
  }
  // What follows the headers is not a whole number of words: the pad cannot be right.
  std::vector<uint8_t> t(kBthBytes + 5, 0);
  t[0] = op::kRcSendOnly;
  EXPECT_EQ(parse_transport(t).error(), ParseError::kBadLength);
}

TEST(WireMalformed, PayloadOnAnOpcodeWithout) {
  std::vector<uint8_t> t(kBthBytes + 4, 0);
  t[0] = op::kRcAck;
  t.resize(opcode_info(op::kRcAck).header_bytes + 4);
  EXPECT_EQ(parse_transport(t).error(), ParseError::kUnexpectedPayload);
}

TEST(WireMalformed, BadTransportVersion) {
  auto p = packet(op::kRcSendOnly, false, 4);
  p[kIpv4Bytes + kUdpBytes + 1] |= 0x01;  // TVer 1
  reseal(p);
  EXPECT_EQ(ip_error(p), ParseError::kBadVersion);
}

// Every bit of every covered byte is guarded by the ICRC; the masked fields (IBA annex A17) are
// not, and flipping them leaves a valid packet.
TEST(WireMalformed, IcrcGuardsEveryCoveredBit) {
  for (const bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "v6" : "v4");
    const auto good = packet(op::kRcWriteOnlyImm, v6, 6);
    const uint32_t ip = ip_len(good);
    auto masked = [&](size_t i, int bit) {
      if (v6) {
        if (i == 0) return bit < 4;  // traffic class, high nibble
        if (i >= 1 && i <= 3) return true;
        if (i == 7) return true;
      } else {
        if (i == 1 || i == 8 || i == 10 || i == 11) return true;
      }
      if (i == ip + 6 || i == ip + 7) return true;  // UDP checksum
      return i == ip + kUdpBytes + 4;               // BTH FECN, BECN, reserved
    };
    int flips = 0;
    for (size_t i = 0; i < good.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        auto p = good;
        p[i] ^= static_cast<uint8_t>(1u << bit);
        auto r = parse_ip_packet(p);
        if (masked(i, bit)) {
          EXPECT_TRUE(r.ok()) << i << ":" << bit;
          continue;
        }
        ++flips;
        ASSERT_FALSE(r.ok()) << i << ":" << bit;
        // Past the IP and UDP headers nothing is checked before the ICRC.
        if (i >= ip + kUdpBytes) {
          EXPECT_EQ(r.error(), ParseError::kBadIcrc) << i << ":" << bit;
        }
      }
    }
    EXPECT_GT(flips, 400);
  }
}

TEST(WireMalformed, NotRoce) {
  auto p = packet(op::kRcSendOnly, false, 4);
  auto q = p;
  store_be16(&q[kIpv4Bytes + 2], 4790);  // another UDP port
  EXPECT_EQ(ip_error(q), ParseError::kNotRoce);
  q = p;
  q[9] = 6;  // TCP
  EXPECT_EQ(ip_error(q), ParseError::kNotRoce);
  q = p;
  q[0] = 0x46;  // IPv4 options
  EXPECT_EQ(ip_error(q), ParseError::kNotRoce);
  q = p;
  q[6] |= 0x20;  // more fragments
  reseal(q);
  EXPECT_EQ(ip_error(q), ParseError::kNotRoce);
  q = p;
  store_be16(&q[6], 0x4001);  // a fragment offset
  reseal(q);
  EXPECT_EQ(ip_error(q), ParseError::kNotRoce);
  q = p;
  q[0] = 0x55;  // IP version 5
  EXPECT_EQ(ip_error(q), ParseError::kBadVersion);
  auto v6 = packet(op::kRcSendOnly, true, 4);
  v6[6] = 0;  // hop-by-hop options header
  EXPECT_EQ(ip_error(v6), ParseError::kNotRoce);

  // Frames: another ethertype, and an ethertype that disagrees with the IP version.
  std::vector<uint8_t> frame(kEthBytes);
  Ethernet eth;
  eth.ethertype = 0x0806;
  write_ethernet(eth, frame);
  frame.insert(frame.end(), p.begin(), p.end());
  EXPECT_EQ(parse_frame(frame).error(), ParseError::kNotRoce);
  store_be16(&frame[12], kEthertypeRoceV1);
  EXPECT_EQ(parse_frame(frame).error(), ParseError::kNotRoce);
  store_be16(&frame[12], kEthertypeIpv6);
  EXPECT_EQ(parse_frame(frame).error(), ParseError::kBadVersion);
}

// The builders refuse what they cannot build, rather than write a bad packet.
TEST(WireMalformed, BuildersRefuse) {
  const std::vector<uint8_t> four(4, 1);
  std::vector<uint8_t> out(1 << 17);
  for (const bool v6 : {false, true}) {
    EXPECT_EQ(build_ip_packet(endpoints(v6), headers(op::kRcAck), four, out), 0u);
    EXPECT_EQ(build_udp_payload(endpoints(v6), headers(op::kRcReadRequest), four, out), 0u);
    EXPECT_EQ(build_ip_packet(endpoints(v6), headers(op::kRcSendOnly), four,
                              std::span(out).first(kIpv6Bytes)),
              0u);
    EXPECT_EQ(build_udp_payload(endpoints(v6), headers(op::kRcSendOnly), four,
                                std::span(out).first(kBthBytes + 4)),
              0u);
    const std::vector<uint8_t> too_big(0xffff, 0);
    EXPECT_EQ(build_ip_packet(endpoints(v6), headers(op::kRcSendOnly), too_big, out), 0u);
    EXPECT_EQ(build_udp_payload(endpoints(v6), headers(op::kRcSendOnly), too_big, out), 0u);
  }
}

TEST(WireMalformed, ErrorsHaveNames) {
  for (int e = 0; e <= static_cast<int>(ParseError::kBadIcrc); ++e)
    EXPECT_NE(to_string(static_cast<ParseError>(e)), "?") << e;
}

}  // namespace
}  // namespace uroce::wire
