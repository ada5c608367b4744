// Requester: work requests -> request packets.
#include "transport/requester.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "wire/packet.h"

namespace uroce::transport {

namespace {

bool opcode_allowed(QpType type, WrOpcode op) {
  switch (type) {
    case QpType::kRc:
    case QpType::kXrcSend:
      return true;
    case QpType::kXrcRecv:  // a target only answers (annex A14)
      return false;
    case QpType::kUc:  // IBA table 38: UC has SEND and RDMA WRITE, and binds windows locally
      return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWrite ||
             op == WrOpcode::kRdmaWriteWithImm || op == WrOpcode::kBindMw ||
             op == WrOpcode::kLocalInvalidate;
    case QpType::kUd:
      return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm;
  }
  return false;
}

WcOpcode wc_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCompareSwap:
      return WcOpcode::kCompareSwap;
    case WrOpcode::kAtomicFetchAdd:
      return WcOpcode::kFetchAdd;
    case WrOpcode::kLocalInvalidate:
      return WcOpcode::kLocalInvalidate;
    case WrOpcode::kBindMw:
      return WcOpcode::kBindMw;
    default:
      return WcOpcode::kSend;
  }
}

}  // namespace

Completion send_completion(const QpContext& ctx, const SendWqe& w, WcStatus status) {
  Completion c;
  c.wr_id = w.wr_id;
  c.status = status;
  c.opcode = wc_opcode(w.opcode);
  c.byte_len = static_cast<uint32_t>(std::min<uint64_t>(w.length, UINT32_MAX));
  c.qp_num = ctx.qpn;
  return c;
}

int Requester::check(const SendWr& wr) const {
  if (ctx_.state == QpState::kReset) return EINVAL;
  if (wr.sg_list.size() > ctx_.caps.max_send_sge) return EINVAL;
  if (!opcode_allowed(ctx_.type, wr.opcode)) return EINVAL;
  if (ctx_.type == QpType::kUd && wr.ah == nullptr) return EINVAL;
  const bool atomic =
      wr.opcode == WrOpcode::kAtomicCompareSwap || wr.opcode == WrOpcode::kAtomicFetchAdd;
  // IBA 9.4.5: an atomic operates on 8 bytes at an 8-byte aligned address.
  if (atomic && (wr.sg_list.size() != 1 || wr.sg_list[0].length != 8 || wr.remote_addr % 8 != 0))
    return EINVAL;
  uint64_t length = 0;
  for (const Sge& s : wr.sg_list) length += s.length;
  const bool is_inline = (wr.flags & kSendInline) != 0;
  if (is_inline &&
      (length > ctx_.caps.max_inline_data || atomic || wr.opcode == WrOpcode::kRdmaRead))
    return EINVAL;
  // BIND_MW and LOCAL_INV move no data: no gather list.
  const bool local = wr.opcode == WrOpcode::kBindMw || wr.opcode == WrOpcode::kLocalInvalidate;
  if (local && (!wr.sg_list.empty() || is_inline)) return EINVAL;
  return 0;
}

int Requester::post(const SendWr& wr) {
  if (int err = check(wr)) return err;
  if (ctx_.sq.full()) return ENOMEM;
  uint64_t length = 0;
  for (const Sge& s : wr.sg_list) length += s.length;
  const bool is_inline = (wr.flags & kSendInline) != 0;
  const uint64_t pos = ctx_.sq.tail();
  SendWqe& w = ctx_.sq.push();
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.flags = wr.flags;
  w.imm = wr.imm;
  w.invalidate_rkey = wr.invalidate_rkey;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.compare_add = wr.compare_add;
  w.swap = wr.swap;
  w.bind = wr.bind;
  if (wr.ah != nullptr) w.ah = *wr.ah;
  w.remote_qpn = wr.remote_qpn;
  w.remote_qkey = wr.remote_qkey;
  w.remote_srqn = wr.remote_srqn & 0xffffff;
  w.num_sge = static_cast<uint32_t>(wr.sg_list.size());
  std::copy(wr.sg_list.begin(), wr.sg_list.end(), w.sge);
  w.length = length;
  w.signaled = ctx_.config.sq_sig_all || (wr.flags & kSendSignaled) != 0;
  if (is_inline) {
    // Inline data is read from the caller's virtual addresses now, without key checks (verbs
    // IBV_SEND_INLINE): the buffers may be reused as soon as post_send returns.
    uint8_t* dst = ctx_.inline_slot(pos);
    for (const Sge& s : wr.sg_list) {
      if (s.length != 0) std::memcpy(dst, reinterpret_cast<const void*>(s.addr), s.length);
      dst += s.length;
    }
    w.is_inline = true;
  }
  if (ctx_.state == QpState::kErr) {
    // A QP in ERR completes every new WR with a flush error, in order (IBA 10.8.3.3).
    ctx_.push_send(send_completion(ctx_, w, WcStatus::kWrFlushErr));
    ctx_.sq.pop();
    if (cur_ < ctx_.sq.head()) cur_ = ctx_.sq.head();
  }
  return 0;
}

void Requester::rewind(Psn psn) {
  resend_count_ = 0;
  for (uint64_t pos = ctx_.sq.head(); pos < ctx_.sq.tail(); ++pos) {
    const SendWqe& w = ctx_.sq.at(pos);
    // Acknowledged WQEs not yet retired are passed over; a failed one stops the requester.
    if (w.state == WqeState::kDone && w.status == WcStatus::kSuccess) continue;
    if (w.state == WqeState::kPosted || w.state == WqeState::kDone || w.contains(psn)) {
      cur_ = pos;
      pkt_ = w.contains(psn) ? static_cast<uint32_t>(psn.distance_from(w.first_psn)) : 0;
      ctx_.next_psn = psn;
      return;
    }
  }
  cur_ = ctx_.sq.tail();
  pkt_ = 0;
  ctx_.next_psn = psn;
}

void Requester::resend(Psn psn) {
  for (uint32_t i = 0; i < resend_count_; ++i)
    if (resends_[(resend_head_ + i) % kMaxPendingResends] == psn) return;  // already queued
  if (resend_count_ == kMaxPendingResends) {
    rewind(ctx_.una);  // bounded: more holes than slots is cheaper to recover by going back
    return;
  }
  resends_[(resend_head_ + resend_count_++) % kMaxPendingResends] = psn;
}

bool Requester::next_resend(uint64_t* pos, uint32_t* pkt) const {
  for (uint32_t i = 0; i < resend_count_; ++i) {
    const Psn psn = resends_[(resend_head_ + i) % kMaxPendingResends];
    // Acknowledged since it was queued, or not sent yet (a go-back-N restart sends it anyway).
    if (psn.before(ctx_.una) || !psn.before(ctx_.next_psn)) continue;
    for (uint64_t p = ctx_.sq.head(); p < ctx_.sq.tail() && p <= cur_; ++p) {
      const SendWqe& w = ctx_.sq.at(p);
      if ((w.state == WqeState::kActive || w.state == WqeState::kSent) && w.contains(psn)) {
        *pos = p;
        *pkt = static_cast<uint32_t>(psn.distance_from(w.first_psn));
        return true;
      }
    }
  }
  return false;
}

Requester::Next Requester::describe(const SendWqe& w, uint32_t pkt) const {
  Next n;
  const uint32_t mtu = ctx_.mtu();
  n.payload_offset = uint64_t{pkt} * mtu;
  if (w.is_read()) {
    const uint32_t total = w.state == WqeState::kPosted ? packets_for(w.length, mtu) : w.npsn;
    n.psns = total - pkt;
  } else if (!w.is_atomic()) {
    n.payload_len = static_cast<uint32_t>(
        std::min<uint64_t>(mtu, w.length - std::min(w.length, n.payload_offset)));
  }
  return n;
}

bool Requester::may_transmit(Nanos now) const {
  if (ctx_.state != QpState::kRts && ctx_.state != QpState::kSqd) return false;
  return now >= ctx_.rnr_hold_until;  // the completer owns that deadline
}

Requester::Gate Requester::pace(Nanos now, uint32_t payload_len, Nanos* when) const {
  if (ctx_.pacer.may_send(now, payload_len, ctx_.in_flight())) return Gate::kReady;
  const Nanos t = ctx_.pacer.next_send_time(now, payload_len);
  if (t <= now) return Gate::kBlocked;  // the pacer's window: wait for ACKs
  *when = t;
  return Gate::kPaced;
}

Requester::Gate Requester::resend_gate(Nanos now, uint64_t pos, uint32_t pkt, Next& next,
                                       Nanos* when) const {
  if (!may_transmit(now)) return Gate::kBlocked;
  next = describe(ctx_.sq.at(pos), pkt);
  return pace(now, next.payload_len, when);
}

Requester::Gate Requester::gate(Nanos now, Next& next, Nanos* when) const {
  if (!may_transmit(now) || cur_ >= ctx_.sq.tail()) return Gate::kBlocked;
  const SendWqe& w = ctx_.sq.at(cur_);
  if (w.state == WqeState::kDone) return Gate::kBlocked;  // failed WQE: the QP is going to ERR
  if (w.state == WqeState::kPosted) {
    if (ctx_.state != QpState::kRts) return Gate::kBlocked;  // SQD starts no new WQE
    // IBV_SEND_FENCE (IBA 10.8.3.4): wait for earlier READs and atomics to complete.
    if (fenced(w)) return Gate::kBlocked;
    // At most max_rd_atomic READ/atomic requests outstanding (IBA 9.7.7.2.2).
    const uint32_t limit = std::max<uint32_t>(1, ctx_.config.max_rd_atomic);
    if (w.is_rd_atomic() && ctx_.rd_atomic_outstanding >= limit) return Gate::kBlocked;
  }
  next = describe(w, pkt_);
  const uint32_t in_flight = ctx_.in_flight();
  if (ctx_.reliable()) {
    uint32_t window = std::clamp<uint32_t>(ctx_.config.max_psn_window, 1, kMaxPsnWindow);
    // Every packet in flight must fit the peer's reorder buffer, or it would be dropped there
    // and cost a timeout instead of a NAK.
    if (ctx_.selective_repeat()) window = std::min(window, reorder_window(ctx_.mtu()));
    if (in_flight > 0 && uint64_t{in_flight} + next.psns > window) return Gate::kBlocked;
  }
  return pace(now, next.payload_len, when);
}

bool Requester::local_op_due() const {
  if (cur_ >= ctx_.sq.tail() || ctx_.state != QpState::kRts) return false;
  const SendWqe& w = ctx_.sq.at(cur_);
  if (!w.is_local()) return false;
  if (w.state == WqeState::kDone) return w.status == WcStatus::kSuccess;  // passed over
  return !fenced(w);
}

bool Requester::run_local_ops() {
  // Bounded by the send queue: each step moves the cursor on or returns.
  while (cur_ < ctx_.sq.tail()) {
    SendWqe& w = ctx_.sq.at(cur_);
    if (!w.is_local()) return true;
    if (w.state == WqeState::kPosted) {
      if (ctx_.state != QpState::kRts) return false;  // SQD starts no new WQE
      // IBV_SEND_FENCE: a bind or invalidate may have to wait for earlier READs and atomics,
      // which still use the old window (IBA 10.8.3.4).
      if (fenced(w)) return false;
      w.first_psn = ctx_.next_psn;
      w.npsn = 0;
      const WcStatus status =
          w.opcode == WrOpcode::kBindMw ? ctx_.memory.bind_mw(w.bind, ctx_.qpn)
          : ctx_.memory.invalidate(w.invalidate_rkey, ctx_.qpn, /*remote=*/false)
              ? WcStatus::kSuccess
              : WcStatus::kLocQpOpErr;
      w.state = WqeState::kDone;
      w.status = status;
      if (status != WcStatus::kSuccess) return false;  // retired with its error; the QP goes to ERR
    } else if (w.status != WcStatus::kSuccess) {
      return false;
    }
    // Done (now, or before a go-back-N rewind brought the cursor back over it): never again.
    ++cur_;
    pkt_ = 0;
  }
  return true;
}

Nanos Requester::ready_at(Nanos now) const {
  if (local_op_due()) return now;
  uint64_t pos = 0;
  uint32_t pkt = 0;
  Next next;
  Nanos when = kNever;
  const Gate g =
      next_resend(&pos, &pkt) ? resend_gate(now, pos, pkt, next, &when) : gate(now, next, &when);
  switch (g) {
    case Gate::kReady:
      return now;
    case Gate::kPaced:
      return when;
    case Gate::kBlocked:
      return kNever;
  }
  return kNever;
}

void Requester::fail(SendWqe& w, WcStatus status) {
  w.state = WqeState::kDone;
  w.status = status;
}

bool Requester::check_local_keys(const SendWqe& w) const {
  if (w.is_inline) return true;
  // READ and atomic results are written into the local buffers (local write access, IBA 10.6.3).
  const uint32_t access = w.is_rd_atomic() ? uint32_t{kAccessLocalWrite} : 0u;
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    const Sge& s = w.sge[i];
    if (!ctx_.memory.local(s.lkey, s.addr, s.length, access).ok()) return false;
  }
  return true;
}

bool Requester::start(SendWqe& w) {
  const uint32_t mtu = ctx_.mtu();
  if (w.length > kMaxMessageBytes || (ctx_.type == QpType::kUd && w.length > mtu)) {
    fail(w, WcStatus::kLocLenErr);
    return false;
  }
  // A one-packet message with one SGE has that SGE checked by its packet's gather, in the same
  // build() and with the same range and rights: checking it here too would cost a second key
  // lookup per small message. A failed gather fails the WQE with the same status.
  const bool checked_by_gather =
      !w.is_rd_atomic() && w.num_sge == 1 && w.length > 0 && w.length <= mtu;
  if (!checked_by_gather && !check_local_keys(w)) {
    fail(w, WcStatus::kLocProtErr);
    return false;
  }
  const uint32_t npsn = w.is_atomic() ? 1 : packets_for(w.length, mtu);
  if (npsn > kMaxPsnWindow) {
    fail(w, WcStatus::kLocLenErr);
    return false;
  }
  w.npsn = npsn;
  w.first_psn = ctx_.next_psn;
  w.state = WqeState::kActive;
  if (w.is_rd_atomic()) ++ctx_.rd_atomic_outstanding;
  return true;
}

bool Requester::per_packet_write(const SendWqe& w) const {
  return w.opcode == WrOpcode::kRdmaWrite && ctx_.reliable() &&
         ctx_.config.write_segments == WriteSegments::kPerPacket;
}

uint8_t Requester::opcode_for(const SendWqe& w, bool first, bool last) const {
  namespace op = wire::op;
  if (ctx_.type == QpType::kUd)
    return w.opcode == WrOpcode::kSendWithImm ? op::kUdSendOnlyImm : op::kUdSendOnly;
  uint8_t code = 0;
  const bool only = first && last;
  switch (w.opcode) {
    case WrOpcode::kSend:
      code = only    ? op::kRcSendOnly
             : first ? op::kRcSendFirst
             : last  ? op::kRcSendLast
                     : op::kRcSendMiddle;
      break;
    case WrOpcode::kSendWithImm:
      code = only    ? op::kRcSendOnlyImm
             : first ? op::kRcSendFirst
             : last  ? op::kRcSendLastImm
                     : op::kRcSendMiddle;
      break;
    case WrOpcode::kSendWithInvalidate:
      code = only    ? op::kRcSendOnlyInv
             : first ? op::kRcSendFirst
             : last  ? op::kRcSendLastInv
                     : op::kRcSendMiddle;
      break;
    case WrOpcode::kRdmaWrite:
      code = only || per_packet_write(w) ? op::kRcWriteOnly
             : first                     ? op::kRcWriteFirst
             : last                      ? op::kRcWriteLast
                                         : op::kRcWriteMiddle;
      break;
    case WrOpcode::kRdmaWriteWithImm:
      code = only    ? op::kRcWriteOnlyImm
             : first ? op::kRcWriteFirst
             : last  ? op::kRcWriteLastImm
                     : op::kRcWriteMiddle;
      break;
    case WrOpcode::kRdmaRead:
      code = op::kRcReadRequest;
      break;
    case WrOpcode::kAtomicCompareSwap:
      code = op::kRcCompareSwap;
      break;
    case WrOpcode::kAtomicFetchAdd:
      code = op::kRcFetchAdd;
      break;
    default:
      UROCE_CHECK(false);
  }
  if (ctx_.type == QpType::kUc) return static_cast<uint8_t>(code | op::kUcBase);
  if (ctx_.type == QpType::kXrcSend) return static_cast<uint8_t>(code | op::kXrcBase);
  return code;
}

void Requester::fill_headers(const SendWqe& w, uint32_t pkt, Psn psn, const Next& next,
                             wire::TransportHeaders& h) const {
  const bool first = pkt == 0;
  const bool last = w.is_rd_atomic() || pkt + 1 == w.npsn;
  h.bth.opcode = opcode_for(w, first, last);
  h.bth.pkey = ctx_.config.pkey;
  h.bth.dest_qp = ctx_.type == QpType::kUd ? w.remote_qpn : ctx_.config.dest_qpn;
  h.bth.psn = psn;
  h.bth.pad_count = wire::pad_for(next.payload_len);
  h.bth.solicited = last && (w.flags & kSendSolicited) != 0;
  // AckReq on the last packet of every message and periodically inside long ones (IBA 9.7.2).
  h.bth.ack_req = ctx_.reliable() && (last || (pkt + 1) % kAckReqEveryPackets == 0);
  h.imm = w.imm;
  h.ieth_rkey = w.invalidate_rkey;
  h.xrc_srqn = w.remote_srqn;
  if (w.is_read()) {
    // A READ restarted mid-way asks only for the rest (IBA 9.7.4.1.2).
    h.reth.va = w.remote_addr + next.payload_offset;
    h.reth.rkey = w.rkey;
    h.reth.dma_length = static_cast<uint32_t>(w.length - std::min(w.length, next.payload_offset));
  } else if (per_packet_write(w)) {
    h.reth.va = w.remote_addr + next.payload_offset;  // this packet's bytes, and only those
    h.reth.rkey = w.rkey;
    h.reth.dma_length = next.payload_len;
  } else {
    h.reth.va = w.remote_addr;
    h.reth.rkey = w.rkey;
    h.reth.dma_length = static_cast<uint32_t>(w.length);
  }
  if (w.is_atomic()) {
    h.atomic.va = w.remote_addr;
    h.atomic.rkey = w.rkey;
    const bool cas = w.opcode == WrOpcode::kAtomicCompareSwap;
    h.atomic.swap_add = cas ? w.swap : w.compare_add;
    h.atomic.compare = cas ? w.compare_add : 0;
  }
  if (ctx_.type == QpType::kUd) {
    h.deth.qkey = (w.remote_qkey & kQkeyUseQpQkey) ? ctx_.config.qkey : w.remote_qkey;
    h.deth.src_qp = ctx_.qpn;
  }
}

bool Requester::gather(uint64_t pos, SendWqe& w, const Next& next, TxPacket& out) {
  out.payload_len = next.payload_len;
  out.payload_parts = 0;
  if (next.payload_len == 0) return true;
  if (w.is_inline) {
    out.payload[0] = {ctx_.inline_slot(pos) + next.payload_offset, next.payload_len};
    out.payload_parts = 1;
    return true;
  }
  uint64_t skip = next.payload_offset;
  uint32_t left = next.payload_len;
  for (uint32_t i = 0; i < w.num_sge && left > 0; ++i) {
    const Sge& s = w.sge[i];
    if (skip >= s.length) {
      skip -= s.length;
      continue;
    }
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(left, s.length - skip));
    auto p = ctx_.memory.local(s.lkey, s.addr + skip, n, 0);
    if (!p.ok() || out.payload_parts == wire::kMaxGather) return false;
    out.payload[out.payload_parts++] = {*p, n};
    left -= n;
    skip = 0;
  }
  return left == 0;
}

void Requester::count_retransmission(const Next& next) {
  ++ctx_.counters.retransmitted_packets;
  ctx_.counters.retransmitted_bytes += next.payload_len;
}

bool Requester::assemble(uint64_t pos, SendWqe& w, uint32_t pkt, Psn psn, const Next& next,
                         TxPacket& out) {
  wire::TransportHeaders h;
  fill_headers(w, pkt, psn, next, h);
  if (!gather(pos, w, next, out)) {
    // The MR went away after post time (IBA 10.6.3): fail the WQE; the QP then goes to ERR.
    fail(w, WcStatus::kLocProtErr);
    return false;
  }
  out.header_len = wire::write_transport_headers(h, out.header);
  out.pad = h.bth.pad_count;
  out.dest = ctx_.type == QpType::kUd ? &w.ah : &ctx_.config.path;
  return true;
}

bool Requester::build_resend(Nanos now, uint64_t pos, uint32_t pkt, TxPacket& out) {
  Next next;
  Nanos when = kNever;
  if (resend_gate(now, pos, pkt, next, &when) != Gate::kReady) return false;
  SendWqe& w = ctx_.sq.at(pos);
  const Psn psn = w.first_psn + static_cast<int32_t>(pkt);
  // Entries before this one were stale; this one is served now.
  while (resend_count_ > 0) {
    const Psn head = resends_[resend_head_];
    resend_head_ = (resend_head_ + 1) % kMaxPendingResends;
    --resend_count_;
    if (head == psn) break;
  }
  // The same headers as the first time (IBA 9.7.4.1.3 asks a retry to repeat the packet), so a
  // FIRST carries its RETH again and a MIDDLE none: the responder needs nothing new to place it.
  if (!assemble(pos, w, pkt, psn, next, out)) return false;
  count_retransmission(next);
  ctx_.pacer.on_sent(now, next.payload_len);
  return true;
}

bool Requester::build(Nanos now, TxPacket& out) {
  // Holes the responder named go first: they hold up everything it has buffered behind them.
  if (resend_count_ > 0) {
    uint64_t pos = 0;
    uint32_t pkt = 0;
    if (next_resend(&pos, &pkt)) return build_resend(now, pos, pkt, out);
    resend_count_ = 0;  // every queued one is stale
  }
  if (!run_local_ops()) return false;
  Next next;
  Nanos when = kNever;
  if (gate(now, next, &when) != Gate::kReady) return false;
  SendWqe& w = ctx_.sq.at(cur_);
  if (w.state == WqeState::kPosted && !start(w)) return false;
  if (!assemble(cur_, w, pkt_, ctx_.next_psn, next, out)) return false;

  if (ctx_.next_psn.before(ctx_.max_psn)) count_retransmission(next);
  ctx_.next_psn += static_cast<int32_t>(next.psns);
  if (ctx_.max_psn.before(ctx_.next_psn)) ctx_.max_psn = ctx_.next_psn;
  if (!ctx_.reliable()) ctx_.una = ctx_.next_psn;  // nothing is acknowledged
  ctx_.pacer.on_sent(now, next.payload_len);

  pkt_ += next.psns;
  // The responder has nothing else of ours to work on while this message is built: nothing before
  // it unacknowledged (a rendezvous's one large WRITE, even with its notice posted behind it) or,
  // where nothing is acknowledged, nothing posted behind it.
  const bool alone = ctx_.reliable() ? !ctx_.una.before(w.first_psn) : cur_ + 1 == ctx_.sq.tail();
  if (alone && pkt_ % kLoneMessageFlushPackets == 0 && pkt_ < w.npsn) out.flush_after = true;
  if (pkt_ >= w.npsn) {
    // Unreliable services complete a send WQE once its last packet is out (IBA 9.8.3, 9.9.3).
    w.state = ctx_.reliable() ? WqeState::kSent : WqeState::kDone;
    ++cur_;
    pkt_ = 0;
  }
  return true;
}

}  // namespace uroce::transport
