// PD, MR, CQ, QP, SRQ and AH verbs over src/verbs. The layer is thin: ibv_* structures are
// copied field by field into the verbs layer's mirrors, whose enums equal libibverbs' (checked
// below), and errors pass through unchanged.
#include "api/ibverbs/objects.h"

#include <arpa/inet.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "api/ibverbs/abi.h"
#include "api/ibverbs/config.h"
#include "api/ibverbs/context_state.h"
#include "api/ibverbs/runtime.h"
#include "wire/packet.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace uroce::abi {
namespace {

namespace t = uroce::transport;
namespace v = uroce::verbs;

// ---- The enums the verbs layer mirrors -------------------------------------------------------
template <typename A, typename B>
constexpr bool same(A a, B b) {
  return static_cast<long long>(a) == static_cast<long long>(b);
}
static_assert(same(t::kWcGrh, IBV_WC_GRH));
static_assert(same(t::kWcWithImm, IBV_WC_WITH_IMM));
static_assert(same(t::kWcWithInvalidate, IBV_WC_WITH_INV));
static_assert(same(t::WrOpcode::kRdmaWrite, IBV_WR_RDMA_WRITE));
static_assert(same(t::WrOpcode::kRdmaWriteWithImm, IBV_WR_RDMA_WRITE_WITH_IMM));
static_assert(same(t::WrOpcode::kSend, IBV_WR_SEND));
static_assert(same(t::WrOpcode::kSendWithImm, IBV_WR_SEND_WITH_IMM));
static_assert(same(t::WrOpcode::kRdmaRead, IBV_WR_RDMA_READ));
static_assert(same(t::WrOpcode::kAtomicCompareSwap, IBV_WR_ATOMIC_CMP_AND_SWP));
static_assert(same(t::WrOpcode::kAtomicFetchAdd, IBV_WR_ATOMIC_FETCH_AND_ADD));
static_assert(same(t::WrOpcode::kLocalInvalidate, IBV_WR_LOCAL_INV));
static_assert(same(t::WrOpcode::kBindMw, IBV_WR_BIND_MW));
static_assert(same(t::WrOpcode::kSendWithInvalidate, IBV_WR_SEND_WITH_INV));
static_assert(same(t::kSendFence, IBV_SEND_FENCE) && same(t::kSendSignaled, IBV_SEND_SIGNALED) &&
              same(t::kSendSolicited, IBV_SEND_SOLICITED) && same(t::kSendInline, IBV_SEND_INLINE));
static_assert(same(t::kAccessLocalWrite, IBV_ACCESS_LOCAL_WRITE) &&
              same(t::kAccessRemoteWrite, IBV_ACCESS_REMOTE_WRITE) &&
              same(t::kAccessRemoteRead, IBV_ACCESS_REMOTE_READ) &&
              same(t::kAccessRemoteAtomic, IBV_ACCESS_REMOTE_ATOMIC) &&
              same(t::kAccessMwBind, IBV_ACCESS_MW_BIND));
static_assert(same(t::WcStatus::kSuccess, IBV_WC_SUCCESS));
static_assert(same(t::WcStatus::kWrFlushErr, IBV_WC_WR_FLUSH_ERR));
static_assert(same(t::WcStatus::kRemAccessErr, IBV_WC_REM_ACCESS_ERR));
static_assert(same(t::WcStatus::kRetryExcErr, IBV_WC_RETRY_EXC_ERR));
static_assert(same(t::WcStatus::kRnrRetryExcErr, IBV_WC_RNR_RETRY_EXC_ERR));
static_assert(same(t::WcStatus::kGeneralErr, IBV_WC_GENERAL_ERR));
static_assert(same(t::WcOpcode::kSend, IBV_WC_SEND) &&
              same(t::WcOpcode::kRdmaWrite, IBV_WC_RDMA_WRITE) &&
              same(t::WcOpcode::kRdmaRead, IBV_WC_RDMA_READ) &&
              same(t::WcOpcode::kCompareSwap, IBV_WC_COMP_SWAP) &&
              same(t::WcOpcode::kFetchAdd, IBV_WC_FETCH_ADD) &&
              same(t::WcOpcode::kBindMw, IBV_WC_BIND_MW) &&
              same(t::WcOpcode::kLocalInvalidate, IBV_WC_LOCAL_INV) &&
              same(t::WcOpcode::kRecv, IBV_WC_RECV) &&
              same(t::WcOpcode::kRecvRdmaWithImm, IBV_WC_RECV_RDMA_WITH_IMM));
static_assert(same(t::kWcGrh, IBV_WC_GRH) && same(t::kWcWithImm, IBV_WC_WITH_IMM));
static_assert(same(t::QpType::kRc, IBV_QPT_RC) && same(t::QpType::kUc, IBV_QPT_UC) &&
              same(t::QpType::kUd, IBV_QPT_UD) && same(t::QpType::kXrcSend, IBV_QPT_XRC_SEND) &&
              same(t::QpType::kXrcRecv, IBV_QPT_XRC_RECV));
static_assert(same(t::QpState::kReset, IBV_QPS_RESET) && same(t::QpState::kInit, IBV_QPS_INIT) &&
              same(t::QpState::kRtr, IBV_QPS_RTR) && same(t::QpState::kRts, IBV_QPS_RTS) &&
              same(t::QpState::kSqd, IBV_QPS_SQD) && same(t::QpState::kSqe, IBV_QPS_SQE) &&
              same(t::QpState::kErr, IBV_QPS_ERR));
static_assert(same(v::kQpState, IBV_QP_STATE) && same(v::kQpCurState, IBV_QP_CUR_STATE) &&
              same(v::kQpAccessFlags, IBV_QP_ACCESS_FLAGS) &&
              same(v::kQpPkeyIndex, IBV_QP_PKEY_INDEX) && same(v::kQpPort, IBV_QP_PORT) &&
              same(v::kQpQkey, IBV_QP_QKEY) && same(v::kQpAv, IBV_QP_AV) &&
              same(v::kQpPathMtu, IBV_QP_PATH_MTU) && same(v::kQpTimeout, IBV_QP_TIMEOUT) &&
              same(v::kQpRetryCnt, IBV_QP_RETRY_CNT) && same(v::kQpRnrRetry, IBV_QP_RNR_RETRY) &&
              same(v::kQpRqPsn, IBV_QP_RQ_PSN) &&
              same(v::kQpMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC) &&
              same(v::kQpAltPath, IBV_QP_ALT_PATH) &&
              same(v::kQpMinRnrTimer, IBV_QP_MIN_RNR_TIMER) && same(v::kQpSqPsn, IBV_QP_SQ_PSN) &&
              same(v::kQpMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC) &&
              same(v::kQpPathMigState, IBV_QP_PATH_MIG_STATE) && same(v::kQpCap, IBV_QP_CAP) &&
              same(v::kQpDestQpn, IBV_QP_DEST_QPN) && same(v::kQpRateLimit, IBV_QP_RATE_LIMIT) &&
              same(v::kQpEnSqdAsyncNotify, IBV_QP_EN_SQD_ASYNC_NOTIFY));
static_assert(same(v::Mtu::k256, IBV_MTU_256) && same(v::Mtu::k4096, IBV_MTU_4096));
static_assert(same(v::EventType::kQpFatal, IBV_EVENT_QP_FATAL) &&
              same(v::EventType::kSrqLimitReached, IBV_EVENT_SRQ_LIMIT_REACHED) &&
              same(v::EventType::kGidChange, IBV_EVENT_GID_CHANGE));
static_assert(same(v::kSrqMaxWr, IBV_SRQ_MAX_WR) && same(v::kSrqLimit, IBV_SRQ_LIMIT));

ContextState* state_of(ibv_context* c) {
  return ctx_of(c)->state;
}

// The NIC of a context, or the errno that keeps it from running.
int usable(ibv_context* c) {
  if (!c || !from(c)) return EINVAL;
  return state_of(c)->open_error();
}

// ---- Conversions -----------------------------------------------------------------------------

constexpr uint32_t kFlowLabelMask = 0xfffff;

v::AhAttr to_verbs(const ibv_ah_attr& a) {
  v::AhAttr r;
  std::memcpy(r.grh.dgid.data(), a.grh.dgid.raw, 16);
  // The flow label is 20 bits; callers that pass more (UCX passes ~0) get the low 20, as from
  // rdma-core's providers and the hardware.
  r.grh.flow_label = a.grh.flow_label & kFlowLabelMask;
  r.grh.sgid_index = a.grh.sgid_index;
  r.grh.hop_limit = a.grh.hop_limit;
  r.grh.traffic_class = a.grh.traffic_class;
  r.dlid = a.dlid;
  r.sl = a.sl;
  r.src_path_bits = a.src_path_bits;
  r.static_rate = a.static_rate;
  r.is_global = a.is_global != 0;
  r.port_num = a.port_num;
  return r;
}

ibv_ah_attr to_ibv(const v::AhAttr& a) {
  ibv_ah_attr r{};
  std::memcpy(r.grh.dgid.raw, a.grh.dgid.data(), 16);
  r.grh.flow_label = a.grh.flow_label;
  r.grh.sgid_index = a.grh.sgid_index;
  r.grh.hop_limit = a.grh.hop_limit;
  r.grh.traffic_class = a.grh.traffic_class;
  r.dlid = a.dlid;
  r.sl = a.sl;
  r.src_path_bits = a.src_path_bits;
  r.static_rate = a.static_rate;
  r.is_global = a.is_global;
  r.port_num = a.port_num;
  return r;
}

v::QpCapabilities to_verbs(const ibv_qp_cap& c) {
  v::QpCapabilities r;
  r.max_send_wr = c.max_send_wr;
  r.max_recv_wr = c.max_recv_wr;
  r.max_send_sge = c.max_send_sge;
  r.max_recv_sge = c.max_recv_sge;
  r.max_inline_data = c.max_inline_data;
  return r;
}

ibv_qp_cap to_ibv(const v::QpCapabilities& c) {
  ibv_qp_cap r{};
  r.max_send_wr = c.max_send_wr;
  r.max_recv_wr = c.max_recv_wr;
  r.max_send_sge = c.max_send_sge;
  r.max_recv_sge = c.max_recv_sge;
  r.max_inline_data = c.max_inline_data;
  return r;
}

v::QpAttr to_verbs(const ibv_qp_attr& a) {
  v::QpAttr r;
  r.qp_state = static_cast<v::QpState>(a.qp_state);
  r.cur_qp_state = static_cast<v::QpState>(a.cur_qp_state);
  r.path_mtu = static_cast<v::Mtu>(a.path_mtu);
  r.path_mig_state = static_cast<uint8_t>(a.path_mig_state);
  r.qkey = a.qkey;
  r.rq_psn = a.rq_psn;
  r.sq_psn = a.sq_psn;
  r.dest_qp_num = a.dest_qp_num;
  r.qp_access_flags = a.qp_access_flags;
  r.cap = to_verbs(a.cap);
  r.ah_attr = to_verbs(a.ah_attr);
  r.alt_ah_attr = to_verbs(a.alt_ah_attr);
  r.pkey_index = a.pkey_index;
  r.alt_pkey_index = a.alt_pkey_index;
  r.en_sqd_async_notify = a.en_sqd_async_notify;
  r.sq_draining = a.sq_draining;
  r.max_rd_atomic = a.max_rd_atomic;
  r.max_dest_rd_atomic = a.max_dest_rd_atomic;
  r.min_rnr_timer = a.min_rnr_timer;
  r.port_num = a.port_num;
  r.timeout = a.timeout;
  r.retry_cnt = a.retry_cnt;
  r.rnr_retry = a.rnr_retry;
  r.alt_port_num = a.alt_port_num;
  r.alt_timeout = a.alt_timeout;
  r.rate_limit = a.rate_limit;
  return r;
}

void to_ibv(const v::QpAttr& a, ibv_qp_attr* r) {
  std::memset(r, 0, sizeof *r);
  r->qp_state = static_cast<ibv_qp_state>(a.qp_state);
  r->cur_qp_state = static_cast<ibv_qp_state>(a.cur_qp_state);
  r->path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  r->path_mig_state = static_cast<ibv_mig_state>(a.path_mig_state);
  r->qkey = a.qkey;
  r->rq_psn = a.rq_psn;
  r->sq_psn = a.sq_psn;
  r->dest_qp_num = a.dest_qp_num;
  r->qp_access_flags = a.qp_access_flags;
  r->cap = to_ibv(a.cap);
  r->ah_attr = to_ibv(a.ah_attr);
  r->alt_ah_attr = to_ibv(a.alt_ah_attr);
  r->pkey_index = a.pkey_index;
  r->alt_pkey_index = a.alt_pkey_index;
  r->en_sqd_async_notify = a.en_sqd_async_notify;
  r->sq_draining = a.sq_draining;
  r->max_rd_atomic = a.max_rd_atomic;
  r->max_dest_rd_atomic = a.max_dest_rd_atomic;
  r->min_rnr_timer = a.min_rnr_timer;
  r->port_num = a.port_num;
  r->timeout = a.timeout;
  r->retry_cnt = a.retry_cnt;
  r->rnr_retry = a.rnr_retry;
  r->alt_port_num = a.alt_port_num;
  r->alt_timeout = a.alt_timeout;
  r->rate_limit = a.rate_limit;
}

// What wc.sl says for a receive with a GRH area on RoCEv2, as mlx5 reports it (its CQE's
// service-level bits carry the packet type there): bit 3 says the frame had a UDP header, bits
// 2:0 are the L3 header type, as mlx5dv.h's MLX5_CQE_L3_HDR_TYPE_*. UCX reads it to find the
// addresses in the area. A device's socket receives only its own address family.
constexpr uint8_t kSlRoceUdp = 0x8;
constexpr uint8_t kSlRoceV2Ipv6 = kSlRoceUdp | 0x1;
constexpr uint8_t kSlRoceV2Ipv4 = kSlRoceUdp | 0x2;

// A RoCE v1 packet has no UDP header and a GRH for its L3 header (type 0): wc.sl 0.
constexpr uint8_t kSlRoceV1 = 0x0;

// `grh_sl`: the CQ's wc.sl for RoCEv2 completions with a GRH area (kSlRoceV2Ipv4 / _Ipv6).
uint8_t wc_sl(const t::Completion& c, uint8_t grh_sl) {
  if (!(c.wc_flags & t::kWcGrh)) return c.sl;
  return c.roce_v1 ? kSlRoceV1 : grh_sl;
}

void to_ibv(const t::Completion& c, uint8_t grh_sl, ibv_wc* wc) {
  wc->wr_id = c.wr_id;
  wc->status = static_cast<ibv_wc_status>(c.status);
  wc->opcode = static_cast<ibv_wc_opcode>(c.opcode);
  wc->vendor_err = c.vendor_err;
  wc->byte_len = c.byte_len;
  // Completion keeps the immediate in host order of the wire field; ibv_wc wants it as on the
  // wire (__be32), and the invalidated rkey in host order (IBA 11.4.2.1).
  wc->imm_data =
      (c.wc_flags & t::kWcWithImm) ? htonl(c.imm_or_invalidated_rkey) : c.imm_or_invalidated_rkey;
  wc->qp_num = c.qp_num;
  wc->src_qp = c.src_qp;
  wc->wc_flags = c.wc_flags;
  wc->pkey_index = c.pkey_index;
  wc->slid = 0;
  wc->sl = wc_sl(c, grh_sl);
  wc->dlid_path_bits = 0;
}

// ---- Data path (ibv_context ops; the header's inline ibv_post_send etc. call these) ----------

int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  if (num_entries < 0 || (num_entries > 0 && !wc)) return -EINVAL;
  constexpr int kBatch = 32;
  t::Completion buf[kBatch];
  Cq* c = from(cq);
  verbs::CompletionQueue* impl = c->impl;
  // Nothing queued: do the NIC's work here rather than wait for the progress thread. A pass that
  // returned at a received message's completion and kept the ACKs behind it gets them handed up
  // now when this CQ is still empty (perftest's send_lat polls its send CQ for the completion
  // they make), without sending: the ACK this side owes leaves with its next post, as before.
  if (num_entries > 0 && impl->size() == 0 && c->runtime->drive(/*app_polls=*/true) &&
      impl->size() == 0)
    c->runtime->receive_kept();
  int total = 0;
  while (total < num_entries) {
    int want = std::min(kBatch, num_entries - total);
    size_t got = impl->poll({buf, static_cast<size_t>(want)});
    for (size_t i = 0; i < got; ++i) to_ibv(buf[i], c->grh_sl, &wc[total + static_cast<int>(i)]);
    total += static_cast<int>(got);
    if (static_cast<int>(got) < want) break;
  }
  // Still nothing after doing the NIC's work: the peer (another process, or this one's progress
  // thread) must run before anything can arrive, so give up the CPU rather than spin out a
  // time slice. On a machine with fewer cores than busy threads this is worth milliseconds.
  if (total == 0 && num_entries > 0) sched_yield();
  if (total > 0) c->runtime->app_polled();
  return total;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  from(cq)->runtime->app_stopped_polling();
  return from(cq)->impl->req_notify(solicited_only != 0);
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  Qp* q = from(qp);
  int rc = 0;
  ibv_send_wr* cur = wr;
  for (; cur; cur = cur->next) {
    t::Sge sges[t::kMaxSge];
    t::SendWr w;
    rc = convert_send_wr(*qp, *cur, sges, &w);
    if (rc == 0) rc = q->impl->post_send(w);
    if (rc != 0) break;
  }
  if (cur != wr) q->runtime->posted(*q->impl);
  if (rc != 0 && bad_wr) *bad_wr = cur;
  return rc;
}

template <typename PostOne>
int post_recv_list(ibv_recv_wr* wr, ibv_recv_wr** bad_wr, PostOne post_one) {
  for (ibv_recv_wr* cur = wr; cur; cur = cur->next) {
    int rc = 0;
    t::Sge sges[t::kMaxSge];
    if (cur->num_sge < 0 || cur->num_sge > static_cast<int>(t::kMaxSge) ||
        (cur->num_sge > 0 && !cur->sg_list)) {
      rc = EINVAL;
    } else {
      for (int i = 0; i < cur->num_sge; ++i) {
        sges[i] = {cur->sg_list[i].addr, cur->sg_list[i].length, cur->sg_list[i].lkey};
      }
      t::RecvWr w;
      w.wr_id = cur->wr_id;
      w.sg_list = {sges, static_cast<size_t>(cur->num_sge)};
      rc = post_one(w);
    }
    if (rc != 0) {
      if (bad_wr) *bad_wr = cur;
      return rc;
    }
  }
  return 0;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  verbs::QueuePair* impl = from(qp)->impl;
  return post_recv_list(wr, bad_wr, [impl](const t::RecvWr& w) { return impl->post_recv(w); });
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  verbs::SharedReceiveQueue* impl = from(srq)->impl;
  return post_recv_list(wr, bad_wr, [impl](const t::RecvWr& w) { return impl->post_recv(w); });
}

// ---- Extended verbs (verbs_context) ----------------------------------------------------------

int query_port_ex(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len) {
  Context* ctx = from(context);
  if (!ctx || !attr || port_num != 1) return EINVAL;
  ibv_port_attr full;
  fill_port_attr(*ctx->device, &full);
  std::memcpy(attr, &full, std::min(len, sizeof full));
  return 0;
}

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) {
  Context* ctx = from(context);
  if (!ctx || !attr) return EINVAL;
  if (input && input->comp_mask != 0) return EINVAL;
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex full;
  std::memset(&full, 0, sizeof full);
  fill_device_attr(*ctx->device, &full.orig_attr);
  full.phys_port_cnt_ex = full.orig_attr.phys_port_cnt;
  fill_memory_caps(&full);
  std::memcpy(attr, &full, std::min(attr_size, sizeof full));
  return 0;
}

ibv_qp* create_qp_common(ibv_pd* pd, ibv_qp_init_attr* attr);

Cq* create_cq_common(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                     int comp_vector) {
  if (int err = usable(context)) return fail<Cq>(err);
  if (cqe <= 0 || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    return fail<Cq>(EINVAL);
  }
  if (channel && channel->context != context) return fail<Cq>(EINVAL);
  auto impl = state_of(context)->verbs()->create_cq(static_cast<uint32_t>(cqe),
                                                    channel ? from(channel)->impl : nullptr);
  if (!impl.ok()) return fail<Cq>(impl.error());
  auto* c = new (std::nothrow) Cq{};
  if (!c) return fail<Cq>(ENOMEM);
  c->impl = impl->release();
  c->runtime = state_of(context)->runtime();
  c->grh_sl = ctx_of(context)->device->config->ipv4 ? kSlRoceV2Ipv4 : kSlRoceV2Ipv6;
  ibv_cq* cq = cq_of(c);
  cq->context = context;
  cq->channel = channel;
  cq->cq_context = cq_context;
  cq->handle = 0;
  cq->cqe = static_cast<int>(c->impl->cqe());
  pthread_mutex_init(&cq->mutex, nullptr);
  pthread_cond_init(&cq->cond, nullptr);
  cq->comp_events_completed = 0;
  cq->async_events_completed = 0;
  if (channel) {
    pthread_mutex_lock(&context->mutex);
    ++channel->refcnt;
    pthread_mutex_unlock(&context->mutex);
  }
  state_of(context)->add(c->impl, c, ContextState::Kind::kCq);
  return c;
}

// ---- ibv_cq_ex: ibv_start_poll / ibv_next_poll / ibv_end_poll and the ibv_wc_read_* family ----

Cq* ex_of(ibv_cq_ex* cq) {
  return reinterpret_cast<Cq*>(cq);
}

int next_entry(ibv_cq_ex* cq) {
  Cq* c = ex_of(cq);
  if (c->impl->poll({&c->current, 1}) == 0) {
    c->runtime->drive(/*app_polls=*/true);
    if (c->impl->poll({&c->current, 1}) == 0) return ENOENT;
  } else {
    c->runtime->app_polled();
  }
  cq->wr_id = c->current.wr_id;
  cq->status = static_cast<ibv_wc_status>(c->current.status);
  return 0;
}

int start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask != 0) return EINVAL;
  return next_entry(cq);
}
void end_poll(ibv_cq_ex*) {}
ibv_wc_opcode read_opcode(ibv_cq_ex* cq) {
  return static_cast<ibv_wc_opcode>(ex_of(cq)->current.opcode);
}
uint32_t read_vendor_err(ibv_cq_ex* cq) {
  return ex_of(cq)->current.vendor_err;
}
uint32_t read_byte_len(ibv_cq_ex* cq) {
  return ex_of(cq)->current.byte_len;
}
__be32 read_imm_data(ibv_cq_ex* cq) {
  ibv_wc wc{};
  to_ibv(ex_of(cq)->current, ex_of(cq)->grh_sl, &wc);
  return wc.imm_data;
}
uint32_t read_qp_num(ibv_cq_ex* cq) {
  return ex_of(cq)->current.qp_num;
}
uint32_t read_src_qp(ibv_cq_ex* cq) {
  return ex_of(cq)->current.src_qp;
}
unsigned int read_wc_flags(ibv_cq_ex* cq) {
  ibv_wc wc{};
  to_ibv(ex_of(cq)->current, ex_of(cq)->grh_sl, &wc);
  return wc.wc_flags;
}
uint32_t read_slid(ibv_cq_ex*) {
  return 0;
}
uint8_t read_sl(ibv_cq_ex* cq) {
  return wc_sl(ex_of(cq)->current, ex_of(cq)->grh_sl);
}
uint8_t read_dlid_path_bits(ibv_cq_ex*) {
  return 0;
}

ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  if (!attr) return fail<ibv_cq_ex>(EINVAL);
  // The standard completion fields only: timestamps, VLAN, flow tags and tag matching are not
  // produced by uroce, nor are CQs allowed to overrun. A CQ may name a parent domain.
  if (attr->wc_flags & ~uint64_t{IBV_WC_STANDARD_FLAGS}) return fail<ibv_cq_ex>(EOPNOTSUPP);
  constexpr uint32_t kSupportedMask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
  if (attr->comp_mask & ~kSupportedMask) return fail<ibv_cq_ex>(EOPNOTSUPP);
  ibv_pd* parent_domain = nullptr;
  if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
    // As rdma-core's providers: it must be a parent domain of this context.
    parent_domain = attr->parent_domain;
    if (!parent_domain || !is_parent_domain(parent_domain) || parent_domain->context != context) {
      return fail<ibv_cq_ex>(EINVAL);
    }
  }
  if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
      (attr->flags & ~uint32_t{IBV_CREATE_CQ_ATTR_SINGLE_THREADED})) {
    return fail<ibv_cq_ex>(EOPNOTSUPP);
  }
  if (attr->cqe > static_cast<uint32_t>(INT32_MAX)) return fail<ibv_cq_ex>(EINVAL);
  Cq* c = create_cq_common(context, static_cast<int>(attr->cqe), attr->cq_context, attr->channel,
                           static_cast<int>(attr->comp_vector));
  if (!c) return nullptr;
  if (parent_domain) {
    c->parent_domain = parent_domain;
    retain_pd(parent_domain);
  }
  ibv_cq_ex& ex = c->ex;
  ex.comp_mask = 0;
  ex.start_poll = start_poll;
  ex.next_poll = next_entry;
  ex.end_poll = end_poll;
  ex.read_opcode = read_opcode;
  ex.read_vendor_err = read_vendor_err;
  ex.read_byte_len = read_byte_len;
  ex.read_imm_data = read_imm_data;
  ex.read_qp_num = read_qp_num;
  ex.read_src_qp = read_src_qp;
  ex.read_wc_flags = read_wc_flags;
  ex.read_slid = read_slid;
  ex.read_sl = read_sl;
  ex.read_dlid_path_bits = read_dlid_path_bits;
  return &ex;
}

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (!attr) return fail<ibv_qp>(EINVAL);
  // What ibv_create_qp offers, plus the PD through the extended struct, create flags when there
  // are none (programs set the mask with 0) and send_ops_flags (the ibv_wr_* API, qp_ex.cpp).
  constexpr uint32_t kSupportedMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
                                      IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                      IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  if (attr->comp_mask & ~kSupportedMask) return fail<ibv_qp>(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags != 0) {
    return fail<ibv_qp>(EOPNOTSUPP);
  }
  const bool wr_api = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
  if (wr_api) {
    if (int err = check_send_ops(attr->qp_type, attr->send_ops_flags)) return fail<ibv_qp>(err);
  }
  if (attr->qp_type == IBV_QPT_XRC_RECV) {
    // A target QP belongs to an XRC domain, not a PD (xrc.cpp).
    if (wr_api) return fail<ibv_qp>(EOPNOTSUPP);
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD)) return fail<ibv_qp>(EINVAL);
    return create_xrc_target_qp(context, attr);
  }
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) return fail<ibv_qp>(EINVAL);
  if (attr->pd->context != context) return fail<ibv_qp>(EINVAL);
  ibv_qp_init_attr basic{};
  basic.qp_context = attr->qp_context;
  basic.send_cq = attr->send_cq;
  basic.recv_cq = attr->recv_cq;
  basic.srq = attr->srq;
  basic.cap = attr->cap;
  basic.qp_type = attr->qp_type;
  basic.sq_sig_all = attr->sq_sig_all;
  ibv_qp* qp = create_qp_common(attr->pd, &basic);
  if (!qp) return nullptr;
  attr->recv_cq = basic.recv_cq;
  attr->srq = basic.srq;
  if (wr_api) {
    // A parent domain with a thread domain: the caller serializes, as with rdma-core's
    // providers (ibv_wr_post(3), CONCURRENCY).
    const bool serialize = thread_domain_of(attr->pd) == nullptr;
    if (int err = attach_wr_batch(from(qp), attr->send_ops_flags, serialize)) {
      ibv_destroy_qp(qp);
      return fail<ibv_qp>(err);
    }
  }
  attr->cap = basic.cap;
  return qp;
}

}  // namespace

namespace {

// ---- MW ----------------------------------------------------------------------------------------
// Reached through ibv_context_ops: ibv_alloc_mw, ibv_dealloc_mw and ibv_bind_mw are inline in
// verbs.h (ibv_bind_mw has checked the type and the MR's PD already).

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (!pd) return fail<ibv_mw>(EINVAL);
  if (int err = usable(pd->context)) return fail<ibv_mw>(err);
  auto impl = from(pd)->impl->alloc_mw(static_cast<verbs::MwType>(type));
  if (!impl.ok()) return fail<ibv_mw>(impl.error());
  auto* m = new (std::nothrow) Mw{};
  if (!m) return fail<ibv_mw>(ENOMEM);
  m->impl = impl->release();
  m->mw.context = pd->context;
  m->mw.pd = pd;
  m->mw.rkey = m->impl->rkey();
  m->mw.handle = m->impl->rkey();
  m->mw.type = type;
  retain_pd(pd);
  state_of(pd->context)->add(m->impl, m, ContextState::Kind::kMw);
  return &m->mw;
}

int dealloc_mw(ibv_mw* mw) {
  if (!mw) return EINVAL;
  Mw* m = from(mw);
  state_of(mw->context)->remove(m->impl);
  release_pd(mw->pd);
  delete m->impl;  // synchronous, as ibv_dereg_mr
  delete m;
  return 0;
}

// Type 1: a BIND_MW work request on `qp` with the next key (ibv_inc_rkey), which mw->rkey takes
// once it is posted, as the providers do.
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
  if (!qp || !mw || !mw_bind) return EINVAL;
  ibv_send_wr wr{};
  wr.wr_id = mw_bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = mw_bind->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = mw_bind->bind_info;
  ibv_send_wr* bad = nullptr;
  if (int rc = post_send(qp, &wr, &bad)) return rc;
  mw->rkey = wr.bind_mw.rkey;
  return 0;
}

}  // namespace

// ---- Send work requests, shared by ibv_post_send and ibv_wr_complete ---------------------------

int convert_send_wr(const ibv_qp& qp, const ibv_send_wr& wr, t::Sge* sges, t::SendWr* out) {
  if (wr.num_sge < 0 || wr.num_sge > static_cast<int>(t::kMaxSge)) return EINVAL;
  if (wr.num_sge > 0 && !wr.sg_list) return EINVAL;
  if (static_cast<unsigned>(wr.opcode) > IBV_WR_SEND_WITH_INV) return EINVAL;
  for (int i = 0; i < wr.num_sge; ++i) {
    sges[i] = {wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  }
  t::SendWr& w = *out;
  w.wr_id = wr.wr_id;
  w.opcode = static_cast<t::WrOpcode>(wr.opcode);
  w.flags = wr.send_flags;
  w.sg_list = {sges, static_cast<size_t>(wr.num_sge)};
  switch (wr.opcode) {
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      w.imm = ntohl(wr.imm_data);
      break;
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_LOCAL_INV:
      w.invalidate_rkey = wr.invalidate_rkey;
      break;
    case IBV_WR_BIND_MW: {
      if (!wr.bind_mw.mw) return EINVAL;
      const ibv_mw_bind_info& b = wr.bind_mw.bind_info;
      // Local write means nothing for a window, whose rights are remote ones; rdma-core's devices
      // accept it (pyverbs passes it), so it is dropped here rather than failing the bind.
      const uint32_t rights = b.mw_access_flags & ~uint32_t{IBV_ACCESS_LOCAL_WRITE};
      // No MR is an unbind (length 0); the window names itself by its current key's index.
      w.bind = {
          wr.bind_mw.mw->rkey, wr.bind_mw.rkey, b.mr ? b.mr->lkey : 0u, b.addr, b.length, rights};
      break;
    }
    default:
      break;
  }
  switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      w.remote_addr = wr.wr.rdma.remote_addr;
      w.rkey = wr.wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      w.remote_addr = wr.wr.atomic.remote_addr;
      w.rkey = wr.wr.atomic.rkey;
      w.compare_add = wr.wr.atomic.compare_add;
      w.swap = wr.wr.atomic.swap;
      break;
    default:
      break;
  }
  if (qp.qp_type == IBV_QPT_XRC_SEND) w.remote_srqn = wr.qp_type.xrc.remote_srqn;
  if (qp.qp_type == IBV_QPT_UD) {
    if (!wr.wr.ud.ah) return EINVAL;
    w.ah = &from(wr.wr.ud.ah)->impl->av();
    w.remote_qpn = wr.wr.ud.remote_qpn;
    w.remote_qkey = wr.wr.ud.remote_qkey;
  }
  return 0;
}

void install_ops(verbs_context* vctx) {
  ibv_context_ops& ops = vctx->context.ops;
  ops.alloc_mw = alloc_mw;
  ops.dealloc_mw = dealloc_mw;
  ops.bind_mw = bind_mw;
  ops.poll_cq = poll_cq;
  ops.req_notify_cq = req_notify_cq;
  ops.post_send = post_send;
  ops.post_recv = post_recv;
  ops.post_srq_recv = post_srq_recv;
  vctx->query_port = query_port_ex;
  vctx->query_device_ex = query_device_ex;
  vctx->create_qp_ex = create_qp_ex;
  vctx->create_cq_ex = create_cq_ex;
  install_memory_ops(vctx);
  install_domain_ops(vctx);
  install_xrc_ops(vctx);
}

namespace {

ibv_qp* create_qp_common(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!pd || !attr) return fail<ibv_qp>(EINVAL);
  if (int err = usable(pd->context)) return fail<ibv_qp>(err);
  const ibv_qp_type type = attr->qp_type;
  if (type == IBV_QPT_XRC_RECV) return fail<ibv_qp>(EINVAL);  // needs an XRC domain (create_qp_ex)
  if (type != IBV_QPT_RC && type != IBV_QPT_UC && type != IBV_QPT_UD && type != IBV_QPT_XRC_SEND) {
    return fail<ibv_qp>(EOPNOTSUPP);
  }
  // An XRC initiator has no receive side: its recv CQ and SRQ are ignored, as the kernel does.
  if (type == IBV_QPT_XRC_SEND) {
    attr->recv_cq = nullptr;
    attr->srq = nullptr;
  }
  if (!attr->send_cq || (type != IBV_QPT_XRC_SEND && !attr->recv_cq)) return fail<ibv_qp>(EINVAL);
  v::QpInitAttr init;
  init.send_cq = from(attr->send_cq)->impl;
  init.recv_cq = attr->recv_cq ? from(attr->recv_cq)->impl : nullptr;
  init.srq = attr->srq ? from(attr->srq)->impl : nullptr;
  init.cap = to_verbs(attr->cap);
  init.qp_type = static_cast<v::QpType>(type);
  init.sq_sig_all = attr->sq_sig_all != 0;
  // ibv_qp_init_attr has no field for these: the environment chose them for the NIC (config.h).
  apply_qp_defaults(state_of(pd->context)->runtime()->qp_defaults(), init);
  auto impl = from(pd)->impl->create_qp(init);
  if (!impl.ok()) return fail<ibv_qp>(impl.error());
  return wrap_qp(pd->context, pd, impl->release(), attr);
}

}  // namespace

ibv_qp* wrap_qp(ibv_context* context, ibv_pd* pd, verbs::QueuePair* impl, ibv_qp_init_attr* attr) {
  auto* q = new (std::nothrow) Qp{};
  if (!q) {
    delete impl;
    return fail<ibv_qp>(ENOMEM);
  }
  q->impl = impl;
  q->runtime = state_of(context)->runtime();
  ibv_qp& qp = q->ex.qp_base;
  qp.context = context;
  qp.qp_context = attr->qp_context;
  qp.pd = pd;
  qp.send_cq = attr->send_cq;
  qp.recv_cq = attr->recv_cq;
  qp.srq = attr->srq;
  qp.handle = q->impl->qp_num();
  qp.qp_num = q->impl->qp_num();
  qp.state = IBV_QPS_RESET;
  qp.qp_type = attr->qp_type;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  qp.events_completed = 0;
  // Like a provider, report the capacities actually granted.
  attr->cap = to_ibv(q->impl->init_attr().cap);
  retain_pd(pd);
  state_of(context)->add(q->impl, q, ContextState::Kind::kQp);
  return &qp;
}

}  // namespace uroce::abi

using namespace uroce::abi;
namespace v = uroce::verbs;

// ---- PD and MR ---------------------------------------------------------------------------------

UROCE_IBV_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  if (int err = usable(context)) return fail<ibv_pd>(err);
  auto impl = state_of(context)->verbs()->alloc_pd();
  if (!impl.ok()) return fail<ibv_pd>(impl.error());
  auto* p = new (std::nothrow) Pd{};
  if (!p) return fail<ibv_pd>(ENOMEM);
  p->impl = impl->release();
  p->pd.context = context;
  p->pd.handle = 0;
  state_of(context)->add(p->impl, p, ContextState::Kind::kPd);
  return &p->pd;
}

UROCE_IBV_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  if (!pd) return EINVAL;
  Pd* p = from(pd);
  if (p->parent_domain) return dealloc_parent_domain(p);
  if (p->impl->users() != 0 || p->abi_users.load() != 0) return EBUSY;
  state_of(pd->context)->remove(p->impl);
  delete p->impl;
  delete p;
  return 0;
}

UROCE_IBV_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                          unsigned int access) {
  if (!pd) return fail<ibv_mr>(EINVAL);
  // Optional access bits may be ignored by a device that lacks them (rdma-core's
  // IBV_ACCESS_OPTIONAL_RANGE contract), e.g. IBV_ACCESS_RELAXED_ORDERING.
  access &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  auto impl = from(pd)->impl->reg_mr(addr, length, iova, access);
  if (!impl.ok()) return fail<ibv_mr>(impl.error());
  auto* m = new (std::nothrow) Mr{};
  if (!m) return fail<ibv_mr>(ENOMEM);
  m->impl = impl->release();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = m->impl->lkey();
  m->mr.lkey = m->impl->lkey();
  m->mr.rkey = m->impl->rkey();
  retain_pd(pd);
  state_of(pd->context)->add(m->impl, m, ContextState::Kind::kMr);
  return &m->mr;
}

UROCE_IBV_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                          static_cast<unsigned>(access));
}

// rdma-core's convention, not an errno: 0, or a negative ibv_rereg_mr_err_code with errno set.
// Its argument checks come first (IBV_REREG_MR_ERR_INPUT, EINVAL); a change the device refuses is
// IBV_REREG_MR_ERR_CMD with the errno, as a provider's failed command is. uroce changes nothing on
// a failure, so the old MR stays valid either way. The keys stay (verbs::MemoryRegion::rereg).
UROCE_IBV_EXPORT int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length,
                                  int access) {
  const bool bad_flags = (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) != 0;
  const bool new_translation = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0;
  const bool new_pd = (flags & IBV_REREG_MR_CHANGE_PD) != 0;
  const bool new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) != 0;
  if (!mr || bad_flags || (new_translation && (!addr || !length)) || (access && !new_access) ||
      (new_pd && !pd)) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  Mr* m = from(mr);
  ibv_pd* target_pd = new_pd ? pd : mr->pd;
  void* target_addr = new_translation ? addr : m->impl->addr();
  size_t target_length = new_translation ? length : m->impl->length();
  uint64_t target_iova = new_translation ? reinterpret_cast<uintptr_t>(addr) : m->impl->iova();
  uint32_t target_access =
      new_access ? static_cast<unsigned>(access) & ~unsigned{IBV_ACCESS_OPTIONAL_RANGE}
                 : m->impl->access();
  if (int rc = m->impl->rereg(*from(target_pd)->impl, target_addr, target_length, target_iova,
                              target_access)) {
    errno = rc;
    return IBV_REREG_MR_ERR_CMD;
  }
  mr->pd = target_pd;
  mr->addr = target_addr;
  mr->length = target_length;
  return 0;
}

UROCE_IBV_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                         int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

UROCE_IBV_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  if (!mr) return EINVAL;
  Mr* m = from(mr);
  if (m->impl->windows_bound() != 0) return EBUSY;  // ibv_dereg_mr(3)
  state_of(mr->context)->remove(m->impl);
  release_pd(mr->pd);
  delete m->impl;  // synchronous: no access through its keys after this (verbs/mr.h)
  delete m;
  return 0;
}

// ---- CQ ----------------------------------------------------------------------------------------

UROCE_IBV_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context,
                                       ibv_comp_channel* channel, int comp_vector) {
  Cq* c = create_cq_common(context, cqe, cq_context, channel, comp_vector);
  return c ? cq_of(c) : nullptr;
}

UROCE_IBV_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  if (!cq) return EINVAL;
  Cq* c = from(cq);
  if (c->impl->users() != 0) return EBUSY;
  state_of(cq->context)->remove(c->impl);
  if (c->parent_domain) release_pd(c->parent_domain);
  if (cq->channel) {
    pthread_mutex_lock(&cq->context->mutex);
    --cq->channel->refcnt;
    pthread_mutex_unlock(&cq->context->mutex);
  }
  delete c->impl;
  pthread_cond_destroy(&cq->cond);
  pthread_mutex_destroy(&cq->mutex);
  delete c;
  return 0;
}

// rdma-core's providers: at least `cqe` entries, never fewer than are queued (EINVAL); cq->cqe
// says the depth it got. A hardware NIC has completed just-posted UD sends by the time its
// resize command runs; here they wait for progress passes, so those run first (pyverbs'
// test_resize_cq posts sends and shrinks at once, and failed when the progress thread was
// mid-pass).
UROCE_IBV_EXPORT int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (!cq || cqe <= 0) return EINVAL;
  Cq* c = from(cq);
  c->runtime->settle();
  if (int rc = c->impl->resize(static_cast<uint32_t>(cqe))) return rc;
  cq->cqe = static_cast<int>(c->impl->cqe());
  return 0;
}

// ---- QP ----------------------------------------------------------------------------------------

UROCE_IBV_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  return create_qp_common(pd, attr);
}

UROCE_IBV_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  if (!qp || !attr) return EINVAL;
  Qp* q = from(qp);
  int rc = q->impl->modify(to_verbs(*attr), static_cast<uint32_t>(attr_mask));
  if (rc != 0) return rc;
  if (attr_mask & IBV_QP_STATE) qp->state = attr->qp_state;
  q->runtime->kick();  // a QP moved to RTS may have work queued
  return 0;
}

UROCE_IBV_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  if (!qp || !attr || !init) return EINVAL;
  Qp* q = from(qp);
  to_ibv(q->impl->query(), attr);
  std::memset(init, 0, sizeof *init);
  init->qp_context = qp->qp_context;
  init->send_cq = qp->send_cq;
  init->recv_cq = qp->recv_cq;
  init->srq = qp->srq;
  init->cap = to_ibv(q->impl->init_attr().cap);
  init->qp_type = qp->qp_type;
  init->sq_sig_all = q->impl->init_attr().sq_sig_all;
  return 0;
}

// The LID is ignored, as on every RoCE device (the group is its GID alone).
UROCE_IBV_EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t /*lid*/) {
  if (!qp || !gid) return EINVAL;
  uroce::Gid g;
  std::memcpy(g.data(), gid->raw, g.size());
  return from(qp)->impl->attach_mcast(g);
}

UROCE_IBV_EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t /*lid*/) {
  if (!qp || !gid) return EINVAL;
  uroce::Gid g;
  std::memcpy(g.data(), gid->raw, g.size());
  return from(qp)->impl->detach_mcast(g);
}

UROCE_IBV_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  if (!qp) return EINVAL;
  Qp* q = from(qp);
  state_of(qp->context)->remove(q->impl);
  delete q->impl;
  detach_wr_batch(q);
  release_pd(qp->pd);
  pthread_cond_destroy(&qp->cond);
  pthread_mutex_destroy(&qp->mutex);
  delete q;
  return 0;
}

// As rdma-core: the extended QP of one created with send_ops_flags (ibv_create_qp_ex), else
// null (errno untouched).
UROCE_IBV_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  if (!qp) return nullptr;
  Qp* q = from(qp);
  return q->batch ? &q->ex : nullptr;
}

// Data placement order is not promised (a retransmitted packet may rewrite bytes already
// written), so the answer is 0, as for devices that do not know.
UROCE_IBV_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
  return 0;
}

// ---- SRQ ---------------------------------------------------------------------------------------

UROCE_IBV_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!pd || !attr) return fail<ibv_srq>(EINVAL);
  v::SrqAttr a;
  a.max_wr = attr->attr.max_wr;
  a.max_sge = attr->attr.max_sge;
  a.srq_limit = attr->attr.srq_limit;
  auto impl = from(pd)->impl->create_srq(a);
  if (!impl.ok()) return fail<ibv_srq>(impl.error());
  auto* s = new (std::nothrow) Srq{};
  if (!s) return fail<ibv_srq>(ENOMEM);
  s->impl = impl->release();
  s->srq.context = pd->context;
  s->srq.srq_context = attr->srq_context;
  s->srq.pd = pd;
  s->srq.handle = 0;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  s->srq.events_completed = 0;
  v::SrqAttr got = s->impl->query();
  attr->attr.max_wr = got.max_wr;
  attr->attr.max_sge = got.max_sge;
  retain_pd(pd);
  state_of(pd->context)->add(s->impl, s, ContextState::Kind::kSrq);
  return &s->srq;
}

UROCE_IBV_EXPORT int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  if (!srq || !attr) return EINVAL;
  v::SrqAttr a{attr->max_wr, attr->max_sge, attr->srq_limit};
  return from(srq)->impl->modify(a, static_cast<uint32_t>(mask));
}

UROCE_IBV_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  if (!srq || !attr) return EINVAL;
  v::SrqAttr a = from(srq)->impl->query();
  attr->max_wr = a.max_wr;
  attr->max_sge = a.max_sge;
  attr->srq_limit = a.srq_limit;
  return 0;
}

UROCE_IBV_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
  if (!srq) return EINVAL;
  Srq* s = from(srq);
  if (s->impl->users() != 0) return EBUSY;
  state_of(srq->context)->remove(s->impl);
  release_pd(srq->pd);
  delete s->impl;
  pthread_cond_destroy(&srq->cond);
  pthread_mutex_destroy(&srq->mutex);
  delete s;
  return 0;
}

// ---- AH ----------------------------------------------------------------------------------------

UROCE_IBV_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (!pd || !attr) return fail<ibv_ah>(EINVAL);
  auto impl = from(pd)->impl->create_ah(to_verbs(*attr));
  if (!impl.ok()) return fail<ibv_ah>(impl.error());
  auto* a = new (std::nothrow) Ah{};
  if (!a) return fail<ibv_ah>(ENOMEM);
  a->impl = impl->release();
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->ah.handle = 0;
  retain_pd(pd);
  state_of(pd->context)->add(a->impl, a, ContextState::Kind::kAh);
  return &a->ah;
}

UROCE_IBV_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
  if (!ah) return EINVAL;
  Ah* a = from(ah);
  state_of(ah->context)->remove(a->impl);
  release_pd(ah->pd);
  delete a->impl;
  delete a;
  return 0;
}

// RoCE needs the GRH the responder placed in the first 40 bytes of the receive buffer (IBA
// 11.4.1.1). For RoCEv2 over IPv4 that area holds the IPv4 header in its last 20 bytes (as
// Linux and rdma-core lay it out), after 20 zero bytes; otherwise it is an IPv6-format header:
// RoCEv2 over IPv6 (next header UDP) or a RoCE v1 GRH (next header 0x1B), whose reply must go
// back as v1 (the GID table's v1 entry).
UROCE_IBV_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc,
                                         ibv_grh* grh, ibv_ah_attr* ah_attr) {
  if (!context || !wc || !grh || !ah_attr || port_num != 1) return EINVAL;
  if (!(wc->wc_flags & IBV_WC_GRH)) return EINVAL;
  std::memset(ah_attr, 0, sizeof *ah_attr);
  const auto* raw = reinterpret_cast<const uint8_t*>(grh);
  const bool ipv6_layout = (raw[0] >> 4) == 6;
  if (!ipv6_layout && (raw[20] >> 4) == 4) {
    uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    std::memcpy(mapped + 12, raw + 20 + 12, 4);  // IPv4 source address
    std::memcpy(ah_attr->grh.dgid.raw, mapped, 16);
    ah_attr->grh.traffic_class = raw[20 + 1];
  } else {
    ah_attr->grh.dgid = grh->sgid;
    uint32_t vtf = ntohl(grh->version_tclass_flow);
    ah_attr->grh.flow_label = vtf & 0xfffff;
    ah_attr->grh.traffic_class = static_cast<uint8_t>((vtf >> 20) & 0xff);
  }
  ah_attr->grh.hop_limit = 0xff;
  ah_attr->grh.sgid_index =
      ipv6_layout && grh->next_hdr == uroce::wire::kGrhNextHeaderIba ? v::kGidIndexRoceV1 : 0;
  ah_attr->is_global = 1;
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  return 0;
}

UROCE_IBV_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh,
                                               uint8_t port_num) {
  if (!pd) return fail<ibv_ah>(EINVAL);
  ibv_ah_attr attr;
  int rc = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr);
  if (rc != 0) return fail<ibv_ah>(rc);
  return ibv_create_ah(pd, &attr);
}
