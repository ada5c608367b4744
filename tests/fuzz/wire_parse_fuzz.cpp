// libFuzzer target for the wire parsers. Properties checked on every input:
//  - no parser crashes, reads out of bounds (ASan) or hits undefined behaviour (UBSan);
//  - a packet that parses rebuilds, from the parsed fields, into one that parses to the same
//    fields and payload (the parser and the builder agree).
// The first input byte picks a mode, so the fuzzer reaches past the ICRC: with bit 0 set, the
// ICRC of the rest is recomputed and stored before parsing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "wire/packet.h"

namespace {

using namespace uroce::wire;

void check(bool ok) {
  if (!ok) std::abort();  // a broken property: libFuzzer saves the input
}

bool same_headers(const TransportHeaders& a, const TransportHeaders& b) {
  const OpcodeInfo& info = opcode_info(a.bth.opcode);
  bool same = a.bth.opcode == b.bth.opcode && a.bth.solicited == b.bth.solicited &&
              a.bth.mig_req == b.bth.mig_req && a.bth.pkey == b.bth.pkey &&
              a.bth.fecn == b.bth.fecn && a.bth.becn == b.bth.becn &&
              a.bth.dest_qp == b.bth.dest_qp && a.bth.ack_req == b.bth.ack_req &&
              a.bth.psn == b.bth.psn;
  if (info.has(kReth))
    same &= a.reth.va == b.reth.va && a.reth.rkey == b.reth.rkey &&
            a.reth.dma_length == b.reth.dma_length;
  if (info.has(kAeth)) same &= a.aeth.syndrome == b.aeth.syndrome && a.aeth.msn == b.aeth.msn;
  if (info.has(kAtomicEth))
    same &= a.atomic.va == b.atomic.va && a.atomic.rkey == b.atomic.rkey &&
            a.atomic.swap_add == b.atomic.swap_add && a.atomic.compare == b.atomic.compare;
  if (info.has(kAtomicAckEth)) same &= a.atomic_ack.original == b.atomic_ack.original;
  if (info.has(kImmDt)) same &= a.imm == b.imm;
  if (info.has(kIeth)) same &= a.ieth_rkey == b.ieth_rkey;
  if (info.has(kDeth)) same &= a.deth.qkey == b.deth.qkey && a.deth.src_qp == b.deth.src_qp;
  return same;
}

// Rebuilds a parsed packet and checks it parses back to the same thing.
void round_trip(const RocePacket& p) {
  IpEndpoints ep;
  ep.ipv6 = p.ipv6.has_value();
  if (p.ipv6) {
    ep.src = p.ipv6->src;
    ep.dst = p.ipv6->dst;
  } else {
    std::memcpy(ep.src.data(), p.ipv4->src.data(), 4);
    std::memcpy(ep.dst.data(), p.ipv4->dst.data(), 4);
  }
  ep.udp_src_port = p.udp.src_port;
  std::vector<uint8_t> out(0x10000 + 64);
  const uint32_t n = build_ip_packet(ep, p.transport.hdr, p.transport.payload, out);
  check(n > 0);
  out.resize(n);
  auto again = parse_ip_packet(out);
  check(again.ok());
  check(same_headers(p.transport.hdr, again->transport.hdr));
  check(again->transport.payload.size() == p.transport.payload.size());
  check(std::memcmp(again->transport.payload.data(), p.transport.payload.data(),
                    p.transport.payload.size()) == 0);
  // The UDP-socket path agrees on the rebuilt packet.
  const uint32_t ip_len = ep.ipv6 ? kIpv6Bytes : kIpv4Bytes;
  check(parse_udp_payload(ep, std::span(out).subspan(ip_len + kUdpBytes)).ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  // An exact-size copy, so ASan sees any read past the end.
  std::vector<uint8_t> in(data + 1, data + size);

  (void)parse_transport(in);
  (void)parse_frame(in);
  (void)parse_v1_frame(in);
  if (mode & 2) {
    // RoCE v1: with the ICRC made right, a packet that parses rebuilds to one that parses to the
    // same headers and payload (reserved bits and pad bytes need not survive).
    std::vector<uint8_t> v1 = in;
    if (v1.size() >= kGrhBytes + kBthBytes + kIcrcBytes) {
      const size_t at = v1.size() - kIcrcBytes;
      store_icrc(&v1[at], compute_icrc_v1(std::span(v1).first(at)));
    }
    auto p1 = parse_v1_packet(v1);
    if (p1) {
      std::vector<uint8_t> out(v1.size() + 8);
      const uint32_t n = build_v1_packet(p1->grh, p1->transport.hdr, p1->transport.payload, out);
      check(n == kGrhBytes + p1->grh.payload_length);
      auto again = parse_v1_packet(std::span(out).first(n));
      check(again.ok());
      check(same_headers(p1->transport.hdr, again->transport.hdr));
      check(again->grh.sgid == p1->grh.sgid && again->grh.dgid == p1->grh.dgid);
      check(again->transport.payload.size() == p1->transport.payload.size());
      check(std::equal(again->transport.payload.begin(), again->transport.payload.end(),
                       p1->transport.payload.begin()));
    }
  }
  IpEndpoints ep4, ep6;
  ep6.ipv6 = true;
  (void)parse_udp_payload(ep4, in);
  (void)parse_udp_payload(ep6, in);

  if ((mode & 1) && in.size() >= kIpv6Bytes + kUdpBytes + kBthBytes + kIcrcBytes) {
    const size_t at = in.size() - kIcrcBytes;
    store_icrc(&in[at], compute_icrc(std::span(in).first(at)));
  }
  auto p = parse_ip_packet(in);
  if (p.ok()) round_trip(*p);
  (void)read_ecn(in);
  return 0;
}
