#include "verbs/event.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "common/check.h"

namespace uroce::verbs::detail {

template <typename T>
FdQueue<T>::FdQueue(size_t capacity) : capacity_(capacity) {
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  // Without an fd the queue still works for non-blocking get(); blocking waits report EIO.
}

template <typename T>
FdQueue<T>::~FdQueue() {
  if (fd_ >= 0) ::close(fd_);
}

// Keeps the eventfd readable exactly while items_ is non-empty. Called with mu_ held so a reader
// never sees a readable fd and an empty queue for longer than one lock hold.
template <typename T>
void FdQueue<T>::sync_fd_locked() {
  if (fd_ < 0) return;
  bool want = !items_.empty();
  if (want == fd_ready_) return;
  if (want) {
    uint64_t one = 1;
    if (::write(fd_, &one, sizeof one) == sizeof one) fd_ready_ = true;
  } else {
    // Reading an eventfd resets it to zero. The ABI layer hands the fd to programs and may make
    // it blocking, and a program may have read it already, so read only if it is readable now:
    // a read must never block while the queue's lock is held.
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
      uint64_t value;
      (void)!::read(fd_, &value, sizeof value);
    }
    fd_ready_ = false;
  }
}

template <typename T>
bool FdQueue<T>::post(const T& item) {
  std::lock_guard lock(mu_);
  if (items_.size() >= capacity_) {
    ++dropped_;
    return false;
  }
  items_.push_back(item);
  sync_fd_locked();
  return true;
}

template <typename T>
Result<T> FdQueue<T>::get(bool block) {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (!items_.empty()) {
        T item = items_.front();
        items_.pop_front();
        sync_fd_locked();
        return item;
      }
    }
    if (!block) return Err(EAGAIN);
    if (fd_ < 0) return Err(EIO);
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0) {
      if (errno == EINTR) return Err(EINTR);
      return Err(EIO);
    }
  }
}

template <typename T>
size_t FdQueue<T>::size() const {
  std::lock_guard lock(mu_);
  return items_.size();
}

template <typename T>
uint64_t FdQueue<T>::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

template <typename T>
template <typename Pred>
size_t FdQueue<T>::purge(Pred pred) {
  std::lock_guard lock(mu_);
  size_t before = items_.size();
  std::erase_if(items_, pred);
  sync_fd_locked();
  return before - items_.size();
}

template class FdQueue<AsyncEvent>;
template class FdQueue<CompletionQueue*>;

}  // namespace uroce::verbs::detail

namespace uroce::verbs {

size_t AsyncEventQueue::purge(const void* object) {
  return q_.purge([object](const AsyncEvent& e) {
    return e.qp == object || e.cq == object || e.srq == object;
  });
}

CompletionChannel::~CompletionChannel() {
  UROCE_CHECK(users_.load() == 0);
}

size_t CompletionChannel::purge(const CompletionQueue* cq) {
  return q_.purge([cq](CompletionQueue* e) { return e == cq; });
}

}  // namespace uroce::verbs
