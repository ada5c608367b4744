#pragma once
// The vocabulary shared by the transport and the verbs objects above it: work requests,
// completions, and the narrow interfaces through which the transport reaches memory, completion
// queues and the wire without knowing how they are implemented.
//
// Enum values equal libibverbs' (ibv_wr_opcode, ibv_wc_status, ibv_wc_opcode, ibv_send_flags,
// ibv_access_flags) so the ABI layer converts by static_cast; src/api static_asserts it.
#include <array>
#include <cstdint>
#include <span>

#include "common/result.h"
#include "common/types.h"
#include "wire/headers.h"
#include "wire/opcode.h"
#include "wire/packet_io.h"

namespace uroce::transport {

enum class WrOpcode : uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCompareSwap = 5,
  kAtomicFetchAdd = 6,
  kLocalInvalidate = 7,
  kBindMw = 8,
  kSendWithInvalidate = 9,
};

enum SendFlags : uint32_t {
  kSendFence = 1u << 0,
  kSendSignaled = 1u << 1,
  kSendSolicited = 1u << 2,
  kSendInline = 1u << 3,
};

enum Access : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
  kAccessRemoteAtomic = 1u << 3,
  kAccessMwBind = 1u << 4,
};

enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};

enum class WcOpcode : uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompareSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInvalidate = 6,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

enum WcFlags : uint32_t {
  kWcGrh = 1u << 0,
  kWcWithImm = 1u << 1,
  kWcWithInvalidate = 1u << 3,  // 1 << 2 is IBV_WC_IP_CSUM_OK, which RoCE never reports
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};
inline constexpr uint32_t kMaxSge = 16;

using wire::AddressVector;

// What a BIND_MW work request binds (ibv_mw_bind_info plus the window): the window named by its
// current R_Key gets `new_rkey` (the same index; a type 2 window's consumer chooses the low byte,
// ibv_inc_rkey) over [addr, addr+length) of the MR named by `mr_lkey`, with `access` (remote
// read/write/atomic; length 0 unbinds a type 1 window).
struct MwBindInfo {
  uint32_t mw_rkey = 0;
  uint32_t new_rkey = 0;
  uint32_t mr_lkey = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
};

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t flags = 0;            // SendFlags
  std::span<const Sge> sg_list;  // read only during post_send
  uint32_t imm = 0;  // immediate data, wire value (ibv's __be32 converted to host order)
  uint32_t invalidate_rkey = 0;
  uint64_t remote_addr = 0;  // RDMA and atomics
  uint32_t rkey = 0;
  uint64_t compare_add = 0;  // atomics
  uint64_t swap = 0;
  MwBindInfo bind{};  // BIND_MW only
  // UD only.
  const AddressVector* ah = nullptr;
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  // XRC initiator only: the XRC SRQ at the target (ibv_send_wr qp_type.xrc.remote_srqn).
  uint32_t remote_srqn = 0;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg_list;  // read only during post_recv
};

struct Completion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_or_invalidated_rkey = 0;  // wire value (host order of the big-endian field)
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  uint32_t wc_flags = 0;  // WcFlags
  uint16_t pkey_index = 0;
  uint8_t sl = 0;
  // A receive completion of a message whose last packet had the BTH SE bit set: it wakes a CQ
  // armed with solicited_only (IBA 11.4.2.2). Not part of ibv_wc.
  bool solicited = false;
  // A receive with a GRH area (kWcGrh) whose packet came as RoCE v1: the area holds a v1 GRH, and
  // the ABI reports the network header type from it (wc.sl, ibv_init_ah_from_wc's GID index).
  bool roce_v1 = false;
};

// ---- What the transport needs from the objects above it ---------------------------------------

// Registered memory of one protection domain. Implemented by the verbs layer; the transport calls
// it for every local gather/scatter (lkey) and every remote access (rkey). A key is valid only if
// it exists, belongs to this PD, is not invalidated or deregistered, covers [addr, addr+length),
// and allows `access` (IBA 10.6.3, C10-17 .. C10-23); a type 2 memory window's R_Key also only
// through the QP it is bound to (`qpn`, IBA 10.6.7.2.2).
enum class KeyError : uint8_t { kNoSuchKey, kWrongPd, kOutOfBounds, kAccessDenied, kInvalidated };
class MemoryAccess {
 public:
  virtual ~MemoryAccess() = default;
  // Returns a host pointer to `length` bytes at `addr` (length 0 is always valid and may return
  // nullptr).
  virtual Result<uint8_t*, KeyError> local(uint32_t lkey, uint64_t addr, uint32_t length,
                                           uint32_t access) = 0;
  virtual Result<uint8_t*, KeyError> remote(uint32_t rkey, uint64_t addr, uint32_t length,
                                            uint32_t access, uint32_t qpn) = 0;
  // SEND with Invalidate (`remote`) or LOCAL_INV on QP `qpn` (IBA 10.6.7.2.4). Returns false if
  // the key may not be invalidated (no such key, other PD, not bound, a type 1 window or an MR,
  // or, remotely, a type 2 window bound to another QP).
  virtual bool invalidate(uint32_t rkey, uint32_t qpn, bool remote) = 0;
  // BIND_MW posted on QP `qpn` (IBA 10.6.7.2): kSuccess, or kMwBindErr if any rule is broken.
  virtual WcStatus bind_mw(const MwBindInfo& bind, uint32_t qpn) = 0;
};

// A completion queue as the transport sees it. push() returns false if the queue is full: the
// verbs layer reports that as a CQ overrun async event (IBA 11.4.2.1) and the QP goes to ERR.
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  virtual bool push(const Completion& c) = 0;
};

// Packets in and out are wire-level values (wire/packet_io.h), shared with the link.
using wire::PacketSink;
using wire::RxPacket;
using wire::TxPacket;

}  // namespace uroce::transport
