#pragma once
// A completion queue: a ring (a power of two at least as large as requested; resize() replaces it)
// that the transport pushes into and applications poll, from different threads. The ring's storage
// starts small and doubles as completions queue up, to the CQ's size at most: middleware sizes CQs
// for the worst case (libfabric's ofi_rxm asks for 2^18 entries per endpoint), which a program
// rarely fills.
//
// Overrun (IBA 11.4.2.1): a push into a full CQ is refused, never overwrites, puts the CQ in error
// and posts IBV_EVENT_CQ_ERR to the context once; the completions already queued stay pollable and
// every later push is refused and counted as lost. The QPs that pushed are moved to ERR by the
// device with IBV_EVENT_QP_FATAL.
//
// Notification (IBA 11.4.2.2, ibv_req_notify_cq): req_notify() arms the CQ once; the next
// completion pushed (solicited_only: the next solicited or unsuccessful one) disarms it and posts
// the CQ to its completion channel, whose eventfd becomes readable.
//
// Threading: push, poll, req_notify and the queries are safe from any thread.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "transport/types.h"
#include "verbs/device_mutex.h"
#include "verbs/event.h"

namespace uroce::verbs {

class Context;
using transport::Completion;

class CompletionQueue : public transport::CompletionSink {
 public:
  ~CompletionQueue() override;
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // transport::CompletionSink. False when the CQ is full or in error.
  bool push(const Completion& c) override;

  // ibv_poll_cq: moves up to out.size() completions out, oldest first; returns how many.
  size_t poll(std::span<Completion> out);
  // Drops the queued completions of QP `qpn`, keeping the others in order: a QP moved to RESET
  // takes its completions with it, as rdma-core's mlx5 provider does (programs that restart a
  // QP after an error, pyverbs' tests among them, poll the CQ next for the new work).
  void purge(uint32_t qpn);
  // ibv_req_notify_cq. 0, or EINVAL for a CQ without a completion channel.
  int req_notify(bool solicited_only);

  // ibv_resize_cq: at least `cqe` entries, rounded up as at create (cqe() says how many), keeping
  // the completions queued, in order. 0, or EINVAL for 0, more than max_cqe, or fewer entries
  // than are queued now (as rdma-core's providers). Safe against concurrent push and poll.
  int resize(uint32_t cqe);

  uint32_t cqe() const { return capacity_.load(std::memory_order_acquire); }
  size_t size() const;
  bool in_error() const { return error_.load(std::memory_order_acquire); }
  uint64_t lost() const;  // completions refused because of overrun
  CompletionChannel* channel() const { return channel_; }
  Context& context() { return ctx_; }
  // QPs and SRQs using this CQ (ibv_destroy_cq says EBUSY while > 0).
  uint32_t users() const { return users_.load(); }

 private:
  friend class Context;
  friend class ProtectionDomain;
  friend class QueuePair;
  friend class XrcDomain;
  friend class XrcSharedReceiveQueue;
  CompletionQueue(Context& ctx, uint32_t capacity, CompletionChannel* channel);

  enum class Arm : uint8_t { kNone, kNext, kSolicited };
  // The storage a ring starts with (or its capacity, when smaller).
  static constexpr uint32_t kInitialStorage = 1024;

  // Moves the queued completions, in order, into storage of `size` entries (>= those queued).
  // False when the allocation fails (nothing changed).
  bool regrow_locked(size_t size);

  Context& ctx_;
  CompletionChannel* const channel_;
  mutable DeviceMutex mu_;
  // Storage: a power of two, at most capacity_; doubled by push when full (grow_locked).
  std::vector<Completion> ring_;
  std::atomic<uint32_t> capacity_;  // the CQ's size (a power of two), readable without mu_
  uint64_t head_ = 0;               // next to poll
  uint64_t tail_ = 0;               // next to fill
  uint64_t lost_ = 0;
  Arm arm_ = Arm::kNone;
  std::atomic<bool> error_{false};
  std::atomic<uint32_t> users_{0};
};

}  // namespace uroce::verbs
