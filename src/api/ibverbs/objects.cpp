// PD, MR, CQ, QP, SRQ and AH verbs. Wired to src/verbs as those objects land; until then each
// verb fails with ENOSYS ("not implemented yet") rather than pretending to work.
#include "api/ibverbs/objects.h"

#include <cstring>
#include <new>

#include "api/ibverbs/abi.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace uroce::abi {
namespace {

int poll_cq(ibv_cq*, int, ibv_wc*) {
  return -1;
}
int req_notify_cq(ibv_cq* cq, int solicited_only) {
  from(cq)->armed.store(solicited_only ? 2 : 1);
  return 0;
}
int post_send(ibv_qp*, ibv_send_wr* wr, ibv_send_wr** bad) {
  *bad = wr;
  return ENOSYS;
}
int post_recv(ibv_qp*, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  *bad = wr;
  return ENOSYS;
}
int post_srq_recv(ibv_srq*, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  *bad = wr;
  return ENOSYS;
}

int query_port_ex(ibv_context* context, uint8_t port_num, ibv_port_attr* attr, size_t len) {
  Context* ctx = from(context);
  if (!ctx || !attr || port_num != 1) return EINVAL;
  ibv_port_attr full;
  fill_port_attr(*ctx->device, &full);
  std::memcpy(attr, &full, len < sizeof full ? len : sizeof full);
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
  full.max_dm_size = 0;
  std::memcpy(attr, &full, attr_size < sizeof full ? attr_size : sizeof full);
  return 0;
}

}  // namespace

void install_ops(verbs_context* v) {
  ibv_context_ops& ops = v->context.ops;
  ops.poll_cq = poll_cq;
  ops.req_notify_cq = req_notify_cq;
  ops.post_send = post_send;
  ops.post_recv = post_recv;
  ops.post_srq_recv = post_srq_recv;
  v->query_port = query_port_ex;
  v->query_device_ex = query_device_ex;
}

}  // namespace uroce::abi

using namespace uroce::abi;

UROCE_IBV_EXPORT ibv_pd* ibv_alloc_pd(ibv_context*) {
  return fail<ibv_pd>(ENOSYS);
}
UROCE_IBV_EXPORT int ibv_dealloc_pd(ibv_pd*) {
  return ENOSYS;
}
UROCE_IBV_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd*, void*, size_t, uint64_t, unsigned int) {
  return fail<ibv_mr>(ENOSYS);
}
UROCE_IBV_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                          static_cast<unsigned>(access));
}
UROCE_IBV_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                         int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}
UROCE_IBV_EXPORT int ibv_dereg_mr(ibv_mr*) {
  return ENOSYS;
}
UROCE_IBV_EXPORT ibv_cq* ibv_create_cq(ibv_context*, int, void*, ibv_comp_channel*, int) {
  return fail<ibv_cq>(ENOSYS);
}
UROCE_IBV_EXPORT int ibv_destroy_cq(ibv_cq*) {
  return ENOSYS;
}
UROCE_IBV_EXPORT ibv_qp* ibv_create_qp(ibv_pd*, ibv_qp_init_attr*) {
  return fail<ibv_qp>(ENOSYS);
}
UROCE_IBV_EXPORT int ibv_modify_qp(ibv_qp*, ibv_qp_attr*, int) {
  return ENOSYS;
}
UROCE_IBV_EXPORT int ibv_query_qp(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*) {
  return ENOSYS;
}
UROCE_IBV_EXPORT int ibv_destroy_qp(ibv_qp*) {
  return ENOSYS;
}
UROCE_IBV_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp*) {
  return fail<ibv_qp_ex>(EOPNOTSUPP);
}
UROCE_IBV_EXPORT int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) {
  return 0;
}
UROCE_IBV_EXPORT ibv_srq* ibv_create_srq(ibv_pd*, ibv_srq_init_attr*) {
  return fail<ibv_srq>(ENOSYS);
}
UROCE_IBV_EXPORT int ibv_modify_srq(ibv_srq*, ibv_srq_attr*, int) {
  return ENOSYS;
}
UROCE_IBV_EXPORT int ibv_query_srq(ibv_srq*, ibv_srq_attr*) {
  return ENOSYS;
}
UROCE_IBV_EXPORT int ibv_destroy_srq(ibv_srq*) {
  return ENOSYS;
}
UROCE_IBV_EXPORT ibv_ah* ibv_create_ah(ibv_pd*, ibv_ah_attr*) {
  return fail<ibv_ah>(ENOSYS);
}
UROCE_IBV_EXPORT int ibv_destroy_ah(ibv_ah*) {
  return ENOSYS;
}
UROCE_IBV_EXPORT int ibv_init_ah_from_wc(ibv_context*, uint8_t, ibv_wc*, ibv_grh*, ibv_ah_attr*) {
  return ENOSYS;
}
UROCE_IBV_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd*, ibv_wc*, ibv_grh*, uint8_t) {
  return fail<ibv_ah>(ENOSYS);
}
