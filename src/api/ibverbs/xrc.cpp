// XRC through the verbs_context ops behind verbs.h's inline wrappers: ibv_open_xrcd /
// ibv_close_xrcd, ibv_create_srq_ex with IBV_SRQT_XRC, ibv_get_srq_num, and the target QPs of
// ibv_create_qp_ex with IBV_QPT_XRC_RECV (verbs/xrc.h has the model). ibv_open_qp stays without
// an op, so verbs.h answers EOPNOTSUPP.
//
// Domains and files: the kernel names a shared XRC domain by the inode of the file descriptor
// passed in ibv_xrcd_init_attr, so that processes opening the same file share it. uroce's
// domains live in the process, so the inode names a domain within one context: a second
// ibv_open_xrcd of the same file on that context gets the same domain (another ibv_xrcd, counted
// like the kernel's uses of it), and the errors are the kernel's (EBADF for a bad descriptor,
// EAGAIN for a file naming no domain without O_CREAT, EINVAL for one that does with O_EXCL).
// Another process (or context) opening that file gets a domain of its own: sharing across
// processes would need the domain's SRQ directory in memory every process maps, and target QPs
// whose packets any of them could receive (docs/ibverbs.md, "XRC").
#include "verbs/xrc.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <new>
#include <tuple>
#include <type_traits>

#include "api/ibverbs/context_state.h"
#include "api/ibverbs/objects.h"
#include "api/ibverbs/runtime.h"
#include "api/uroce.h"

namespace uroce::abi {
namespace {

// What every ibv_xrcd of one domain shares.
struct SharedXrcd {
  verbs::XrcDomain* impl;
  verbs::Context* owner;
  bool named = false;  // opened through a file (key below)
  dev_t dev = 0;
  ino_t ino = 0;
  uint32_t opens = 0;  // guarded by g_files_mu
};

// rdma-core's verbs_xrcd (driver.h, not installed) begins with the ibv_xrcd, as this does.
struct Xrcd {
  ibv_xrcd xrcd;  // first: ibv_xrcd* <-> Xrcd*
  SharedXrcd* shared;
};
static_assert(std::is_standard_layout_v<Xrcd>);

Xrcd* xrcd_of(ibv_xrcd* x) {
  return reinterpret_cast<Xrcd*>(x);
}

// The domains opened through a file, by (context, device, inode). Bounded by max_xrcd per
// device, as every entry holds a domain.
std::mutex g_files_mu;
std::map<std::tuple<verbs::Context*, dev_t, ino_t>, SharedXrcd*> g_files;

int usable(ibv_context* c) {
  if (!c || !from(c) || !ctx_of(c)->state) return EINVAL;
  return ctx_of(c)->state->open_error();
}

ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  if (!attr) return fail<ibv_xrcd>(EINVAL);
  // As rdma-core's ibv_cmd_open_xrcd: unknown bits are not supported, and both FD and OFLAGS
  // must be given.
  if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) return fail<ibv_xrcd>(EOPNOTSUPP);
  if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
    return fail<ibv_xrcd>(EINVAL);
  if (int err = usable(context)) return fail<ibv_xrcd>(err);
  verbs::Context* vctx = ctx_of(context)->state->verbs();

  auto* x = new (std::nothrow) Xrcd{};
  if (!x) return fail<ibv_xrcd>(ENOMEM);
  std::lock_guard lock(g_files_mu);
  SharedXrcd* shared = nullptr;
  struct stat st {};
  if (attr->fd != -1) {
    if (fstat(attr->fd, &st) != 0) {
      delete x;
      return fail<ibv_xrcd>(EBADF);
    }
    auto it = g_files.find({vctx, st.st_dev, st.st_ino});
    if (it != g_files.end()) {
      if (attr->oflags & O_EXCL) {
        delete x;
        return fail<ibv_xrcd>(EINVAL);
      }
      shared = it->second;
    } else if (!(attr->oflags & O_CREAT)) {
      delete x;
      return fail<ibv_xrcd>(EAGAIN);
    }
  }
  if (!shared) {
    auto impl = vctx->open_xrcd();
    if (!impl.ok()) {
      delete x;
      return fail<ibv_xrcd>(impl.error());
    }
    shared = new (std::nothrow) SharedXrcd{impl->get(), vctx};
    if (!shared) {
      delete x;
      return fail<ibv_xrcd>(ENOMEM);
    }
    impl->release();
    if (attr->fd != -1) {
      shared->named = true;
      shared->dev = st.st_dev;
      shared->ino = st.st_ino;
      g_files.emplace(std::tuple{vctx, st.st_dev, st.st_ino}, shared);
    }
  }
  ++shared->opens;
  x->shared = shared;
  x->xrcd.context = context;
  ctx_of(context)->state->add(x, x, ContextState::Kind::kXrcd);
  return &x->xrcd;
}

ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr) {
  if (!attr) return fail<ibv_srq>(EINVAL);
  constexpr uint32_t kSupported =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if (attr->comp_mask & ~kSupported) return fail<ibv_srq>(EOPNOTSUPP);
  const bool typed = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) != 0;
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) return fail<ibv_srq>(EINVAL);
  if (!typed || attr->srq_type == IBV_SRQT_BASIC) {
    // A basic SRQ with extra (ignored) XRCD/CQ bits; verbs.h sends plain ones to ibv_create_srq.
    return ibv_create_srq(attr->pd, reinterpret_cast<ibv_srq_init_attr*>(attr));
  }
  if (attr->srq_type != IBV_SRQT_XRC) return fail<ibv_srq>(EOPNOTSUPP);  // tag matching
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
      !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq)
    return fail<ibv_srq>(EINVAL);
  if (attr->pd->context != context || attr->xrcd->context != context ||
      attr->cq->context != context)
    return fail<ibv_srq>(EINVAL);
  if (int err = usable(context)) return fail<ibv_srq>(err);
  verbs::SrqAttr a{attr->attr.max_wr, attr->attr.max_sge, attr->attr.srq_limit};
  auto impl = xrcd_of(attr->xrcd)
                  ->shared->impl->create_srq(*from(attr->pd)->impl, *from(attr->cq)->impl, a);
  if (!impl.ok()) return fail<ibv_srq>(impl.error());
  auto* s = new (std::nothrow) Srq{};
  if (!s) return fail<ibv_srq>(ENOMEM);
  s->srq_num = (*impl)->srq_num();
  s->impl = impl->release();
  s->srq.context = context;
  s->srq.srq_context = attr->srq_context;
  s->srq.pd = attr->pd;
  s->srq.handle = s->srq_num;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  s->srq.events_completed = 0;
  verbs::SrqAttr got = s->impl->query();
  attr->attr.max_wr = got.max_wr;
  attr->attr.max_sge = got.max_sge;
  retain_pd(attr->pd);
  ctx_of(context)->state->add(s->impl, s, ContextState::Kind::kSrq);
  return &s->srq;
}

// mlx5 answers for every SRQ; only XRC SRQs have a number that means anything (initiators name
// it), so a basic SRQ is EINVAL here.
int get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  if (!srq || !srq_num) return EINVAL;
  Srq* s = reinterpret_cast<Srq*>(srq);
  if (s->srq_num == 0) return EINVAL;
  *srq_num = s->srq_num;
  return 0;
}

}  // namespace

int close_xrcd(ibv_xrcd* xrcd) {
  if (!xrcd) return EINVAL;
  Xrcd* x = xrcd_of(xrcd);
  SharedXrcd* shared = x->shared;
  {
    std::lock_guard lock(g_files_mu);
    // The last ibv_xrcd of a domain closes it, which its SRQs and target QPs forbid.
    if (shared->opens == 1 && shared->impl->users() != 0) return EBUSY;
    if (--shared->opens == 0 && shared->named) {
      g_files.erase({shared->owner, shared->dev, shared->ino});
    }
  }
  ctx_of(xrcd->context)->state->remove(x);
  if (shared->opens == 0) {
    delete shared->impl;
    delete shared;
  }
  delete x;
  return 0;
}

ibv_qp* create_xrc_target_qp(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  if (!attr->xrcd || attr->xrcd->context != context) return fail<ibv_qp>(EINVAL);
  if (int err = usable(context)) return fail<ibv_qp>(err);
  verbs::QpInitAttr init;
  init.qp_type = verbs::QpType::kXrcRecv;
  init.sq_sig_all = attr->sq_sig_all != 0;
  apply_qp_defaults(ctx_of(context)->state->runtime()->qp_defaults(), init);
  auto impl = xrcd_of(attr->xrcd)->shared->impl->create_qp(init);
  if (!impl.ok()) return fail<ibv_qp>(impl.error());
  // A target has no CQs, SRQ or PD of its own (they come with each request's XRC SRQ).
  ibv_qp_init_attr basic{};
  basic.qp_context = attr->qp_context;
  basic.qp_type = IBV_QPT_XRC_RECV;
  basic.sq_sig_all = attr->sq_sig_all;
  ibv_qp* qp = wrap_qp(context, nullptr, impl->release(), &basic);
  if (qp) {
    attr->cap = basic.cap;
    attr->send_cq = attr->recv_cq = nullptr;
    attr->srq = nullptr;
  }
  return qp;
}

void install_xrc_ops(verbs_context* vctx) {
  vctx->open_xrcd = open_xrcd;
  vctx->close_xrcd = close_xrcd;
  vctx->create_srq_ex = create_srq_ex;
  vctx->get_srq_num = get_srq_num;
}

}  // namespace uroce::abi
