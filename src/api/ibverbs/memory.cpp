// Memory verbs beyond ibv_reg_mr: on-demand paging (ibv_advise_mr and the ODP caps of
// ibv_query_device_ex; IBV_ACCESS_ON_DEMAND itself goes through ibv_reg_mr) and device memory
// (ibv_alloc_dm, ibv_free_dm, ibv_memcpy_to_dm / ibv_memcpy_from_dm, ibv_reg_dm_mr). The header's
// inline functions reach them through the verbs_context and the ibv_dm (install_memory_ops).
#include <cstring>
#include <new>

#include "api/ibverbs/context_state.h"
#include "api/ibverbs/objects.h"
#include "verbs/device.h"

namespace uroce::abi {
namespace {

namespace v = uroce::verbs;

static_assert(v::kAccessZeroBased == IBV_ACCESS_ZERO_BASED &&
              v::kAccessOnDemand == IBV_ACCESS_ON_DEMAND);
static_assert(v::kAdvisePrefetch == IBV_ADVISE_MR_ADVICE_PREFETCH &&
              v::kAdvisePrefetchWrite == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
              v::kAdvisePrefetchNoFault == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT &&
              v::kAdviseFlush == IBV_ADVISE_MR_FLAG_FLUSH);

struct Dm {
  ibv_dm dm;  // first: ibv_dm* <-> Dm*
  v::DeviceMemory* impl;
};
static_assert(std::is_standard_layout_v<Dm>);

Dm* dm_of(ibv_dm* d) {
  return reinterpret_cast<Dm*>(d);
}

ContextState* state_of(ibv_context* c) {
  return ctx_of(c)->state;
}

int memcpy_to_dm(ibv_dm* dm, uint64_t dm_offset, const void* host_addr, size_t length) {
  if (!dm || (!host_addr && length)) return EINVAL;
  return dm_of(dm)->impl->copy_to(dm_offset, host_addr, length);
}

int memcpy_from_dm(void* host_addr, ibv_dm* dm, uint64_t dm_offset, size_t length) {
  if (!dm || (!host_addr && length)) return EINVAL;
  return dm_of(dm)->impl->copy_from(host_addr, dm_offset, length);
}

ibv_dm* alloc_dm(ibv_context* context, ibv_alloc_dm_attr* attr) {
  if (!context || !from(context) || !attr) return fail<ibv_dm>(EINVAL);
  if (int err = state_of(context)->open_error()) return fail<ibv_dm>(err);
  if (attr->comp_mask != 0) return fail<ibv_dm>(EINVAL);  // no optional fields defined
  auto impl = state_of(context)->verbs()->alloc_dm(attr->length, attr->log_align_req);
  if (!impl.ok()) return fail<ibv_dm>(impl.error());
  auto* d = new (std::nothrow) Dm{};
  if (!d) return fail<ibv_dm>(ENOMEM);
  d->impl = impl->release();
  d->dm.context = context;
  d->dm.memcpy_to_dm = memcpy_to_dm;
  d->dm.memcpy_from_dm = memcpy_from_dm;
  d->dm.comp_mask = 0;
  d->dm.handle = 0;
  state_of(context)->add(d->impl, d, ContextState::Kind::kDm);
  return &d->dm;
}

int free_dm(ibv_dm* dm) {
  if (!dm) return EINVAL;
  Dm* d = dm_of(dm);
  if (d->impl->users() != 0) return EBUSY;  // an MR still registers it
  state_of(dm->context)->remove(d->impl);
  delete d->impl;
  delete d;
  return 0;
}

ibv_mr* reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length, unsigned int access) {
  if (!pd || !dm) return fail<ibv_mr>(EINVAL);
  access &= ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  auto impl = from(pd)->impl->reg_dm_mr(*dm_of(dm)->impl, dm_offset, length, access);
  if (!impl.ok()) return fail<ibv_mr>(impl.error());
  auto* m = new (std::nothrow) Mr{};
  if (!m) return fail<ibv_mr>(ENOMEM);
  m->impl = impl->release();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = nullptr;  // zero-based: as rdma-core reports a DM MR
  m->mr.length = length;
  m->mr.handle = m->impl->lkey();
  m->mr.lkey = m->impl->lkey();
  m->mr.rkey = m->impl->rkey();
  state_of(pd->context)->add(m->impl, m, ContextState::Kind::kMr);
  return &m->mr;
}

int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge) {
  if (!pd || (num_sge != 0 && !sg_list)) return EINVAL;
  if (num_sge > v::kMaxAdviseSge) return EINVAL;
  transport::Sge sges[v::kMaxAdviseSge];
  for (uint32_t i = 0; i < num_sge; ++i)
    sges[i] = {sg_list[i].addr, sg_list[i].length, sg_list[i].lkey};
  return from(pd)->impl->advise_mr(static_cast<uint32_t>(advice), flags, {sges, num_sge});
}

}  // namespace

void install_memory_ops(verbs_context* vctx) {
  vctx->advise_mr = advise_mr;
  vctx->alloc_dm = alloc_dm;
  vctx->free_dm = free_dm;
  vctx->reg_dm_mr = reg_dm_mr;
}

void fill_memory_caps(ibv_device_attr_ex* attr) {
  attr->max_dm_size = Limits::kMaxDmSize;
  if (!v::on_demand_supported()) return;
  // Every operation on every transport uroce has: the probe is the same for all of them.
  attr->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  constexpr uint32_t kSendRecv = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
  attr->odp_caps.per_transport_caps.rc_odp_caps = kSendRecv | IBV_ODP_SUPPORT_WRITE |
                                                  IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
                                                  IBV_ODP_SUPPORT_SRQ_RECV;
  attr->odp_caps.per_transport_caps.uc_odp_caps =
      kSendRecv | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV;
  attr->odp_caps.per_transport_caps.ud_odp_caps = kSendRecv | IBV_ODP_SUPPORT_SRQ_RECV;
  // XRC is RC's engines; a target reaches memory through its XRC SRQ's PD, as any QP does.
  attr->xrc_odp_caps = attr->odp_caps.per_transport_caps.rc_odp_caps;
}

}  // namespace uroce::abi
