#include "link/ip_packet_io.h"

#include <algorithm>
#include <cstring>

#include "common/bytes.h"
#include "wire/packet.h"

namespace uroce::link {

namespace {

// Copies a packet's payload parts and its pad to `p`; false if the parts disagree with its length.
bool gather_payload(const wire::TxPacket& pkt, uint8_t* p) {
  size_t gathered = 0;
  for (uint32_t i = 0; i < pkt.payload_parts; ++i) {
    const auto part = pkt.payload[i];
    if (gathered + part.size() > pkt.payload_len) return false;
    if (!part.empty()) std::memcpy(p + gathered, part.data(), part.size());
    gathered += part.size();
  }
  if (gathered != pkt.payload_len) return false;
  std::memset(p + gathered, 0, pkt.pad);
  return true;
}

}  // namespace

uint32_t build_ip_packet(const wire::TxPacket& pkt, const Gid& local, std::span<uint8_t> buf,
                         bool icrc, bool headers_only) {
  if (pkt.dest == nullptr || pkt.header_len > pkt.header.size() ||
      pkt.payload_parts > wire::kMaxGather || pkt.pad > 3)
    return 0;
  const wire::AddressVector& av = *pkt.dest;
  const bool v4 = gid_is_ipv4(local);
  if (v4 != gid_is_ipv4(av.dgid)) return 0;
  const uint32_t ip_len = v4 ? wire::kIpv4Bytes : wire::kIpv6Bytes;
  const size_t udp_len =
      size_t{wire::kUdpBytes} + pkt.header_len + pkt.payload_len + pkt.pad + wire::kIcrcBytes;
  const size_t total = ip_len + udp_len;
  if (total > buf.size()) return 0;
  const std::span<uint8_t> out = buf.first(total);
  // The transport says only whether the packet is ECN-capable; switches may mark it CE later.
  const wire::Ecn ecn = pkt.ect ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
  if (v4) {
    wire::Ipv4 ip;
    ip.dscp = av.traffic_class >> 2;
    ip.ecn = ecn;
    ip.total_length = static_cast<uint16_t>(total);
    ip.ttl = av.hop_limit;
    std::copy_n(local.begin() + 12, 4, ip.src.begin());
    std::copy_n(av.dgid.begin() + 12, 4, ip.dst.begin());
    wire::write_ipv4(ip, out);
  } else {
    wire::Ipv6 ip;
    ip.dscp = av.traffic_class >> 2;
    ip.ecn = ecn;
    ip.flow_label = av.flow_label;
    ip.payload_length = static_cast<uint16_t>(udp_len);
    ip.hop_limit = av.hop_limit;
    ip.src = local;
    ip.dst = av.dgid;
    wire::write_ipv6(ip, out);
  }
  // RoCEv2 sends a zero UDP checksum (IBA annex A17.4.2); the ICRC protects the payload.
  wire::write_udp(wire::Udp{av.udp_src_port, wire::kRoceV2Port, static_cast<uint16_t>(udp_len), 0},
                  out.subspan(ip_len));
  uint8_t* p = out.data() + ip_len + wire::kUdpBytes;
  std::memcpy(p, pkt.header.data(), pkt.header_len);
  p += pkt.header_len;
  if (headers_only) return static_cast<uint32_t>(p - out.data());
  if (!gather_payload(pkt, p)) return 0;
  const size_t icrc_at = total - wire::kIcrcBytes;
  wire::store_icrc(out.data() + icrc_at, icrc ? wire::compute_icrc(out.first(icrc_at)) : 0);
  return static_cast<uint32_t>(total);
}

namespace {

// A packet the codec refused: counted under the drop counter its reason names.
RxVerdict count_parse_drop(wire::ParseError error, LinkCounters& counters) {
  switch (error) {
    case wire::ParseError::kBadIcrc:
      ++counters.rx_drop_bad_icrc;
      return RxVerdict::kBadIcrc;
    case wire::ParseError::kNotRoce:
      ++counters.rx_drop_not_roce;
      return RxVerdict::kNotRoce;
    default:
      ++counters.rx_drop_malformed;
      return RxVerdict::kMalformed;
  }
}

}  // namespace

RxVerdict receive_ip_packet(std::span<const uint8_t> bytes, const Gid& local,
                            LinkCounters& counters, const RxHandler& handler, bool check_icrc) {
  if (bytes.size() >= wire::kIpv4Bytes && (bytes[0] >> 4) == 4 &&
      wire::ipv4_header_checksum(bytes.first<wire::kIpv4Bytes>()) != load_be16(&bytes[10])) {
    ++counters.rx_drop_malformed;
    return RxVerdict::kBadIpChecksum;
  }
  auto parsed = wire::parse_ip_packet(bytes, check_icrc);
  if (!parsed) return count_parse_drop(parsed.error(), counters);
  const wire::RocePacket& pkt = *parsed;
  wire::RxPacket rx;
  if (pkt.ipv4) {
    rx.sgid = gid_from_ipv4(pkt.ipv4->src);
    rx.dgid = gid_from_ipv4(pkt.ipv4->dst);
    rx.ce = pkt.ipv4->ecn == wire::Ecn::kCe;
    rx.traffic_class = wire::traffic_class_of(*pkt.ipv4);
    rx.hop_limit = pkt.ipv4->ttl;
  } else {
    rx.sgid = pkt.ipv6->src;
    rx.dgid = pkt.ipv6->dst;
    rx.ce = pkt.ipv6->ecn == wire::Ecn::kCe;
    rx.traffic_class = wire::traffic_class_of(*pkt.ipv6);
    rx.hop_limit = pkt.ipv6->hop_limit;
  }
  if (rx.dgid != local) {
    ++counters.rx_drop_not_roce;  // not addressed to us: a host would not hand it to RoCE
    return RxVerdict::kNotRoce;
  }
  rx.hdr = &pkt.transport.hdr;
  rx.payload = pkt.transport.payload;
  rx.udp_src_port = pkt.udp.src_port;
  ++counters.rx_packets;
  counters.rx_bytes += bytes.size();
  if (rx.ce) ++counters.rx_ce_marked;
  handler(rx);
  return RxVerdict::kDelivered;
}

uint32_t build_v1_packet(const wire::TxPacket& pkt, const Gid& local, std::span<uint8_t> out) {
  if (pkt.dest == nullptr || pkt.header_len > pkt.header.size() ||
      pkt.payload_parts > wire::kMaxGather || pkt.pad > 3 || pkt.header_len < wire::kBthBytes)
    return 0;
  const wire::AddressVector& av = *pkt.dest;
  const size_t after_grh = size_t{pkt.header_len} + pkt.payload_len + pkt.pad + wire::kIcrcBytes;
  const size_t total = wire::kGrhBytes + after_grh;
  if (total > out.size()) return 0;
  wire::Grh grh;
  grh.traffic_class = av.traffic_class;
  grh.flow_label = av.flow_label;
  grh.hop_limit = av.hop_limit;
  grh.payload_length = static_cast<uint16_t>(after_grh);
  grh.sgid = local;
  grh.dgid = av.dgid;
  wire::write_grh(grh, out);
  uint8_t* p = out.data() + wire::kGrhBytes;
  std::memcpy(p, pkt.header.data(), pkt.header_len);
  p += pkt.header_len;
  if (!gather_payload(pkt, p)) return 0;
  const size_t icrc_at = total - wire::kIcrcBytes;
  wire::store_icrc(out.data() + icrc_at, wire::compute_icrc_v1(out.first(icrc_at)));
  return static_cast<uint32_t>(total);
}

bool is_v1_packet(std::span<const uint8_t> bytes) {
  return bytes.size() >= wire::kGrhBytes && (bytes[0] >> 4) == 6 &&
         bytes[6] == wire::kGrhNextHeaderIba;
}

RxVerdict receive_v1_packet(std::span<const uint8_t> bytes, const Gid& local,
                            LinkCounters& counters, const RxHandler& handler) {
  auto parsed = wire::parse_v1_packet(bytes);
  if (!parsed) return count_parse_drop(parsed.error(), counters);
  const wire::RoceV1Packet& pkt = *parsed;
  if (pkt.grh.dgid != local) {
    ++counters.rx_drop_not_roce;
    return RxVerdict::kNotRoce;
  }
  wire::RxPacket rx;
  rx.hdr = &pkt.transport.hdr;
  rx.payload = pkt.transport.payload;
  rx.sgid = pkt.grh.sgid;
  rx.dgid = pkt.grh.dgid;
  rx.traffic_class = pkt.grh.traffic_class;
  rx.hop_limit = pkt.grh.hop_limit;
  rx.roce_v1 = true;
  rx.flow_label = pkt.grh.flow_label;
  ++counters.rx_packets;
  counters.rx_bytes += wire::kGrhBytes + size_t{pkt.grh.payload_length};
  handler(rx);
  return RxVerdict::kDelivered;
}

}  // namespace uroce::link
