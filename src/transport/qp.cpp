// TransportQp: one QP's requester, responder and completer behind the interface of qp.h.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/check.h"
#include "transport/completer.h"
#include "transport/congestion.h"
#include "transport/qp_context.h"
#include "transport/requester.h"
#include "transport/responder.h"

namespace uroce::transport {

bool scatter(MemoryAccess& memory, const Sge* sge, uint32_t num_sge, uint64_t offset,
             std::span<const uint8_t> data, std::span<const uint8_t> more) {
  // Validate, then place: every piece's key and bounds are checked before the first byte is
  // copied, so a list that fails part way leaves memory as it was.
  struct Piece {
    uint8_t* dst;
    uint32_t len;
  };
  Piece pieces[kMaxSge];
  uint32_t n_pieces = 0;
  const uint64_t total = data.size() + more.size();
  uint64_t found = 0;
  for (uint32_t i = 0; i < num_sge && i < kMaxSge && found < total; ++i) {
    if (offset >= sge[i].length) {
      offset -= sge[i].length;
      continue;
    }
    const uint32_t n =
        static_cast<uint32_t>(std::min<uint64_t>(sge[i].length - offset, total - found));
    auto p = memory.local(sge[i].lkey, sge[i].addr + offset, n, kAccessLocalWrite);
    if (!p.ok()) return false;
    pieces[n_pieces++] = {*p, n};
    found += n;
    offset = 0;
  }
  if (found != total) return false;
  // Copies the two spans, in order, across the pieces.
  std::span<const uint8_t> src = data.empty() ? more : data;
  bool on_more = data.empty();
  for (uint32_t i = 0; i < n_pieces; ++i) {
    uint8_t* dst = pieces[i].dst;
    uint32_t left = pieces[i].len;
    while (left > 0) {
      if (src.empty() && !on_more) src = more, on_more = true;
      const size_t k = std::min<size_t>(left, src.size());
      std::memcpy(dst, src.data(), k);
      dst += k;
      left -= static_cast<uint32_t>(k);
      src = src.subspan(k);
    }
  }
  return true;
}

namespace {

class QpImpl final : public TransportQp {
 public:
  QpImpl(QpType type, uint32_t qpn, const QpCapabilities& caps, MemoryAccess& memory,
         CompletionSink& send_cq, CompletionSink& recv_cq, RecvQueue* srq)
      : ctx_(type, qpn, caps, memory, send_cq, recv_cq, srq),
        requester_(ctx_),
        completer_(ctx_, requester_),
        responder_(ctx_) {}

  int post_send(const SendWr& wr) override {
    const int rc = requester_.post(wr);
    settle();
    return rc;
  }

  int post_send_all(std::span<const SendWr> wrs) override {
    for (const SendWr& wr : wrs) {
      if (int err = requester_.check(wr)) return err;
    }
    if (wrs.size() > requester_.room()) return ENOMEM;
    for (const SendWr& wr : wrs) {
      const int rc = requester_.post(wr);
      UROCE_CHECK(rc == 0);
    }
    settle();
    return 0;
  }

  int post_recv(const RecvWr& wr) override {
    // Receives go to the SRQ (ibv_post_srq_recv); an XRC initiator receives nothing and a target
    // takes its receives from the SRQ each request names.
    if (ctx_.srq != nullptr || ctx_.type == QpType::kXrcSend || ctx_.type == QpType::kXrcRecv)
      return EINVAL;
    if (ctx_.state == QpState::kReset) return EINVAL;
    if (ctx_.state == QpState::kErr) {
      if (wr.sg_list.size() > ctx_.caps.max_recv_sge) return EINVAL;
      // IBA 10.8.3.3: in ERR every new receive WR completes with a flush error.
      Completion c;
      c.wr_id = wr.wr_id;
      c.status = WcStatus::kWrFlushErr;
      c.opcode = WcOpcode::kRecv;
      c.qp_num = ctx_.qpn;
      ctx_.push_recv(c);
      return 0;
    }
    return ctx_.own_rq.post(wr);
  }

  void configure(const QpConfig& config) override {
    ctx_.config = config;
    ctx_.config.path_mtu_bytes = std::clamp<uint32_t>(config.path_mtu_bytes, 256, 4096);
    // The verbs layer may pass the whole attribute set at every transition; the send PSN is
    // taken only until the first packet goes (WRs posted earlier have no PSNs yet).
    if (!sent_any_) {
      ctx_.una = ctx_.next_psn = ctx_.max_psn = config.sq_psn;
      completer_.reset();
    }
    responder_.configure();
    // UD has no connection to pace or to notify (docs/cc.md): congestion control is RC/UC only.
    congestion_.configure(ctx_.type == QpType::kUd ? CongestionConfig{} : config.congestion,
                          ctx_.pacer, ctx_.counters);
  }

  void set_state(QpState state) override {
    if (state == ctx_.state) return;
    if (state == QpState::kReset) {
      ctx_.state = state;
      reset_all();
      return;
    }
    if (state == QpState::kErr) {
      enter_error();
      return;
    }
    ctx_.state = state;
  }
  QpState state() const override { return ctx_.state; }
  uint32_t packets_in_flight() const override { return ctx_.in_flight(); }

  void receive(const RxPacket& packet, Nanos now) override {
    const wire::TransportHeaders& h = *packet.hdr;
    ++ctx_.counters.rx_packets;
    ctx_.counters.rx_bytes += packet.payload.size();
    if (packet.ce) ++ctx_.counters.ce_marked;
    const wire::OpcodeInfo& info = wire::opcode_info(h.bth.opcode);
    if (info.kind == wire::Kind::kCnp) {
      ++ctx_.counters.cnps_received;
      if (ctx_.type == QpType::kUd)
        ++ctx_.counters.rx_dropped;  // a CNP names a connected QP (IBA annex A17.9.2)
      else
        congestion_.on_cnp(now, ctx_.pacer);
      return;
    }
    // IBA 9.6.1.1: the opcode's service must be the QP's, and (9.6.1.1.1) the P_Key must match
    // in its low 15 bits.
    if (!service_matches(info) ||
        (h.bth.pkey & kPkeyBaseMask) != (ctx_.config.pkey & kPkeyBaseMask)) {
      ++ctx_.counters.rx_dropped;
      return;
    }
    if (packet.ce) congestion_.on_ce(now);
    if (info.is_request()) {
      if (ctx_.type == QpType::kXrcSend) {
        ++ctx_.counters.rx_dropped;  // an initiator has no responder (annex A14)
        return;
      }
      responder_.receive(packet, now);
    } else {
      if (ctx_.type == QpType::kXrcRecv) {
        ++ctx_.counters.rx_dropped;  // a target has no requester
        return;
      }
      completer_.receive(h, packet.payload, now);
    }
    settle();
  }

  size_t transmit(Nanos now, PacketSink& sink, size_t budget) override {
    completer_.on_timer(now);
    congestion_.on_timer(now, ctx_.pacer);
    settle();
    size_t sent = 0;
    TxPacket pkt;
    while (sent < budget) {
      pkt.clear();
      if (congestion_.take_cnp(ctx_.config.dest_qpn, ctx_.config.path, pkt, ctx_.counters)) {
        emit(sink, pkt);  // a CNP goes first and unpaced: it is what slows the sender down
      } else if (responder_.build(now, pkt)) {
        emit(sink, pkt);
        if (pkt.payload_len) {
          congestion_.on_sent(now, pkt.payload_len, ctx_.pacer);
          congestion_.charge_framing(now, pkt, ctx_.pacer);
        }
      } else if (requester_.build(now, pkt)) {
        emit(sink, pkt);
        congestion_.on_sent(now, pkt.payload_len, ctx_.pacer);
        congestion_.charge_framing(now, pkt, ctx_.pacer);
        completer_.on_sent(now);
        sent_any_ = true;
      } else {
        break;
      }
      ++sent;
    }
    settle();
    return sent;
  }

  Nanos next_deadline(Nanos now) const override {
    Nanos t = std::min(responder_.ready_at(now), requester_.ready_at(now));
    if (ctx_.state != QpState::kErr) t = std::min(t, completer_.deadline());
    if (ctx_.state != QpState::kErr && ctx_.state != QpState::kReset)
      t = std::min(t, std::max(now, congestion_.deadline(now)));
    return t;
  }

  uint32_t qpn() const override { return ctx_.qpn; }
  const QpCounters& counters() const override { return ctx_.counters; }
  cc::Pacer& pacer() override { return ctx_.pacer; }
  void set_xrc_srqs(XrcSrqDirectory* srqs) override { ctx_.xrc_srqs = srqs; }

 private:
  bool service_matches(const wire::OpcodeInfo& info) const {
    switch (ctx_.type) {
      case QpType::kRc:
        return info.service == wire::Service::kRc;
      case QpType::kUc:
        return info.service == wire::Service::kUc;
      case QpType::kUd:
        return info.service == wire::Service::kUd;
      case QpType::kXrcSend:
      case QpType::kXrcRecv:
        return info.service == wire::Service::kXrc;
    }
    return false;
  }

  void emit(PacketSink& sink, const TxPacket& pkt) {
    ++ctx_.counters.tx_packets;
    ctx_.counters.tx_bytes += pkt.header_len + pkt.payload_len + pkt.pad;
    sink.transmit(pkt);
  }

  // Retires finished WQEs and carries out an error an engine raised, in that order, so an
  // error completion precedes the flushes it causes.
  void settle() {
    if (ctx_.state != QpState::kErr) completer_.retire();
    requester_.clamp();
    if (ctx_.error_pending) enter_error();
  }

  void enter_error() {
    ctx_.error_pending = false;
    if (ctx_.state == QpState::kErr) return;
    ctx_.state = QpState::kErr;
    // IBA 10.8.3.3: every outstanding WR completes with WR_FLUSH_ERR, in posting order,
    // signaled or not.
    while (!ctx_.sq.empty()) {
      const SendWqe& w = ctx_.sq.at(ctx_.sq.head());
      ctx_.push_send(send_completion(ctx_, w, WcStatus::kWrFlushErr));
      ctx_.sq.pop();
    }
    ctx_.rd_atomic_outstanding = 0;
    requester_.reset();
    auto flush_recv = [this](const RecvWqe& w) {
      Completion c;
      c.wr_id = w.wr_id;
      c.status = WcStatus::kWrFlushErr;
      c.opcode = WcOpcode::kRecv;
      c.qp_num = ctx_.qpn;
      ctx_.push_recv(c);
    };
    responder_.flush_current_recv();
    if (ctx_.srq == nullptr) ctx_.own_rq.drain(flush_recv);
    ctx_.error_pending = false;  // CQ overruns while flushing change nothing more
  }

  void reset_all() {
    ctx_.sq.clear();
    ctx_.own_rq.clear();
    ctx_.rd_atomic_outstanding = 0;
    ctx_.error_pending = false;
    ctx_.una = ctx_.next_psn = ctx_.max_psn = ctx_.config.sq_psn;
    requester_.reset();
    completer_.reset();
    responder_.reset();
    sent_any_ = false;
  }

  QpContext ctx_;
  Requester requester_;
  Completer completer_;
  Responder responder_;
  Congestion congestion_;
  bool sent_any_ = false;
};

}  // namespace

std::unique_ptr<TransportQp> TransportQp::create(QpType type, uint32_t qpn,
                                                 const QpCapabilities& caps, MemoryAccess& memory,
                                                 CompletionSink& send_cq, CompletionSink& recv_cq,
                                                 RecvQueue* srq) {
  QpCapabilities c = caps;
  c.max_send_sge = std::min(c.max_send_sge, kMaxSge);
  c.max_recv_sge = std::min(c.max_recv_sge, kMaxSge);
  return std::make_unique<QpImpl>(type, qpn, c, memory, send_cq, recv_cq, srq);
}

}  // namespace uroce::transport
