// Responder: request packets -> memory, receive completions and responses.
#include "transport/responder.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "wire/packet.h"

namespace uroce::transport {

Responder::Responder(QpContext& ctx) : ctx_(ctx) {
  reset();
}

void Responder::reset() {
  started_ = false;
  epsn_ = ctx_.config.rq_psn;
  msn_ = 0;
  nak_outstanding_ = false;
  unacked_ = 0;
  in_msg_ = InMessage::kNone;
  recv_.reset();
  recv_offset_ = write_va_ = write_left_ = write_total_ = 0;
  write_rkey_ = 0;
  uc_dropping_ = false;
  cur_srq_ = nullptr;
  msg_srqn_ = 0;
  reorder_.release_storage();
  resources_.reset(ctx_.config.max_dest_rd_atomic);
  responses_.reset(ctx_.config.max_dest_rd_atomic);
  uncharge_responses(responses_charged_);
}

Responder::~Responder() {
  uncharge_responses(responses_charged_);
}

bool Responder::charge_response() {
  if (ctx_.config.totals == nullptr) return true;
  if (!ctx_.config.totals->take_response()) return false;
  ++responses_charged_;
  return true;
}

void Responder::uncharge_responses(uint32_t n) {
  if (ctx_.config.totals == nullptr || n == 0) return;
  ctx_.config.totals->give_responses(n);
  responses_charged_ -= n;
}

Responder::Resource* Responder::take_resource() {
  const uint64_t before = ctx_.counters.responses_dropped;
  Resource* r = resources_.take(ctx_.counters.responses_dropped);
  // take() counts the queued replay it took over; that response will never be sent.
  if (ctx_.counters.responses_dropped != before) uncharge_responses(1);
  return r;
}

void Responder::configure() {
  // The verbs layer may hand over the full attribute set again at RTS; once requests have
  // arrived the expected PSN and the resources in use must not be reset under them.
  if (started_) return;
  epsn_ = ctx_.config.rq_psn;
  resources_.resize(ctx_.config.max_dest_rd_atomic);
  // Nothing has arrived, so nothing is queued: the ring can take its size.
  responses_.reset(ctx_.config.max_dest_rd_atomic);
}

void Responder::flush_current_recv() {
  if (!recv_) return;
  cur_srq_ = nullptr;
  if (ctx_.type == QpType::kXrcRecv) {
    cur_srq_ = find_xrc_srq(msg_srqn_);
    if (cur_srq_ == nullptr) {  // the SRQ is gone, and its CQ with it
      recv_.reset();
      return;
    }
  }
  complete_recv(WcStatus::kWrFlushErr, WcOpcode::kRecv, 0, 0, 0);
  cur_srq_ = nullptr;
}

// ---- Receive ---------------------------------------------------------------------------------

void Responder::receive(const RxPacket& pkt, Nanos now) {
  const QpState s = ctx_.state;
  if (s != QpState::kRtr && s != QpState::kRts && s != QpState::kSqd && s != QpState::kSqe) {
    ++ctx_.counters.rx_dropped;  // IBA 10.3.1: only RTR and later states receive
    return;
  }
  started_ = true;
  switch (ctx_.type) {
    case QpType::kRc:
    case QpType::kXrcRecv:
      receive_rc(pkt, now);
      return;
    case QpType::kXrcSend:
      ++ctx_.counters.rx_dropped;
      return;
    case QpType::kUc:
      receive_uc(pkt);
      return;
    case QpType::kUd:
      receive_ud(pkt);
      return;
  }
}

void Responder::receive_rc(const RxPacket& pkt, Nanos now) {
  (void)now;
  const wire::TransportHeaders& h = *pkt.hdr;
  const int32_t d = h.bth.psn.distance_from(epsn_);
  if (d < 0) {  // IBA 9.7.5.1.2: a duplicate is answered again, never executed again
    ++ctx_.counters.duplicate_requests;
    on_duplicate(h);
    return;
  }
  if (d > 0) {
    // IBA 9.7.5.1.1 / 9.7.5.2.3: one PSN Sequence Error NAK (carrying the expected PSN) per
    // gap; later packets are dropped silently until the expected one arrives.
    ++ctx_.counters.out_of_sequence;
    if (ctx_.selective_repeat()) {
      hold(h, pkt.payload, d);
      return;
    }
    if (!nak_outstanding_) {
      ++ctx_.counters.seq_naks_sent;
      queue_nak(epsn_, wire::Aeth::nak(msn_, wire::NakCode::kPsnSequenceError));
      nak_outstanding_ = true;
    } else {
      ++ctx_.counters.rx_dropped;
    }
    return;
  }
  nak_outstanding_ = false;
  if (!apply(h, pkt.payload)) {
    reorder_.clear();
  } else if (!reorder_.empty()) {
    release_held(h.bth.psn + 1);
    drain();
  }
}

bool Responder::apply(const wire::TransportHeaders& h, std::span<const uint8_t> payload) {
  const wire::OpcodeInfo& info = wire::opcode_info(h.bth.opcode);
  Verdict v = check_op_sequence(info);
  cur_srq_ = nullptr;
  if (v == Verdict::kAccepted && ctx_.type == QpType::kXrcRecv) v = resolve_xrc_srq(h, info);
  if (v == Verdict::kAccepted) v = check_length(info, payload.size());
  if (v == Verdict::kAccepted) v = execute(h, info, payload);
  finish(v, h, info);
  cur_srq_ = nullptr;
  return v == Verdict::kAccepted || v == Verdict::kResponded;
}

Responder::Verdict Responder::resolve_xrc_srq(const wire::TransportHeaders& h,
                                              const wire::OpcodeInfo& info) {
  // Annex A14: the XRCETH must name an XRC SRQ of the target QP's XRC domain; otherwise the
  // request is answered with NAK Remote Access Error (class C: the target QP enters ERR).
  cur_srq_ = find_xrc_srq(h.xrc_srqn);
  if (cur_srq_ == nullptr) {
    ++ctx_.counters.xrc_bad_srqn;
    return Verdict::kAccess;
  }
  // Every packet of a message names the SRQ its first one did (its receive WQE is from there).
  if (!info.starts_message() && in_msg_ != InMessage::kNone && h.xrc_srqn != msg_srqn_) {
    cur_srq_ = nullptr;
    return Verdict::kInvalid;
  }
  if (info.starts_message()) msg_srqn_ = h.xrc_srqn;
  return Verdict::kAccepted;
}

// ---- Selective repeat: the reorder buffer ------------------------------------------------------
//
// IRN (Mittal et al., SIGCOMM 2018, section 3) keeps out-of-order packets and places them at
// once, which needs every packet to say where it goes. RoCE packets do not: only a WRITE's first
// packet has a RETH, a SEND's middle packets do not say which receive WQE or offset they fill, and
// the order of receive-WQE consumption, WRITE-with-immediate completions, atomics and READs is
// the PSN order (IBA 9.5, 9.7.5.1). So the packets wait here, with their standard headers, and go
// through the ordinary in-order path (every 9.7.5.1 check included) once the hole before them
// fills. What selective repeat saves is the retransmission of everything after the hole.

void Responder::hold(const wire::TransportHeaders& h, std::span<const uint8_t> payload, int32_t d) {
  switch (reorder_.hold(h, payload, d, ctx_.mtu(), ctx_.config.totals)) {
    case ReorderBuffer::Hold::kHeld:
      ++ctx_.counters.ooo_buffered;
      break;
    case ReorderBuffer::Hold::kDuplicate:
      ++ctx_.counters.ooo_duplicates;
      ++ctx_.counters.duplicate_requests;
      ++ctx_.counters.rx_dropped;
      return;
    case ReorderBuffer::Hold::kNoRoom:
      // A peer whose window is larger than the buffer, a ghost, or a packet longer than any valid
      // one: a counted drop. The requester recovers it by going back or by its timer.
      ++ctx_.counters.ooo_dropped;
      ++ctx_.counters.rx_dropped;
      break;
  }
  // One NAK per hole (the go-back-N rule, IBA 9.7.5.2.3): it names the first missing PSN, and a
  // selective-repeat requester resends that packet only.
  if (!nak_outstanding_) queue_seq_nak();
}

void Responder::drain() {
  // Bounded: each step frees a slot, and there are kReorderSlots.
  ReorderBuffer::Packet next;
  while (reorder_.take(epsn_, next)) {
    const Psn from = epsn_ + 1;
    if (!apply(next.hdr, next.payload)) {
      // RNR NAK or a fatal NAK: the requester goes back to that PSN (IBA 9.7.5.2.8) or the QP
      // stops, so what is held would only be duplicates.
      reorder_.clear();
      return;
    }
    release_held(from);
  }
  if (!reorder_.empty()) {
    // The filled hole revealed the next one (the slot at epsn is empty), and packets behind it
    // are already here: name it at once rather than waiting for another out-of-order arrival. The
    // NAK also acknowledges everything before it (IBA 9.7.5.2.3).
    queue_seq_nak();
  } else if (unacked_ > 0) {
    // Caught up: acknowledge what the held packets completed, so the requester retires them now.
    queue_ack(epsn_ - 1);
  }
}

void Responder::queue_seq_nak() {
  ++ctx_.counters.seq_naks_sent;
  nak_outstanding_ = true;
  const wire::Aeth aeth = wire::Aeth::nak(msn_, wire::NakCode::kPsnSequenceError);
  if (Response* ack = responses_.pending_ack()) {
    // The NAK acknowledges everything before its PSN (IBA 9.7.5.2.3): it replaces an ACK not
    // yet sent instead of following it.
    ++ctx_.counters.naks_sent;
    ack->psn = epsn_;
    ack->aeth = aeth;
    unacked_ = 0;
    return;
  }
  queue_nak(epsn_, aeth);
}

void Responder::release_held(Psn from) {
  // A PSN a READ's responses use is not a request of its own.
  ctx_.counters.rx_dropped += reorder_.release(from, epsn_);
}

Responder::Verdict Responder::check_op_sequence(const wire::OpcodeInfo& info) const {
  // IBA 9.7.5.1.3 (opcode sequence check): a message's packets come FIRST, MIDDLE*, LAST, and
  // nothing else may interleave.
  const bool continues = info.place == wire::Place::kMiddle || info.place == wire::Place::kLast;
  switch (in_msg_) {
    case InMessage::kNone:
      return continues ? Verdict::kInvalid : Verdict::kAccepted;
    case InMessage::kSend:
      return continues && info.kind == wire::Kind::kSend ? Verdict::kAccepted : Verdict::kInvalid;
    case InMessage::kWrite:
      return continues && info.kind == wire::Kind::kWrite ? Verdict::kAccepted : Verdict::kInvalid;
  }
  return Verdict::kInvalid;
}

Responder::Verdict Responder::check_length(const wire::OpcodeInfo& info, size_t payload) const {
  // IBA 9.7.5.1.4 (length check): FIRST and MIDDLE carry exactly one PMTU, LAST 1..PMTU, ONLY
  // 0..PMTU.
  if (!info.payload) return Verdict::kAccepted;
  const uint32_t mtu = ctx_.mtu();
  switch (info.place) {
    case wire::Place::kFirst:
    case wire::Place::kMiddle:
      return payload == mtu ? Verdict::kAccepted : Verdict::kInvalid;
    case wire::Place::kLast:
      return payload >= 1 && payload <= mtu ? Verdict::kAccepted : Verdict::kInvalid;
    default:
      return payload <= mtu ? Verdict::kAccepted : Verdict::kInvalid;
  }
}

Responder::Verdict Responder::execute(const wire::TransportHeaders& h, const wire::OpcodeInfo& info,
                                      std::span<const uint8_t> payload) {
  switch (info.kind) {
    case wire::Kind::kSend:
      return on_send(h, info, payload);
    case wire::Kind::kWrite:
      return on_write(h, info, payload);
    case wire::Kind::kReadRequest:
      return on_read(h);
    case wire::Kind::kCompareSwap:
    case wire::Kind::kFetchAdd:
      return on_atomic(h, info);
    default:
      return Verdict::kInvalid;
  }
}

Responder::Verdict Responder::on_send(const wire::TransportHeaders& h, const wire::OpcodeInfo& info,
                                      std::span<const uint8_t> payload) {
  if (info.starts_message()) {
    // A UC message abandoned after a gap leaves its WQE here for the next one (IBA 9.8.4).
    if (!recv_) recv_ = pop_recv();
    if (!recv_) return Verdict::kRnr;
    recv_offset_ = 0;
    in_msg_ = InMessage::kSend;
  }
  if (recv_offset_ + payload.size() > recv_->length) {
    // IBA 9.7.5.1.4: the message is longer than the receive buffer.
    complete_recv(WcStatus::kLocLenErr, WcOpcode::kRecv, 0, 0, 0);
    return Verdict::kInvalid;
  }
  if (!scatter(mem(), recv_->sge.data(), recv_->num_sge, recv_offset_, payload)) {
    complete_recv(WcStatus::kLocProtErr, WcOpcode::kRecv, 0, 0, 0);
    return Verdict::kOperational;
  }
  recv_offset_ += payload.size();
  if (!info.ends_message()) return Verdict::kAccepted;
  uint32_t flags = 0, value = 0;
  if (info.has(wire::kImmDt)) flags |= kWcWithImm, value = h.imm;
  if (info.has(wire::kIeth)) {
    // SEND with Invalidate (IBA 9.4.1.1, 10.6.7): invalidate the named key before completing.
    if (!mem().invalidate(h.ieth_rkey, ctx_.qpn, /*remote=*/true)) {
      complete_recv(WcStatus::kLocProtErr, WcOpcode::kRecv, 0, 0, 0);
      return Verdict::kInvalid;
    }
    flags |= kWcWithInvalidate, value = h.ieth_rkey;
  }
  complete_recv(WcStatus::kSuccess, WcOpcode::kRecv, static_cast<uint32_t>(recv_offset_), flags,
                value);
  return Verdict::kAccepted;
}

Responder::Verdict Responder::on_write(const wire::TransportHeaders& h,
                                       const wire::OpcodeInfo& info,
                                       std::span<const uint8_t> payload) {
  if (info.starts_message()) {
    // IBA 9.7.5.1.5 / 10.6.3: the QP must allow remote writes and the R_Key cover the range.
    if (!remote_ok(kAccessRemoteWrite)) return Verdict::kAccess;
    const uint32_t len = h.reth.dma_length;
    // A WRITE ONLY that carries all it announces (every packet of a per-packet WRITE) is checked
    // once, where it is placed below, with the same verdict. (With immediate, the check must come
    // before the receive WQE is taken.)
    const bool placed_whole =
        info.ends_message() && !info.has(wire::kImmDt) && payload.size() == len;
    if (len > 0 && !placed_whole &&
        !mem().remote(h.reth.rkey, h.reth.va, len, kAccessRemoteWrite, ctx_.qpn).ok())
      return Verdict::kAccess;
    write_va_ = h.reth.va;
    write_rkey_ = h.reth.rkey;
    write_left_ = write_total_ = len;
    in_msg_ = InMessage::kWrite;
  }
  // Validate, then place: a packet whose length cannot fit the message the RETH announced is
  // rejected before any of its bytes reach memory. More than is left is invalid; so is a last
  // packet that leaves bytes unwritten, or a first or middle one that leaves none for the LAST.
  if (payload.size() > write_left_) return Verdict::kInvalid;
  if ((write_left_ == payload.size()) != info.ends_message()) return Verdict::kInvalid;
  const bool imm = info.has(wire::kImmDt);
  if (info.ends_message() && imm && !recv_) {
    // Take the receive WQE before placing data so an RNR retry repeats nothing.
    recv_ = pop_recv();
    if (!recv_) return Verdict::kRnr;
  }
  if (!payload.empty()) {
    auto dst = mem().remote(write_rkey_, write_va_, static_cast<uint32_t>(payload.size()),
                            kAccessRemoteWrite, ctx_.qpn);
    if (!dst.ok()) return Verdict::kAccess;
    std::memcpy(*dst, payload.data(), payload.size());
  }
  write_va_ += payload.size();
  write_left_ -= payload.size();
  if (!info.ends_message()) return Verdict::kAccepted;
  if (imm)
    complete_recv(WcStatus::kSuccess, WcOpcode::kRecvRdmaWithImm,
                  static_cast<uint32_t>(write_total_), kWcWithImm, h.imm);
  return Verdict::kAccepted;
}

Responder::Verdict Responder::on_read(const wire::TransportHeaders& h) {
  if (!remote_ok(kAccessRemoteRead)) return Verdict::kAccess;
  const uint32_t len = h.reth.dma_length;
  if (len > kMaxMessageBytes) return Verdict::kInvalid;
  if (len > 0 && !mem().remote(h.reth.rkey, h.reth.va, len, kAccessRemoteRead, ctx_.qpn).ok())
    return Verdict::kAccess;
  if (!charge_response()) return Verdict::kDropped;
  // More READ/atomics in progress than max_dest_rd_atomic (IBA 9.7.7.2.1): Invalid Request.
  Resource* r = take_resource();
  if (r == nullptr) {
    uncharge_responses(1);
    return Verdict::kInvalid;
  }
  r->kind = Resource::Kind::kRead;
  r->first_psn = r->reply_psn = epsn_;
  r->npsn = r->reply_npsn = packets_for(len, ctx_.mtu());
  r->msn = ++msn_;
  r->original = 0;
  r->va = h.reth.va;
  r->rkey = h.reth.rkey;
  r->length = len;
  r->sent = 0;
  r->xrc_srqn = h.xrc_srqn;
  // The READ uses one PSN per response packet (IBA 9.7.4.1.2).
  epsn_ += static_cast<int32_t>(r->npsn);
  queue_resource_response(*r, r->first_psn);
  return Verdict::kResponded;
}

Responder::Verdict Responder::on_atomic(const wire::TransportHeaders& h,
                                        const wire::OpcodeInfo& info) {
  if (!remote_ok(kAccessRemoteAtomic)) return Verdict::kAccess;
  if (h.atomic.va % 8 != 0) return Verdict::kInvalid;  // IBA 9.4.5: 8-byte aligned only
  auto p = mem().remote(h.atomic.rkey, h.atomic.va, 8, kAccessRemoteAtomic, ctx_.qpn);
  if (!p.ok()) return Verdict::kAccess;
  if (reinterpret_cast<uintptr_t>(*p) % alignof(uint64_t) != 0) return Verdict::kOperational;
  if (!charge_response()) return Verdict::kDropped;  // before the atomic acts
  Resource* r = take_resource();
  if (r == nullptr) {
    uncharge_responses(1);
    return Verdict::kInvalid;
  }
  // Executed once here; duplicates replay `original` from the resource (IBA 9.7.5.1.2).
  std::atomic_ref<uint64_t> target(*reinterpret_cast<uint64_t*>(*p));
  uint64_t original = 0;
  if (info.kind == wire::Kind::kCompareSwap) {
    original = h.atomic.compare;
    target.compare_exchange_strong(original, h.atomic.swap_add);
  } else {
    original = target.fetch_add(h.atomic.swap_add);
  }
  r->kind = Resource::Kind::kAtomic;
  r->first_psn = r->reply_psn = epsn_;
  r->npsn = r->reply_npsn = 1;
  r->msn = ++msn_;
  r->original = original;
  r->va = h.atomic.va;
  r->rkey = h.atomic.rkey;
  r->length = 8;
  r->sent = 0;
  epsn_ += 1;
  queue_resource_response(*r, r->first_psn);
  return Verdict::kResponded;
}

void Responder::finish(Verdict v, const wire::TransportHeaders& h, const wire::OpcodeInfo& info) {
  const Psn psn = h.bth.psn;
  switch (v) {
    case Verdict::kAccepted:
      epsn_ = psn + 1;
      ++unacked_;
      if (info.ends_message()) {
        ++msn_;  // IBA 9.7.5.1.1: one MSN per completed request message
        in_msg_ = InMessage::kNone;
      }
      // Coalesced: one ACK covers every packet up to its PSN (IBA 9.7.5.1.1).
      if (h.bth.ack_req || unacked_ >= kAckEveryPackets) queue_ack(psn);
      return;
    case Verdict::kResponded:
      unacked_ = 0;  // the response acknowledges everything before it
      return;
    case Verdict::kDropped:
      ++ctx_.counters.rx_dropped;
      return;
    case Verdict::kRnr:
      ++ctx_.counters.rnr_naks_sent;
      if (info.starts_message()) in_msg_ = InMessage::kNone;
      queue_nak(psn, wire::Aeth::rnr_nak(msn_, ctx_.config.min_rnr_timer));
      nak_outstanding_ = true;
      return;
    case Verdict::kInvalid:
      queue_nak(psn, wire::Aeth::nak(msn_, wire::NakCode::kInvalidRequest));
      break;
    case Verdict::kAccess:
      queue_nak(psn, wire::Aeth::nak(msn_, wire::NakCode::kRemoteAccessError));
      break;
    case Verdict::kOperational:
      queue_nak(psn, wire::Aeth::nak(msn_, wire::NakCode::kRemoteOperationalError));
      break;
  }
  // IBA 9.9.3.1 (responder class A/C errors): after the NAK the QP enters ERR.
  in_msg_ = InMessage::kNone;
  ctx_.error_pending = true;
}

void Responder::on_duplicate(const wire::TransportHeaders& h) {
  const wire::OpcodeInfo& info = wire::opcode_info(h.bth.opcode);
  const Psn psn = h.bth.psn;
  switch (info.kind) {
    case wire::Kind::kSend:
    case wire::Kind::kWrite:
      queue_ack(epsn_ - 1);  // the latest ACK covers the duplicate too
      return;
    case wire::Kind::kReadRequest: {
      // Re-executed from memory for exactly what the duplicate asks (IBA 9.7.5.1.2), which may
      // be the tail of an earlier READ, by the resource that READ took. The resource keeps the
      // PSNs it covers: if a partial duplicate narrowed them, the next whole duplicate would miss
      // it and evict another live resource (an atomic's result, docs/sim-findings.md 1).
      const uint32_t len = h.reth.dma_length;
      const uint32_t npsn = packets_for(len, ctx_.mtu());
      Resource* r = resources_.find_read(psn, npsn);
      XrcSrq* srq = ctx_.type == QpType::kXrcRecv ? find_xrc_srq(h.xrc_srqn) : nullptr;
      MemoryAccess* memory =
          ctx_.type == QpType::kXrcRecv ? (srq ? &srq->memory() : nullptr) : &ctx_.memory;
      // No resource: older than the last max_dest_rd_atomic READ/atomics, so the requester (which
      // keeps at most that many outstanding) already has its data; or not a READ we answered.
      if (r == nullptr || memory == nullptr || !remote_ok(kAccessRemoteRead) ||
          (len > 0 &&
           !memory->remote(h.reth.rkey, h.reth.va, len, kAccessRemoteRead, ctx_.qpn).ok())) {
        ++ctx_.counters.rx_dropped;
        return;
      }
      r->reply_psn = psn;
      r->reply_npsn = npsn;
      r->va = h.reth.va;
      r->rkey = h.reth.rkey;
      r->length = len;
      r->xrc_srqn = h.xrc_srqn;
      r->sent = 0;  // a reply in progress restarts from the duplicate's first PSN
      if (r->queued) return;
      if (!charge_response()) {
        ++ctx_.counters.rx_dropped;
        return;
      }
      queue_resource_response(*r, psn);
      return;
    }
    case wire::Kind::kCompareSwap:
    case wire::Kind::kFetchAdd:
      if (Resource* r = resources_.find_atomic(psn)) {
        if (r->queued) return;
        if (!charge_response()) {
          ++ctx_.counters.rx_dropped;
          return;
        }
        queue_resource_response(*r, psn);
        return;
      }
      // Older than every resource: the requester already has this result.
      ++ctx_.counters.rx_dropped;
      return;
    default:
      ++ctx_.counters.rx_dropped;
      return;
  }
}

void Responder::receive_uc(const RxPacket& pkt) {
  const wire::TransportHeaders& h = *pkt.hdr;
  const wire::OpcodeInfo& info = wire::opcode_info(h.bth.opcode);
  // IBA 9.8.4: UC has no duplicates and no NAKs. A PSN gap abandons the message in progress;
  // packets are taken up again at the next FIRST or ONLY.
  if (h.bth.psn != epsn_) {
    ++ctx_.counters.out_of_sequence;
    if (in_msg_ != InMessage::kNone) uc_dropping_ = true;
    in_msg_ = InMessage::kNone;
  }
  epsn_ = h.bth.psn + 1;
  if (info.starts_message()) {
    uc_dropping_ = false;
    in_msg_ = InMessage::kNone;  // a message that lost its LAST is abandoned
  } else if (uc_dropping_ || in_msg_ == InMessage::kNone) {
    uc_dropping_ = true;
    ++ctx_.counters.rx_dropped;
    return;
  }
  Verdict v = check_op_sequence(info);
  if (v == Verdict::kAccepted) v = check_length(info, pkt.payload.size());
  if (v == Verdict::kAccepted) v = execute(h, info, pkt.payload);
  if (v == Verdict::kAccepted) {
    if (info.ends_message()) in_msg_ = InMessage::kNone, ++msn_;
    return;
  }
  // Errors drop the rest of the message silently; a receive WQE already failed (length or
  // protection) has been completed in error by the handler.
  ++ctx_.counters.rx_dropped;
  in_msg_ = InMessage::kNone;
  uc_dropping_ = !info.ends_message();
}

void Responder::receive_ud(const RxPacket& pkt) {
  const wire::TransportHeaders& h = *pkt.hdr;
  const wire::OpcodeInfo& info = wire::opcode_info(h.bth.opcode);
  // IBA 10.2.5: a datagram whose Q_Key differs from the QP's is discarded.
  if (h.deth.qkey != ctx_.config.qkey || pkt.payload.size() > ctx_.mtu()) {
    ++ctx_.counters.rx_dropped;
    return;
  }
  recv_ = ctx_.rq().pop();
  if (!recv_) {  // IBA 9.9.3: no receive WQE -> the datagram is silently dropped
    ++ctx_.counters.rx_dropped;
    return;
  }
  const uint32_t total = wire::kGrhBytes + static_cast<uint32_t>(pkt.payload.size());
  if (total > recv_->length) {
    complete_recv(WcStatus::kLocLenErr, WcOpcode::kRecv, 0, 0, 0, h.deth.src_qp);
    return;
  }
  // The first 40 bytes get the GRH, rebuilt from what the link saw: addresses, lengths, traffic
  // class and hop limit.
  const uint32_t udp_len = wire::kUdpBytes + info.header_bytes +
                           static_cast<uint32_t>(pkt.payload.size()) + h.bth.pad_count +
                           wire::kIcrcBytes;
  const std::array<uint8_t, wire::kGrhBytes> grh =
      wire::build_ud_grh({pkt.sgid, pkt.dgid, pkt.traffic_class, pkt.hop_limit,
                          static_cast<uint16_t>(udp_len), pkt.roce_v1, pkt.flow_label});
  if (!scatter(ctx_.memory, recv_->sge.data(), recv_->num_sge, 0, grh, pkt.payload)) {
    complete_recv(WcStatus::kLocProtErr, WcOpcode::kRecv, 0, 0, 0, h.deth.src_qp);
    return;
  }
  uint32_t flags = kWcGrh;
  if (info.has(wire::kImmDt)) flags |= kWcWithImm;
  complete_recv(WcStatus::kSuccess, WcOpcode::kRecv, total, flags,
                info.has(wire::kImmDt) ? h.imm : 0, h.deth.src_qp, pkt.roce_v1);
}

void Responder::complete_recv(WcStatus status, WcOpcode opcode, uint32_t byte_len, uint32_t flags,
                              uint32_t imm_or_rkey, uint32_t src_qp, bool roce_v1) {
  if (!recv_) return;
  Completion c;
  c.roce_v1 = roce_v1;
  c.wr_id = recv_->wr_id;
  c.status = status;
  c.opcode = opcode;
  c.byte_len = byte_len;
  c.imm_or_invalidated_rkey = imm_or_rkey;
  c.qp_num = ctx_.qpn;
  c.src_qp = src_qp;
  c.wc_flags = flags;
  recv_.reset();
  if (cur_srq_ != nullptr) {
    if (!cur_srq_->cq().push(c)) ctx_.error_pending = true;  // the SRQ's CQ overran
  } else {
    ctx_.push_recv(c);
  }
  // A failed receive WQE takes a connected QP to ERR (IBA 10.8.3.3); UD just reports it.
  if (status != WcStatus::kSuccess && ctx_.type != QpType::kUd) ctx_.error_pending = true;
}

void Responder::queue_resource_response(Resource& r, Psn psn) {
  const auto kind =
      r.kind == Resource::Kind::kAtomic ? Response::Kind::kAtomic : Response::Kind::kRead;
  r.queued = true;
  queue_response({kind, psn, {}, resources_.index_of(r), r.generation});
}

bool Responder::stale(const Response& r) const {
  return r.kind != Response::Kind::kAck && resources_.at(r.resource).generation != r.generation;
}

// ---- Responses -------------------------------------------------------------------------------

void Responder::queue_response(const Response& r) {
  if (!responses_.push(r)) ++ctx_.counters.responses_dropped;
}

void Responder::queue_ack(Psn psn) {
  unacked_ = 0;
  if (Response* ack = responses_.pending_ack()) {
    ack->psn = psn;  // a newer ACK supersedes one not yet sent
    ack->aeth = wire::Aeth::ack(msn_);
    return;
  }
  queue_response({Response::Kind::kAck, psn, wire::Aeth::ack(msn_), 0});
}

void Responder::queue_nak(Psn psn, wire::Aeth aeth) {
  ++ctx_.counters.naks_sent;
  queue_response({Response::Kind::kAck, psn, aeth, 0});
}

Nanos Responder::ready_at(Nanos now) const {
  if (responses_.empty()) return kNever;
  const Response& r = responses_.front();
  if (r.kind != Response::Kind::kRead || stale(r)) return now;
  if (ctx_.pacer.may_send(now, ctx_.mtu(), 0)) return now;
  return std::max(now, ctx_.pacer.next_send_time(now, ctx_.mtu()));
}

bool Responder::build(Nanos now, TxPacket& out) {
  while (!responses_.empty() && stale(responses_.front())) responses_.pop();
  if (responses_.empty()) return false;
  const Response& r = responses_.front();
  wire::TransportHeaders h;
  h.bth.pkey = ctx_.config.pkey;
  h.bth.dest_qp = ctx_.config.dest_qpn;
  // An XRC target answers with the XRC forms of the RC responses (annex A14).
  const uint8_t service = ctx_.type == QpType::kXrcRecv ? wire::op::kXrcBase : 0;
  out.payload_parts = 0;
  out.payload_len = 0;
  switch (r.kind) {
    case Response::Kind::kAck:
      h.bth.opcode = static_cast<uint8_t>(service | wire::op::kRcAck);
      h.bth.psn = r.psn;
      h.aeth = r.aeth;
      responses_.pop();
      break;
    case Response::Kind::kAtomic: {
      Resource& res = resources_.at(r.resource);
      h.bth.opcode = static_cast<uint8_t>(service | wire::op::kRcAtomicAck);
      h.bth.psn = res.first_psn;
      h.aeth = wire::Aeth::ack(res.msn);
      h.atomic_ack.original = res.original;
      res.queued = false;
      res.answered = true;
      responses_.pop();
      uncharge_responses(1);
      break;
    }
    case Response::Kind::kRead: {
      Resource& res = resources_.at(r.resource);
      const uint32_t mtu = ctx_.mtu();
      const uint64_t offset = uint64_t{res.sent} * mtu;
      const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(mtu, res.length - offset));
      if (!ctx_.pacer.may_send(now, len, 0)) return false;
      if (len > 0) {
        XrcSrq* srq = ctx_.type == QpType::kXrcRecv ? find_xrc_srq(res.xrc_srqn) : nullptr;
        MemoryAccess* memory =
            ctx_.type == QpType::kXrcRecv ? (srq ? &srq->memory() : nullptr) : &ctx_.memory;
        auto src = memory
                       ? memory->remote(res.rkey, res.va + offset, len, kAccessRemoteRead, ctx_.qpn)
                       : Result<uint8_t*, KeyError>(Err(KeyError::kNoSuchKey));
        if (!src.ok()) {
          // Deregistered since the request was checked: abandon; the requester times out.
          ++ctx_.counters.responses_dropped;
          res.queued = false;
          responses_.pop();
          uncharge_responses(1);
          return false;
        }
        out.payload[0] = {*src, len};
        out.payload_parts = 1;
        out.payload_len = len;
      }
      const bool first = res.sent == 0, last = res.sent + 1 == res.reply_npsn;
      namespace op = wire::op;
      h.bth.opcode = static_cast<uint8_t>(service | (first && last ? op::kRcReadResponseOnly
                                                     : first       ? op::kRcReadResponseFirst
                                                     : last        ? op::kRcReadResponseLast
                                                                   : op::kRcReadResponseMiddle));
      h.bth.psn = res.reply_psn + static_cast<int32_t>(res.sent);
      h.bth.pad_count = wire::pad_for(len);
      h.aeth = wire::Aeth::ack(res.msn);
      ctx_.pacer.on_sent(now, len);
      // The only response queued, so the requester waits for this READ alone.
      if (responses_.size() == 1 && (res.sent + 1) % kLoneMessageFlushPackets == 0 &&
          res.sent + 1 < res.reply_npsn)
        out.flush_after = true;
      if (++res.sent == res.reply_npsn) {
        res.queued = false;
        res.answered = true;
        responses_.pop();
        uncharge_responses(1);
      }
      break;
    }
  }
  out.header_len = wire::write_transport_headers(h, out.header);
  out.pad = h.bth.pad_count;
  out.dest = &ctx_.config.path;
  return true;
}

}  // namespace uroce::transport
