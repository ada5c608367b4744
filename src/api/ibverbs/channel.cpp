// Completion channels and async events as real file descriptors (pipes), so programs can read(),
// poll() and epoll() them, and a signal interrupts a blocking ibv_get_cq_event with EINTR.
//
// A completion event is the 8-byte address of the CQ, written when a completion arrives on an
// armed CQ (IBA 11.4.2.2: one event per request for notification). An async event is a whole
// struct ibv_async_event. Both are smaller than PIPE_BUF, so each write is atomic.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "api/ibverbs/abi.h"
#include "api/ibverbs/context_state.h"
#include "api/ibverbs/objects.h"

namespace uroce::abi {
namespace {

// Reads exactly `len` bytes, or returns -1 with errno (EINTR when a signal arrives first,
// EAGAIN on a nonblocking fd with nothing queued).
int read_record(int fd, void* out, size_t len) {
  auto* p = static_cast<uint8_t*>(out);
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, p + got, len - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      errno = EIO;  // the write end is gone: the context or channel is being destroyed
      return -1;
    }
    // Records are written atomically, so a partial record means a reader bug; keep reading the
    // rest rather than losing stream alignment, unless nothing was read yet.
    if (got == 0) return -1;
    if (errno != EINTR && errno != EAGAIN) return -1;
  }
  return 0;
}

bool make_pipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  // Writers never block (the progress engine must not stall on a slow reader); readers block
  // unless the program sets O_NONBLOCK on its end.
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  return true;
}

}  // namespace

ContextState* ContextState::create(Context* ctx, int* err) {
  auto* s = new (std::nothrow) ContextState();
  if (!s) {
    *err = ENOMEM;
    return nullptr;
  }
  s->ctx_ = ctx;
  if (!make_pipe(s->async_fds_)) {
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
  for (int fd : async_fds_) {
    if (fd >= 0) close(fd);
  }
}

bool ContextState::post_async(const ibv_async_event& event) {
  ssize_t n = write(async_fds_[1], &event, sizeof event);
  if (n != static_cast<ssize_t>(sizeof event)) {
    async_dropped_.fetch_add(1);
    return false;
  }
  return true;
}

bool post_async_event(Context* ctx, const ibv_async_event& event) {
  return ctx->state->post_async(event);
}

void notify_cq(ibv_cq* cq) {
  Cq* c = from(cq);
  if (!cq->channel) return;
  if (c->armed.exchange(0) == 0) return;
  ibv_cq* token = cq;
  ssize_t n = write(from(cq->channel)->write_fd, &token, sizeof token);
  if (n != static_cast<ssize_t>(sizeof token)) c->events_dropped.fetch_add(1);
}

}  // namespace uroce::abi

using namespace uroce::abi;

UROCE_IBV_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  if (!context || !from(context)) return fail<ibv_comp_channel>(EINVAL);
  auto* ch = new (std::nothrow) CompChannel{};
  if (!ch) return fail<ibv_comp_channel>(ENOMEM);
  int fds[2];
  if (!make_pipe(fds)) {
    int err = errno;
    delete ch;
    return fail<ibv_comp_channel>(err);
  }
  ch->channel.context = context;
  ch->channel.fd = fds[0];
  ch->channel.refcnt = 0;
  ch->write_fd = fds[1];
  return &ch->channel;
}

UROCE_IBV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (!channel) return EINVAL;
  // rdma-core refuses while CQs still use the channel (refcnt counts them).
  if (channel->refcnt != 0) return EBUSY;
  CompChannel* ch = from(channel);
  close(ch->channel.fd);
  close(ch->write_fd);
  delete ch;
  return 0;
}

UROCE_IBV_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (!channel || !cq || !cq_context) {
    errno = EINVAL;
    return -1;
  }
  ibv_cq* token = nullptr;
  if (read_record(channel->fd, &token, sizeof token) != 0) return -1;
  *cq = token;
  *cq_context = token->cq_context;
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
  if (!context || !event) {
    errno = EINVAL;
    return -1;
  }
  return read_record(context->async_fd, event, sizeof *event);
}

UROCE_IBV_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  if (!event) return;
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: {
      ibv_cq* cq = event->element.cq;
      pthread_mutex_lock(&cq->mutex);
      ++cq->async_events_completed;
      pthread_cond_signal(&cq->cond);
      pthread_mutex_unlock(&cq->mutex);
      break;
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: {
      ibv_qp* qp = event->element.qp;
      pthread_mutex_lock(&qp->mutex);
      ++qp->events_completed;
      pthread_cond_signal(&qp->cond);
      pthread_mutex_unlock(&qp->mutex);
      break;
    }
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: {
      ibv_srq* srq = event->element.srq;
      pthread_mutex_lock(&srq->mutex);
      ++srq->events_completed;
      pthread_cond_signal(&srq->cond);
      pthread_mutex_unlock(&srq->mutex);
      break;
    }
    default:
      break;
  }
}
