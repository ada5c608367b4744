#pragma once
// Bounded event queues with a file descriptor: the asynchronous event queue of a context
// (ibv_get_async_event) and the completion channel (ibv_get_cq_event). Each owns an eventfd that is
// readable exactly while the queue holds events, so the ABI layer can hand it to applications that
// poll()/select() on it, and a blocking get() is an interruptible poll() (qperf relies on EINTR).
//
// Threading: every member is safe to call from any thread.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

#include "common/result.h"
#include "verbs/attrs.h"

namespace uroce::verbs {

class QueuePair;

// == ibv_async_event: the type and the object it is about (one of qp, cq, srq, or port).
struct AsyncEvent {
  EventType type = EventType::kDeviceFatal;
  QueuePair* qp = nullptr;
  CompletionQueue* cq = nullptr;
  SharedReceiveQueue* srq = nullptr;
  uint8_t port = 0;
};

namespace detail {

// A bounded FIFO of T plus an eventfd mirroring "non-empty".
template <typename T>
class FdQueue {
 public:
  explicit FdQueue(size_t capacity);
  ~FdQueue();
  FdQueue(const FdQueue&) = delete;
  FdQueue& operator=(const FdQueue&) = delete;

  // Returns false (and counts a drop) when the queue is full.
  bool post(const T& item);
  // EAGAIN when empty and !block; EINTR when a signal interrupts a blocking wait.
  Result<T> get(bool block);
  // Removes every queued item for which pred(item) is true (the object is being destroyed).
  template <typename Pred>
  size_t purge(Pred pred);

  int fd() const { return fd_; }
  size_t size() const;
  uint64_t dropped() const;
  size_t capacity() const { return capacity_; }

 private:
  void sync_fd_locked();
  const size_t capacity_;
  int fd_ = -1;
  mutable std::mutex mu_;
  std::deque<T> items_;
  uint64_t dropped_ = 0;
  bool fd_ready_ = false;
};

}  // namespace detail

// The per-context asynchronous event queue (IBA 11.6.3). Events past the bound are dropped and
// counted rather than blocking the progress engine.
class AsyncEventQueue {
 public:
  static constexpr size_t kCapacity = 1024;
  AsyncEventQueue() : q_(kCapacity) {}

  bool post(const AsyncEvent& e) { return q_.post(e); }
  Result<AsyncEvent> get(bool block = false) { return q_.get(block); }
  // Drops queued events about an object that is being destroyed, so none names a dead object.
  size_t purge(const void* object);
  int fd() const { return q_.fd(); }
  size_t size() const { return q_.size(); }
  uint64_t dropped() const { return q_.dropped(); }

 private:
  detail::FdQueue<AsyncEvent> q_;
};

// A completion channel (ibv_comp_channel): CQs armed with req_notify() post themselves here once
// per notification.
class CompletionChannel {
 public:
  static constexpr size_t kCapacity = 4096;
  CompletionChannel() : q_(kCapacity) {}
  ~CompletionChannel();
  CompletionChannel(const CompletionChannel&) = delete;
  CompletionChannel& operator=(const CompletionChannel&) = delete;

  Result<CompletionQueue*> get_event(bool block = false) { return q_.get(block); }
  int fd() const { return q_.fd(); }
  size_t pending() const { return q_.size(); }
  uint64_t dropped() const { return q_.dropped(); }
  // CQs attached (ibv_destroy_comp_channel says EBUSY while > 0).
  uint32_t users() const { return users_.load(); }

 private:
  friend class CompletionQueue;
  std::atomic<uint32_t> users_{0};
  bool notify(CompletionQueue* cq) { return q_.post(cq); }
  size_t purge(const CompletionQueue* cq);
  detail::FdQueue<CompletionQueue*> q_;
};

}  // namespace uroce::verbs
