#pragma once
// Packets as they pass between the transport and a link: transport headers and a gather list on
// the way out, a parsed packet on the way in. The link owns IP, UDP, the pad bytes and the ICRC.
#include <array>
#include <cstdint>
#include <span>

#include "common/types.h"
#include "wire/headers.h"

namespace uroce::wire {

inline constexpr uint32_t kMaxGather = 16;

// Where a packet goes (RC/UC: the QP's primary path; UD: the work request's address handle).
struct AddressVector {
  Gid dgid{};
  uint8_t traffic_class = 0;  // DSCP << 2; the link sets the ECN bits
  uint8_t hop_limit = 64;
  uint32_t flow_label = 0;
  uint16_t udp_src_port = 0xc000;  // ECMP entropy; RoCE NICs derive it from the QP numbers
  // RoCE v1 (EtherType 0x8915 and a GRH) rather than RoCEv2: the path's source GID is a v1 entry
  // of the GID table. Only a link that writes Ethernet frames can honour it (link/raw_link.h).
  bool roce_v1 = false;
  // The path's service level. On RoCE it is the 802.1p priority (the PCP of an 802.1Q tag, as
  // mlx5 takes it); 0 leaves the priority to the traffic class (link/raw_link.h).
  uint8_t service_level = 0;
};

struct TxPacket {
  std::array<uint8_t, 64> header{};  // BTH and extension headers
  uint32_t header_len = 0;
  std::array<std::span<const uint8_t>, kMaxGather> payload{};  // valid only during transmit()
  uint32_t payload_parts = 0;
  uint32_t payload_len = 0;
  uint8_t pad = 0;
  bool ect = true;  // mark ECN-capable (ECT(0))
  // The link sends what it has queued after this packet instead of waiting for a full batch: the
  // peer can start on those packets while the rest are built (one large message in flight).
  bool flush_after = false;
  const AddressVector* dest = nullptr;

  std::span<const uint8_t> headers() const { return {header.data(), header_len}; }
  // Ready for the next packet, keeping the header bytes and payload spans (header_len and
  // payload_parts say how many are valid; a builder overwrites those it uses). Constructing a
  // fresh TxPacket zeroes its few hundred bytes of header room, per packet on the hot path.
  void clear() {
    header_len = 0;
    payload_parts = 0;
    payload_len = 0;
    pad = 0;
    ect = true;
    flush_after = false;
    dest = nullptr;
  }
};

class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual void transmit(const TxPacket& packet) = 0;
};

// A packet that arrived, already parsed and ICRC-checked by the link.
struct RxPacket {
  const TransportHeaders* hdr = nullptr;
  std::span<const uint8_t> payload;
  Gid sgid{};  // the sender's address
  Gid dgid{};  // our address it was sent to
  uint16_t udp_src_port = 0;
  bool ce = false;  // the IP ECN field was Congestion Experienced
  // As received: the IPv4 TOS or IPv6 traffic class byte (DSCP and ECN) and the TTL or hop limit.
  // A UD receive's GRH carries them (IBA 11.4.1.2: the GRH as it arrived).
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
  bool roce_v1 = false;     // came as RoCE v1 (the GRH's traffic class and hop limit above)
  uint32_t flow_label = 0;  // RoCE v1: the GRH's (a UD receive's GRH area holds it)
};

}  // namespace uroce::wire
