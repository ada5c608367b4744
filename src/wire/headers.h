#pragma once
// The IBA transport headers as plain values. Codec functions in packet.h move them to and from
// bytes at explicit offsets.
#include <cstdint>

#include "common/psn.h"

namespace uroce::wire {

struct Bth {
  uint8_t opcode = 0;
  bool solicited = false;  // SE
  bool mig_req = true;     // RoCE NICs send MigReq set (APM unused)
  uint8_t pad_count = 0;   // 0..3 bytes of payload padding
  uint8_t tver = 0;
  uint16_t pkey = 0xffff;
  bool fecn = false;     // RoCEv2: bit 7 of the reserved byte after the P_Key
  bool becn = false;     // RoCEv2: bit 6; set on CNPs
  uint32_t dest_qp = 0;  // 24 bits
  bool ack_req = false;
  Psn psn;
};

struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_length = 0;
};

// AETH syndrome (IBA 9.7.5.1, table 42): bits 6:5 select ACK, RNR NAK or NAK.
enum class AckType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};
inline constexpr uint8_t kCreditInvalid = 0x1f;  // "end-to-end credits not supported"

struct Aeth {
  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24 bits

  AckType type() const { return static_cast<AckType>((syndrome >> 5) & 3); }
  uint8_t value() const { return syndrome & 0x1f; }  // credit count, RNR timer or NAK code
  NakCode nak_code() const { return static_cast<NakCode>(value()); }

  static Aeth ack(uint32_t msn, uint8_t credits = kCreditInvalid) {
    return {static_cast<uint8_t>(credits & 0x1f), msn & 0xffffff};
  }
  static Aeth rnr_nak(uint32_t msn, uint8_t timer_code) {
    return {static_cast<uint8_t>(0x20 | (timer_code & 0x1f)), msn & 0xffffff};
  }
  static Aeth nak(uint32_t msn, NakCode code) {
    return {static_cast<uint8_t>(0x60 | static_cast<uint8_t>(code)), msn & 0xffffff};
  }
};

struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
};

struct AtomicAckEth {
  uint64_t original = 0;
};

struct Deth {
  uint32_t qkey = 0;
  uint32_t src_qp = 0;  // 24 bits
};

// Everything after the UDP header up to the payload. Only the headers the opcode table lists for
// `bth.opcode` are meaningful; the others keep their defaults.
struct TransportHeaders {
  Bth bth;
  Reth reth;
  Aeth aeth;
  AtomicEth atomic;
  AtomicAckEth atomic_ack;
  uint32_t imm = 0;        // ImmDt as it appears on the wire, read big-endian
  uint32_t ieth_rkey = 0;  // IETH: the R_Key to invalidate
  Deth deth;
  uint32_t xrc_srqn = 0;  // XRCETH: the XRC SRQ number (24 bits) at the target
};

}  // namespace uroce::wire
