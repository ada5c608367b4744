#include "link/sim_link.h"

#include <algorithm>
#include <cstring>

#include "common/bytes.h"
#include "wire/packet.h"

namespace uroce::link {

Result<std::unique_ptr<SimLink>> SimLink::create(fabric::LossyNetwork& network, const Gid& local) {
  auto ep = network.attach(local);
  if (!ep) return Err(ep.error());
  return std::unique_ptr<SimLink>(new SimLink(network, local, *ep));
}

uint32_t SimLink::build(const wire::TxPacket& pkt) {
  if (pkt.dest == nullptr || pkt.header_len > pkt.header.size() ||
      pkt.payload_parts > wire::kMaxGather || pkt.pad > 3)
    return 0;
  const wire::AddressVector& av = *pkt.dest;
  const bool v4 = gid_is_ipv4(local_);
  if (v4 != gid_is_ipv4(av.dgid)) return 0;
  const uint32_t ip_len = v4 ? wire::kIpv4Bytes : wire::kIpv6Bytes;
  const size_t udp_len =
      size_t{wire::kUdpBytes} + pkt.header_len + pkt.payload_len + pkt.pad + wire::kIcrcBytes;
  const size_t total = ip_len + udp_len;
  if (total > buf_.size()) return 0;
  const std::span<uint8_t> out(buf_.data(), total);
  const uint8_t dscp = av.traffic_class >> 2;
  // The transport only says whether the packet is ECN-capable; switches may later mark it CE.
  const wire::Ecn ecn = pkt.ect ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
  if (v4) {
    wire::Ipv4 ip;
    ip.dscp = dscp;
    ip.ecn = ecn;
    ip.total_length = static_cast<uint16_t>(total);
    ip.ttl = av.hop_limit;
    std::copy_n(local_.begin() + 12, 4, ip.src.begin());
    std::copy_n(av.dgid.begin() + 12, 4, ip.dst.begin());
    wire::write_ipv4(ip, out);
  } else {
    wire::Ipv6 ip;
    ip.dscp = dscp;
    ip.ecn = ecn;
    ip.flow_label = av.flow_label;
    ip.payload_length = static_cast<uint16_t>(udp_len);
    ip.hop_limit = av.hop_limit;
    ip.src = local_;
    ip.dst = av.dgid;
    wire::write_ipv6(ip, out);
  }
  // RoCEv2 sends a zero UDP checksum (IBA annex A17.4.2); the ICRC protects the payload.
  wire::write_udp(wire::Udp{av.udp_src_port, wire::kRoceV2Port, static_cast<uint16_t>(udp_len), 0},
                  out.subspan(ip_len));
  uint8_t* p = buf_.data() + ip_len + wire::kUdpBytes;
  std::memcpy(p, pkt.header.data(), pkt.header_len);
  p += pkt.header_len;
  size_t gathered = 0;
  for (uint32_t i = 0; i < pkt.payload_parts; ++i) {
    const auto part = pkt.payload[i];
    if (gathered + part.size() > pkt.payload_len) return 0;
    if (!part.empty()) std::memcpy(p + gathered, part.data(), part.size());
    gathered += part.size();
  }
  if (gathered != pkt.payload_len) return 0;
  std::memset(p + gathered, 0, pkt.pad);
  const size_t icrc_at = total - wire::kIcrcBytes;
  const uint32_t icrc = wire::compute_icrc(std::span<const uint8_t>(buf_.data(), icrc_at));
  // Least significant byte first, like the Ethernet FCS (IBA annex A17.4.1).
  for (uint32_t i = 0; i < 4; ++i) buf_[icrc_at + i] = static_cast<uint8_t>(icrc >> (8 * i));
  return static_cast<uint32_t>(total);
}

void SimLink::transmit(const wire::TxPacket& packet) {
  const uint32_t n = build(packet);
  if (n == 0 || !network_.send(endpoint_, std::span<const uint8_t>(buf_.data(), n))) {
    ++counters_.tx_errors;
    return;
  }
  ++counters_.tx_packets;
  counters_.tx_bytes += n;
}

size_t SimLink::poll(const RxHandler& handler, size_t budget) {
  size_t taken = 0;
  while (taken < budget) {
    const std::span<const uint8_t> bytes = network_.front(endpoint_);
    if (bytes.empty()) break;
    receive_one(bytes, handler);
    network_.pop(endpoint_);
    ++taken;
  }
  return taken;
}

void SimLink::receive_one(std::span<const uint8_t> bytes, const RxHandler& handler) {
  // IPv4 carries a header checksum the ICRC leaves out (TTL, TOS and the checksum are masked),
  // so a flip there is caught by IP as on a real host (RFC 791).
  if ((bytes[0] >> 4) == 4 && bytes.size() >= wire::kIpv4Bytes &&
      wire::ipv4_header_checksum(bytes.first<wire::kIpv4Bytes>()) != load_be16(&bytes[10])) {
    ++rx_drop_bad_ip_checksum_;
    ++counters_.rx_drop_malformed;
    return;
  }
  auto parsed = wire::parse_ip_packet(bytes);
  if (!parsed) {
    switch (parsed.error()) {
      case wire::ParseError::kBadIcrc:
        ++counters_.rx_drop_bad_icrc;
        break;
      case wire::ParseError::kNotRoce:
        ++counters_.rx_drop_not_roce;
        break;
      default:
        ++counters_.rx_drop_malformed;
        break;
    }
    return;
  }
  const wire::RocePacket& pkt = *parsed;
  wire::RxPacket rx;
  if (pkt.ipv4) {
    rx.sgid = gid_from_ipv4(pkt.ipv4->src);
    rx.dgid = gid_from_ipv4(pkt.ipv4->dst);
    rx.ce = pkt.ipv4->ecn == wire::Ecn::kCe;
  } else {
    rx.sgid = pkt.ipv6->src;
    rx.dgid = pkt.ipv6->dst;
    rx.ce = pkt.ipv6->ecn == wire::Ecn::kCe;
  }
  if (rx.dgid != local_) {
    ++counters_.rx_drop_not_roce;  // not addressed to us: a host would not hand it to RoCE
    return;
  }
  rx.hdr = &pkt.transport.hdr;
  rx.payload = pkt.transport.payload;
  rx.udp_src_port = pkt.udp.src_port;
  ++counters_.rx_packets;
  counters_.rx_bytes += bytes.size();
  if (rx.ce) ++counters_.rx_ce_marked;
  handler(rx);
}

}  // namespace uroce::link
