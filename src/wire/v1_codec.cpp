// RoCE v1: the GRH, its ICRC, and whole v1 packets and frames (IBA annex A16).
#include <algorithm>
#include <cstring>

#include "common/bytes.h"
#include "common/check.h"
#include "wire/crc32.h"
#include "wire/packet.h"

namespace uroce::wire {

namespace {
constexpr uint8_t kGrhVersion = 6;
constexpr std::array<uint8_t, 3> kPadZeros{};
}  // namespace

uint32_t write_grh(const Grh& grh, std::span<uint8_t> out) {
  UROCE_CHECK(out.size() >= kGrhBytes);
  uint8_t* p = out.data();
  store_be32(p, uint32_t{kGrhVersion} << 28 | uint32_t{grh.traffic_class} << 20 |
                    (grh.flow_label & 0xfffff));
  store_be16(p + 4, grh.payload_length);
  p[6] = grh.next_header;
  p[7] = grh.hop_limit;
  std::memcpy(p + 8, grh.sgid.data(), 16);
  std::memcpy(p + 24, grh.dgid.data(), 16);
  return kGrhBytes;
}

uint32_t compute_icrc_v1(std::span<const uint8_t> headers, std::span<const uint8_t> payload,
                         uint8_t pad) {
  UROCE_CHECK(headers.size() >= kGrhBytes + kBthBytes && pad <= 3);
  // One masked copy of the LRH stand-in, GRH and BTH, so the CRC runs once over them.
  std::array<uint8_t, 8 + kGrhBytes + kBthBytes> buf;
  std::fill_n(buf.begin(), 8, 0xff);
  uint8_t* g = buf.data() + 8;
  std::memcpy(g, headers.data(), kGrhBytes + kBthBytes);
  g[0] |= 0x0f;               // traffic class, high nibble
  g[1] = g[2] = g[3] = 0xff;  // traffic class, low nibble, and flow label
  g[7] = 0xff;                // hop limit
  g[kGrhBytes + 4] = 0xff;    // BTH reserved byte (FECN/BECN in RoCEv2)
  uint32_t crc = crc32(0, buf);
  crc = crc32(crc, headers.subspan(kGrhBytes + kBthBytes));
  crc = crc32(crc, payload);
  return crc32(crc, std::span<const uint8_t>(kPadZeros.data(), pad));
}

uint32_t build_v1_packet(const Grh& grh, const TransportHeaders& hdr,
                         std::span<const uint8_t> payload, std::span<uint8_t> out) {
  const OpcodeInfo& info = opcode_info(hdr.bth.opcode);
  UROCE_CHECK(info.valid());
  if (!info.payload && !payload.empty()) return 0;
  const uint8_t pad = info.payload ? pad_for(static_cast<uint32_t>(payload.size())) : 0;
  const size_t after_grh = info.header_bytes + payload.size() + pad + kIcrcBytes;
  const size_t total = kGrhBytes + after_grh;
  if (out.size() < total || after_grh > 0xffff) return 0;
  Grh g = grh;
  g.payload_length = static_cast<uint16_t>(after_grh);
  write_grh(g, out);
  TransportHeaders h = hdr;
  h.bth.pad_count = pad;
  const uint32_t th = write_transport_headers(h, out.subspan(kGrhBytes));
  uint8_t* body = out.data() + kGrhBytes + th;
  if (!payload.empty()) std::memcpy(body, payload.data(), payload.size());
  std::memset(body + payload.size(), 0, pad);
  const size_t icrc_at = total - kIcrcBytes;
  store_icrc(out.data() + icrc_at, compute_icrc_v1(out.first(icrc_at)));
  return static_cast<uint32_t>(total);
}

ParseResult<RoceV1Packet> parse_v1_packet(std::span<const uint8_t> bytes) {
  if (bytes.size() < kGrhBytes) return Err(ParseError::kTruncated);
  RoceV1Packet pkt;
  Grh& g = pkt.grh;
  const uint32_t w = load_be32(&bytes[0]);
  if ((w >> 28) != kGrhVersion) return Err(ParseError::kBadVersion);
  g.traffic_class = static_cast<uint8_t>(w >> 20);
  g.flow_label = w & 0xfffff;
  g.payload_length = load_be16(&bytes[4]);
  g.next_header = bytes[6];
  g.hop_limit = bytes[7];
  std::copy_n(&bytes[8], 16, g.sgid.begin());
  std::copy_n(&bytes[24], 16, g.dgid.begin());
  if (g.next_header != kGrhNextHeaderIba) return Err(ParseError::kNotRoce);
  const size_t total = kGrhBytes + size_t{g.payload_length};
  if (total > bytes.size()) return Err(ParseError::kTruncated);
  if (g.payload_length < kBthBytes + kIcrcBytes) return Err(ParseError::kTruncated);
  const std::span<const uint8_t> whole = bytes.first(total);
  const size_t icrc_at = total - kIcrcBytes;
  // Integrity first, as for RoCEv2: a corrupted packet counts as a bad ICRC.
  pkt.icrc = load_icrc(&whole[icrc_at]);
  if (compute_icrc_v1(whole.first(icrc_at)) != pkt.icrc) return Err(ParseError::kBadIcrc);
  auto transport = parse_transport(whole.subspan(kGrhBytes, icrc_at - kGrhBytes));
  if (!transport) return Err(transport.error());
  pkt.transport = *transport;
  return pkt;
}

uint32_t read_ethernet(std::span<const uint8_t> bytes, Ethernet& eth) {
  if (bytes.size() < kEthBytes) return 0;
  std::copy_n(&bytes[0], 6, eth.dst.begin());
  std::copy_n(&bytes[6], 6, eth.src.begin());
  uint32_t off = 12;
  uint16_t type = load_be16(&bytes[off]);
  eth.vlan_tci.reset();
  if (type == kEthertypeVlan) {
    if (bytes.size() < kEthBytes + kVlanBytes) return 0;
    eth.vlan_tci = load_be16(&bytes[off + 2]);
    off += kVlanBytes;
    type = load_be16(&bytes[off]);
  }
  eth.ethertype = type;
  return off + 2;
}

ParseResult<RoceV1Frame> parse_v1_frame(std::span<const uint8_t> bytes) {
  RoceV1Frame f;
  const uint32_t off = read_ethernet(bytes, f.eth);
  if (off == 0) return Err(ParseError::kTruncated);
  if (f.eth.ethertype != kEthertypeRoceV1) return Err(ParseError::kNotRoce);
  auto p = parse_v1_packet(bytes.subspan(off));
  if (!p) return Err(p.error());
  f.packet = *p;
  return f;
}

}  // namespace uroce::wire
