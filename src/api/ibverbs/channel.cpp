// Context state, completion channels and async events. Both kinds of event queue are verbs
// objects with an eventfd (verbs/event.h), so programs can read(), poll() and epoll() the fd, and
// a signal interrupts a blocking ibv_get_cq_event with EINTR (qperf relies on it).
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "api/ibverbs/abi.h"
#include "api/ibverbs/context_state.h"
#include "api/ibverbs/objects.h"

namespace uroce::abi {
namespace {

// A program that sets O_NONBLOCK on the fd expects EAGAIN instead of a wait, as with the
// kernel's fd.
bool blocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && !(fl & O_NONBLOCK);
}

// The verbs layer creates its eventfds nonblocking; programs get them blocking, as the kernel's
// fds start, so that the flag afterwards says what the program chose. The verbs queue reads the
// eventfd only while it knows it is non-zero, so it never blocks on it.
void hand_to_program(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

}  // namespace

ContextState* ContextState::create(Context* ctx, int* err) {
  auto* s = new (std::nothrow) ContextState();
  if (!s) {
    *err = ENOMEM;
    return nullptr;
  }
  s->config_ = ctx->device->config;
  s->cmd_fd_ = memfd_create("uroce-cmd", MFD_CLOEXEC);
  if (s->cmd_fd_ < 0) {
    *err = errno;
    delete s;
    return nullptr;
  }
  auto rt = Runtime::acquire(ctx->device);
  if (rt.ok()) {
    auto vctx = (*rt)->device().open();
    if (vctx.ok()) {
      s->runtime_ = std::move(*rt);
      s->vctx_ = std::move(*vctx);
      hand_to_program(s->vctx_->async_events().fd());
      return s;
    }
    s->open_error_ = vctx.error();
  } else {
    s->open_error_ = rt.error();
  }
  s->idle_fd_ = eventfd(0, EFD_CLOEXEC);
  if (s->idle_fd_ < 0) {
    *err = errno;
    delete s;
    return nullptr;
  }
  return s;
}

void ContextState::destroy(ContextState* s) {
  delete s;
}

ContextState::~ContextState() {
  vctx_.reset();  // before the runtime whose device it belongs to
  runtime_.reset();
  if (idle_fd_ >= 0) close(idle_fd_);
  if (cmd_fd_ >= 0) close(cmd_fd_);
}

int ContextState::async_fd() const {
  return vctx_ ? vctx_->async_events().fd() : idle_fd_;
}

void ContextState::add(const void* impl, void* abi_object, Kind kind) {
  std::lock_guard lock(mu_);
  objects_[impl] = {abi_object, kind};
}

void ContextState::remove(const void* impl) {
  std::lock_guard lock(mu_);
  objects_.erase(impl);
}

void* ContextState::lookup(const void* impl) const {
  std::lock_guard lock(mu_);
  auto it = objects_.find(impl);
  return it == objects_.end() ? nullptr : it->second.abi;
}

int ContextState::open_error() {
  if (open_error_ != 0 && !open_error_reported_.exchange(true)) {
    std::fprintf(stderr, "uroce: %s: cannot serve %s (UDP port 4791): %s\n", config_->name.c_str(),
                 config_->address.c_str(), std::strerror(open_error_));
  }
  return open_error_;
}

void ContextState::destroy_all() {
  std::vector<std::pair<Kind, void*>> all;
  {
    std::lock_guard lock(mu_);
    for (const auto& [impl, e] : objects_) all.emplace_back(e.kind, e.abi);
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [kind, abi] : all) {
    switch (kind) {
      case Kind::kQp:
        ibv_destroy_qp(qp_of(static_cast<Qp*>(abi)));
        break;
      case Kind::kAh:
        ibv_destroy_ah(&static_cast<Ah*>(abi)->ah);
        break;
      case Kind::kSrq:
        ibv_destroy_srq(&static_cast<Srq*>(abi)->srq);
        break;
      case Kind::kXrcd:
        close_xrcd(static_cast<ibv_xrcd*>(abi));  // the ibv_xrcd is its wrapper's first member
        break;
      case Kind::kMw: {
        ibv_mw* mw = &static_cast<Mw*>(abi)->mw;
        mw->context->ops.dealloc_mw(mw);
        break;
      }
      case Kind::kMr:
        ibv_dereg_mr(&static_cast<Mr*>(abi)->mr);
        break;
      case Kind::kDm: {
        ibv_dm* dm = static_cast<ibv_dm*>(abi);  // the ibv_dm is its wrapper's first member
        verbs_get_ctx(dm->context)->free_dm(dm);
        break;
      }
      case Kind::kCq:
        ibv_destroy_cq(cq_of(static_cast<Cq*>(abi)));
        break;
      case Kind::kParentDomain:
      case Kind::kPd:
        ibv_dealloc_pd(&static_cast<Pd*>(abi)->pd);
        break;
      case Kind::kTd:
        dealloc_td(static_cast<ibv_td*>(abi));
        break;
      case Kind::kChannel:
        ibv_destroy_comp_channel(&static_cast<CompChannel*>(abi)->channel);
        break;
    }
  }
}

}  // namespace uroce::abi

using namespace uroce::abi;

UROCE_IBV_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  Context* ctx = context ? from(context) : nullptr;
  if (!ctx) return fail<ibv_comp_channel>(EINVAL);
  if (ctx->state->open_error()) return fail<ibv_comp_channel>(ctx->state->open_error());
  auto impl = ctx->state->verbs()->create_comp_channel();
  if (!impl.ok()) return fail<ibv_comp_channel>(impl.error());
  auto* ch = new (std::nothrow) CompChannel{};
  if (!ch) return fail<ibv_comp_channel>(ENOMEM);
  ch->impl = impl->release();
  ch->channel.context = context;
  ch->channel.fd = ch->impl->fd();
  hand_to_program(ch->channel.fd);
  ch->channel.refcnt = 0;
  ctx_of(context)->state->add(ch->impl, ch, ContextState::Kind::kChannel);
  return &ch->channel;
}

UROCE_IBV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (!channel) return EINVAL;
  // As rdma-core: refused while CQs still use the channel (refcnt counts them).
  if (channel->refcnt != 0) return EBUSY;
  CompChannel* ch = from(channel);
  ctx_of(channel->context)->state->remove(ch->impl);
  delete ch->impl;
  delete ch;
  return 0;
}

UROCE_IBV_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context) {
    errno = EINVAL;
    return -1;
  }
  CompChannel* ch = from(channel);
  Context* ctx = from(channel->context);
  if (!ctx) {
    errno = EINVAL;
    return -1;
  }
  auto ev = ch->impl->get_event(blocking(channel->fd));
  if (!ev.ok()) {
    errno = ev.error();
    return -1;
  }
  auto* c = static_cast<Cq*>(ctx->state->lookup(*ev));
  if (!c) {
    errno = EIO;  // the CQ was destroyed with an event queued: a program bug rdma-core also has
    return -1;
  }
  *cq = cq_of(c);
  *cq_context = (*cq)->cq_context;
  return 0;
}

UROCE_IBV_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (!cq) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

UROCE_IBV_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  Context* ctx = context && event ? from(context) : nullptr;
  if (!ctx) {
    errno = EINVAL;
    return -1;
  }
  ContextState* s = ctx->state;
  if (!s->verbs()) {
    // A query-only context has no events: wait on its idle fd like any other.
    if (!blocking(s->async_fd())) {
      errno = EAGAIN;
      return -1;
    }
    uint64_t v;
    if (read(s->async_fd(), &v, sizeof v) < 0) return -1;
    errno = EIO;
    return -1;
  }
  for (;;) {
    auto ev = s->verbs()->async_events().get(blocking(s->async_fd()));
    if (!ev.ok()) {
      errno = ev.error();
      return -1;
    }
    const uroce::verbs::AsyncEvent& e = *ev;
    event->event_type = static_cast<ibv_event_type>(e.type);
    if (e.qp) {
      auto* q = static_cast<Qp*>(s->lookup(e.qp));
      if (!q) continue;  // the QP is gone; rdma-core would not report it either
      event->element.qp = qp_of(q);
    } else if (e.cq) {
      auto* c = static_cast<Cq*>(s->lookup(e.cq));
      if (!c) continue;
      event->element.cq = cq_of(c);
    } else if (e.srq) {
      auto* q = static_cast<Srq*>(s->lookup(e.srq));
      if (!q) continue;
      event->element.srq = &q->srq;
    } else {
      event->element.port_num = e.port ? e.port : 1;
    }
    return 0;
  }
}

UROCE_IBV_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  if (!event) return;
  pthread_mutex_t* mu = nullptr;
  pthread_cond_t* cond = nullptr;
  uint32_t* counter = nullptr;
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
      mu = &event->element.cq->mutex;
      cond = &event->element.cq->cond;
      counter = &event->element.cq->async_events_completed;
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      mu = &event->element.qp->mutex;
      cond = &event->element.qp->cond;
      counter = &event->element.qp->events_completed;
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      mu = &event->element.srq->mutex;
      cond = &event->element.srq->cond;
      counter = &event->element.srq->events_completed;
      break;
    default:
      return;
  }
  pthread_mutex_lock(mu);
  ++*counter;
  pthread_cond_signal(cond);
  pthread_mutex_unlock(mu);
}
