// SrSender: the requester-side state selective repeat adds to go-back-N.
#include "transport/sr_sender.h"

#include "transport/timers.h"

namespace uroce::transport {

void SrSender::reset(Psn max_psn) {
  rtt_.reset(max_psn);
  fast_deadline_ = kNever;
  fast_fired_ = false;
  peer_done_valid_ = false;
  episode_ = false;
  placed_.reset();
}

void SrSender::on_sent(Psn max_psn, Nanos now, Nanos ack_timeout) {
  rtt_.on_sent(max_psn, now);
  if (fast_deadline_ == kNever && rtt_.has_estimate() && !fast_fired_)
    fast_deadline_ = add_saturating(now, rtt_.rto(ack_timeout));
}

void SrSender::on_progress(Psn una, Psn max_psn, Nanos now, Nanos ack_timeout) {
  rtt_.on_acknowledged(una, now);
  fast_fired_ = false;
  fast_deadline_ =
      rtt_.has_estimate() && max_psn != una ? add_saturating(now, rtt_.rto(ack_timeout)) : kNever;
}

bool SrSender::fast_resend_due(Nanos now, bool stalled) {
  if (fast_deadline_ > now) return false;
  fast_deadline_ = kNever;
  // una has not moved for a few round trips with packets out, so the hole there lost its NAK or
  // its resend (the responder names a hole once).
  if (fast_fired_ || !stalled) return false;
  fast_fired_ = true;
  rtt_.forget_sample();
  return true;
}

void SrSender::note_executed(Psn psn, Psn una) {
  if (peer_done_valid_ && peer_done_.before(una)) peer_done_valid_ = false;
  if (!peer_done_valid_ || psn.after(peer_done_)) {
    peer_done_ = psn;
    peer_done_valid_ = true;
  }
}

std::optional<Psn> SrSender::executed_from(Psn una) {
  if (!peer_done_valid_) return std::nullopt;
  if (peer_done_.before(una)) {
    peer_done_valid_ = false;
    return std::nullopt;
  }
  return peer_done_;
}

bool SrSender::dense_holes(Psn una, Psn max_psn) {
  // Selective repeat names one hole per round trip (a NAK carries one PSN). When holes come
  // denser than that (a window far above the bandwidth-delay product, or heavy loss), repairing
  // them one round trip apiece is slower than resending the window, so go back N once; the
  // responder drops the copies of what it holds. The next episode starts from what is in flight
  // then.
  if (!episode_ || !una.before(episode_end_)) {
    episode_ = true;
    episode_end_ = max_psn;
    episode_naks_ = 0;
  }
  if (++episode_naks_ <= kDenseHoles) return false;
  episode_end_ = max_psn;
  episode_naks_ = 0;
  return true;
}

bool SrSender::take_placed(Psn psn) {
  if (!placed_.test(slot(psn))) return false;
  placed_.reset(slot(psn));
  return true;
}

}  // namespace uroce::transport
