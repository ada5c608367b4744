// Completer: responses -> completions, retransmission and the requester's timers.
#include "transport/completer.h"

#include <algorithm>
#include <cstring>

#include "transport/timers.h"

namespace uroce::transport {

void Completer::reset() {
  retry_left_ = ctx_.config.retry_cnt;
  rnr_retry_left_ = ctx_.config.rnr_retry;
  ack_deadline_ = kNever;
  rnr_waiting_ = false;
  retried_at_una_ = false;
  sr_.reset(ctx_.max_psn);
  ctx_.rnr_hold_until = 0;
}

void Completer::on_sent(Nanos now) {
  if (!ctx_.reliable()) return;
  if (ctx_.selective_repeat()) sr_.on_sent(ctx_.max_psn, now, ack_timeout_ns(ctx_.config.timeout));
  if (ack_deadline_ != kNever) return;
  ack_deadline_ = add_saturating(now, ack_timeout_ns(ctx_.config.timeout));
}

Nanos Completer::deadline() const {
  return std::min(
      {ack_deadline_, rnr_waiting_ ? ctx_.rnr_hold_until : kNever, sr_.fast_deadline()});
}

void Completer::on_timer(Nanos now) {
  if (ctx_.state == QpState::kErr || ctx_.state == QpState::kReset) {
    ack_deadline_ = kNever;
    sr_.stop_fast_timer();
    rnr_waiting_ = false;
    return;
  }
  if (rnr_waiting_ && now >= ctx_.rnr_hold_until) {
    rnr_waiting_ = false;
    ctx_.rnr_hold_until = 0;
  }
  // Selective repeat's fast retransmission: the packet at una, once, charged to nothing.
  if (sr_.fast_resend_due(
          now, ctx_.selective_repeat() && ctx_.max_psn != ctx_.una && ack_deadline_ > now))
    requester_.resend(ctx_.una);
  if (ack_deadline_ > now) return;
  ack_deadline_ = kNever;
  if (ctx_.max_psn == ctx_.una) return;
  // IBA 9.7.6.1.3: no response within the local ACK timeout -> resend from the oldest
  // unacknowledged PSN, charged to the retry counter. Selective repeat resends that one packet
  // only and carries on (IRN's timeout, section 3.1): the responder then names the next hole.
  ++ctx_.counters.local_ack_timeouts;
  retry(now);
}

bool Completer::dense_holes() {
  if (!ctx_.selective_repeat() || !sr_.dense_holes(ctx_.una, ctx_.max_psn)) return false;
  ++ctx_.counters.sr_go_backs;
  return true;
}

void Completer::retry(Nanos now, bool go_back) {
  (void)now;
  if (retry_left_ == 0) {
    // IBA 9.7.6.1.3: retries exhausted -> the WQE fails with RETRY_EXC_ERR and the QP enters ERR.
    if (SendWqe* w = find(ctx_.una)) fail(*w, WcStatus::kRetryExcErr);
    return;
  }
  --retry_left_;
  retried_at_una_ = true;
  ack_deadline_ = kNever;  // re-armed by the retransmission
  if (go_back) {
    sr_.forget_rtt_sample();
    requester_.rewind(ctx_.una);
  } else {
    restart_at_una();
  }
}

void Completer::restart_at_una() {
  sr_.forget_rtt_sample();
  // Selective repeat: the responder kept what came after the hole, so only the packet at una
  // goes again (for a READ, a request for the rest of it, IBA 9.7.4.1.2). Go-back-N resends
  // everything from una (IBA 9.7.4.1.3).
  if (ctx_.selective_repeat())
    requester_.resend(ctx_.una);
  else
    requester_.rewind(ctx_.una);
}

void Completer::restart_once_at_una() {
  if (retried_at_una_) return;
  retried_at_una_ = true;
  restart_at_una();
}

SendWqe* Completer::find(Psn psn) {
  for (uint64_t pos = ctx_.sq.head(); pos < ctx_.sq.tail(); ++pos) {
    SendWqe& w = ctx_.sq.at(pos);
    if (w.state == WqeState::kPosted) break;
    if (w.state != WqeState::kDone && w.contains(psn)) return &w;
  }
  return nullptr;
}

void Completer::fail(SendWqe& w, WcStatus status) {
  w.state = WqeState::kDone;
  w.status = status;
  ack_deadline_ = kNever;
}

Completer::Advance Completer::acknowledge_through(Psn psn, Nanos now) {
  const Psn before = ctx_.una;
  Advance result = Advance::kOk;
  for (uint64_t pos = ctx_.sq.head(); pos < ctx_.sq.tail(); ++pos) {
    SendWqe& w = ctx_.sq.at(pos);
    // Finished in this same call and not retired yet (a READ or atomic answer just placed).
    if (w.state == WqeState::kDone && w.status == WcStatus::kSuccess) continue;
    if (w.state == WqeState::kPosted || w.state == WqeState::kDone) break;
    if (w.first_psn.after(psn)) break;
    if (w.is_rd_atomic()) {
      result = Advance::kImpliedNak;
      break;
    }
    if (w.last_psn().after(psn)) {
      if (ctx_.una.before(psn + 1)) ctx_.una = psn + 1;  // part of a long message
      break;
    }
    w.state = WqeState::kDone;
    ctx_.una = w.last_psn() + 1;
  }
  if (ctx_.una != before) progress(now);
  return result;
}

void Completer::progress(Nanos now) {
  // Forward progress restores both retry budgets (IBA 9.7.6.1.3 counts consecutive retries).
  retry_left_ = ctx_.config.retry_cnt;
  rnr_retry_left_ = ctx_.config.rnr_retry;
  retried_at_una_ = false;
  if (ctx_.selective_repeat())
    sr_.on_progress(ctx_.una, ctx_.max_psn, now, ack_timeout_ns(ctx_.config.timeout));
  // An ACK for packets sent before a go-back-N restart may overtake the restart.
  if (ctx_.next_psn.before(ctx_.una)) requester_.rewind(ctx_.una);
  ack_deadline_ =
      ctx_.max_psn == ctx_.una ? kNever : add_saturating(now, ack_timeout_ns(ctx_.config.timeout));
}

void Completer::receive(const wire::TransportHeaders& h, std::span<const uint8_t> payload,
                        Nanos now) {
  if (!ctx_.reliable() || (ctx_.state != QpState::kRts && ctx_.state != QpState::kSqd)) {
    ++ctx_.counters.rx_dropped;
    return;
  }
  const Psn psn = h.bth.psn;
  // Only PSNs in flight can be answered; older ones are duplicates (a re-ACK, a replayed
  // response) and newer ones are not ours (IBA 9.7.5.2.1, "ghost" responses).
  if (psn.before(ctx_.una) || !psn.before(ctx_.max_psn)) {
    ++ctx_.counters.duplicate_requests;
    ++ctx_.counters.rx_dropped;
    return;
  }
  if (!ctx_.selective_repeat()) {
    dispatch(h, payload, now);
    return;
  }
  // Selective repeat. Responses come in PSN order of execution, so any response tells that the
  // responder executed every request up to it (up to the PSN before a NAK's): remember the
  // furthest, even when this response cannot be used now (a READ response or atomic ACK behind a
  // missing one is dropped, IBA 9.7.5.2.1).
  const bool is_nak = wire::opcode_info(h.bth.opcode).kind == wire::Kind::kAck &&
                      h.aeth.type() != wire::AckType::kAck;
  sr_.note_executed(is_nak ? psn - 1 : psn, ctx_.una);
  dispatch(h, payload, now);
  if (ctx_.state != QpState::kRts && ctx_.state != QpState::kSqd) return;
  // Catch up: everything up to the furthest executed PSN was executed, so SEND/WRITE packets
  // there are acknowledged, and the first READ/atomic whose answer was dropped is asked for again
  // now, not after a timeout (the responder replays it from its resource, IBA 9.7.5.1.2). This is
  // the requester's half of naming the next hole at once.
  const std::optional<Psn> done = sr_.executed_from(ctx_.una);
  if (done && acknowledge_through(*done, now) == Advance::kImpliedNak) restart_once_at_una();
}

void Completer::dispatch(const wire::TransportHeaders& h, std::span<const uint8_t> payload,
                         Nanos now) {
  const wire::OpcodeInfo& info = wire::opcode_info(h.bth.opcode);
  switch (info.kind) {
    case wire::Kind::kAck:
      switch (h.aeth.type()) {
        case wire::AckType::kAck:
          on_ack(h, now);
          return;
        case wire::AckType::kRnrNak:
          on_rnr_nak(h, now);
          return;
        case wire::AckType::kNak:
          on_nak(h, now);
          return;
        case wire::AckType::kReserved:
          break;
      }
      break;
    case wire::Kind::kReadResponse:
      on_read_response(h, payload, now);
      return;
    case wire::Kind::kAtomicAck:
      on_atomic_ack(h, now);
      return;
    default:
      break;
  }
  ++ctx_.counters.rx_dropped;
}

void Completer::on_ack(const wire::TransportHeaders& h, Nanos now) {
  if (acknowledge_through(h.bth.psn, now) == Advance::kImpliedNak) restart_once_at_una();
}

void Completer::on_rnr_nak(const wire::TransportHeaders& h, Nanos now) {
  ++ctx_.counters.rnr_naks_received;
  ++ctx_.counters.naks_received;
  const Psn psn = h.bth.psn;
  // The NAK acknowledges everything before its PSN (IBA 9.7.5.2.8).
  if (acknowledge_through(psn - 1, now) == Advance::kImpliedNak) {
    restart_once_at_una();
    return;
  }
  SendWqe* w = find(psn);
  if (w == nullptr) return;
  if (rnr_waiting_ && psn == rnr_psn_) return;  // a duplicate of the NAK being waited out
  if (rnr_retry_left_ == 0) {
    fail(*w, WcStatus::kRnrRetryExcErr);
    return;
  }
  if (rnr_retry_left_ != kRnrRetryForever) --rnr_retry_left_;
  ctx_.rnr_hold_until = add_saturating(now, rnr_timer_ns(h.aeth.value()));
  rnr_waiting_ = true;
  rnr_psn_ = psn;
  ack_deadline_ = kNever;
  requester_.rewind(psn);
}

void Completer::on_nak(const wire::TransportHeaders& h, Nanos now) {
  ++ctx_.counters.naks_received;
  const Psn psn = h.bth.psn;
  if (acknowledge_through(psn - 1, now) == Advance::kImpliedNak) {
    restart_once_at_una();
    return;
  }
  SendWqe* w = find(psn);
  if (w == nullptr) return;
  switch (h.aeth.nak_code()) {
    case wire::NakCode::kPsnSequenceError:
      // IBA 9.7.5.2.3: resend from the PSN the responder expects.
      ++ctx_.counters.seq_naks_received;
      // The responder NAKs a gap once; the same NAK again before any progress is a duplicate
      // from the network and must not cost another retry.
      if (retried_at_una_ && psn == ctx_.una) return;
      retry(now, dense_holes());
      return;
    case wire::NakCode::kInvalidRequest:
      fail(*w, WcStatus::kRemInvReqErr);
      return;
    case wire::NakCode::kRemoteAccessError:
      fail(*w, WcStatus::kRemAccessErr);
      return;
    case wire::NakCode::kRemoteOperationalError:
      fail(*w, WcStatus::kRemOpErr);
      return;
    case wire::NakCode::kInvalidRdRequest:
      fail(*w, WcStatus::kRemInvRdReqErr);
      return;
  }
  ++ctx_.counters.rx_dropped;  // reserved NAK code
}

void Completer::on_read_response(const wire::TransportHeaders& h, std::span<const uint8_t> payload,
                                 Nanos now) {
  const Psn psn = h.bth.psn;
  SendWqe* w = find(psn);
  if (w == nullptr || !w->is_read()) {
    ++ctx_.counters.rx_dropped;
    return;
  }
  if (ctx_.selective_repeat() && psn != ctx_.una) {
    // Selective repeat places a response that overtook a lost one right away: the requester
    // knows where each response PSN of its READ goes. The hole is asked for by the catch-up in
    // receive() (a READ request for the rest, from the first missing PSN).
    place_ahead(*w, h, payload);
    return;
  }
  // Validated before it acts: a malformed response acknowledges nothing either.
  if (!response_fits(*w, h, payload)) {
    ++ctx_.counters.rx_dropped;  // malformed response: the ACK timer recovers
    return;
  }
  // A READ response also acknowledges every request before the READ (IBA 9.7.5.2.1).
  if (acknowledge_through(w->first_psn - 1, now) == Advance::kImpliedNak || psn != ctx_.una) {
    // A response beyond the one expected: the ones between were lost (an implied NAK). Responses
    // arrive in order, so ask again from the first missing PSN.
    restart_once_at_una();
    return;
  }
  const uint64_t offset =
      uint64_t{static_cast<uint32_t>(psn.distance_from(w->first_psn))} * ctx_.mtu();
  if (!scatter(ctx_.memory, w->sge, w->num_sge, offset, payload)) {
    fail(*w, WcStatus::kLocProtErr);
    return;
  }
  ctx_.una = psn + 1;
  if (psn == w->last_psn()) w->state = WqeState::kDone;
  if (ctx_.selective_repeat()) advance_over_placed();
  progress(now);
}

bool Completer::response_fits(const SendWqe& w, const wire::TransportHeaders& h,
                              std::span<const uint8_t> payload) const {
  // IBA 9.7.5.2.1 / C9-118: a response's opcode and length must be the ones its place in the
  // READ calls for.
  const uint32_t mtu = ctx_.mtu();
  const uint32_t idx = static_cast<uint32_t>(h.bth.psn.distance_from(w.first_psn));
  const uint64_t offset = uint64_t{idx} * mtu;
  const uint64_t expect = std::min<uint64_t>(mtu, w.length - std::min(w.length, offset));
  const bool last = idx + 1 == w.npsn;
  const wire::Place place = wire::opcode_info(h.bth.opcode).place;
  const bool place_ok = last ? (place == wire::Place::kLast || place == wire::Place::kOnly)
                             : (place == wire::Place::kFirst || place == wire::Place::kMiddle);
  return place_ok && payload.size() == expect;
}

void Completer::place_ahead(SendWqe& w, const wire::TransportHeaders& h,
                            std::span<const uint8_t> payload) {
  const Psn psn = h.bth.psn;
  const int32_t ahead = psn.distance_from(ctx_.una);
  // Bounded: only the SrSender::kReadBitmapSlots PSNs after una are tracked; later ones wait for
  // the re-request (and are counted as dropped now).
  if (ahead <= 0 || static_cast<uint32_t>(ahead) >= SrSender::kReadBitmapSlots ||
      !response_fits(w, h, payload)) {
    ++ctx_.counters.rx_dropped;
    return;
  }
  if (sr_.placed(psn)) {
    ++ctx_.counters.rx_dropped;  // a copy of a response already placed
    return;
  }
  const uint64_t offset =
      uint64_t{static_cast<uint32_t>(psn.distance_from(w.first_psn))} * ctx_.mtu();
  if (!scatter(ctx_.memory, w.sge, w.num_sge, offset, payload)) {
    fail(w, WcStatus::kLocProtErr);
    return;
  }
  sr_.mark_placed(psn);
}

void Completer::advance_over_placed() {
  // una moves over responses placed ahead of it, READ by READ; each step clears one bit, so this
  // ends within SrSender::kReadBitmapSlots steps.
  while (sr_.any_placed()) {
    SendWqe* w = find(ctx_.una);
    if (w == nullptr || !w->is_read()) break;
    if (!sr_.take_placed(ctx_.una)) break;
    if (ctx_.una == w->last_psn()) w->state = WqeState::kDone;
    ctx_.una += 1;
  }
}

void Completer::on_atomic_ack(const wire::TransportHeaders& h, Nanos now) {
  const Psn psn = h.bth.psn;
  SendWqe* w = find(psn);
  if (w == nullptr || !w->is_atomic()) {
    ++ctx_.counters.rx_dropped;
    return;
  }
  if (acknowledge_through(psn - 1, now) == Advance::kImpliedNak || psn != ctx_.una) {
    restart_once_at_una();
    return;
  }
  // The original value lands in the local buffer in host order, as verbs returns it.
  uint8_t bytes[8];
  std::memcpy(bytes, &h.atomic_ack.original, 8);
  if (!scatter(ctx_.memory, w->sge, w->num_sge, 0, bytes)) {
    fail(*w, WcStatus::kLocProtErr);
    return;
  }
  w->atomic_original = h.atomic_ack.original;
  w->state = WqeState::kDone;
  ctx_.una = psn + 1;
  progress(now);
}

void Completer::retire() {
  // Bounded by the send queue's size: each step pops one WQE.
  while (!ctx_.sq.empty()) {
    const SendWqe& w = ctx_.sq.at(ctx_.sq.head());
    if (w.state != WqeState::kDone) break;
    const bool ok = w.status == WcStatus::kSuccess;
    if (!ok || w.signaled) ctx_.push_send(send_completion(ctx_, w, w.status));
    if (w.is_rd_atomic() && w.npsn != 0) --ctx_.rd_atomic_outstanding;
    ctx_.sq.pop();
    if (!ok) {
      // IBA 10.8.3.3: an errored send WQE takes the QP to ERR; the rest flush.
      ctx_.error_pending = true;
      break;
    }
  }
}

}  // namespace uroce::transport
