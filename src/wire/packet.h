#pragma once
// RoCE codec: the transport packet (BTH .. payload .. pad) and the frames around it (Ethernet II
// with optional 802.1Q; IPv4 or IPv6 and UDP for RoCEv2, the GRH for RoCE v1), plus the ICRC.
// All of it at explicit offsets.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "common/result.h"
#include "common/types.h"
#include "wire/headers.h"
#include "wire/opcode.h"

namespace uroce::wire {

enum class ParseError : uint8_t {
  kTruncated,          // fewer bytes than the headers the opcode needs
  kUnknownOpcode,      // not in the opcode table
  kBadVersion,         // BTH TVer != 0, IP version mismatch
  kBadPadCount,        // pad count larger than the payload, or pad on an opcode without payload
  kBadLength,          // IP and UDP lengths disagree, or the payload is not whole words
  kUnexpectedPayload,  // payload on an opcode that carries none
  kNotRoce,            // not UDP to 4791, not IP, IP options or extension headers, fragments
  kBadIcrc,            // checked before the transport headers are interpreted
};
std::string_view to_string(ParseError e);

template <typename T>
using ParseResult = Result<T, ParseError>;

// A parsed transport packet: headers plus a view of the payload (padding and ICRC excluded).
struct TransportPacket {
  TransportHeaders hdr;
  std::span<const uint8_t> payload;
  const OpcodeInfo& info() const { return opcode_info(hdr.bth.opcode); }
};

// Parses BTH .. end of pad. `bytes` must not include the ICRC (the link checks and strips it).
ParseResult<TransportPacket> parse_transport(std::span<const uint8_t> bytes);
// The same into `pkt` (every field set: what the opcode lacks is zero), for the receive path: no
// result object to build and move per packet. nullopt on success.
std::optional<ParseError> parse_transport_into(std::span<const uint8_t> bytes,
                                               TransportPacket& pkt);

// Writes the BTH and the extension headers that the opcode table lists for hdr.bth.opcode.
// Returns the number of bytes written (== opcode_info(...).header_bytes). `out` must hold at least
// kMaxTransportHeaderBytes. The pad count is taken from hdr.bth as given: use pad_for() to set it.
uint32_t write_transport_headers(const TransportHeaders& hdr, std::span<uint8_t> out);
inline constexpr uint32_t kMaxTransportHeaderBytes = 64;

constexpr uint8_t pad_for(uint32_t payload_bytes) {
  return (4 - (payload_bytes & 3)) & 3;
}

// ---- Network and link headers -------------------------------------------------------------

enum class Ecn : uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

struct Ipv4 {
  uint8_t dscp = 0;
  Ecn ecn = Ecn::kNotEct;
  uint16_t total_length = 0;
  uint16_t identification = 0;
  bool dont_fragment = true;
  uint8_t ttl = 64;
  uint8_t protocol = 17;
  std::array<uint8_t, 4> src{};
  std::array<uint8_t, 4> dst{};
};
struct Ipv6 {
  uint8_t dscp = 0;
  Ecn ecn = Ecn::kNotEct;
  uint32_t flow_label = 0;
  uint16_t payload_length = 0;
  uint8_t next_header = 17;
  uint8_t hop_limit = 64;
  std::array<uint8_t, 16> src{};
  std::array<uint8_t, 16> dst{};
};
// The IP traffic class byte (IPv4 TOS) of headers and endpoints that keep DSCP and ECN apart
// (Ipv4, Ipv6, IpEndpoints), and back.
template <typename Ip>
uint8_t traffic_class_of(const Ip& ip) {
  return static_cast<uint8_t>(ip.dscp << 2 | static_cast<uint8_t>(ip.ecn));
}
template <typename Ip>
void set_traffic_class(Ip& ip, uint8_t traffic_class) {
  ip.dscp = static_cast<uint8_t>(traffic_class >> 2);
  ip.ecn = static_cast<Ecn>(traffic_class & 3);
}

struct Udp {
  uint16_t src_port = 0;
  uint16_t dst_port = kRoceV2Port;
  uint16_t length = 0;
  uint16_t checksum = 0;
};
struct Ethernet {
  std::array<uint8_t, 6> dst{};
  std::array<uint8_t, 6> src{};
  std::optional<uint16_t> vlan_tci;  // 802.1Q: PCP(3) DEI(1) VID(12)
  uint16_t ethertype = 0x0800;
};
inline constexpr uint16_t kEthertypeIpv4 = 0x0800, kEthertypeIpv6 = 0x86dd, kEthertypeVlan = 0x8100,
                          kEthertypeRoceV1 = 0x8915;
inline constexpr uint32_t kIpv4Bytes = 20, kIpv6Bytes = 40, kUdpBytes = 8, kEthBytes = 14,
                          kVlanBytes = 4;

// A whole RoCEv2 packet from the IP header on, parsed and with the ICRC checked.
struct RocePacket {
  std::optional<Ipv4> ipv4;
  std::optional<Ipv6> ipv6;
  Udp udp;
  TransportPacket transport;
  uint32_t icrc = 0;
};

// Parses an IP packet (IPv4 or IPv6, told apart by the version nibble). Verifies lengths, the UDP
// port and, unless `check_icrc` is false (a simulated wire that corrupts nothing), the ICRC.
ParseResult<RocePacket> parse_ip_packet(std::span<const uint8_t> bytes, bool check_icrc = true);
// Parses an Ethernet frame (FCS not included) carrying a RoCEv2 IP packet.
struct RoceFrame {
  Ethernet eth;
  RocePacket packet;
};
ParseResult<RoceFrame> parse_frame(std::span<const uint8_t> bytes);

// Header writers; each returns the bytes written. IPv4 also fills in its header checksum.
uint32_t write_ipv4(const Ipv4& ip, std::span<uint8_t> out);
uint32_t write_ipv6(const Ipv6& ip, std::span<uint8_t> out);
uint32_t write_udp(const Udp& udp, std::span<uint8_t> out);
uint32_t write_ethernet(const Ethernet& eth, std::span<uint8_t> out);
uint16_t ipv4_header_checksum(std::span<const uint8_t, kIpv4Bytes> header);

// The Global Route Header area a UD receive buffer starts with (ibv_post_recv on UD: 40 bytes, the
// size of an IPv6 header). RoCEv2 carries no GRH, so it is rebuilt from the IP header the packet
// came in: for IPv6 that header fills the area; for IPv4, as mlx5 and Linux's union
// rdma_network_hdr lay it out, 20 zero bytes come first and the IPv4 header takes the last 20.
inline constexpr uint32_t kGrhBytes = kIpv6Bytes;
inline constexpr uint32_t kGrhIpv4Offset = kGrhBytes - kIpv4Bytes;
// What a UD receiver knows of the IP header its packet came in. An IPv4 sender is the one whose
// GID is IPv4-mapped (::ffff:a.b.c.d).
struct GrhSource {
  Gid sgid{};  // sender
  Gid dgid{};  // receiver
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;    // IPv4 TTL
  uint16_t udp_length = 0;  // UDP header to ICRC
  // Came as RoCE v1: the area is the GRH itself (IPv6 layout, next header 0x1B, payload length
  // BTH to ICRC, the GIDs whatever their kind, the flow label as received), not an IP header.
  bool roce_v1 = false;
  uint32_t flow_label = 0;  // RoCE v1 only
};
// The 40 bytes. Fields the link does not see are written as a Linux UDP socket sends them: IPv4
// identification 0 with DF set, IPv6 flow label 0. IPv4 also gets its header checksum.
std::array<uint8_t, kGrhBytes> build_ud_grh(const GrhSource& src);

// ECN and DSCP in place on an IP packet (version taken from the first nibble). IPv4's header
// checksum is updated.
Ecn read_ecn(std::span<const uint8_t> ip_packet);
void set_ecn(std::span<uint8_t> ip_packet, Ecn ecn);

// ---- ICRC ---------------------------------------------------------------------------------

// ICRC (IBA 7.8.1, as RoCEv2 annex A17 adapts it): CRC-32 over 8 bytes of ones (the LRH stand-in),
// the IP header with its variable fields set to ones, the UDP header with the checksum set to ones,
// the BTH with its reserved byte set to ones, then the rest up to the ICRC. `ip_packet` spans the
// IP header to the end of the pad, without the ICRC.
uint32_t compute_icrc(std::span<const uint8_t> ip_packet);
// Same, with the payload given apart from the headers (gather from registered memory). `headers`
// covers IP, UDP, BTH and extension headers; `payload` follows them, then `pad` zero bytes.
uint32_t compute_icrc(std::span<const uint8_t> headers, std::span<const uint8_t> payload,
                      uint8_t pad);

// The same computation in two steps, for a sender that keeps the first: the running CRC over the
// LRH stand-in and the masked IP and UDP headers (`ip_udp`, IP header first), which is the same for
// every packet of one length and IPv4 identification to one peer; then continued over the
// transport headers with the BTH's reserved byte masked. Continue with wire::crc32() over the
// payload and pad.
uint32_t icrc_ip_udp(std::span<const uint8_t> ip_udp);
uint32_t icrc_transport(uint32_t crc, std::span<const uint8_t> transport_headers);
// icrc_transport() and the crc32() after it in one: continues over a whole transport packet (BTH
// to the end of the pad, without the ICRC), in one CRC call when it is small (a CRC call's fixed
// cost dominates a small packet's ICRC).
uint32_t icrc_transport_packet(uint32_t crc, std::span<const uint8_t> transport_packet);

// Builds a complete IP packet: IP header, UDP, transport headers, payload, pad, ICRC. Returns the
// bytes written, or 0 if `out` is too small, the packet too big for IP, or `payload` not empty
// on an opcode that carries none. The UDP checksum is 0 over IPv4 (none) and computed over IPv6,
// where it is mandatory; parsers ignore it, as the ICRC does.
struct IpEndpoints {
  bool ipv6 = false;
  std::array<uint8_t, 16> src{};  // IPv4 uses the first 4 bytes
  std::array<uint8_t, 16> dst{};
  uint16_t udp_src_port = 0xc000;
  uint8_t dscp = 0;
  Ecn ecn = Ecn::kEct0;
  uint32_t flow_label = 0;
  uint8_t hop_limit = 64;  // IPv4 TTL
};
uint32_t build_ip_packet(const IpEndpoints& ep, const TransportHeaders& hdr,
                         std::span<const uint8_t> payload, std::span<uint8_t> out);

// Fills in the UDP checksum of a finished IPv6 packet (IP header to ICRC). IPv6 forbids a zero
// UDP checksum (RFC 8200 section 8.1), so a frame that leaves a kernel's or Wireshark's view
// needs one; the ICRC masks it, so it may be filled in after the ICRC.
void fill_ipv6_udp_checksum(std::span<uint8_t> ip_packet);

// Endpoints between two GIDs: IPv4 when both are IPv4-mapped (::ffff:a.b.c.d), IPv6 otherwise.
IpEndpoints endpoints_from_gids(const Gid& src, const Gid& dst, uint16_t udp_src_port);

// ---- What a UDP socket sees -------------------------------------------------------------
//
// A UDP socket hands its user the UDP payload (BTH .. ICRC) and the addresses, not the IP and UDP
// headers the ICRC covers. These rebuild those headers from `ep` the way the sender's kernel wrote
// them: IPv4 with identification 0 and DF set (what Linux writes for a DF datagram from an
// unconnected socket), IPv6 as is; fields the ICRC masks never matter. See docs/wire.md.
// For a received packet, `ep.src` is the sender and `ep.dst` the receiver.

// The running CRC-32 over the masked pseudo headers and `transport_headers` (BTH and extension
// headers) of a packet whose UDP payload, ICRC included, is `udp_payload_bytes` long. Continue it
// with wire::crc32() over each payload part and the pad bytes: the result is the ICRC.
uint32_t icrc_begin_udp(const IpEndpoints& ep, uint32_t udp_payload_bytes,
                        std::span<const uint8_t> transport_headers);
// Checks the ICRC at the end of `udp_payload` and parses what precedes it.
ParseResult<TransportPacket> parse_udp_payload(const IpEndpoints& ep,
                                               std::span<const uint8_t> udp_payload);
// Builds a UDP payload: transport headers, payload, pad, ICRC. Returns the bytes written, or 0 as
// build_ip_packet() does.
uint32_t build_udp_payload(const IpEndpoints& ep, const TransportHeaders& hdr,
                           std::span<const uint8_t> payload, std::span<uint8_t> out);

// The ICRC is sent least significant byte first (like an Ethernet FCS).
inline uint32_t load_icrc(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
inline void store_icrc(uint8_t* p, uint32_t icrc) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(icrc >> (8 * i));
}

// ---- RoCE v1 (IBA annex A16) ------------------------------------------------------------
//
// RoCE v1 is the InfiniBand packet with the LRH replaced by Ethernet: EtherType 0x8915, then an
// IBA Global Route Header (40 bytes, laid out like IPv6 with version 6), BTH .. pad, ICRC. It is
// not routable: the GRH's GIDs name end points on one Ethernet segment. The GIDs are the same
// values a v2 GID table holds (IPv4-mapped or IPv6 addresses); only the GID type differs.

inline constexpr uint8_t kGrhNextHeaderIba = 0x1b;  // IBA 8.3.1: next header is a BTH
struct Grh {
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;      // 20 bits
  uint16_t payload_length = 0;  // BTH through ICRC
  uint8_t next_header = kGrhNextHeaderIba;
  uint8_t hop_limit = 64;
  Gid sgid{};
  Gid dgid{};
};
uint32_t write_grh(const Grh& grh, std::span<uint8_t> out);

struct RoceV1Packet {
  Grh grh;
  TransportPacket transport;
  uint32_t icrc = 0;
};
// Parses a v1 packet from the GRH on (the bytes after EtherType 0x8915): version 6, next header
// 0x1B, the payload length within `bytes` (bytes past it, Ethernet padding, are ignored), the
// ICRC checked before the transport headers are read.
ParseResult<RoceV1Packet> parse_v1_packet(std::span<const uint8_t> bytes);
struct RoceV1Frame {
  Ethernet eth;
  RoceV1Packet packet;
};
// An Ethernet frame (FCS not included, optional 802.1Q) with EtherType 0x8915.
ParseResult<RoceV1Frame> parse_v1_frame(std::span<const uint8_t> bytes);

// The v1 ICRC (IBA 7.8.1 with annex A16's missing LRH): CRC-32 over 8 bytes of ones standing in
// for the LRH, the GRH with its variant fields (traffic class, flow label, hop limit) set to ones,
// the BTH with its reserved byte set to ones, then the rest up to the ICRC. `headers` starts at
// the GRH and covers at least the BTH; `payload` and `pad` zero bytes follow it.
uint32_t compute_icrc_v1(std::span<const uint8_t> headers, std::span<const uint8_t> payload = {},
                         uint8_t pad = 0);

// Builds a complete v1 packet (GRH, transport headers, payload, pad, ICRC) from `grh`, whose
// payload length is filled in. Returns the bytes written, or 0 as build_ip_packet() does.
uint32_t build_v1_packet(const Grh& grh, const TransportHeaders& hdr,
                         std::span<const uint8_t> payload, std::span<uint8_t> out);

// Reads the Ethernet header (and 802.1Q tag) at the start of `frame` into `eth`; returns the
// offset of what follows, or 0 if the frame is too short.
uint32_t read_ethernet(std::span<const uint8_t> frame, Ethernet& eth);

// A congestion notification packet (RoCEv2 annex A17, CNP) to `dest_qp`: BECN set, the other BTH
// flags and the PSN zero; the 16 reserved bytes are written as zeros.
TransportHeaders cnp_headers(uint32_t dest_qp, uint16_t pkey = 0xffff);

}  // namespace uroce::wire
