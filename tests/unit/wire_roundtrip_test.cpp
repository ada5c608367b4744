// Build-then-parse round trips for every opcode in the table, every pad count, both IP versions,
// Ethernet frames with and without 802.1Q, and the table's own arithmetic.
#include <gtest/gtest.h>

#include <vector>

#include "common/bytes.h"
#include "wire/crc32.h"
#include "wire/packet.h"

namespace uroce::wire {
namespace {

TransportHeaders sample_headers(uint8_t opcode) {
  TransportHeaders h;
  h.bth.opcode = opcode;
  h.bth.solicited = true;
  h.bth.pkey = 0x8001;
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
  h.xrc_srqn = 0xfedcba;
  return h;
}

IpEndpoints endpoints(bool v6) {
  IpEndpoints ep;
  ep.ipv6 = v6;
  if (v6) {
    ep.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    ep.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    ep.flow_label = 0xabcde;
  } else {
    ep.src = {198, 18, 0, 1};
    ep.dst = {198, 18, 0, 2};
  }
  ep.udp_src_port = 0xc123;
  ep.dscp = 26;
  return ep;
}

void expect_same_headers(const OpcodeInfo& info, const TransportHeaders& h,
                         const TransportHeaders& g) {
  EXPECT_EQ(g.bth.opcode, h.bth.opcode);
  EXPECT_EQ(g.bth.dest_qp, h.bth.dest_qp);
  EXPECT_EQ(g.bth.psn, h.bth.psn);
  EXPECT_EQ(g.bth.pkey, h.bth.pkey);
  EXPECT_EQ(g.bth.ack_req, h.bth.ack_req);
  EXPECT_EQ(g.bth.solicited, h.bth.solicited);
  EXPECT_EQ(g.bth.mig_req, h.bth.mig_req);
  EXPECT_EQ(g.bth.fecn, h.bth.fecn);
  EXPECT_EQ(g.bth.becn, h.bth.becn);
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
    EXPECT_EQ(g.atomic.rkey, h.atomic.rkey);
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
  if (info.has(kXrcEth)) {
    EXPECT_EQ(g.xrc_srqn, h.xrc_srqn);
  }
  if (info.has(kDeth)) {
    EXPECT_EQ(g.deth.qkey, h.deth.qkey);
    EXPECT_EQ(g.deth.src_qp, h.deth.src_qp);
  }
}

// Header sizes from IBA 9.3 (the extension header formats), written out here rather than taken from
// opcode.h.
TEST(WireOpcodeTable, HeaderSizesAddUp) {
  struct Size {
    Header h;
    uint32_t bytes;
  };
  const Size kSpec[] = {{kDeth, 8},       {kXrcEth, 4}, {kReth, 16},
                        {kAtomicEth, 28}, {kAeth, 4},   {kAtomicAckEth, 8},
                        {kImmDt, 4},      {kIeth, 4},   {kCnpReserved, 16}};
  int valid = 0;
  for (int code = 0; code < 256; ++code) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(code));
    if (!info.valid()) {
      EXPECT_EQ(info.headers, 0) << code;
      continue;
    }
    ++valid;
    SCOPED_TRACE(info.name);
    uint32_t sum = 12;  // BTH
    uint32_t next_offset = 12;
    for (const Size& s : kSpec) {
      if (!info.has(s.h)) continue;
      // Each extension header starts where the previous one ends, in figure 9's order.
      EXPECT_EQ(header_offset(info.headers, s.h), next_offset);
      EXPECT_EQ(info.offset(s.h), next_offset);  // the table's copy, which the codec reads
      next_offset += s.bytes;
      sum += s.bytes;
    }
    EXPECT_EQ(info.header_bytes, sum);
    EXPECT_EQ(headers_bytes(info.headers), sum);
    EXPECT_LE(sum, kMaxTransportHeaderBytes);
    EXPECT_EQ(sum % 4, 0u);  // headers are whole words, so pads only follow payload
    // Names carry the service: RC_, UC_, UD_ or CNP.
    const std::string_view prefix = info.name.substr(0, 3);
    switch (info.service) {
      case Service::kRc:
        EXPECT_EQ(prefix, "RC_");
        break;
      case Service::kUc:
        EXPECT_EQ(prefix, "UC_");
        break;
      case Service::kUd:
        EXPECT_EQ(prefix, "UD_");
        break;
      case Service::kCnp:
        EXPECT_EQ(info.name, "CNP");
        break;
      case Service::kXrc:
        EXPECT_EQ(info.name.substr(0, 4), "XRC_");
        break;
    }
    // XRC opcodes mirror every RC one, 0xa0 higher (annex A14); requests add the XRCETH.
    if (info.service == Service::kXrc) {
      const OpcodeInfo& rc = opcode_info(static_cast<uint8_t>(code - op::kXrcBase));
      EXPECT_EQ(rc.service, Service::kRc);
      EXPECT_EQ(rc.headers | (rc.is_request() ? kXrcEth : 0), info.headers);
      EXPECT_EQ(rc.kind, info.kind);
      EXPECT_EQ(rc.place, info.place);
      EXPECT_EQ(rc.payload, info.payload);
      EXPECT_EQ(info.name.substr(4), rc.name.substr(3));
    }
    // UC opcodes mirror the RC SEND/WRITE ones, 0x20 higher (IBA 9.2, table 38).
    if (info.service == Service::kUc) {
      const OpcodeInfo& rc = opcode_info(static_cast<uint8_t>(code - op::kUcBase));
      EXPECT_EQ(rc.headers, info.headers);
      EXPECT_EQ(rc.kind, info.kind);
      EXPECT_EQ(rc.place, info.place);
      EXPECT_EQ(info.name.substr(3), rc.name.substr(3));
    }
  }
  EXPECT_EQ(valid, 23 + 12 + 2 + 1 + 23);  // RC, UC, UD, CNP, XRC
  // Only the payload-carrying kinds may carry payload.
  EXPECT_FALSE(opcode_info(op::kRcReadRequest).payload);
  EXPECT_FALSE(opcode_info(op::kRcAck).payload);
  EXPECT_FALSE(opcode_info(op::kCnp).payload);
  EXPECT_TRUE(opcode_info(op::kRcReadResponseMiddle).payload);
}

// Payload sizes 0..7 exercise every pad count; each opcode, both IP versions.
TEST(WireRoundTrip, EveryOpcodeEveryPadBothIpVersions) {
  int packets = 0;
  for (int code = 0; code < 256; ++code) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(code));
    if (!info.valid()) continue;
    for (const bool v6 : {false, true}) {
      for (uint32_t len = 0; len < (info.payload ? 8u : 1u); ++len) {
        SCOPED_TRACE(testing::Message() << info.name << (v6 ? " v6 " : " v4 ") << len);
        const TransportHeaders h = sample_headers(static_cast<uint8_t>(code));
        std::vector<uint8_t> payload(len);
        for (uint32_t i = 0; i < len; ++i) payload[i] = static_cast<uint8_t>(0xa0 + i);
        const IpEndpoints ep = endpoints(v6);
        std::vector<uint8_t> buf(200, 0xee);
        const uint32_t n = build_ip_packet(ep, h, payload, buf);
        const uint32_t ip_len = v6 ? kIpv6Bytes : kIpv4Bytes;
        const uint8_t pad = pad_for(len);
        ASSERT_EQ(n, ip_len + kUdpBytes + info.header_bytes + len + pad + kIcrcBytes);
        // Pad bytes are sent as zeros (IBA 9.2, BTH PadCnt).
        for (uint32_t i = 0; i < pad; ++i) EXPECT_EQ(buf[n - kIcrcBytes - pad + i], 0);
        buf.resize(n);  // exact size, so ASan catches any read past the end
        auto parsed = parse_ip_packet(buf);
        ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
        EXPECT_EQ(parsed->ipv6.has_value(), v6);
        EXPECT_EQ(parsed->udp.src_port, ep.udp_src_port);
        EXPECT_EQ(parsed->udp.length, n - ip_len);
        if (v6) {
          EXPECT_EQ(parsed->ipv6->flow_label, ep.flow_label);
          EXPECT_EQ(parsed->ipv6->dscp, ep.dscp);
          EXPECT_EQ(parsed->ipv6->payload_length, n - ip_len);
        } else {
          EXPECT_EQ(parsed->ipv4->dscp, ep.dscp);
          EXPECT_EQ(parsed->ipv4->total_length, n);
          EXPECT_EQ(parsed->ipv4->identification, 0);
          EXPECT_TRUE(parsed->ipv4->dont_fragment);
          EXPECT_EQ(ipv4_header_checksum(std::span(buf).first<kIpv4Bytes>()), load_be16(&buf[10]));
        }
        EXPECT_EQ(parsed->transport.hdr.bth.pad_count, pad);
        expect_same_headers(info, h, parsed->transport.hdr);
        EXPECT_EQ(std::vector<uint8_t>(parsed->transport.payload.begin(),
                                       parsed->transport.payload.end()),
                  payload);
        ++packets;
      }
    }
  }
  EXPECT_EQ(packets,
            2 * ((32 + 18) * 8 + (6 + 5) * 1));  // RC/UC/UD: 32 with payload, 6 without; XRC 18, 5
}

TEST(WireRoundTrip, EthernetFramesWithAndWithoutVlan) {
  const TransportHeaders h = sample_headers(op::kRcWriteOnly);
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5, 6};
  for (const bool v6 : {false, true}) {
    for (const bool vlan : {false, true}) {
      SCOPED_TRACE(testing::Message() << (v6 ? "v6" : "v4") << (vlan ? " vlan" : ""));
      Ethernet eth;
      eth.dst = {2, 0, 0, 0, 0, 2};
      eth.src = {2, 0, 0, 0, 0, 1};
      if (vlan) eth.vlan_tci = 0x6064;  // PCP 3, VID 100
      eth.ethertype = v6 ? kEthertypeIpv6 : kEthertypeIpv4;
      std::vector<uint8_t> frame(256);
      const uint32_t l2 = write_ethernet(eth, frame);
      EXPECT_EQ(l2, kEthBytes + (vlan ? kVlanBytes : 0));
      const uint32_t n = build_ip_packet(endpoints(v6), h, payload, std::span(frame).subspan(l2));
      // BTH, RETH, the 6-byte payload and its 2 pad bytes, ICRC.
      ASSERT_EQ(n, (v6 ? kIpv6Bytes : kIpv4Bytes) + kUdpBytes + 12 + 16 + 6 + 2 + 4);
      frame.resize(l2 + n);
      auto f = parse_frame(frame);
      ASSERT_TRUE(f.ok()) << to_string(f.error());
      EXPECT_EQ(f->eth.dst, eth.dst);
      EXPECT_EQ(f->eth.src, eth.src);
      EXPECT_EQ(f->eth.vlan_tci, eth.vlan_tci);
      EXPECT_EQ(f->eth.ethertype, eth.ethertype);
      expect_same_headers(opcode_info(op::kRcWriteOnly), h, f->packet.transport.hdr);
      EXPECT_EQ(f->packet.transport.payload.size(), payload.size());
    }
  }
}

// A frame shorter than Ethernet's 60-byte minimum arrives padded; the IP length says where the
// packet ends, so the padding is not mistaken for the ICRC.
TEST(WireRoundTrip, EthernetMinimumFramePaddingIsIgnored) {
  const TransportHeaders h = cnp_headers(0x77);
  std::vector<uint8_t> frame(128, 0);
  Ethernet eth;
  const uint32_t l2 = write_ethernet(eth, frame);
  const uint32_t n = build_ip_packet(endpoints(false), h, {}, std::span(frame).subspan(l2));
  ASSERT_EQ(l2 + n, 14u + 20 + 8 + 12 + 16 + 4);
  frame.resize(l2 + n + 6);  // 74 bytes, but a short packet would get the same treatment
  auto f = parse_frame(frame);
  ASSERT_TRUE(f.ok()) << to_string(f.error());
  EXPECT_EQ(f->packet.transport.hdr.bth.opcode, op::kCnp);
}

TEST(WireRoundTrip, CnpHasBecnAndSixteenReservedBytes) {
  const TransportHeaders h = cnp_headers(0xabcdef, 0x7fff);
  std::vector<uint8_t> buf(64, 0xee);
  const uint32_t n = build_udp_payload(endpoints(false), h, {}, buf);
  ASSERT_EQ(n, kBthBytes + 16 + kIcrcBytes);
  EXPECT_EQ(buf[0], 0x81);
  EXPECT_EQ(buf[1], 0);     // SE, MigReq, pad, TVer all zero
  EXPECT_EQ(buf[4], 0x40);  // BECN
  for (uint32_t i = kBthBytes; i < kBthBytes + 16; ++i) EXPECT_EQ(buf[i], 0) << i;
  auto p = parse_udp_payload(endpoints(false), std::span(buf).first(n));
  ASSERT_TRUE(p.ok()) << to_string(p.error());
  EXPECT_TRUE(p->hdr.bth.becn);
  EXPECT_EQ(p->hdr.bth.dest_qp, 0xabcdefu);
  EXPECT_EQ(p->hdr.bth.pkey, 0x7fff);
  EXPECT_TRUE(p->payload.empty());
}

// The UDP-socket path (headers rebuilt from the endpoints) and the whole-packet path agree, and
// the ICRC can be gathered from payload parts.
TEST(WireIcrc, UdpPayloadPathMatchesWholePacketPath) {
  for (const bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "v6" : "v4");
    const IpEndpoints ep = endpoints(v6);
    const TransportHeaders h = sample_headers(op::kRcSendOnlyImm);
    std::vector<uint8_t> payload(1001);
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
    std::vector<uint8_t> ip(2048), udp(2048);
    const uint32_t n = build_ip_packet(ep, h, payload, ip);
    const uint32_t m = build_udp_payload(ep, h, payload, udp);
    const uint32_t ip_udp = (v6 ? kIpv6Bytes : kIpv4Bytes) + kUdpBytes;
    ASSERT_EQ(n, ip_udp + m);
    EXPECT_TRUE(std::equal(udp.begin(), udp.begin() + m, ip.begin() + ip_udp));

    // Gather: headers, then the payload in three uneven parts, then the pad.
    const uint32_t th = opcode_info(op::kRcSendOnlyImm).header_bytes;
    uint32_t crc = icrc_begin_udp(ep, m, std::span(udp).first(th));
    crc = crc32(crc, std::span(payload).first(1));
    crc = crc32(crc, std::span(payload).subspan(1, 500));
    crc = crc32(crc, std::span(payload).subspan(501));
    const std::array<uint8_t, 3> pad{};
    crc = crc32(crc, std::span<const uint8_t>(pad.data(), pad_for(1001)));
    EXPECT_EQ(crc, load_icrc(&udp[m - kIcrcBytes]));
    // compute_icrc with the payload given apart agrees too.
    EXPECT_EQ(compute_icrc(std::span(ip).first(ip_udp + th), payload, pad_for(1001)), crc);
    // And the two-step form a sender keeps the IP/UDP part of (masked fields changed on the way:
    // a TOS, TTL or BTH FECN/BECN bit must not change the ICRC).
    std::vector<uint8_t> changed(ip.begin(), ip.begin() + ip_udp + th);
    changed[1] ^= 0x03;           // ECN bits (IPv4 TOS; IPv6 traffic class)
    changed[v6 ? 7 : 8] ^= 0x11;  // hop limit / TTL
    changed[ip_udp + 4] ^= 0xc0;  // FECN, BECN
    uint32_t two_step = icrc_transport(icrc_ip_udp(std::span(changed).first(ip_udp)),
                                       std::span(changed).subspan(ip_udp, th));
    two_step = crc32(crc32(two_step, payload), std::span<const uint8_t>(pad.data(), pad_for(1001)));
    EXPECT_EQ(two_step, crc);
    changed[ip_udp + 8] ^= 1;  // a covered BTH byte (the destination QP) does change it
    EXPECT_NE(crc32(crc32(icrc_transport(icrc_ip_udp(std::span(changed).first(ip_udp)),
                                         std::span(changed).subspan(ip_udp, th)),
                          payload),
                    std::span<const uint8_t>(pad.data(), pad_for(1001))),
              crc);

    auto ok = parse_udp_payload(ep, std::span(udp).first(m));
    ASSERT_TRUE(ok.ok()) << to_string(ok.error());
    EXPECT_EQ(ok->payload.size(), payload.size());
    // Another sender address or port is another ICRC.
    IpEndpoints other = ep;
    other.src[3] ^= 1;
    EXPECT_EQ(parse_udp_payload(other, std::span(udp).first(m)).error(), ParseError::kBadIcrc);
    other = ep;
    other.udp_src_port++;
    EXPECT_EQ(parse_udp_payload(other, std::span(udp).first(m)).error(), ParseError::kBadIcrc);
    // Masked fields do not matter.
    other = ep;
    other.dscp = 0;
    other.ecn = Ecn::kCe;
    other.flow_label = 1;
    EXPECT_TRUE(parse_udp_payload(other, std::span(udp).first(m)).ok());
  }
}

TEST(WireIcrc, EndpointsFromGids) {
  const Gid a = gid_from_ipv4({10, 0, 0, 1}), b = gid_from_ipv4({10, 0, 0, 2});
  IpEndpoints ep = endpoints_from_gids(a, b, 0xc001);
  EXPECT_FALSE(ep.ipv6);
  EXPECT_EQ(ep.src[0], 10);
  EXPECT_EQ(ep.dst[3], 2);
  EXPECT_EQ(ep.udp_src_port, 0xc001);
  Gid c{};
  c[0] = 0xfd;
  c[15] = 9;
  ep = endpoints_from_gids(c, b, 1);
  EXPECT_TRUE(ep.ipv6);
  EXPECT_EQ(ep.src, c);
  EXPECT_EQ(ep.dst, b);
}

// ECN is read and set in place; the ICRC masks it, so a switch marking CE keeps the packet valid,
// and IPv4's header checksum follows.
TEST(WireEcn, SetAndReadBothIpVersions) {
  for (const bool v6 : {false, true}) {
    SCOPED_TRACE(v6 ? "v6" : "v4");
    std::vector<uint8_t> buf(128);
    IpEndpoints ep = endpoints(v6);
    ep.ecn = Ecn::kEct0;
    const uint32_t n = build_ip_packet(ep, cnp_headers(5), {}, buf);
    buf.resize(n);
    EXPECT_EQ(read_ecn(buf), Ecn::kEct0);
    for (const Ecn e : {Ecn::kCe, Ecn::kNotEct, Ecn::kEct1, Ecn::kEct0}) {
      set_ecn(buf, e);
      EXPECT_EQ(read_ecn(buf), e);
      auto p = parse_ip_packet(buf);
      ASSERT_TRUE(p.ok()) << to_string(p.error());
      if (v6) {
        EXPECT_EQ(p->ipv6->ecn, e);
        EXPECT_EQ(p->ipv6->dscp, ep.dscp);
        EXPECT_EQ(p->ipv6->flow_label, ep.flow_label);
      } else {
        EXPECT_EQ(p->ipv4->ecn, e);
        EXPECT_EQ(p->ipv4->dscp, ep.dscp);
        EXPECT_EQ(ipv4_header_checksum(std::span(buf).first<kIpv4Bytes>()), load_be16(&buf[10]));
      }
    }
  }
  // Too short to hold the field: read says Not-ECT, set changes nothing.
  std::vector<uint8_t> tiny = {0x45};
  EXPECT_EQ(read_ecn(tiny), Ecn::kNotEct);
  set_ecn(tiny, Ecn::kCe);
  EXPECT_EQ(tiny[0], 0x45);
  EXPECT_EQ(read_ecn({}), Ecn::kNotEct);
}

TEST(WireHeaders, AethSyndromes) {
  // IBA 9.7.5.1, table 42: bits 6:5 select the type, 4:0 the credit count, timer or NAK code.
  EXPECT_EQ(Aeth::ack(5).syndrome, 0x1f);
  EXPECT_EQ(Aeth::ack(5).type(), AckType::kAck);
  EXPECT_EQ(Aeth::ack(5, 3).value(), 3);
  EXPECT_EQ(Aeth::rnr_nak(1, 14).syndrome, 0x2e);
  EXPECT_EQ(Aeth::rnr_nak(1, 14).type(), AckType::kRnrNak);
  EXPECT_EQ(Aeth::rnr_nak(1, 14).value(), 14);
  const Aeth nak = Aeth::nak(0x1000000 | 7, NakCode::kInvalidRdRequest);
  EXPECT_EQ(nak.syndrome, 0x64);
  EXPECT_EQ(nak.type(), AckType::kNak);
  EXPECT_EQ(nak.nak_code(), NakCode::kInvalidRdRequest);
  EXPECT_EQ(nak.msn, 7u);  // 24 bits
}

TEST(WireHeaders, BthBitsAtTheirOffsets) {
  TransportHeaders h;
  h.bth.opcode = op::kRcSendOnly;
  h.bth.solicited = true;
  h.bth.mig_req = false;
  h.bth.pad_count = 2;
  h.bth.pkey = 0x1234;
  h.bth.fecn = true;
  h.bth.becn = true;
  h.bth.dest_qp = 0xfedcba;
  h.bth.ack_req = true;
  h.bth.psn = Psn(0xffffff) + 1;  // wraps to 0
  std::array<uint8_t, kMaxTransportHeaderBytes> out{};
  ASSERT_EQ(write_transport_headers(h, out), kBthBytes);
  const std::array<uint8_t, 12> want = {0x04, 0xa0, 0x12, 0x34, 0xc0, 0xfe,
                                        0xdc, 0xba, 0x80, 0x00, 0x00, 0x00};
  EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin()));
}

// A builder writes into a TxPacket's header room that still holds the last packet's bytes: every
// byte of every opcode's headers, reserved ones included, is the same whatever was there.
TEST(WireHeaders, EveryHeaderByteIsWrittenWhateverTheBufferHeld) {
  int opcodes = 0;
  for (int code = 0; code < 256; ++code) {
    const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(code));
    if (!info.valid()) continue;
    ++opcodes;
    const TransportHeaders h = sample_headers(static_cast<uint8_t>(code));
    std::array<uint8_t, kMaxTransportHeaderBytes> zeros{}, ones{};
    ones.fill(0xff);
    ASSERT_EQ(write_transport_headers(h, zeros), info.header_bytes);
    ASSERT_EQ(write_transport_headers(h, ones), info.header_bytes);
    EXPECT_TRUE(std::equal(zeros.begin(), zeros.begin() + info.header_bytes, ones.begin()))
        << info.name;
  }
  EXPECT_EQ(opcodes, 61);  // RC 23, UC 12, UD 2, XRC 23 and the CNP
}

// The receive path parses every packet into one kept TransportPacket: a packet without an
// extension header must not inherit the last packet's.
TEST(WireRoundTrip, ParseIntoResetsWhatTheOpcodeLacks) {
  std::array<uint8_t, kMaxTransportHeaderBytes + 8> buf{};
  TransportPacket pkt;
  const TransportHeaders write = sample_headers(op::kRcWriteOnly);
  uint32_t n = write_transport_headers(write, buf);
  ASSERT_FALSE(parse_transport_into(std::span<const uint8_t>(buf.data(), n + 8), pkt));
  EXPECT_EQ(pkt.hdr.reth.rkey, 0xaabbccddu);
  EXPECT_EQ(pkt.payload.size(), 8u);

  TransportHeaders ack;
  ack.bth.opcode = op::kRcAck;
  ack.bth.dest_qp = 0x42;
  ack.aeth = Aeth::ack(7);
  n = write_transport_headers(ack, buf);
  ASSERT_FALSE(parse_transport_into(std::span<const uint8_t>(buf.data(), n), pkt));
  EXPECT_EQ(pkt.hdr.bth.dest_qp, 0x42u);
  EXPECT_EQ(pkt.hdr.aeth.msn, 7u);
  EXPECT_EQ(pkt.hdr.reth.rkey, 0u);
  EXPECT_EQ(pkt.hdr.reth.va, 0u);
  EXPECT_EQ(pkt.hdr.imm, 0u);
  EXPECT_TRUE(pkt.payload.empty());
  // An error leaves its code and no payload behind.
  EXPECT_EQ(parse_transport_into(std::span<const uint8_t>(buf.data(), 4), pkt),
            ParseError::kTruncated);
  EXPECT_TRUE(pkt.payload.empty());
}

// The CRC-32 behind the ICRC is the IEEE one (reflected, init and final XOR all ones): its
// standard check value, and continuation across split input.
TEST(WireIcrc, Crc32CheckValue) {
  const std::string_view check = "123456789";
  const std::span<const uint8_t> b(reinterpret_cast<const uint8_t*>(check.data()), check.size());
  EXPECT_EQ(crc32(0, b), 0xcbf43926u);
  EXPECT_EQ(crc32(crc32(0, b.first(4)), b.subspan(4)), 0xcbf43926u);
  EXPECT_EQ(crc32(0, {}), 0u);
}

// Bytes made by scapy's RoCE layer (scapy.contrib.roce), which computes the ICRC itself:
// IP(src=198.18.0.1,dst=198.18.0.2,flags=DF,id=0)/UDP(sport=0xc000)/BTH(opcode=4,psn=5,dqpn=0x11,
// migreq=1)/b"abcd". tests/unit/wire_vectors_test.cpp has many more.
TEST(WireIcrc, MatchesScapyForRcSendOnlyIpv4) {
  const std::vector<uint8_t> scapy = {0x45, 0x00, 0x00, 0x30, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                                      0xae, 0x95, 0xc6, 0x12, 0x00, 0x01, 0xc6, 0x12, 0x00, 0x02,
                                      0xc0, 0x00, 0x12, 0xb7, 0x00, 0x1c, 0x57, 0x54, 0x04, 0x40,
                                      0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x05,
                                      0x61, 0x62, 0x63, 0x64, 0xeb, 0x88, 0x94, 0xdc};
  auto parsed = parse_ip_packet(scapy);
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  EXPECT_EQ(parsed->transport.hdr.bth.opcode, op::kRcSendOnly);
  EXPECT_EQ(parsed->transport.hdr.bth.psn, Psn(5));
  EXPECT_EQ(parsed->icrc, 0xdc9488ebu);
}

}  // namespace
}  // namespace uroce::wire
