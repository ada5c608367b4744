// The ibv_wr_* work-request API on ibv_qp_ex (ibv_wr_post(3)): builders and setters fill
// ibv_send_wr records in a per-QP batch between ibv_wr_start and ibv_wr_complete; complete
// converts them with the same convert_send_wr as ibv_post_send and hands them to the verbs
// layer all at once, so either every request is queued or none is (as rdma-core's providers,
// which publish the producer index only when the batch is whole). A bad argument seen by a
// builder or setter is remembered and returned by ibv_wr_complete, which then posts nothing.
//
// Threading: the caller serializes ibv_wr_* calls on one QP within a start..complete region;
// the region itself holds a per-QP lock unless the QP was created on a parent domain with a
// thread domain (then the caller promises a single thread, and nothing is locked).
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "api/ibverbs/objects.h"
#include "api/ibverbs/runtime.h"

namespace uroce::abi {

namespace t = uroce::transport;

// One work request being built, with where its data lives in the batch's shared arrays.
struct PendingWr {
  ibv_send_wr wr;
  uint32_t sge_first = 0;  // into WrBatch::sges
  uint32_t sge_count = 0;
  uint32_t inline_first = 0;  // into WrBatch::inline_bytes
  uint32_t inline_length = 0;
  bool has_inline = false;
};

struct WrBatch {
  WrBatch(uint32_t capacity_wrs, uint32_t max_inline_bytes, bool serialize_region)
      : capacity(capacity_wrs), max_inline(max_inline_bytes), serialize(serialize_region) {}

  // Bounds: at most `capacity` requests (the send queue could not take more), each with at most
  // transport::kMaxSge SGEs and max_inline bytes of inline data.
  const uint32_t capacity;
  const uint32_t max_inline;
  const bool serialize;
  std::mutex region;  // held from ibv_wr_start to ibv_wr_complete / ibv_wr_abort
  bool open = false;
  int err = 0;  // the first error a builder or setter found
  std::vector<PendingWr> pending;
  std::vector<ibv_sge> sges;
  std::vector<uint8_t> inline_bytes;
  // Scratch for ibv_wr_complete, kept to avoid allocating per batch.
  std::vector<t::Sge> transport_sges;
  std::vector<t::SendWr> transport_wrs;

  void clear() {
    err = 0;
    pending.clear();
    sges.clear();
    inline_bytes.clear();
  }
};

namespace {

Qp* qp_of_ex(ibv_qp_ex* qpx) {
  return reinterpret_cast<Qp*>(qpx);  // ex is Qp's first member
}

// Starts a work request for a builder; null when the batch already failed or is full.
ibv_send_wr* begin_wr(ibv_qp_ex* qpx, ibv_wr_opcode opcode) {
  WrBatch& b = *qp_of_ex(qpx)->batch;
  if (b.err) return nullptr;
  if (b.pending.size() >= b.capacity) {
    b.err = ENOMEM;  // as ibv_post_send on a full send queue
    return nullptr;
  }
  PendingWr& p = b.pending.emplace_back();
  std::memset(&p.wr, 0, sizeof p.wr);
  p.wr.wr_id = qpx->wr_id;
  p.wr.opcode = opcode;
  // Whether data goes inline is the data setter's choice in this API, not a flag's.
  p.wr.send_flags = qpx->wr_flags & ~static_cast<unsigned>(IBV_SEND_INLINE);
  return &p.wr;
}

// The request the setters act on: the one the last builder started.
PendingWr* last_wr(ibv_qp_ex* qpx) {
  WrBatch& b = *qp_of_ex(qpx)->batch;
  if (b.err) return nullptr;
  if (b.pending.empty()) {
    b.err = EINVAL;  // a setter with no builder before it
    return nullptr;
  }
  return &b.pending.back();
}

// Drops the data a setter gave the last request before (a second data setter replaces it). The
// last request's data is always at the end of the shared arrays.
void drop_data(WrBatch& b, PendingWr& p) {
  if (p.sge_count) b.sges.resize(p.sge_first);
  if (p.has_inline) b.inline_bytes.resize(p.inline_first);
  p.sge_count = 0;
  p.inline_length = 0;
  p.has_inline = false;
  p.sge_first = static_cast<uint32_t>(b.sges.size());
  p.inline_first = static_cast<uint32_t>(b.inline_bytes.size());
}

// ---- Builders ----------------------------------------------------------------------------------

void wr_send(ibv_qp_ex* qpx) {
  begin_wr(qpx, IBV_WR_SEND);
}

void wr_send_imm(ibv_qp_ex* qpx, __be32 imm_data) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_SEND_WITH_IMM)) wr->imm_data = imm_data;
}

void wr_send_inv(ibv_qp_ex* qpx, uint32_t invalidate_rkey) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_SEND_WITH_INV)) wr->invalidate_rkey = invalidate_rkey;
}

void wr_rdma_write(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_RDMA_WRITE)) wr->wr.rdma = {remote_addr, rkey};
}

void wr_rdma_write_imm(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, __be32 imm_data) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_RDMA_WRITE_WITH_IMM)) {
    wr->wr.rdma = {remote_addr, rkey};
    wr->imm_data = imm_data;
  }
}

void wr_rdma_read(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_RDMA_READ)) wr->wr.rdma = {remote_addr, rkey};
}

void wr_atomic_cmp_swp(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
                       uint64_t swap) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_ATOMIC_CMP_AND_SWP)) {
    wr->wr.atomic = {remote_addr, compare, swap, rkey};
  }
}

void wr_atomic_fetch_add(ibv_qp_ex* qpx, uint32_t rkey, uint64_t remote_addr, uint64_t add) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD)) {
    wr->wr.atomic = {remote_addr, add, 0, rkey};
  }
}

void wr_bind_mw(ibv_qp_ex* qpx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* bind_info) {
  ibv_send_wr* wr = begin_wr(qpx, IBV_WR_BIND_MW);
  if (!wr) return;
  if (!mw || !bind_info) {
    qp_of_ex(qpx)->batch->err = EINVAL;
    return;
  }
  wr->bind_mw.mw = mw;
  wr->bind_mw.rkey = rkey;
  wr->bind_mw.bind_info = *bind_info;  // the caller's struct need not outlive the call
}

void wr_local_inv(ibv_qp_ex* qpx, uint32_t invalidate_rkey) {
  if (ibv_send_wr* wr = begin_wr(qpx, IBV_WR_LOCAL_INV)) wr->invalidate_rkey = invalidate_rkey;
}

// ---- Setters -----------------------------------------------------------------------------------

void wr_set_sge_list(ibv_qp_ex* qpx, size_t num_sge, const ibv_sge* sg_list) {
  PendingWr* p = last_wr(qpx);
  if (!p) return;
  WrBatch& b = *qp_of_ex(qpx)->batch;
  if (num_sge > t::kMaxSge || (num_sge > 0 && !sg_list)) {
    b.err = EINVAL;  // what ibv_post_send answers for the same list
    return;
  }
  drop_data(b, *p);
  b.sges.insert(b.sges.end(), sg_list, sg_list + num_sge);
  p->sge_count = static_cast<uint32_t>(num_sge);
}

void wr_set_sge(ibv_qp_ex* qpx, uint32_t lkey, uint64_t addr, uint32_t length) {
  // A zero-length buffer is no buffer (a zero-byte message), as rdma-core's providers take it.
  if (length == 0) {
    wr_set_sge_list(qpx, 0, nullptr);
    return;
  }
  const ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(qpx, 1, &sge);
}

// Copies now: the caller may reuse its buffers as soon as the setter returns.
void wr_set_inline_data_list(ibv_qp_ex* qpx, size_t num_buf, const ibv_data_buf* buf_list) {
  PendingWr* p = last_wr(qpx);
  if (!p) return;
  WrBatch& b = *qp_of_ex(qpx)->batch;
  size_t total = 0;
  for (size_t i = 0; i < num_buf; ++i) {
    total += buf_list[i].length;
    if (total > b.max_inline) {
      b.err = EINVAL;  // as ibv_post_send with IBV_SEND_INLINE past max_inline_data
      return;
    }
  }
  drop_data(b, *p);
  for (size_t i = 0; i < num_buf; ++i) {
    const auto* bytes = static_cast<const uint8_t*>(buf_list[i].addr);
    if (buf_list[i].length)
      b.inline_bytes.insert(b.inline_bytes.end(), bytes, bytes + buf_list[i].length);
  }
  p->inline_length = static_cast<uint32_t>(total);
  p->has_inline = true;
}

void wr_set_inline_data(ibv_qp_ex* qpx, void* addr, size_t length) {
  const ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(qpx, 1, &buf);
}

void wr_set_ud_addr(ibv_qp_ex* qpx, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  PendingWr* p = last_wr(qpx);
  if (!p) return;
  p->wr.wr.ud.ah = ah;  // a null AH fails in convert_send_wr, as in ibv_post_send
  p->wr.wr.ud.remote_qpn = remote_qpn;
  p->wr.wr.ud.remote_qkey = remote_qkey;
}

// XRC initiators: the XRC SRQ at the target the request is for (its XRCETH).
void wr_set_xrc_srqn(ibv_qp_ex* qpx, uint32_t remote_srqn) {
  PendingWr* p = last_wr(qpx);
  if (!p) return;
  p->wr.qp_type.xrc.remote_srqn = remote_srqn;
}

// ---- The region --------------------------------------------------------------------------------

void wr_start(ibv_qp_ex* qpx) {
  WrBatch& b = *qp_of_ex(qpx)->batch;
  if (b.serialize) b.region.lock();
  b.clear();
  b.open = true;
}

void close_region(WrBatch& b) {
  const bool was_open = b.open;
  b.clear();
  b.open = false;
  if (was_open && b.serialize) b.region.unlock();
}

// Converts the batch; 0 or the first request's error.
int convert_batch(const ibv_qp& qp, WrBatch& b) {
  const size_t n = b.pending.size();
  size_t sge_total = 0;
  for (const PendingWr& p : b.pending) sge_total += p.has_inline ? 1 : p.sge_count;
  b.transport_wrs.assign(n, t::SendWr{});
  b.transport_sges.resize(sge_total);
  size_t next_sge = 0;
  for (size_t i = 0; i < n; ++i) {
    PendingWr& p = b.pending[i];
    ibv_sge inline_sge{};
    if (p.has_inline) {
      // The transport copies inline data from the SGE's address when it queues the request
      // (IBV_SEND_INLINE): here, the batch's own copy.
      inline_sge = {reinterpret_cast<uint64_t>(b.inline_bytes.data() + p.inline_first),
                    p.inline_length, 0};
      p.wr.sg_list = p.inline_length ? &inline_sge : nullptr;
      p.wr.num_sge = p.inline_length ? 1 : 0;
      p.wr.send_flags |= IBV_SEND_INLINE;
    } else {
      p.wr.sg_list = p.sge_count ? b.sges.data() + p.sge_first : nullptr;
      p.wr.num_sge = static_cast<int>(p.sge_count);
    }
    // convert_send_wr copies the SGEs (so inline_sge may go) into this request's share.
    int err = convert_send_wr(qp, p.wr, b.transport_sges.data() + next_sge, &b.transport_wrs[i]);
    if (err) return err;
    next_sge += static_cast<size_t>(p.wr.num_sge);
  }
  return 0;
}

int wr_complete(ibv_qp_ex* qpx) {
  Qp* q = qp_of_ex(qpx);
  WrBatch& b = *q->batch;
  if (!b.open) return EINVAL;  // no ibv_wr_start
  int err = b.err;
  if (!err && !b.pending.empty()) {
    err = convert_batch(qpx->qp_base, b);
    if (!err) err = q->impl->post_send_all(b.transport_wrs);
    if (!err) q->runtime->posted(*q->impl);  // as ibv_post_send
  }
  close_region(b);
  return err;
}

void wr_abort(ibv_qp_ex* qpx) {
  close_region(*qp_of_ex(qpx)->batch);
}

// What uroce's transport does per QP type (transport/requester.cpp, opcode_allowed): RC and XRC
// initiators all of the classic opcodes, UC sends, writes and local window operations, UD sends.
constexpr uint64_t kRcSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                                IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                                IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |
                                IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
constexpr uint64_t kUcSendOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                                IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW;
constexpr uint64_t kUdSendOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

}  // namespace

int check_send_ops(ibv_qp_type type, uint64_t send_ops_flags) {
  uint64_t supported = 0;
  switch (type) {
    case IBV_QPT_RC:
    case IBV_QPT_XRC_SEND:
      supported = kRcSendOps;
      break;
    case IBV_QPT_UC:
      supported = kUcSendOps;
      break;
    case IBV_QPT_UD:
      supported = kUdSendOps;
      break;
    default:
      return EOPNOTSUPP;
  }
  // TSO, atomic write and anything newer are not done by uroce: refused, as providers do.
  return (send_ops_flags & ~supported) ? EOPNOTSUPP : 0;
}

int attach_wr_batch(Qp* q, uint64_t send_ops_flags, bool serialize) {
  const verbs::QpCapabilities& cap = q->impl->init_attr().cap;
  auto* b = new (std::nothrow) WrBatch(cap.max_send_wr, cap.max_inline_data, serialize);
  if (!b) return ENOMEM;
  q->batch = b;
  ibv_qp_ex& ex = q->ex;
  ex.comp_mask = 0;
  // Builders only for the operations asked for (the others stay null, as with rdma-core's
  // providers); TSO and atomic write are never installed, the XRC SRQ setter only on XRC
  // initiators.
  if (send_ops_flags & IBV_QP_EX_WITH_SEND) ex.wr_send = wr_send;
  if (send_ops_flags & IBV_QP_EX_WITH_SEND_WITH_IMM) ex.wr_send_imm = wr_send_imm;
  if (send_ops_flags & IBV_QP_EX_WITH_SEND_WITH_INV) ex.wr_send_inv = wr_send_inv;
  if (send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE) ex.wr_rdma_write = wr_rdma_write;
  if (send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) ex.wr_rdma_write_imm = wr_rdma_write_imm;
  if (send_ops_flags & IBV_QP_EX_WITH_RDMA_READ) ex.wr_rdma_read = wr_rdma_read;
  if (send_ops_flags & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) ex.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  if (send_ops_flags & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) {
    ex.wr_atomic_fetch_add = wr_atomic_fetch_add;
  }
  if (send_ops_flags & IBV_QP_EX_WITH_BIND_MW) ex.wr_bind_mw = wr_bind_mw;
  if (send_ops_flags & IBV_QP_EX_WITH_LOCAL_INV) ex.wr_local_inv = wr_local_inv;
  ex.wr_set_sge = wr_set_sge;
  ex.wr_set_sge_list = wr_set_sge_list;
  ex.wr_set_inline_data = wr_set_inline_data;
  ex.wr_set_inline_data_list = wr_set_inline_data_list;
  ex.wr_set_ud_addr = wr_set_ud_addr;  // ignored unless UD
  if (q->ex.qp_base.qp_type == IBV_QPT_XRC_SEND) ex.wr_set_xrc_srqn = wr_set_xrc_srqn;
  ex.wr_start = wr_start;
  ex.wr_complete = wr_complete;
  ex.wr_abort = wr_abort;
  return 0;
}

void detach_wr_batch(Qp* q) {
  delete q->batch;
  q->batch = nullptr;
}

}  // namespace uroce::abi
