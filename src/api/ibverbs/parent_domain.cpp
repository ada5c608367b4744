// Thread domains and parent domains (ibv_alloc_td(3), ibv_alloc_parent_domain(3)), reached
// through verbs_context ops (the header's inline wrappers).
//
// A parent domain is an ibv_pd whose wrapper shares the verbs PD of the PD it contains, so it
// serves wherever a PD does (ibv_reg_mr, ibv_create_qp / _ex, ibv_create_srq, ibv_create_ah,
// ibv_alloc_mw) and an MR registered on either is usable by a QP on the other. A thread domain
// in it tells the ibv_wr_* API not to lock (qp_ex.cpp).
//
// The custom allocator (IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) is kept but never called:
// rdma-core's providers call it for the queue buffers the device reads by DMA, and uroce has
// none; its queues are library objects (docs/ibverbs.md).
#include <atomic>
#include <cerrno>
#include <new>

#include "api/ibverbs/context_state.h"
#include "api/ibverbs/objects.h"

namespace uroce::abi {

struct Td {
  ibv_td td;                       // first: ibv_td* <-> Td*
  std::atomic<uint32_t> users{0};  // parent domains naming it
};

struct ParentDomain {
  Pd* contained;
  Td* td;  // or null
  void* (*alloc)(ibv_pd*, void*, size_t, size_t, uint64_t);
  void (*free)(ibv_pd*, void*, void*, uint64_t);
  void* pd_context;
};

namespace {

Td* from(ibv_td* t) {
  return reinterpret_cast<Td*>(t);
}

ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* init_attr) {
  if (!context || !init_attr) return fail<ibv_td>(EINVAL);
  if (init_attr->comp_mask != 0) return fail<ibv_td>(EINVAL);  // as rdma-core's providers
  auto* t = new (std::nothrow) Td{};
  if (!t) return fail<ibv_td>(ENOMEM);
  t->td.context = context;
  ctx_of(context)->state->add(t, &t->td, ContextState::Kind::kTd);
  return &t->td;
}

ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  if (!context || !attr || !attr->pd) return fail<ibv_pd>(EINVAL);
  constexpr uint32_t kSupportedMask =
      IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (attr->comp_mask & ~kSupportedMask) return fail<ibv_pd>(EINVAL);
  // A parent domain contains a plain PD of the same context, and a TD of that context.
  if (attr->pd->context != context || is_parent_domain(attr->pd)) return fail<ibv_pd>(EINVAL);
  if (attr->td && attr->td->context != context) return fail<ibv_pd>(EINVAL);
  const bool allocators = (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) != 0;
  if (allocators && (!attr->alloc || !attr->free)) return fail<ibv_pd>(EINVAL);

  auto* pd = new (std::nothrow) ParentDomain{};
  auto* p = new (std::nothrow) Pd{};
  if (!pd || !p) {
    delete pd;
    delete p;
    return fail<ibv_pd>(ENOMEM);
  }
  Pd* contained = reinterpret_cast<Pd*>(attr->pd);
  pd->contained = contained;
  pd->td = attr->td ? from(attr->td) : nullptr;
  if (allocators) {
    pd->alloc = attr->alloc;
    pd->free = attr->free;
  }
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) pd->pd_context = attr->pd_context;
  p->impl = contained->impl;
  p->parent_domain = pd;
  // Interchangeable with the PD it contains, as rdma-core initializes it.
  p->pd.context = context;
  p->pd.handle = contained->pd.handle;
  contained->abi_users.fetch_add(1);
  if (pd->td) pd->td->users.fetch_add(1);
  ctx_of(context)->state->add(p, p, ContextState::Kind::kParentDomain);
  return &p->pd;
}

}  // namespace

int dealloc_td(ibv_td* td) {
  if (!td) return EINVAL;
  Td* t = from(td);
  if (t->users.load() != 0) return EBUSY;
  ctx_of(td->context)->state->remove(t);
  delete t;
  return 0;
}

bool is_parent_domain(ibv_pd* pd) {
  return pd && reinterpret_cast<Pd*>(pd)->parent_domain != nullptr;
}

ibv_td* thread_domain_of(ibv_pd* pd) {
  if (!is_parent_domain(pd)) return nullptr;
  Td* t = reinterpret_cast<Pd*>(pd)->parent_domain->td;
  return t ? &t->td : nullptr;
}

void retain_pd(ibv_pd* pd) {
  if (is_parent_domain(pd)) reinterpret_cast<Pd*>(pd)->abi_users.fetch_add(1);
}

void release_pd(ibv_pd* pd) {
  if (is_parent_domain(pd)) reinterpret_cast<Pd*>(pd)->abi_users.fetch_sub(1);
}

int dealloc_parent_domain(Pd* p) {
  if (p->abi_users.load() != 0) return EBUSY;
  ParentDomain* pd = p->parent_domain;
  pd->contained->abi_users.fetch_sub(1);
  if (pd->td) pd->td->users.fetch_sub(1);
  ctx_of(p->pd.context)->state->remove(p);
  delete pd;
  delete p;
  return 0;
}

void install_domain_ops(verbs_context* vctx) {
  vctx->alloc_td = alloc_td;
  vctx->dealloc_td = dealloc_td;
  vctx->alloc_parent_domain = alloc_parent_domain;
}

}  // namespace uroce::abi
