#pragma once
// Completer (IBA 9.7.5.2, 9.7.6): ACKs, NAKs, READ responses and atomic ACKs -> retired WQEs and
// send completions; the local ACK timer, the retry and RNR-retry counters, and go-back-N. What
// selective repeat adds lives in SrSender (sr_sender.h), reached through a few hooks.
#include <cstdint>
#include <span>

#include "transport/qp_context.h"
#include "transport/requester.h"
#include "transport/sr_sender.h"

namespace uroce::transport {

class Completer {
 public:
  Completer(QpContext& ctx, Requester& requester) : ctx_(ctx), requester_(requester) {}

  void reset();
  void receive(const wire::TransportHeaders& h, std::span<const uint8_t> payload, Nanos now);
  // A request packet went out at `now`: arm the local ACK timer if it is not running.
  void on_sent(Nanos now);
  // Fires the ACK timer and ends an RNR wait when due.
  void on_timer(Nanos now);
  // Earliest pending timer (ACK timeout or end of an RNR wait); kNever if none.
  Nanos deadline() const;
  // Retires finished WQEs from the head of the send queue, in posting order, into completions.
  void retire();

 private:
  enum class Advance : uint8_t { kOk, kImpliedNak };
  // Acknowledges every SEND/WRITE packet up to and including `psn` (IBA 9.7.5.2.1: ACKs are
  // cumulative). A READ or atomic at or before `psn` without its response means the response
  // was lost: an implied NAK (IBA 9.7.5.2.1).
  Advance acknowledge_through(Psn psn, Nanos now);
  void progress(Nanos now);
  void dispatch(const wire::TransportHeaders& h, std::span<const uint8_t> payload, Nanos now);
  void on_ack(const wire::TransportHeaders& h, Nanos now);
  void on_rnr_nak(const wire::TransportHeaders& h, Nanos now);
  void on_nak(const wire::TransportHeaders& h, Nanos now);
  void on_read_response(const wire::TransportHeaders& h, std::span<const uint8_t> payload,
                        Nanos now);
  void on_atomic_ack(const wire::TransportHeaders& h, Nanos now);
  // Whether a READ response's opcode and length match its place in `w`.
  bool response_fits(const SendWqe& w, const wire::TransportHeaders& h,
                     std::span<const uint8_t> payload) const;
  // Selective repeat: places a READ response beyond una and marks it placed.
  void place_ahead(SendWqe& w, const wire::TransportHeaders& h, std::span<const uint8_t> payload);
  // Selective repeat: moves una over READ responses placed ahead of it (progress() follows).
  void advance_over_placed();
  // Go-back-N from una (or, with selective repeat, the packet at una alone), charged to the retry
  // counter; RETRY_EXC_ERR when it is spent.
  void retry(Nanos now, bool go_back = false);
  // Selective repeat: whether this sequence NAK shows holes denser than one per round trip can
  // repair (then the retry goes back N once).
  bool dense_holes();
  // Sends again what the responder misses at una, by the QP's loss recovery, without charge.
  void restart_at_una();
  // An implied NAK (IBA 9.7.5.2.1): restart_at_una() once per loss; further implied NAKs for it
  // are left to the ACK timer until something is acknowledged.
  void restart_once_at_una();
  // The WQE holding `psn` (at or after una), or nullptr.
  SendWqe* find(Psn psn);
  void fail(SendWqe& w, WcStatus status);

  QpContext& ctx_;
  Requester& requester_;
  uint8_t retry_left_ = QpConfig{}.retry_cnt;
  uint8_t rnr_retry_left_ = QpConfig{}.rnr_retry;
  Nanos ack_deadline_ = kNever;
  bool rnr_waiting_ = false;
  Psn rnr_psn_;
  // Set when go-back-N restarted from una and nothing was acknowledged since: further implied
  // NAKs for the same loss are left to the ACK timer instead of restarting again and again.
  bool retried_at_una_ = false;
  SrSender sr_;  // selective repeat only
};

}  // namespace uroce::transport
