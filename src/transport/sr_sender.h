#pragma once
// What selective repeat adds to the completer (transport/README.md): finding the holes the
// responder cannot name (the catch-up from the furthest executed PSN, the fast retransmission
// timer), noticing holes too dense to repair one at a time, and READ responses placed ahead of
// una. The completer's go-back-N path uses none of it.
#include <bitset>
#include <cstdint>
#include <optional>

#include "common/psn.h"
#include "common/types.h"
#include "transport/rtt_estimator.h"

namespace uroce::transport {

class SrSender {
 public:
  // More sequence NAKs than this before una passes what was in flight at the first of them make
  // the requester go back N once.
  static constexpr uint32_t kDenseHoles = 4;
  // READ response PSNs in (una, una + kReadBitmapSlots) can be placed ahead of una.
  static constexpr uint32_t kReadBitmapSlots = 512;

  void reset(Psn max_psn);

  // ---- Fast retransmission (IRN's RTO_low, section 3.1) ----
  // A request packet went out: a new one may start a round-trip sample, and the fast timer is
  // armed if there is an estimate and it has not fired at this una.
  void on_sent(Psn max_psn, Nanos now, Nanos ack_timeout);
  // una moved: the round-trip sample may end, and the fast timer restarts while packets are out.
  void on_progress(Psn una, Psn max_psn, Nanos now, Nanos ack_timeout);
  // A retransmission went or is about to go (Karn).
  void forget_rtt_sample() { rtt_.forget_sample(); }
  Nanos fast_deadline() const { return fast_deadline_; }
  void stop_fast_timer() { fast_deadline_ = kNever; }
  // The fast timer expired by `now` (and is now off). Then true if the packet at una should go
  // again: `stalled` (packets out, the ACK timer not due) and not yet resent by this timer at this
  // una. Charged to nothing: the ACK timeout stays the backstop that spends retry_cnt.
  bool fast_resend_due(Nanos now, bool stalled);

  // ---- Catch-up ----
  // A response showed the responder executed every request up to `psn`: remember the furthest.
  void note_executed(Psn psn, Psn una);
  // The furthest executed PSN if it is not behind una (then forgotten: a PSN left behind would
  // look ahead again after 2^23 more).
  std::optional<Psn> executed_from(Psn una);

  // ---- Dense holes ----
  // A sequence NAK arrived with [una, max_psn) in flight: true if holes come denser than one per
  // round trip can repair (then the requester goes back N once and a new count starts).
  bool dense_holes(Psn una, Psn max_psn);

  // ---- READ responses placed ahead of una, by PSN modulo kReadBitmapSlots ----
  bool placed(Psn psn) const { return placed_.test(slot(psn)); }
  void mark_placed(Psn psn) { placed_.set(slot(psn)); }
  // Whether `psn` was placed; forgets it.
  bool take_placed(Psn psn);
  bool any_placed() const { return placed_.any(); }

 private:
  static uint32_t slot(Psn psn) { return psn.value() % kReadBitmapSlots; }

  RttEstimator rtt_;
  Nanos fast_deadline_ = kNever;
  bool fast_fired_ = false;  // the packet at this una was already resent by the fast timer
  Psn peer_done_;
  bool peer_done_valid_ = false;
  // Sequence NAKs since the episode began, until una passes episode_end_.
  bool episode_ = false;
  Psn episode_end_;
  uint32_t episode_naks_ = 0;
  std::bitset<kReadBitmapSlots> placed_;
};

}  // namespace uroce::transport
