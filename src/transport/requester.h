#pragma once
// Requester (IBA 9.7.2-9.7.4 and 9.8, 9.9 for UD): turns send WQEs into request packets, one per
// transmit() step, under the QP's PSN window, the READ/atomic limit, fences and the pacer.
#include <array>
#include <cstdint>

#include "transport/qp_context.h"

namespace uroce::transport {

class Requester {
 public:
  explicit Requester(QpContext& ctx) : ctx_(ctx) {}

  // ibv_post_send: validates and queues (or, in ERR, completes with WR_FLUSH_ERR).
  int post(const SendWr& wr);
  // What post() would answer about `wr` itself, without queuing it: 0 or EINVAL (the queue's
  // room is the caller's to check).
  int check(const SendWr& wr) const;
  // Free send queue slots.
  size_t room() const { return ctx_.sq.capacity() - (ctx_.sq.tail() - ctx_.sq.head()); }
  // Forgets all sending progress (QP reset).
  void reset() {
    cur_ = ctx_.sq.head();
    pkt_ = 0;
    resend_count_ = 0;
  }
  // Keeps the cursor inside the send queue after the completer retired WQEs.
  void clamp() {
    if (cur_ >= ctx_.sq.head()) return;
    cur_ = ctx_.sq.head();
    pkt_ = 0;
  }
  // Go-back-N (IBA 9.7.4.1.3): the next packet sent is the one with `psn`, which must lie in
  // [una, max_psn]. Drops any queued selective retransmission (they are all resent anyway).
  void rewind(Psn psn);
  // Selective repeat (IRN, Mittal et al. SIGCOMM 2018, section 3.1): resend only the packet with
  // `psn` (in [una, next_psn)), rebuilt from its WQE, ahead of new packets. New packets keep going
  // after it. Falls back to go-back-N from una if kMaxPendingResends are already queued.
  void resend(Psn psn);
  // `now` if a packet may go now, the pacer's next send time if only pacing holds it back, else
  // kNever (nothing to send, or waiting on ACKs / a fence / the RNR timer).
  Nanos ready_at(Nanos now) const;
  // Builds the next request packet; false when none may go at `now`.
  bool build(Nanos now, TxPacket& out);

 private:
  enum class Gate : uint8_t { kReady, kBlocked, kPaced };
  struct Next {
    uint64_t payload_offset = 0;
    uint32_t payload_len = 0;
    uint32_t psns = 1;  // PSNs this packet uses (a READ request uses one per response packet)
  };
  // The checks every request packet passes, new or resent, in one place: the QP state and the RNR
  // wait (may_transmit), then the pacer (pace).
  bool may_transmit(Nanos now) const;
  Gate pace(Nanos now, uint32_t payload_len, Nanos* when) const;
  // Whether the next new packet may go; `next` describes it.
  Gate gate(Nanos now, Next& next, Nanos* when) const;
  // Whether the retransmission of packet `pkt` of the WQE at `pos` may go; `next` describes it.
  Gate resend_gate(Nanos now, uint64_t pos, uint32_t pkt, Next& next, Nanos* when) const;
  // Carries out the BIND_MW and LOCAL_INV WQEs at the cursor, in posting order, and passes over
  // those already done; false if one must wait (fence, SQD) or failed.
  bool run_local_ops();
  bool local_op_due() const;  // run_local_ops() has something to do now
  // IBV_SEND_FENCE (IBA 10.8.3.4): `w` waits for earlier READs and atomics to complete.
  bool fenced(const SendWqe& w) const {
    return (w.flags & kSendFence) && ctx_.rd_atomic_outstanding > 0;
  }
  // The queued retransmission that goes next: its WQE position and packet index; false (and
  // stale entries skipped) if none.
  bool next_resend(uint64_t* pos, uint32_t* pkt) const;
  bool build_resend(Nanos now, uint64_t pos, uint32_t pkt, TxPacket& out);
  Next describe(const SendWqe& w, uint32_t pkt) const;
  // Assigns PSNs and checks lengths and local keys (IBA 10.6.3); false if the WQE failed.
  bool start(SendWqe& w);
  bool check_local_keys(const SendWqe& w) const;
  void fail(SendWqe& w, WcStatus status);
  uint8_t opcode_for(const SendWqe& w, bool first, bool last) const;
  bool per_packet_write(const SendWqe& w) const;  // QpConfig::write_segments applies to w
  // Headers of packet `pkt` of `w`, which carries `psn`.
  void fill_headers(const SendWqe& w, uint32_t pkt, Psn psn, const Next& next,
                    wire::TransportHeaders& h) const;
  // Points out.payload at the bytes of this packet of the WQE at `pos`; false if a local key no
  // longer holds.
  bool gather(uint64_t pos, SendWqe& w, const Next& next, TxPacket& out);
  // Headers and payload of packet `pkt` of the WQE at `pos`, carrying `psn`, into `out`; false
  // (and the WQE failed) if a local key no longer holds.
  bool assemble(uint64_t pos, SendWqe& w, uint32_t pkt, Psn psn, const Next& next, TxPacket& out);
  void count_retransmission(const Next& next);

  QpContext& ctx_;
  uint64_t cur_ = 0;  // send queue position of the WQE being sent
  uint32_t pkt_ = 0;  // packet (PSN) index within it
  // Selective retransmissions, oldest first (a fixed ring: bounded).
  std::array<Psn, kMaxPendingResends> resends_{};
  uint32_t resend_head_ = 0, resend_count_ = 0;
};

}  // namespace uroce::transport
