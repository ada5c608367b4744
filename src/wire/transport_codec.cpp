// BTH and extension headers, driven by the opcode table.
#include <cstring>

#include "common/bytes.h"
#include "common/check.h"
#include "wire/packet.h"

namespace uroce::wire {

std::string_view to_string(ParseError e) {
  switch (e) {
    case ParseError::kTruncated:
      return "truncated";
    case ParseError::kUnknownOpcode:
      return "unknown opcode";
    case ParseError::kBadVersion:
      return "bad version";
    case ParseError::kBadPadCount:
      return "bad pad count";
    case ParseError::kBadLength:
      return "bad length";
    case ParseError::kUnexpectedPayload:
      return "unexpected payload";
    case ParseError::kNotRoce:
      return "not RoCEv2";
    case ParseError::kBadIcrc:
      return "bad ICRC";
  }
  return "?";
}

namespace {

void read_bth(const uint8_t* p, Bth& b) {
  b.opcode = p[0];
  b.solicited = p[1] & 0x80;
  b.mig_req = p[1] & 0x40;
  b.pad_count = (p[1] >> 4) & 3;
  b.tver = p[1] & 0x0f;
  b.pkey = load_be16(p + 2);
  b.fecn = p[4] & 0x80;
  b.becn = p[4] & 0x40;
  b.dest_qp = load_be24(p + 5);
  b.ack_req = p[8] & 0x80;
  b.psn = Psn(load_be24(p + 9));
}

void write_bth(const Bth& b, uint8_t* p) {
  p[0] = b.opcode;
  p[1] = static_cast<uint8_t>((b.solicited ? 0x80 : 0) | (b.mig_req ? 0x40 : 0) |
                              (b.pad_count & 3) << 4 | (b.tver & 0x0f));
  store_be16(p + 2, b.pkey);
  p[4] = static_cast<uint8_t>((b.fecn ? 0x80 : 0) | (b.becn ? 0x40 : 0));
  store_be24(p + 5, b.dest_qp);
  p[8] = b.ack_req ? 0x80 : 0;
  store_be24(p + 9, b.psn.value());
}

}  // namespace

ParseResult<TransportPacket> parse_transport(std::span<const uint8_t> bytes) {
  TransportPacket pkt;
  if (std::optional<ParseError> e = parse_transport_into(bytes, pkt)) return Err(*e);
  return pkt;
}

std::optional<ParseError> parse_transport_into(std::span<const uint8_t> bytes,
                                               TransportPacket& pkt) {
  pkt = TransportPacket{};
  if (bytes.size() < kBthBytes) return ParseError::kTruncated;
  const uint8_t* p = bytes.data();
  TransportHeaders& h = pkt.hdr;
  read_bth(p, h.bth);
  const OpcodeInfo& info = opcode_info(h.bth.opcode);
  if (!info.valid()) return ParseError::kUnknownOpcode;
  if (h.bth.tver != 0) return ParseError::kBadVersion;
  if (bytes.size() < info.header_bytes) return ParseError::kTruncated;
  const uint16_t hs = info.headers;
  if (hs & kDeth) {
    const uint8_t* q = p + info.offset(kDeth);
    h.deth.qkey = load_be32(q);
    h.deth.src_qp = load_be24(q + 5);
  }
  if (hs & kXrcEth) h.xrc_srqn = load_be24(p + info.offset(kXrcEth) + 1);
  if (hs & kReth) {
    const uint8_t* q = p + info.offset(kReth);
    h.reth.va = load_be64(q);
    h.reth.rkey = load_be32(q + 8);
    h.reth.dma_length = load_be32(q + 12);
  }
  if (hs & kAtomicEth) {
    const uint8_t* q = p + info.offset(kAtomicEth);
    h.atomic.va = load_be64(q);
    h.atomic.rkey = load_be32(q + 8);
    h.atomic.swap_add = load_be64(q + 12);
    h.atomic.compare = load_be64(q + 20);
  }
  if (hs & kAeth) {
    const uint8_t* q = p + info.offset(kAeth);
    h.aeth.syndrome = q[0];
    h.aeth.msn = load_be24(q + 1);
  }
  if (hs & kAtomicAckEth) h.atomic_ack.original = load_be64(p + info.offset(kAtomicAckEth));
  if (hs & kImmDt) h.imm = load_be32(p + info.offset(kImmDt));
  if (hs & kIeth) h.ieth_rkey = load_be32(p + info.offset(kIeth));

  const size_t rest = bytes.size() - info.header_bytes;
  if (!info.payload) {
    if (h.bth.pad_count != 0) return ParseError::kBadPadCount;
    if (rest != 0) return ParseError::kUnexpectedPayload;
  } else {
    // The pad makes the payload a whole number of 4-byte words (IBA 9.2, BTH PadCnt): headers are
    // words already, so what follows them must be too, and the pad cannot exceed it.
    if (rest % 4 != 0) return ParseError::kBadLength;
    if (h.bth.pad_count > rest) return ParseError::kBadPadCount;
  }
  pkt.payload = bytes.subspan(info.header_bytes, rest - h.bth.pad_count);
  return std::nullopt;
}

uint32_t write_transport_headers(const TransportHeaders& h, std::span<uint8_t> out) {
  const OpcodeInfo& info = opcode_info(h.bth.opcode);
  UROCE_CHECK(info.valid());
  UROCE_CHECK(out.size() >= info.header_bytes);
  // Every byte of the headers is stored below, the reserved ones as zeros: `out` may hold an
  // earlier packet's headers (TxPacket::clear keeps them), and a memset per packet costs a call.
  uint8_t* p = out.data();
  write_bth(h.bth, p);
  const uint16_t hs = info.headers;
  if (hs & kDeth) {
    uint8_t* q = p + info.offset(kDeth);
    store_be32(q, h.deth.qkey);
    q[4] = 0;
    store_be24(q + 5, h.deth.src_qp);
  }
  if (hs & kXrcEth) {
    uint8_t* q = p + info.offset(kXrcEth);
    q[0] = 0;
    store_be24(q + 1, h.xrc_srqn);
  }
  if (hs & kReth) {
    uint8_t* q = p + info.offset(kReth);
    store_be64(q, h.reth.va);
    store_be32(q + 8, h.reth.rkey);
    store_be32(q + 12, h.reth.dma_length);
  }
  if (hs & kAtomicEth) {
    uint8_t* q = p + info.offset(kAtomicEth);
    store_be64(q, h.atomic.va);
    store_be32(q + 8, h.atomic.rkey);
    store_be64(q + 12, h.atomic.swap_add);
    store_be64(q + 20, h.atomic.compare);
  }
  if (hs & kAeth) {
    uint8_t* q = p + info.offset(kAeth);
    q[0] = h.aeth.syndrome;
    store_be24(q + 1, h.aeth.msn);
  }
  if (hs & kAtomicAckEth) store_be64(p + info.offset(kAtomicAckEth), h.atomic_ack.original);
  if (hs & kImmDt) store_be32(p + info.offset(kImmDt), h.imm);
  if (hs & kIeth) store_be32(p + info.offset(kIeth), h.ieth_rkey);
  if (hs & kCnpReserved)  // the last header: its bytes run to the end
    std::memset(p + info.offset(kCnpReserved), 0, info.header_bytes - info.offset(kCnpReserved));
  return info.header_bytes;
}

TransportHeaders cnp_headers(uint32_t dest_qp, uint16_t pkey) {
  TransportHeaders h;
  h.bth.opcode = op::kCnp;
  h.bth.mig_req = false;
  h.bth.pkey = pkey;
  h.bth.becn = true;
  h.bth.dest_qp = dest_qp & 0xffffff;
  return h;
}

}  // namespace uroce::wire
