// IPv4, IPv6, UDP, Ethernet, the ICRC, and whole RoCEv2 packets.
#include <algorithm>
#include <bit>
#include <cstring>

#include "common/bytes.h"
#include "common/check.h"
#include "wire/crc32.h"
#include "wire/packet.h"

namespace uroce::wire {

uint16_t ipv4_header_checksum(std::span<const uint8_t, kIpv4Bytes> h) {
  uint32_t sum = 0;
  for (uint32_t i = 0; i < kIpv4Bytes; i += 2)
    if (i != 10) sum += load_be16(&h[i]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

uint32_t write_ipv4(const Ipv4& ip, std::span<uint8_t> out) {
  UROCE_CHECK(out.size() >= kIpv4Bytes);
  uint8_t* p = out.data();
  p[0] = 0x45;
  p[1] = static_cast<uint8_t>(ip.dscp << 2 | static_cast<uint8_t>(ip.ecn));
  store_be16(p + 2, ip.total_length);
  store_be16(p + 4, ip.identification);
  store_be16(p + 6, ip.dont_fragment ? 0x4000 : 0);
  p[8] = ip.ttl;
  p[9] = ip.protocol;
  std::memcpy(p + 12, ip.src.data(), 4);
  std::memcpy(p + 16, ip.dst.data(), 4);
  store_be16(p + 10, ipv4_header_checksum(out.first<kIpv4Bytes>()));
  return kIpv4Bytes;
}

uint32_t write_ipv6(const Ipv6& ip, std::span<uint8_t> out) {
  UROCE_CHECK(out.size() >= kIpv6Bytes);
  uint8_t* p = out.data();
  const uint8_t tclass = static_cast<uint8_t>(ip.dscp << 2 | static_cast<uint8_t>(ip.ecn));
  store_be32(p, 6u << 28 | uint32_t{tclass} << 20 | (ip.flow_label & 0xfffff));
  store_be16(p + 4, ip.payload_length);
  p[6] = ip.next_header;
  p[7] = ip.hop_limit;
  std::memcpy(p + 8, ip.src.data(), 16);
  std::memcpy(p + 24, ip.dst.data(), 16);
  return kIpv6Bytes;
}

std::array<uint8_t, kGrhBytes> build_ud_grh(const GrhSource& src) {
  std::array<uint8_t, kGrhBytes> grh{};
  if (src.roce_v1) {
    Grh g;
    g.traffic_class = src.traffic_class;
    g.flow_label = src.flow_label & 0xfffff;
    g.payload_length = static_cast<uint16_t>(src.udp_length - kUdpBytes);
    g.hop_limit = src.hop_limit;
    g.sgid = src.sgid;
    g.dgid = src.dgid;
    write_grh(g, grh);
  } else if (gid_is_ipv4(src.sgid)) {
    Ipv4 ip;
    ip.total_length = static_cast<uint16_t>(kIpv4Bytes + src.udp_length);
    set_traffic_class(ip, src.traffic_class);
    ip.ttl = src.hop_limit;
    std::copy_n(src.sgid.begin() + 12, 4, ip.src.begin());
    std::copy_n(src.dgid.begin() + 12, 4, ip.dst.begin());
    write_ipv4(ip, std::span(grh).subspan(kGrhIpv4Offset));
  } else {
    Ipv6 ip;
    ip.payload_length = src.udp_length;
    set_traffic_class(ip, src.traffic_class);
    ip.hop_limit = src.hop_limit;
    ip.src = src.sgid;
    ip.dst = src.dgid;
    write_ipv6(ip, grh);
  }
  return grh;
}

uint32_t write_udp(const Udp& udp, std::span<uint8_t> out) {
  UROCE_CHECK(out.size() >= kUdpBytes);
  store_be16(&out[0], udp.src_port);
  store_be16(&out[2], udp.dst_port);
  store_be16(&out[4], udp.length);
  store_be16(&out[6], udp.checksum);
  return kUdpBytes;
}

uint32_t write_ethernet(const Ethernet& eth, std::span<uint8_t> out) {
  const uint32_t n = kEthBytes + (eth.vlan_tci ? kVlanBytes : 0);
  UROCE_CHECK(out.size() >= n);
  uint8_t* p = out.data();
  std::memcpy(p, eth.dst.data(), 6);
  std::memcpy(p + 6, eth.src.data(), 6);
  if (eth.vlan_tci) {
    store_be16(p + 12, kEthertypeVlan);
    store_be16(p + 14, *eth.vlan_tci);
    p += kVlanBytes;
  }
  store_be16(p + 12, eth.ethertype);
  return n;
}

Ecn read_ecn(std::span<const uint8_t> ip) {
  if (ip.empty()) return Ecn::kNotEct;
  if ((ip[0] >> 4) == 6) return ip.size() >= 2 ? static_cast<Ecn>((ip[1] >> 4) & 3) : Ecn::kNotEct;
  return ip.size() >= 2 ? static_cast<Ecn>(ip[1] & 3) : Ecn::kNotEct;
}

void set_ecn(std::span<uint8_t> ip, Ecn ecn) {
  const uint8_t e = static_cast<uint8_t>(ecn);
  if (ip.size() >= kIpv6Bytes && (ip[0] >> 4) == 6) {
    ip[1] = static_cast<uint8_t>((ip[1] & ~0x30) | e << 4);
  } else if (ip.size() >= kIpv4Bytes && (ip[0] >> 4) == 4) {
    ip[1] = static_cast<uint8_t>((ip[1] & ~3) | e);
    store_be16(&ip[10], ipv4_header_checksum(ip.first<kIpv4Bytes>()));
  }
}

namespace {

constexpr std::array<uint8_t, 8> kLrhOnes = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
constexpr std::array<uint8_t, 3> kZeros{};

// The variant fields (IBA annex A17, RoCEv2 ICRC; IBA 7.8.1 for the InfiniBand original) are
// replaced by ones in a copy: in the IP and UDP headers at `ip`, IPv4 TOS, TTL and header
// checksum, IPv6 traffic class, flow label and hop limit, and the UDP checksum;
void mask_ip_udp(uint8_t* ip) {
  const bool v6 = (ip[0] >> 4) == 6;
  const uint32_t ip_len = v6 ? kIpv6Bytes : kIpv4Bytes;
  if (v6) {
    ip[0] |= 0x0f;  // traffic class (high nibble) and flow label
    ip[1] = ip[2] = ip[3] = 0xff;
    ip[7] = 0xff;  // hop limit
  } else {
    ip[1] = 0xff;            // TOS
    ip[8] = 0xff;            // TTL
    ip[10] = ip[11] = 0xff;  // header checksum
  }
  ip[ip_len + 6] = ip[ip_len + 7] = 0xff;  // UDP checksum
}
// and in the BTH at `bth`, the reserved byte that holds FECN and BECN.
void mask_bth(uint8_t* bth) {
  bth[4] = 0xff;  // reserved byte (FECN/BECN live here)
}

// Starts the ICRC over `headers` (IP, UDP, BTH, then anything else that is covered as is), the
// 8 bytes of ones standing in for the LRH that RoCEv2 does not have.
uint32_t icrc_begin(std::span<const uint8_t> headers) {
  const bool v6 = (headers[0] >> 4) == 6;
  const uint32_t ip_len = v6 ? kIpv6Bytes : kIpv4Bytes;
  const uint32_t n = ip_len + kUdpBytes + kBthBytes;
  UROCE_CHECK(headers.size() >= n);
  // One buffer for the LRH stand-in and the headers, masked, so the CRC runs once over them (a
  // CRC call has a fixed cost that dominates at these sizes: small packets are CPU-bound on it,
  // and every packet pays it once per call). Callers that pass a whole packet as `headers` get
  // the masked part copied and the rest CRC'd in place.
  std::array<uint8_t, kLrhOnes.size() + kIpv6Bytes + kUdpBytes + kMaxTransportHeaderBytes> buf;
  const size_t copied = std::min(headers.size(), buf.size() - kLrhOnes.size());
  std::copy(kLrhOnes.begin(), kLrhOnes.end(), buf.begin());
  uint8_t* p = buf.data() + kLrhOnes.size();
  std::memcpy(p, headers.data(), copied);
  mask_ip_udp(p);
  mask_bth(p + ip_len + kUdpBytes);
  const uint32_t crc = crc32(0, std::span<const uint8_t>(buf.data(), kLrhOnes.size() + copied));
  return crc32(crc, headers.subspan(copied));
}

// Writes the IP and UDP headers of a packet with `udp_len` bytes of UDP (header included).
uint32_t write_ip_udp(const IpEndpoints& ep, size_t udp_len, std::span<uint8_t> out) {
  uint32_t ip_len;
  if (ep.ipv6) {
    Ipv6 ip;
    ip.dscp = ep.dscp;
    ip.ecn = ep.ecn;
    ip.flow_label = ep.flow_label;
    ip.hop_limit = ep.hop_limit;
    ip.payload_length = static_cast<uint16_t>(udp_len);
    std::copy_n(ep.src.begin(), 16, ip.src.begin());
    std::copy_n(ep.dst.begin(), 16, ip.dst.begin());
    ip_len = write_ipv6(ip, out);
  } else {
    // Identification 0 and DF: what a Linux UDP socket sends (docs/wire.md), so a receiver that
    // sees only the UDP payload can rebuild this header exactly.
    Ipv4 ip;
    ip.dscp = ep.dscp;
    ip.ecn = ep.ecn;
    ip.total_length = static_cast<uint16_t>(kIpv4Bytes + udp_len);
    ip.identification = 0;
    ip.dont_fragment = true;
    ip.ttl = ep.hop_limit;
    std::copy_n(ep.src.begin(), 4, ip.src.begin());
    std::copy_n(ep.dst.begin(), 4, ip.dst.begin());
    ip_len = write_ipv4(ip, out);
  }
  const Udp udp{ep.udp_src_port, kRoceV2Port, static_cast<uint16_t>(udp_len), 0};
  return ip_len + write_udp(udp, out.subspan(ip_len));
}

// The Internet checksum's one's-complement sum (RFC 1071) of `b`, continuing `sum`. RFC 1071
// section 2 lets it add wider words in the machine's byte order and swap once at the end, which
// the compiler vectorises: several times faster than 16-bit big-endian steps.
uint32_t ones_sum(uint32_t sum, std::span<const uint8_t> b) {
  uint64_t acc = 0;
  size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, &b[i], 8);
    acc += (w & 0xffffffff) + (w >> 32);
  }
  for (; i + 2 <= b.size(); i += 2) {
    uint16_t w;
    std::memcpy(&w, &b[i], 2);
    acc += w;
  }
  if (i < b.size()) {
    // An odd last byte is the high half of a zero-padded big-endian word.
    acc += std::endian::native == std::endian::little ? uint32_t{b[i]} : uint32_t{b[i]} << 8;
  }
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  uint32_t be = static_cast<uint32_t>(acc);
  if constexpr (std::endian::native == std::endian::little)
    be = static_cast<uint32_t>(__builtin_bswap16(static_cast<uint16_t>(be)));
  be += sum;
  while (be >> 16) be = (be & 0xffff) + (be >> 16);
  return be;
}

// The largest UDP payload an IP packet can carry (the IPv4 total length is 16 bits).
size_t max_udp_payload(bool ipv6) {
  return 0xffff - kUdpBytes - (ipv6 ? 0 : kIpv4Bytes);
}

}  // namespace

// IPv6 requires a UDP checksum (RFC 8200 section 8.1: zero is not allowed, and receivers such as
// Linux and Wireshark treat it as an error). RoCEv2 masks it out of the ICRC, so it is filled in
// last, over the finished packet. IPv4 may send zero ("no checksum"), and uroce does.
void fill_ipv6_udp_checksum(std::span<uint8_t> ip_packet) {
  UROCE_CHECK(ip_packet.size() >= kIpv6Bytes + kUdpBytes);
  uint8_t* udp = ip_packet.data() + kIpv6Bytes;
  const size_t udp_len = ip_packet.size() - kIpv6Bytes;
  store_be16(udp + 6, 0);
  uint32_t sum = ones_sum(0, ip_packet.subspan(8, 32));  // source and destination addresses
  sum += static_cast<uint32_t>(udp_len >> 16) + static_cast<uint32_t>(udp_len & 0xffff) + 17;
  sum = ones_sum(sum, ip_packet.subspan(kIpv6Bytes));
  const uint16_t csum = static_cast<uint16_t>(~sum);
  store_be16(udp + 6, csum == 0 ? 0xffff : csum);
}

uint32_t compute_icrc(std::span<const uint8_t> headers, std::span<const uint8_t> payload,
                      uint8_t pad) {
  UROCE_CHECK(pad <= 3);
  const uint32_t crc = crc32(icrc_begin(headers), payload);
  return crc32(crc, std::span<const uint8_t>(kZeros.data(), pad));
}

uint32_t compute_icrc(std::span<const uint8_t> ip_packet) {
  return compute_icrc(ip_packet, {}, 0);
}

uint32_t icrc_ip_udp(std::span<const uint8_t> ip_udp) {
  std::array<uint8_t, kLrhOnes.size() + kIpv6Bytes + kUdpBytes> buf;
  UROCE_CHECK(!ip_udp.empty() && ip_udp.size() <= buf.size() - kLrhOnes.size());
  UROCE_CHECK(ip_udp.size() == ((ip_udp[0] >> 4) == 6 ? kIpv6Bytes : kIpv4Bytes) + kUdpBytes);
  std::copy(kLrhOnes.begin(), kLrhOnes.end(), buf.begin());
  std::memcpy(buf.data() + kLrhOnes.size(), ip_udp.data(), ip_udp.size());
  mask_ip_udp(buf.data() + kLrhOnes.size());
  return crc32(0, std::span<const uint8_t>(buf.data(), kLrhOnes.size() + ip_udp.size()));
}

uint32_t icrc_transport(uint32_t crc, std::span<const uint8_t> transport_headers) {
  std::array<uint8_t, kMaxTransportHeaderBytes> buf;
  UROCE_CHECK(transport_headers.size() >= kBthBytes && transport_headers.size() <= buf.size());
  std::memcpy(buf.data(), transport_headers.data(), transport_headers.size());
  mask_bth(buf.data());
  return crc32(crc, std::span<const uint8_t>(buf.data(), transport_headers.size()));
}

uint32_t icrc_transport_packet(uint32_t crc, std::span<const uint8_t> transport_packet) {
  UROCE_CHECK(transport_packet.size() >= kBthBytes);
  std::array<uint8_t, 256> buf;
  if (transport_packet.size() > buf.size())
    return crc32(icrc_transport(crc, transport_packet.first(kBthBytes)),
                 transport_packet.subspan(kBthBytes));
  std::memcpy(buf.data(), transport_packet.data(), transport_packet.size());
  mask_bth(buf.data());
  return crc32(crc, std::span<const uint8_t>(buf.data(), transport_packet.size()));
}

uint32_t icrc_begin_udp(const IpEndpoints& ep, uint32_t udp_payload_bytes,
                        std::span<const uint8_t> transport_headers) {
  UROCE_CHECK(udp_payload_bytes <= max_udp_payload(ep.ipv6));
  UROCE_CHECK(transport_headers.size() >= kBthBytes);
  UROCE_CHECK(transport_headers.size() <= kMaxTransportHeaderBytes);
  std::array<uint8_t, kIpv6Bytes + kUdpBytes + kMaxTransportHeaderBytes> buf;
  const uint32_t n = write_ip_udp(ep, kUdpBytes + udp_payload_bytes, buf);
  std::memcpy(buf.data() + n, transport_headers.data(), transport_headers.size());
  return icrc_begin(std::span<const uint8_t>(buf.data(), n + transport_headers.size()));
}

ParseResult<TransportPacket> parse_udp_payload(const IpEndpoints& ep,
                                               std::span<const uint8_t> bytes) {
  if (bytes.size() < kBthBytes + kIcrcBytes) return Err(ParseError::kTruncated);
  if (bytes.size() > max_udp_payload(ep.ipv6)) return Err(ParseError::kBadLength);
  const size_t icrc_at = bytes.size() - kIcrcBytes;
  uint32_t crc = icrc_begin_udp(ep, static_cast<uint32_t>(bytes.size()), bytes.first(kBthBytes));
  crc = crc32(crc, bytes.subspan(kBthBytes, icrc_at - kBthBytes));
  if (crc != load_icrc(&bytes[icrc_at])) return Err(ParseError::kBadIcrc);
  return parse_transport(bytes.first(icrc_at));
}

uint32_t build_udp_payload(const IpEndpoints& ep, const TransportHeaders& hdr,
                           std::span<const uint8_t> payload, std::span<uint8_t> out) {
  const OpcodeInfo& info = opcode_info(hdr.bth.opcode);
  UROCE_CHECK(info.valid());
  if (!info.payload && !payload.empty()) return 0;
  const uint8_t pad = info.payload ? pad_for(static_cast<uint32_t>(payload.size())) : 0;
  const size_t total = info.header_bytes + payload.size() + pad + kIcrcBytes;
  if (out.size() < total || total > max_udp_payload(ep.ipv6)) return 0;
  TransportHeaders h = hdr;
  h.bth.pad_count = pad;
  const uint32_t th = write_transport_headers(h, out);
  uint8_t* body = out.data() + th;
  if (!payload.empty()) std::memcpy(body, payload.data(), payload.size());
  std::memset(body + payload.size(), 0, pad);
  uint32_t crc = icrc_begin_udp(ep, static_cast<uint32_t>(total), out.first(th));
  crc = crc32(crc, std::span<const uint8_t>(body, payload.size() + pad));
  store_icrc(out.data() + total - kIcrcBytes, crc);
  return static_cast<uint32_t>(total);
}

uint32_t build_ip_packet(const IpEndpoints& ep, const TransportHeaders& hdr,
                         std::span<const uint8_t> payload, std::span<uint8_t> out) {
  const OpcodeInfo& info = opcode_info(hdr.bth.opcode);
  UROCE_CHECK(info.valid());
  if (!info.payload && !payload.empty()) return 0;
  const uint8_t pad = info.payload ? pad_for(static_cast<uint32_t>(payload.size())) : 0;
  const uint32_t ip_len = ep.ipv6 ? kIpv6Bytes : kIpv4Bytes;
  const size_t udp_len = kUdpBytes + info.header_bytes + payload.size() + pad + kIcrcBytes;
  const size_t total = ip_len + udp_len;
  if (out.size() < total || udp_len - kUdpBytes > max_udp_payload(ep.ipv6)) return 0;
  const uint32_t n = write_ip_udp(ep, udp_len, out);
  TransportHeaders h = hdr;
  h.bth.pad_count = pad;
  const uint32_t th = write_transport_headers(h, out.subspan(n));
  uint8_t* body = out.data() + n + th;
  if (!payload.empty()) std::memcpy(body, payload.data(), payload.size());
  std::memset(body + payload.size(), 0, pad);
  const size_t icrc_at = total - kIcrcBytes;
  store_icrc(out.data() + icrc_at, compute_icrc(out.first(icrc_at)));
  if (ep.ipv6) fill_ipv6_udp_checksum(out.first(total));
  return static_cast<uint32_t>(total);
}

IpEndpoints endpoints_from_gids(const Gid& src, const Gid& dst, uint16_t udp_src_port) {
  IpEndpoints ep;
  ep.ipv6 = !(gid_is_ipv4(src) && gid_is_ipv4(dst));
  if (ep.ipv6) {
    ep.src = src;
    ep.dst = dst;
  } else {
    std::copy_n(src.begin() + 12, 4, ep.src.begin());
    std::copy_n(dst.begin() + 12, 4, ep.dst.begin());
  }
  ep.udp_src_port = udp_src_port;
  return ep;
}

ParseResult<RocePacket> parse_ip_packet(std::span<const uint8_t> bytes, bool check_icrc) {
  RocePacket pkt;
  if (bytes.empty()) return Err(ParseError::kTruncated);
  const uint8_t version = bytes[0] >> 4;
  uint32_t ip_len = 0;
  size_t ip_total = 0;
  if (version == 4) {
    if (bytes.size() < kIpv4Bytes) return Err(ParseError::kTruncated);
    if ((bytes[0] & 0x0f) != 5) return Err(ParseError::kNotRoce);  // options are never used
    Ipv4 ip;
    ip.dscp = bytes[1] >> 2;
    ip.ecn = static_cast<Ecn>(bytes[1] & 3);
    ip.total_length = load_be16(&bytes[2]);
    ip.identification = load_be16(&bytes[4]);
    ip.dont_fragment = bytes[6] & 0x40;
    ip.ttl = bytes[8];
    ip.protocol = bytes[9];
    std::copy_n(&bytes[12], 4, ip.src.begin());
    std::copy_n(&bytes[16], 4, ip.dst.begin());
    if (ip.protocol != 17) return Err(ParseError::kNotRoce);
    // uroce never fragments (it sends with DF and sizes packets to the path MTU), and a
    // fragment's UDP payload is not a whole RoCE packet: drop rather than reassemble.
    if ((load_be16(&bytes[6]) & 0x3fff) != 0) return Err(ParseError::kNotRoce);
    ip_len = kIpv4Bytes;
    ip_total = ip.total_length;
    pkt.ipv4 = ip;
  } else if (version == 6) {
    if (bytes.size() < kIpv6Bytes) return Err(ParseError::kTruncated);
    Ipv6 ip;
    const uint32_t w = load_be32(&bytes[0]);
    const uint8_t tclass = static_cast<uint8_t>(w >> 20);
    ip.dscp = tclass >> 2;
    ip.ecn = static_cast<Ecn>(tclass & 3);
    ip.flow_label = w & 0xfffff;
    ip.payload_length = load_be16(&bytes[4]);
    ip.next_header = bytes[6];
    ip.hop_limit = bytes[7];
    std::copy_n(&bytes[8], 16, ip.src.begin());
    std::copy_n(&bytes[24], 16, ip.dst.begin());
    if (ip.next_header != 17) return Err(ParseError::kNotRoce);
    ip_len = kIpv6Bytes;
    ip_total = kIpv6Bytes + size_t{ip.payload_length};
    pkt.ipv6 = ip;
  } else {
    return Err(ParseError::kBadVersion);
  }
  if (ip_total > bytes.size()) return Err(ParseError::kTruncated);
  if (ip_total < ip_len + kUdpBytes) return Err(ParseError::kBadLength);
  const uint8_t* u = &bytes[ip_len];
  pkt.udp = {load_be16(u), load_be16(u + 2), load_be16(u + 4), load_be16(u + 6)};
  if (pkt.udp.dst_port != kRoceV2Port) return Err(ParseError::kNotRoce);
  if (pkt.udp.length != ip_total - ip_len) return Err(ParseError::kBadLength);
  if (pkt.udp.length < kUdpBytes + kBthBytes + kIcrcBytes) return Err(ParseError::kTruncated);
  // Trailing bytes past the IP length (Ethernet minimum-frame padding) are not part of it.
  const std::span<const uint8_t> whole = bytes.first(ip_total);
  const size_t icrc_at = ip_total - kIcrcBytes;
  // Integrity first: a corrupted packet counts as a bad ICRC, whatever its headers now say.
  pkt.icrc = load_icrc(&whole[icrc_at]);
  if (check_icrc && compute_icrc(whole.first(icrc_at)) != pkt.icrc)
    return Err(ParseError::kBadIcrc);
  auto transport = parse_transport(whole.subspan(ip_len + kUdpBytes, icrc_at - ip_len - kUdpBytes));
  if (!transport) return Err(transport.error());
  pkt.transport = *transport;
  return pkt;
}

ParseResult<RoceFrame> parse_frame(std::span<const uint8_t> bytes) {
  RoceFrame f;
  if (bytes.size() < kEthBytes) return Err(ParseError::kTruncated);
  std::copy_n(&bytes[0], 6, f.eth.dst.begin());
  std::copy_n(&bytes[6], 6, f.eth.src.begin());
  uint32_t off = 12;
  uint16_t type = load_be16(&bytes[off]);
  if (type == kEthertypeVlan) {
    if (bytes.size() < kEthBytes + kVlanBytes) return Err(ParseError::kTruncated);
    f.eth.vlan_tci = load_be16(&bytes[off + 2]);
    off += 4;
    type = load_be16(&bytes[off]);
  }
  f.eth.ethertype = type;
  off += 2;
  if (type != kEthertypeIpv4 && type != kEthertypeIpv6) return Err(ParseError::kNotRoce);
  auto ip = parse_ip_packet(bytes.subspan(off));
  if (!ip) return Err(ip.error());
  if ((type == kEthertypeIpv4) != ip->ipv4.has_value()) return Err(ParseError::kBadVersion);
  f.packet = *ip;
  return f;
}

}  // namespace uroce::wire
