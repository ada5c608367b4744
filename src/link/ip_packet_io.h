#pragma once
// What every link that carries whole IP packets does (the simulated lossy network and the switched
// fabric; the UDP link rebuilds headers the kernel writes instead): serialise a TxPacket into a
// RoCEv2 IP packet, and check, parse and count an arriving one before handing it up.
#include <cstdint>
#include <span>

#include "common/types.h"
#include "link/link.h"
#include "wire/packet_io.h"

namespace uroce::link {

// Largest IP packet a link builds: an IPv6 header, UDP, 64 bytes of transport headers, a 4096-byte
// payload (the largest path MTU), pad and ICRC.
inline constexpr uint32_t kMaxIpPacketBytes = 40 + 8 + 64 + 4096 + 3 + 4;

// Writes IP (from `local`, DSCP and hop limit from the destination, ECT(0) if the transport asks),
// UDP, transport headers, gathered payload, pad and ICRC into `out`. Returns the length, or 0 if
// the packet can't be built: no destination, IPv4/IPv6 mismatch, too big, inconsistent gather list.
// With `icrc` false the ICRC field is left zero: for a simulated wire that corrupts nothing, whose
// receiver does not check it either (FabricLink::set_trusted_wire).
// With `headers_only` it writes only IP, UDP and the transport headers (lengths counting the whole
// packet) and returns where the payload would start: for a simulation that carries the payload by
// reference (fabric/fabric_link.h).
uint32_t build_ip_packet(const wire::TxPacket& packet, const Gid& local, std::span<uint8_t> out,
                         bool icrc = true, bool headers_only = false);

enum class RxVerdict : uint8_t { kDelivered, kBadIpChecksum, kBadIcrc, kNotRoce, kMalformed };

// Checks the IPv4 header checksum (it covers what the ICRC masks, RFC 791), parses and checks the
// ICRC, drops what is not addressed to `local`, counts into `counters`, and calls `handler` for a
// good packet. `check_icrc` false skips the ICRC (as build_ip_packet's `icrc`).
RxVerdict receive_ip_packet(std::span<const uint8_t> bytes, const Gid& local,
                            LinkCounters& counters, const RxHandler& handler,
                            bool check_icrc = true);

// RoCE v1 (annex A16), for the links that carry it (raw_link.h, the fabric): the GRH (from `local`;
// traffic class, flow label and hop limit from the destination), transport headers, gathered
// payload, pad and ICRC. Returns the length, or 0 as build_ip_packet.
uint32_t build_v1_packet(const wire::TxPacket& packet, const Gid& local, std::span<uint8_t> out);

// Whether a network-layer packet starts with a RoCE v1 GRH (version 6, next header 0x1B) rather
// than an IP header.
bool is_v1_packet(std::span<const uint8_t> bytes);

// As receive_ip_packet, for a packet that starts with a GRH; hands it up with RxPacket::roce_v1.
RxVerdict receive_v1_packet(std::span<const uint8_t> bytes, const Gid& local,
                            LinkCounters& counters, const RxHandler& handler);

}  // namespace uroce::link
