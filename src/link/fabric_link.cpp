#include "link/fabric_link.h"

#include <algorithm>
#include <cstring>

#include "common/bytes.h"
#include "wire/packet.h"

namespace uroce::link {

Result<std::unique_ptr<FabricLink>> FabricLink::create(fabric::SwitchFabric& fabric,
                                                       fabric::HostId host, const Gid& local,
                                                       size_t inbox_packets) {
  if (host >= fabric.hosts() || inbox_packets == 0) return Err(EINVAL);
  std::unique_ptr<FabricLink> link(new FabricLink(fabric, host, local, inbox_packets));
  fabric.set_receiver(host, link.get());
  return link;
}

FabricLink::~FabricLink() {
  fabric_.set_receiver(host_, nullptr);
}

uint32_t FabricLink::build(const wire::TxPacket& pkt) {
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
  // The transport says only whether the packet is ECN-capable; the fabric may mark it CE.
  const wire::Ecn ecn = pkt.ect ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
  if (v4) {
    wire::Ipv4 ip;
    ip.dscp = av.traffic_class >> 2;
    ip.ecn = ecn;
    ip.total_length = static_cast<uint16_t>(total);
    ip.ttl = av.hop_limit;
    std::copy_n(local_.begin() + 12, 4, ip.src.begin());
    std::copy_n(av.dgid.begin() + 12, 4, ip.dst.begin());
    wire::write_ipv4(ip, out);
  } else {
    wire::Ipv6 ip;
    ip.dscp = av.traffic_class >> 2;
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
  // Least significant byte first, like the Ethernet FCS (IBA annex A17.4.1).
  wire::store_icrc(buf_.data() + icrc_at,
                   wire::compute_icrc(std::span<const uint8_t>(buf_.data(), icrc_at)));
  return static_cast<uint32_t>(total);
}

void FabricLink::transmit(const wire::TxPacket& packet) {
  const uint32_t n = build(packet);
  if (n == 0 || !fabric_.host_send_ip(host_, std::span<const uint8_t>(buf_.data(), n))) {
    ++counters_.tx_errors;
    return;
  }
  ++counters_.tx_packets;
  counters_.tx_bytes += n;
}

void FabricLink::on_receive(const fabric::Delivered& packet, Nanos) {
  if (inbox_count_ == inbox_.size()) {
    ++rx_drop_inbox_full_;
    return;
  }
  if (packet.ip_packet.empty()) {
    ++counters_.rx_drop_not_roce;  // a descriptor-only packet from a synthetic host
    return;
  }
  std::vector<uint8_t>& slot = inbox_[(inbox_head_ + inbox_count_) % inbox_.size()];
  slot.assign(packet.ip_packet.begin(), packet.ip_packet.end());
  ++inbox_count_;
}

size_t FabricLink::poll(const RxHandler& handler, size_t budget) {
  size_t taken = 0;
  while (taken < budget && inbox_count_ > 0) {
    receive_one(inbox_[inbox_head_], handler);
    inbox_head_ = (inbox_head_ + 1) % inbox_.size();
    --inbox_count_;
    ++taken;
  }
  return taken;
}

void FabricLink::receive_one(std::span<const uint8_t> bytes, const RxHandler& handler) {
  // The IPv4 header checksum covers what the ICRC masks out (RFC 791).
  if (bytes.size() >= wire::kIpv4Bytes && (bytes[0] >> 4) == 4 &&
      wire::ipv4_header_checksum(bytes.first<wire::kIpv4Bytes>()) != load_be16(&bytes[10])) {
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
    ++counters_.rx_drop_not_roce;
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
