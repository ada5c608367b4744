#include "verbs/qp.h"

#include <cerrno>
#include <cstring>
#include <shared_mutex>

#include "common/check.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/xrc.h"

namespace uroce::verbs {
namespace {

using S = QpState;
using T = QpType;

constexpr uint32_t kQpAccessMask = transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                                   transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;

struct PerType {
  uint32_t rc = 0, uc = 0, ud = 0, xrc_ini = 0, xrc_tgt = 0;
  uint32_t of(T t) const {
    switch (t) {
      case T::kRc:
        return rc;
      case T::kUc:
        return uc;
      case T::kUd:
        return ud;
      case T::kXrcSend:
        return xrc_ini;
      case T::kXrcRecv:
        return xrc_tgt;
    }
    return 0;
  }
};
struct Row {
  S from, to;
  PerType required, optional;
};

// IBA 10.3.1 table 91 for RC, UC and UD, in the form of Linux's qp_state_table (drivers/infiniband
// /core/verbs.c), which libibverbs applications are written against, with its XRC columns: an
// initiator takes RC's requester attributes (no MAX_DEST_RD_ATOMIC or MIN_RNR_TIMER, as it
// answers nothing), a target RC's responder ones (no RETRY_CNT, RNR_RETRY or MAX_QP_RD_ATOMIC, as
// it requests nothing; SQ_PSN and TIMEOUT stay required at RTS, as in Linux and mlx5). Pairs
// absent here are invalid. Any state may go to RESET or ERR with the state bit alone.
constexpr uint32_t kUdInit = kQpPkeyIndex | kQpPort | kQpQkey;
constexpr uint32_t kConnInit = kQpPkeyIndex | kQpPort | kQpAccessFlags;
constexpr uint32_t kConnRtr = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
constexpr uint32_t kConnRtrOpt = kQpAltPath | kQpAccessFlags | kQpPkeyIndex;
constexpr uint32_t kConnRts = kQpCurState | kQpAltPath | kQpAccessFlags | kQpPathMigState;
constexpr uint32_t kRcRts = kConnRts | kQpMinRnrTimer;
constexpr uint32_t kUdRts = kQpCurState | kQpQkey;
constexpr Row kTable[] = {
    {S::kReset, S::kInit, {kConnInit, kConnInit, kUdInit, kConnInit, kConnInit}, {}},
    {S::kInit, S::kInit, {}, {kConnInit, kConnInit, kUdInit, kConnInit, kConnInit}},
    {S::kInit,
     S::kRtr,
     {kConnRtr | kQpMaxDestRdAtomic | kQpMinRnrTimer, kConnRtr, 0, kConnRtr,
      kConnRtr | kQpMaxDestRdAtomic | kQpMinRnrTimer},
     {kConnRtrOpt, kConnRtrOpt, kQpPkeyIndex | kQpQkey, kConnRtrOpt, kConnRtrOpt}},
    {S::kRtr,
     S::kRts,
     {kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic, kQpSqPsn, kQpSqPsn,
      kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic, kQpTimeout | kQpSqPsn},
     {kRcRts, kConnRts, kUdRts, kConnRts, kRcRts}},
    {S::kRts, S::kRts, {}, {kRcRts, kConnRts, kUdRts, kConnRts, kRcRts}},
    {S::kRts,
     S::kSqd,
     {},
     {kQpEnSqdAsyncNotify, kQpEnSqdAsyncNotify, kQpEnSqdAsyncNotify, kQpEnSqdAsyncNotify,
      kQpEnSqdAsyncNotify}},
    {S::kSqd, S::kRts, {}, {kRcRts, kConnRts, kUdRts, kConnRts, kRcRts}},
    {S::kSqd,
     S::kSqd,
     {},
     {kQpPort | kQpAv | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic |
          kQpMaxDestRdAtomic | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpMinRnrTimer |
          kQpPathMigState,
      kQpAv | kQpAltPath | kQpAccessFlags | kQpPkeyIndex | kQpPathMigState, kQpPkeyIndex | kQpQkey,
      kQpPort | kQpAv | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic | kQpAltPath |
          kQpAccessFlags | kQpPkeyIndex | kQpPathMigState,
      kQpPort | kQpAv | kQpTimeout | kQpMaxDestRdAtomic | kQpAltPath | kQpAccessFlags |
          kQpPkeyIndex | kQpMinRnrTimer | kQpPathMigState}},
    // SQE exists for UC and UD only: an RC (or XRC) send error takes the QP to ERR (IBA 10.3.1).
    {S::kSqe, S::kRts, {}, {0, kQpCurState | kQpAccessFlags, kUdRts, 0, 0}},
};

bool valid_state(S s) {
  return static_cast<uint8_t>(s) <= static_cast<uint8_t>(S::kErr);
}
bool valid_type(T t) {
  return t == T::kRc || t == T::kUc || t == T::kUd || t == T::kXrcSend || t == T::kXrcRecv;
}
bool is_xrc(T t) {
  return t == T::kXrcSend || t == T::kXrcRecv;
}

uint16_t udp_source_port(uint32_t flow_label, uint32_t a, uint32_t b) {
  // RoCEv2 NICs spread flows over ECMP paths by the UDP source port, taken from the flow label
  // when there is one (as rdma_flow_label_to_udp_sport does) and from the QPNs otherwise; the
  // top two bits are set so the port is in the dynamic range (IBA annex A17.3.2).
  uint32_t x = flow_label ? (flow_label & 0x3fff) ^ ((flow_label & 0xfc000) >> 14)
                          : (a * 0x9e3779b1u) ^ (b * 0x85ebca6bu);
  x ^= x >> 14;
  return static_cast<uint16_t>(0xc000 | (x & 0x3fff));
}

}  // namespace

TransitionMasks transition_masks(QpState from, QpState to, QpType type) {
  if (!valid_state(from) || !valid_state(to) || !valid_type(type)) return {};
  if (to == S::kReset || to == S::kErr) return {true, 0, 0};
  for (const Row& r : kTable) {
    if (r.from != from || r.to != to) continue;
    if (from == S::kSqe && (type == T::kRc || is_xrc(type))) return {};
    return {true, r.required.of(type), r.optional.of(type)};
  }
  return {};
}

Result<transport::AddressVector> make_address_vector(const AhAttr& ah, const Device& dev,
                                                     uint32_t src_qpn, uint32_t dst_qpn) {
  // RoCE routes by GRH only (IBA annex A16/A17): no GRH, no destination.
  if (!ah.is_global || ah.port_num != 1) return Err(EINVAL);
  if (ah.grh.sgid_index >= static_cast<uint32_t>(dev.port_attr().gid_tbl_len)) return Err(EINVAL);
  // The v1 entry asks for RoCE v1 frames, which only a link writing Ethernet itself can send; on
  // the UDP link the path is refused here rather than sent as v2 under the caller's feet.
  const bool roce_v1 = gid_type_at(ah.grh.sgid_index) == GidType::kRoceV1;
  if (roce_v1 && !dev.carries_roce_v1()) return Err(EINVAL);
  if (ah.grh.flow_label >> 20) return Err(EINVAL);
  bool zero = true;
  for (uint8_t b : ah.grh.dgid) zero = zero && b == 0;
  if (zero) return Err(EINVAL);
  // RoCE v1 cannot cross a router (IBA annex A16): a peer off the link's Ethernet segment is
  // unreachable, said here rather than as a retry-exceeded completion once every packet is lost.
  if (roce_v1 && !dev.reaches_roce_v1(ah.grh.dgid)) return Err(EHOSTUNREACH);
  transport::AddressVector av;
  av.dgid = ah.grh.dgid;
  av.traffic_class = ah.grh.traffic_class;
  av.hop_limit = ah.grh.hop_limit;
  av.flow_label = ah.grh.flow_label;
  av.udp_src_port = udp_source_port(ah.grh.flow_label, src_qpn, dst_qpn);
  av.roce_v1 = roce_v1;
  av.service_level = ah.sl;
  return av;
}

// Counts completion statuses on their way to a CQ, for the error counters the transport does
// not keep, and notes an overrun so the QP can go to ERR. `cq` is null for the queue an XRC QP
// lacks (an initiator's receive side, both of a target's), where the transport completes nothing.
class QueuePair::CountingSink : public transport::CompletionSink {
 public:
  CountingSink(QueuePair& qp, CompletionQueue* cq) : qp_(qp), cq_(cq) {}
  bool push(const transport::Completion& c) override {
    using transport::WcStatus;
    if (c.status != WcStatus::kSuccess) {
      bool recv =
          static_cast<uint8_t>(c.opcode) >= static_cast<uint8_t>(transport::WcOpcode::kRecv);
      if (c.status == WcStatus::kWrFlushErr) {
        (recv ? qp_.resp_cqe_flush_error_ : qp_.req_cqe_flush_error_).fetch_add(1);
      } else {
        (recv ? qp_.resp_cqe_error_ : qp_.req_cqe_error_).fetch_add(1);
      }
      if (c.status == WcStatus::kRnrRetryExcErr) qp_.rnr_nak_retry_err_.fetch_add(1);
    }
    if (cq_ == nullptr) return true;
    if (cq_->push(c)) {
      ++pushed;
      return true;
    }
    overrun = true;
    return false;
  }
  bool overrun = false;  // guarded by the QP's lock, like every transport call
  uint64_t pushed = 0;   // likewise

 private:
  QueuePair& qp_;
  CompletionQueue* cq_;
};

// The QP's lock, then its SRQ's: the transport pops the SRQ, which application threads post to.
struct QueuePair::Guard {
  explicit Guard(const QueuePair& qp)
      : qp_lock(qp.mu_),
        srq_lock(qp.init_.srq ? std::unique_lock(qp.init_.srq->mu_)
                              : std::unique_lock<DeviceMutex>()) {}
  std::unique_lock<DeviceMutex> qp_lock;
  std::unique_lock<DeviceMutex> srq_lock;
};

QueuePair::QueuePair(ProtectionDomain& pd, const QpInitAttr& init)
    : pd_(pd), dev_(pd.device()), type_(init.qp_type), init_(init) {
  mu_.set_single_threaded(dev_.config().single_threaded);
  send_sink_ = std::make_unique<CountingSink>(*this, init.send_cq);
  recv_sink_ = std::make_unique<CountingSink>(*this, init.recv_cq);
  // Defaults a query reports before the first modify, as a fresh ibv QP does.
  attr_.path_mtu = dev_.port_attr().active_mtu;
  attr_.cap = init.cap;
}

QueuePair::~QueuePair() {
  {
    std::unique_lock barrier(dev_.quiesce_);
    if (qpn_ != 0) {
      dev_.send_ready_before_destroy(this);
      dev_.detach_all_mcast(this);
      dev_.unregister_qp(this);
    }
    tqp_.reset();
    // Its completions go with it, as with rdma-core's mlx5 provider (its destroy cleans both
    // CQs): libfabric's ofi_rxm closes a connection's endpoint and then drains the shared CQ,
    // reposting each receive it finds to that connection's endpoint, so a completion left
    // behind sends it into freed memory. Still under the barrier: no pass can push one now, and
    // no new QP can take this number before the purge.
    if (qpn_ != 0) purge_completions();
  }
  pd_.context().async_events().purge(this);
  if (init_.send_cq) init_.send_cq->users_.fetch_sub(1);
  if (init_.recv_cq) init_.recv_cq->users_.fetch_sub(1);
  if (init_.srq) init_.srq->users_.fetch_sub(1);
  if (init_.xrcd) init_.xrcd->target_qps_.fetch_sub(1);
  pd_.users_.fetch_sub(1);
  dev_.totals_.give_recv_wqes(recv_wqes_charged_);
  dev_.release(Device::kQp);
}

Result<std::unique_ptr<QueuePair>> ProtectionDomain::create_qp(const QpInitAttr& attr) {
  const DeviceAttr& d = device().attr();
  if (!valid_type(attr.qp_type)) return Err(EINVAL);
  QpInitAttr init = attr;
  // As Linux's uverbs: an XRC initiator has no receive side (its recv CQ and SRQ are ignored); a
  // target has neither CQ nor SRQ of its own (its completions go to the CQ of the XRC SRQ each
  // request names) and only the hidden PD of its domain.
  if (attr.qp_type == QpType::kXrcSend) {
    init.recv_cq = nullptr;
    init.srq = nullptr;
    init.xrcd = nullptr;
    init.cap.max_recv_wr = init.cap.max_recv_sge = 0;
    if (!init.send_cq) return Err(EINVAL);
  } else if (attr.qp_type == QpType::kXrcRecv) {
    if (!attr.xrcd || attr.xrcd->target_pd_.get() != this) return Err(EINVAL);
    init.send_cq = init.recv_cq = nullptr;
    init.srq = nullptr;
    init.cap = {0, 0, 0, 0, 0};
  } else {
    init.xrcd = nullptr;
    if (!init.send_cq || !init.recv_cq) return Err(EINVAL);
  }
  if (init.send_cq && &init.send_cq->context() != &ctx_) return Err(EINVAL);
  if (init.recv_cq && &init.recv_cq->context() != &ctx_) return Err(EINVAL);
  if (init.srq && &init.srq->pd().context() != &ctx_) return Err(EINVAL);
  const QpCapabilities& c = init.cap;
  if (c.max_send_wr > d.max_qp_wr || c.max_recv_wr > d.max_qp_wr || c.max_send_sge > d.max_sge ||
      c.max_recv_sge > d.max_sge || c.max_inline_data > d.max_inline_data)
    return Err(EINVAL);
  if (init.xrcd) {
    std::atomic<uint32_t>& n = init.xrcd->target_qps_;
    uint32_t cur = n.load();
    do {
      if (cur >= d.max_xrcd_target_qps) return Err(ENOMEM);
    } while (!n.compare_exchange_weak(cur, cur + 1));
  }
  if (!device().acquire(Device::kQp)) {
    if (init.xrcd) init.xrcd->target_qps_.fetch_sub(1);
    return Err(ENOMEM);
  }

  // ibv_create_qp returns the capabilities granted, which may exceed those asked for; every queue
  // the QP has gets at least one entry so the transport never sees an empty ring (a target's
  // send queue stays at one entry the transport never fills, as it requests nothing).
  const bool own_rq = !init.srq && !is_xrc(init.qp_type);
  init.cap.max_send_wr = std::max<uint32_t>(c.max_send_wr, 1);
  init.cap.max_recv_wr = own_rq ? std::max<uint32_t>(c.max_recv_wr, 1) : 0;
  init.cap.max_send_sge = std::max<uint32_t>(c.max_send_sge, 1);
  init.cap.max_recv_sge = own_rq ? std::max<uint32_t>(c.max_recv_sge, 1) : 0;
  // As rxe: a send queue entry has room for max_send_sge gather entries (16 bytes each, an
  // ibv_sge), and inline data may use that room, so at least that much inline data is granted
  // (rdma-core's rdma_xclient posts 16 inline bytes on a QP that asked for none and one SGE).
  constexpr uint32_t kSgeBytes = 16;
  if (init.qp_type != QpType::kXrcRecv) {
    init.cap.max_inline_data =
        std::min(d.max_inline_data, std::max(c.max_inline_data, init.cap.max_send_sge * kSgeBytes));
  }
  // Receive WQEs are allocated now, so they count against the device's total now.
  if (!device().totals_.take_recv_wqes(init.cap.max_recv_wr)) {
    device().release(Device::kQp);
    if (init.xrcd) init.xrcd->target_qps_.fetch_sub(1);
    return Err(ENOMEM);
  }
  std::unique_ptr<QueuePair> qp(new QueuePair(*this, init));
  qp->recv_wqes_charged_ = init.cap.max_recv_wr;
  users_.fetch_add(1);
  if (init.send_cq) init.send_cq->users_.fetch_add(1);
  if (init.recv_cq) init.recv_cq->users_.fetch_add(1);
  if (init.srq) init.srq->users_.fetch_add(1);
  // From here on ~QueuePair undoes everything above.

  std::unique_lock barrier(device().quiesce_);
  auto qpn = device().register_qp(qp.get());
  if (!qpn) return Err(qpn.error());
  qp->qpn_ = *qpn;
  qp->tqp_ =
      device().config_.transport_factory(init.qp_type, *qpn, init.cap, *this, *qp->send_sink_,
                                         *qp->recv_sink_, init.srq ? &init.srq->rq_ : nullptr);
  if (qp->tqp_ && init.xrcd) qp->tqp_->set_xrc_srqs(init.xrcd);
  barrier.unlock();
  if (!qp->tqp_) return Err(ENOMEM);
  return qp;
}

QpState QueuePair::state() const {
  std::lock_guard lock(mu_);
  return tqp_->state();
}

int QueuePair::validate(const QpAttr& a, uint32_t mask, QpState cur, QpState next) const {
  TransitionMasks t = transition_masks(cur, next, type_);
  if (!t.valid) return EINVAL;
  const uint32_t given = mask & ~kQpState;
  if ((given & t.required) != t.required || (given & ~(t.required | t.optional))) return EINVAL;

  const DeviceAttr& d = dev_.attr();
  // A stated current state must be the actual one (IBA 11.2.4.2, "current QP state").
  if ((mask & kQpCurState) && a.cur_qp_state != cur) return EINVAL;
  if ((mask & kQpPkeyIndex) && a.pkey_index >= dev_.port_attr().pkey_tbl_len) return EINVAL;
  if ((mask & kQpPort) && a.port_num != 1) return EINVAL;
  if (mask & kQpPathMtu) {
    auto m = static_cast<uint8_t>(a.path_mtu);
    if (m < static_cast<uint8_t>(Mtu::k256) ||
        m > static_cast<uint8_t>(dev_.port_attr().active_mtu))
      return EINVAL;
  }
  if (mask & kQpAv) {
    auto av = make_address_vector(a.ah_attr, dev_, qpn_, a.dest_qp_num);
    if (!av) return av.error();  // EINVAL, or EHOSTUNREACH for a v1 peer off the segment
  }
  if (mask & kQpAltPath) {
    if (a.alt_port_num != 1 || a.alt_pkey_index != 0) return EINVAL;
    auto av = make_address_vector(a.alt_ah_attr, dev_, qpn_, 0);
    if (!av) return av.error();
  }
  if ((mask & kQpPathMigState) && a.path_mig_state > 2) return EINVAL;  // ibv_mig_state
  if ((mask & kQpDestQpn) && a.dest_qp_num >> 24) return EINVAL;
  // Field widths of IBA 11.2.4.2: timers and retry counts.
  if ((mask & kQpTimeout) && a.timeout > 31) return EINVAL;
  if ((mask & kQpMinRnrTimer) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & kQpRetryCnt) && a.retry_cnt > 7) return EINVAL;
  if ((mask & kQpRnrRetry) && a.rnr_retry > 7) return EINVAL;
  if ((mask & kQpMaxQpRdAtomic) && a.max_rd_atomic > d.max_qp_init_rd_atom) return EINVAL;
  if ((mask & kQpMaxDestRdAtomic) && a.max_dest_rd_atomic > d.max_qp_rd_atom) return EINVAL;
  return 0;
}

void QueuePair::apply(const QpAttr& a, uint32_t mask) {
  if (mask & kQpPkeyIndex) attr_.pkey_index = a.pkey_index;
  if (mask & kQpPort) attr_.port_num = a.port_num;
  if (mask & kQpQkey) attr_.qkey = a.qkey;
  // Bits that only mean something to an MR (IBV_ACCESS_ON_DEMAND, ZERO_BASED, ...) are dropped,
  // not refused: the kernel passes qp_access_flags on unchecked and mlx5 and rxe use only the
  // remote-access bits, so programs (pyverbs' ODP tests) hand a QP their MR's access flags.
  if (mask & kQpAccessFlags) attr_.qp_access_flags = a.qp_access_flags & kQpAccessMask;
  if (mask & kQpPathMtu) attr_.path_mtu = a.path_mtu;
  if (mask & kQpAv) attr_.ah_attr = a.ah_attr;
  if (mask & kQpAltPath) {
    // Stored and reported, never used: uroce has one port and no automatic path migration.
    attr_.alt_ah_attr = a.alt_ah_attr;
    attr_.alt_port_num = a.alt_port_num;
    attr_.alt_pkey_index = a.alt_pkey_index;
    attr_.alt_timeout = a.alt_timeout;
  }
  if (mask & kQpPathMigState) attr_.path_mig_state = a.path_mig_state;
  if (mask & kQpDestQpn) attr_.dest_qp_num = a.dest_qp_num;
  // PSNs are 24 bits (IBA 9.7.1); like the kernel drivers, uroce keeps the low 24 bits of what
  // the application passes (many pass lrand48() unmasked).
  if (mask & kQpRqPsn) attr_.rq_psn = a.rq_psn & Psn::kMask;
  if (mask & kQpSqPsn) attr_.sq_psn = a.sq_psn & Psn::kMask;
  if (mask & kQpTimeout) attr_.timeout = a.timeout;
  if (mask & kQpMinRnrTimer) attr_.min_rnr_timer = a.min_rnr_timer;
  if (mask & kQpRetryCnt) attr_.retry_cnt = a.retry_cnt;
  if (mask & kQpRnrRetry) attr_.rnr_retry = a.rnr_retry;
  if (mask & kQpMaxQpRdAtomic) attr_.max_rd_atomic = a.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) attr_.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & kQpEnSqdAsyncNotify) attr_.en_sqd_async_notify = a.en_sqd_async_notify;
}

transport::QpConfig QueuePair::config() const {
  transport::QpConfig c;
  c.dest_qpn = attr_.dest_qp_num;
  c.sq_psn = Psn(attr_.sq_psn);
  c.rq_psn = Psn(attr_.rq_psn);
  c.path_mtu_bytes = mtu_bytes(attr_.path_mtu);
  c.timeout = attr_.timeout;
  c.retry_cnt = attr_.retry_cnt;
  c.rnr_retry = attr_.rnr_retry;
  c.min_rnr_timer = attr_.min_rnr_timer;
  c.max_rd_atomic = attr_.max_rd_atomic;
  c.max_dest_rd_atomic = attr_.max_dest_rd_atomic;
  c.qp_access_flags = attr_.qp_access_flags;
  c.qkey = attr_.qkey;
  c.pkey = 0xffff;
  if (auto av = make_address_vector(attr_.ah_attr, dev_, qpn_, attr_.dest_qp_num)) c.path = *av;
  c.sq_sig_all = init_.sq_sig_all;
  c.congestion = init_.congestion;
  c.loss_recovery = init_.loss_recovery;
  c.write_segments = init_.write_segments;
  if (init_.max_psn_window != 0) c.max_psn_window = init_.max_psn_window;
  c.totals = &dev_.totals_;
  return c;
}

void QueuePair::purge_completions() {
  if (init_.send_cq) init_.send_cq->purge(qpn_);
  if (init_.recv_cq && init_.recv_cq != init_.send_cq) init_.recv_cq->purge(qpn_);
}

int QueuePair::modify(const QpAttr& attr, uint32_t mask) {
  std::shared_lock quiesce(dev_.quiesce_);
  Guard guard(*this);
  const QpState cur = tqp_->state();
  const QpState next = (mask & kQpState) ? attr.qp_state : cur;
  if (int err = validate(attr, mask, cur, next)) return err;
  apply(attr, mask);
  if (mask & ~(kQpState | kQpCurState)) tqp_->configure(config());
  if (next != cur || next == QpState::kReset || next == QpState::kErr) {
    tqp_->set_state(next);
    if (next == QpState::kReset) {
      fatal_reported_ = false;
      purge_completions();
    }
  }
  check_fatal_locked();
  dev_.mark_ready(*this);  // a new state or attribute may let it send (RTS, SQD -> RTS, pacing)
  return 0;
}

QpAttr QueuePair::query() const {
  std::lock_guard lock(mu_);
  QpAttr a = attr_;
  a.qp_state = a.cur_qp_state = tqp_->state();
  a.cap = init_.cap;
  return a;
}

void QueuePair::check_fatal_locked() {
  if (!send_sink_->overrun && !recv_sink_->overrun) return;
  send_sink_->overrun = recv_sink_->overrun = false;
  if (tqp_->state() != QpState::kErr) tqp_->set_state(QpState::kErr);
  if (!fatal_reported_) {
    fatal_reported_ = true;
    AsyncEvent e;
    e.type = EventType::kQpFatal;
    e.qp = this;
    pd_.context().async_events().post(e);
  }
}

int QueuePair::post_send(const transport::SendWr& wr) {
  std::shared_lock quiesce(dev_.quiesce_);
  Guard guard(*this);
  QpState s = tqp_->state();
  // ibv_post_send(3): the send queue accepts work only from RTS on (IBA 10.3.1; in SQD it
  // queues, in SQE and ERR it flushes).
  if (s == QpState::kReset || s == QpState::kInit || s == QpState::kRtr) return EINVAL;
  int err = tqp_->post_send(wr);
  check_fatal_locked();
  if (err == 0) {
    in_flight_at_post_.store(tqp_->packets_in_flight(), std::memory_order_relaxed);
    dev_.mark_ready(*this);
  }
  return err;
}

int QueuePair::post_send(std::span<const transport::SendWr> wrs, size_t* bad) {
  for (size_t i = 0; i < wrs.size(); ++i) {
    if (int err = post_send(wrs[i])) {
      if (bad) *bad = i;
      return err;
    }
  }
  return 0;
}

int QueuePair::post_send_all(std::span<const transport::SendWr> wrs) {
  std::shared_lock quiesce(dev_.quiesce_);
  Guard guard(*this);
  QpState s = tqp_->state();
  if (s == QpState::kReset || s == QpState::kInit || s == QpState::kRtr) return EINVAL;
  int err = tqp_->post_send_all(wrs);
  check_fatal_locked();
  if (err == 0) {
    in_flight_at_post_.store(tqp_->packets_in_flight(), std::memory_order_relaxed);
    dev_.mark_ready(*this);
  }
  return err;
}

int QueuePair::post_recv(const transport::RecvWr& wr) {
  // Receives go to the SRQ; an XRC initiator receives nothing, a target takes its receives
  // from the XRC SRQ each request names.
  if (init_.srq || is_xrc(type_)) return EINVAL;
  std::shared_lock quiesce(dev_.quiesce_);
  Guard guard(*this);
  // The receive queue accepts work from INIT on (IBA 10.3.1).
  if (tqp_->state() == QpState::kReset) return EINVAL;
  int err = tqp_->post_recv(wr);
  check_fatal_locked();
  return err;
}

int QueuePair::post_recv(std::span<const transport::RecvWr> wrs, size_t* bad) {
  for (size_t i = 0; i < wrs.size(); ++i) {
    if (int err = post_recv(wrs[i])) {
      if (bad) *bad = i;
      return err;
    }
  }
  return 0;
}

bool QueuePair::on_path(const wire::RxPacket& packet) const {
  if (type_ == QpType::kUd) return true;
  // memcmp of a constant 16 bytes compiles to two loads per GID; std::array's == did not.
  return std::memcmp(packet.sgid.data(), attr_.ah_attr.grh.dgid.data(), 16) == 0 &&
         std::memcmp(packet.dgid.data(), dev_.gid().data(), 16) == 0;
}

int QueuePair::attach_mcast(const Gid& gid) {
  return dev_.attach_mcast(*this, gid);
}

int QueuePair::detach_mcast(const Gid& gid) {
  return dev_.detach_mcast(*this, gid);
}

QueuePair::Delivery QueuePair::receive(const wire::RxPacket& packet, Nanos now) {
  Guard guard(*this);
  QpState s = tqp_->state();
  if (s == QpState::kReset || s == QpState::kInit) return Delivery::kWrongState;
  if (!on_path(packet)) {
    rx_path_drops_.fetch_add(1, std::memory_order_relaxed);
    return Delivery::kWrongPath;
  }
  const uint64_t received_before = recv_sink_->pushed;
  tqp_->receive(packet, now);
  check_fatal_locked();
  dev_.mark_ready(*this);  // an answer to send, a timer to move, WQEs to retire
  return recv_sink_->pushed != received_before ? Delivery::kCompletedReceive : Delivery::kTaken;
}

size_t QueuePair::transmit(Nanos now, wire::PacketSink& sink, size_t budget) {
  Guard guard(*this);
  size_t n = 0;
  if (tqp_->state() != QpState::kReset) {
    n = tqp_->transmit(now, sink, budget);
    check_fatal_locked();
  }
  // Sending less than it could means it ran out of work for now: until its deadline the device
  // need not visit it. Decided under this QP's lock, so a post cannot come between.
  if (n < budget) {
    const Nanos next = tqp_->state() == QpState::kReset ? kNever : tqp_->next_deadline(now);
    if (next > now) dev_.set_idle(*this, next);
  }
  return n;
}

Nanos QueuePair::next_deadline(Nanos now) const {
  std::lock_guard lock(mu_);
  if (tqp_->state() == QpState::kReset) return kNever;
  return tqp_->next_deadline(now);
}

std::vector<Counter> QueuePair::counters() const {
  transport::QpCounters t;
  {
    std::lock_guard lock(mu_);
    if (tqp_) t = tqp_->counters();  // null only while a failed create_qp unwinds
  }
  return {
      {"tx_packets", t.tx_packets},
      {"tx_bytes", t.tx_bytes},
      {"rx_packets", t.rx_packets},
      {"rx_bytes", t.rx_bytes},
      {"retransmitted_packets", t.retransmitted_packets},
      {"retransmitted_bytes", t.retransmitted_bytes},
      {"local_ack_timeout_err", t.local_ack_timeouts},
      {"out_of_buffer", t.rnr_naks_sent},  // RNR NAKs sent for want of a receive WQE
      {"rnr_naks_received", t.rnr_naks_received},
      {"seq_naks_sent", t.seq_naks_sent},
      {"packet_seq_err", t.seq_naks_received},
      {"naks_sent", t.naks_sent},
      {"naks_received", t.naks_received},
      {"duplicate_request", t.duplicate_requests},
      {"out_of_sequence", t.out_of_sequence},
      // Selective repeat (transport/README.md): packets held out of order, dropped for want of
      // room, copies of held ones, and fallbacks to go-back-N. uroce's names.
      {"sr_ooo_held", t.ooo_buffered},
      {"sr_ooo_dropped", t.ooo_dropped},
      {"sr_ooo_duplicates", t.ooo_duplicates},
      {"sr_go_backs", t.sr_go_backs},
      {"rx_qp_drops", t.rx_dropped},
      // RC/UC packets from outside the QP's path (on_path()): not from the remote GID or not to
      // ours. rxe drops these in check_addr() without a counter; the name is uroce's.
      {"rx_path_drops", rx_path_drops_.load()},
      {"np_ecn_marked_roce_packets", t.ce_marked},
      {"np_cnp_sent", t.cnps_sent},
      {"rp_cnp_handled", t.cnps_received},
      // DCQCN's reaction point; mlx5 has no hw_counters for these, so the names are uroce's.
      {"rp_cnp_rate_cuts", t.rate_cuts},
      {"rp_rate_mbps", t.dcqcn_rate_mbps, Counter::Kind::kGaugeSum},
      {"rp_min_rate_mbps", t.dcqcn_min_rate_mbps, Counter::Kind::kGaugeMin},
      {"rnr_nak_retry_err", rnr_nak_retry_err_.load()},
      {"req_cqe_error", req_cqe_error_.load()},
      {"resp_cqe_error", resp_cqe_error_.load()},
      {"req_cqe_flush_error", req_cqe_flush_error_.load()},
      {"resp_cqe_flush_error", resp_cqe_flush_error_.load()},
  };
}

// ---- AddressHandle ----------------------------------------------------------------------------

AddressHandle::AddressHandle(ProtectionDomain& pd, const AhAttr& attr,
                             const transport::AddressVector& av)
    : pd_(pd), attr_(attr), av_(av) {}

AddressHandle::~AddressHandle() {
  pd_.users_.fetch_sub(1);
  pd_.device().release(Device::kAh);
}

Result<std::unique_ptr<AddressHandle>> ProtectionDomain::create_ah(const AhAttr& attr) {
  auto av = make_address_vector(attr, device(), 0, 0);
  if (!av) return Err(av.error());
  if (!device().acquire(Device::kAh)) return Err(ENOMEM);
  users_.fetch_add(1);
  return std::unique_ptr<AddressHandle>(new AddressHandle(*this, attr, *av));
}

// ---- SharedReceiveQueue -----------------------------------------------------------------------

SharedReceiveQueue::SharedReceiveQueue(ProtectionDomain& pd, const SrqAttr& attr)
    : pd_(pd), rq_(attr.max_wr, attr.max_sge) {
  mu_.set_single_threaded(pd.device().config().single_threaded);
  // Called by the transport's pop() under this SRQ's lock: posting an event takes only the event
  // queue's lock, which comes after it in the lock order.
  rq_.set_limit_hook([this] {
    AsyncEvent e;
    e.type = EventType::kSrqLimitReached;
    e.srq = this;
    pd_.context().async_events().post(e);
  });
}

SharedReceiveQueue::~SharedReceiveQueue() {
  UROCE_CHECK(users_.load() == 0);
  pd_.context().async_events().purge(this);
  pd_.users_.fetch_sub(1);
  pd_.device().totals_.give_recv_wqes(recv_wqes_charged_);
  pd_.device().release(Device::kSrq);
}

Result<std::unique_ptr<SharedReceiveQueue>> ProtectionDomain::create_srq(const SrqAttr& attr) {
  const DeviceAttr& d = device().attr();
  if (attr.max_wr == 0 || attr.max_wr > d.max_srq_wr || attr.max_sge == 0 ||
      attr.max_sge > d.max_srq_sge)
    return Err(EINVAL);
  if (!device().acquire(Device::kSrq)) return Err(ENOMEM);
  if (!device().totals_.take_recv_wqes(attr.max_wr)) {
    device().release(Device::kSrq);
    return Err(ENOMEM);
  }
  users_.fetch_add(1);
  std::unique_ptr<SharedReceiveQueue> srq(new SharedReceiveQueue(*this, attr));
  srq->recv_wqes_charged_ = attr.max_wr;
  return srq;
}

int SharedReceiveQueue::post_recv(const transport::RecvWr& wr) {
  std::lock_guard lock(mu_);
  return rq_.post(wr);
}

int SharedReceiveQueue::modify(const SrqAttr& attr, uint32_t mask) {
  if (mask & ~(kSrqMaxWr | kSrqLimit)) return EINVAL;
  if (mask & kSrqMaxWr) return EINVAL;
  std::lock_guard lock(mu_);
  if ((mask & kSrqLimit) && attr.srq_limit > rq_.capacity()) return EINVAL;
  if (mask & kSrqLimit) rq_.arm_limit(attr.srq_limit);
  return 0;
}

SrqAttr SharedReceiveQueue::query() const {
  std::lock_guard lock(mu_);
  return {rq_.capacity(), rq_.max_sge(), rq_.limit()};
}

}  // namespace uroce::verbs
