#include "verbs/cq.h"

#include <algorithm>
#include <cerrno>
#include <new>

#include "common/check.h"
#include "verbs/device.h"

namespace uroce::verbs {

CompletionQueue::CompletionQueue(Context& ctx, uint32_t capacity, CompletionChannel* channel)
    : ctx_(ctx),
      channel_(channel),
      ring_(std::min(capacity, kInitialStorage)),
      capacity_(capacity) {
  UROCE_CHECK(capacity > 0 && (capacity & (capacity - 1)) == 0);
  mu_.set_single_threaded(ctx.device().config().single_threaded);
  if (channel_) channel_->users_.fetch_add(1);
}

CompletionQueue::~CompletionQueue() {
  UROCE_CHECK(users_.load() == 0);
  // No event may name a destroyed CQ.
  if (channel_) {
    channel_->purge(this);
    channel_->users_.fetch_sub(1);
  }
  ctx_.events_.purge(this);
  ctx_.users_.fetch_sub(1);
  ctx_.dev_.release(Device::kCq);
}

bool CompletionQueue::push(const Completion& c) {
  bool notify = false;
  {
    std::lock_guard lock(mu_);
    const uint64_t queued = tail_ - head_;
    bool refused = error_.load(std::memory_order_relaxed) ||
                   queued == capacity_.load(std::memory_order_relaxed);
    // Full storage below the CQ's size grows; an allocation that fails counts as an overrun.
    if (!refused && queued == ring_.size()) refused = !regrow_locked(ring_.size() * 2);
    if (refused) {
      ++lost_;
      if (!error_.exchange(true)) {
        // The first overrun: the CQ enters the error state and the consumer hears about it once
        // (IBA 11.4.2.1; IBV_EVENT_CQ_ERR).
        AsyncEvent e;
        e.type = EventType::kCqErr;
        e.cq = this;
        ctx_.events_.post(e);
      }
      return false;
    }
    ring_[tail_ & (ring_.size() - 1)] = c;
    ++tail_;
    // IBA 11.4.2.2: a solicited-only arm fires on a solicited completion or an unsuccessful one.
    if (arm_ == Arm::kNext ||
        (arm_ == Arm::kSolicited && (c.solicited || c.status != transport::WcStatus::kSuccess))) {
      arm_ = Arm::kNone;
      notify = true;
    }
    if (notify && channel_) channel_->notify(this);
  }
  return true;
}

size_t CompletionQueue::poll(std::span<Completion> out) {
  std::lock_guard lock(mu_);
  size_t n = 0;
  while (n < out.size() && head_ != tail_) {
    out[n++] = ring_[head_ & (ring_.size() - 1)];
    ++head_;
  }
  return n;
}

void CompletionQueue::purge(uint32_t qpn) {
  std::lock_guard lock(mu_);
  const uint64_t mask = ring_.size() - 1;
  uint64_t kept = head_;
  for (uint64_t i = head_; i != tail_; ++i) {
    if (ring_[i & mask].qp_num == qpn) continue;
    if (kept != i) ring_[kept & mask] = ring_[i & mask];
    ++kept;
  }
  tail_ = kept;
}

int CompletionQueue::req_notify(bool solicited_only) {
  if (!channel_) return EINVAL;
  ctx_.device().cq_notify_requests_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  // A solicited-only request does not weaken an arm for "next" (IBA 11.4.2.2).
  if (solicited_only) {
    if (arm_ == Arm::kNone) arm_ = Arm::kSolicited;
  } else {
    arm_ = Arm::kNext;
  }
  return 0;
}

bool CompletionQueue::regrow_locked(size_t size) {
  std::vector<Completion> ring;
  try {
    ring.resize(size);
  } catch (const std::bad_alloc&) {
    return false;
  }
  const uint64_t queued = tail_ - head_;
  for (uint64_t i = 0; i < queued; ++i) ring[i] = ring_[(head_ + i) & (ring_.size() - 1)];
  ring_.swap(ring);
  head_ = 0;
  tail_ = queued;
  return true;
}

int CompletionQueue::resize(uint32_t cqe) {
  if (cqe == 0 || cqe > ctx_.dev_.attr().max_cqe) return EINVAL;
  uint32_t capacity = 1;
  while (capacity < cqe) capacity <<= 1;
  std::lock_guard lock(mu_);
  const uint64_t queued = tail_ - head_;
  if (queued > cqe) return EINVAL;  // the request, not its rounding (rdma-core rxe)
  size_t storage = std::min(capacity, kInitialStorage);
  while (storage < queued) storage <<= 1;
  if (storage != ring_.size() && !regrow_locked(storage)) return ENOMEM;
  capacity_.store(capacity, std::memory_order_release);
  return 0;
}

size_t CompletionQueue::size() const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(tail_ - head_);
}

uint64_t CompletionQueue::lost() const {
  std::lock_guard lock(mu_);
  return lost_;
}

}  // namespace uroce::verbs
