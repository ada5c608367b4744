#pragma once
// State one QP's engines share: configuration, queues, PSN bookkeeping, counters, and the sinks
// they report to. Internal to src/transport.
#include <cstdint>
#include <vector>

#include "cc/pacer.h"
#include "transport/qp.h"
#include "transport/recv_queue.h"
#include "transport/send_queue.h"

namespace uroce::transport {

// An RC requester sets AckReq at least this often within a long message (IBA 9.7.2: the
// requester decides; the last packet of every message always asks).
inline constexpr uint32_t kAckReqEveryPackets = 16;
// A responder ACKs after this many unacknowledged request packets even without AckReq.
inline constexpr uint32_t kAckEveryPackets = 16;
// Outstanding PSNs must stay below 2^23 so a PSN comparison is never ambiguous (IBA 9.7.1).
inline constexpr uint32_t kMaxPsnWindow = Psn::kHalf - 1;
// Largest message (IBA 9.4: 2^31 bytes).
inline constexpr uint64_t kMaxMessageBytes = 1ull << 31;
// Selective repeat: the responder's reorder buffer holds request packets up to this many PSNs
// past the expected one (a power of two, so PSN % slots stays consistent across the 2^24 wrap;
// as many as the default max_psn_window), and at most this many payload bytes. A selective-repeat
// requester keeps its window within both (kReorderBytes / MTU packets: 4096 at 1024 bytes, 1024
// at 4096), so an honest uroce peer never overflows it.
inline constexpr uint32_t kReorderSlots = 4096;
inline constexpr uint64_t kReorderBytes = 4u << 20;
// The selective-repeat requester's cap on unacknowledged PSNs at this MTU.
inline constexpr uint32_t reorder_window(uint32_t mtu) {
  const uint64_t by_bytes = kReorderBytes / (mtu == 0 ? 1 : mtu);
  return by_bytes < kReorderSlots ? static_cast<uint32_t>(by_bytes) : kReorderSlots;
}
// IBA 9.6.1.1.1: P_Keys match in their low 15 bits (the base); the top bit is the membership type.
inline constexpr uint16_t kPkeyBaseMask = 0x7fff;
// IBA 10.2.5: a work request's Q_Key with this bit set means "use the QP's own Q_Key".
inline constexpr uint32_t kQkeyUseQpQkey = 0x80000000u;
// Selective retransmissions queued at the requester (one per sequence NAK or timeout; the
// responder names one hole at a time, so a handful is plenty; more falls back to go-back-N).
inline constexpr uint32_t kMaxPendingResends = 16;
// A message with nothing queued behind it (a READ response alone in the response queue, a request
// with no WQE posted after it) goes to the link this many packets at a time rather than in the
// link's whole send batch (256): the peer, waiting for this message alone (a rendezvous of one
// large message), receives and places the first packets while the rest are built, instead of
// after the last one. A 256 KiB send call at MTU 4096.
inline constexpr uint32_t kLoneMessageFlushPackets = 64;

struct QpContext {
  QpContext(QpType t, uint32_t n, const QpCapabilities& c, MemoryAccess& mem, CompletionSink& scq,
            CompletionSink& rcq, RecvQueue* shared_rq)
      : type(t),
        qpn(n),
        caps(c),
        memory(mem),
        send_cq(scq),
        recv_cq(rcq),
        srq(shared_rq),
        own_rq(shared_rq ? 1 : c.max_recv_wr, c.max_recv_sge),
        sq(c.max_send_wr, c.max_send_sge) {}

  const QpType type;
  const uint32_t qpn;
  const QpCapabilities caps;
  MemoryAccess& memory;
  CompletionSink& send_cq;
  CompletionSink& recv_cq;
  RecvQueue* const srq;
  RecvQueue own_rq;
  SendQueue sq;
  // max_inline_data bytes per SQ slot, allocated by the first inline post: most QPs of a
  // many-connection server never send inline, and 100,000 of them would carry the buffers for
  // nothing (docs/security.md, "Scale").
  std::vector<uint8_t> inline_buf;

  QpConfig config;
  QpState state = QpState::kReset;
  QpCounters counters;
  cc::Pacer pacer;

  // Requester PSN space: [una, next_psn) is in flight; max_psn is one past the highest PSN ever
  // sent (next_psn < max_psn while retransmitting).
  Psn una, next_psn, max_psn;
  uint32_t rd_atomic_outstanding = 0;  // READ/atomic WQEs started and not yet retired
  // After an RNR NAK the requester sends nothing before this time (IBA 9.7.5.2.8).
  Nanos rnr_hold_until = 0;
  // Set by an engine that hit an error the spec makes fatal for the QP; the QP moves to ERR
  // once the engine returns (so the error completion goes out before the flushes).
  bool error_pending = false;

  XrcSrqDirectory* xrc_srqs = nullptr;  // XRC target QPs only

  RecvQueue& rq() { return srq ? *srq : own_rq; }
  // RC and both halves of XRC: acknowledged, retried, in order (XRC is RC with an XRCETH).
  bool reliable() const {
    return type == QpType::kRc || type == QpType::kXrcSend || type == QpType::kXrcRecv;
  }
  uint32_t mtu() const { return config.path_mtu_bytes; }
  uint32_t in_flight() const { return static_cast<uint32_t>(next_psn.distance_from(una)); }
  bool selective_repeat() const {
    return reliable() && config.loss_recovery == LossRecovery::kSelectiveRepeat;
  }
  // The inline slot of the WQE at `pos`; allocates the buffer the first time.
  uint8_t* inline_slot(uint64_t pos) {
    if (inline_buf.empty())
      inline_buf.resize(static_cast<size_t>(sq.capacity()) * caps.max_inline_data);
    return inline_buf.data() + static_cast<size_t>(sq.slot(pos)) * caps.max_inline_data;
  }
  // Completion queues: a full CQ is an overrun (IBA 11.4.2.1); the QP goes to ERR.
  void push_send(const Completion& c) {
    if (!send_cq.push(c)) error_pending = true;
  }
  void push_recv(const Completion& c) {
    if (!recv_cq.push(c)) error_pending = true;
  }
};

// Packets a message of `length` bytes needs at this MTU (a zero-length message is one packet).
inline uint32_t packets_for(uint64_t length, uint32_t mtu) {
  return length == 0 ? 1 : static_cast<uint32_t>((length + mtu - 1) / mtu);
}

// The send-queue completion for `w` (opcode, length, QP number) with `status`.
Completion send_completion(const QpContext& ctx, const SendWqe& w, WcStatus status);

// Copies `data`, then `more`, into the scatter list starting `offset` bytes into it; false if a
// key fails (local write access, IBA 10.6.3) or the data runs past the list, and then nothing has
// been written.
bool scatter(MemoryAccess& memory, const Sge* sge, uint32_t num_sge, uint64_t offset,
             std::span<const uint8_t> data, std::span<const uint8_t> more = {});

}  // namespace uroce::transport
