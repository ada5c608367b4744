#pragma once
// A bounded FIFO of receive WQEs: a QP's own receive queue, or a shared receive queue (SRQ) that
// several QPs consume from. The verbs layer creates SRQs; the transport only pops from them.
//
// Threading: not thread-safe; an SRQ's users must serialise access (the verbs layer's lock).
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "common/ring_slot.h"
#include "transport/types.h"

namespace uroce::transport {

struct RecvWqe {
  uint64_t wr_id = 0;
  std::array<Sge, kMaxSge> sge{};
  uint32_t num_sge = 0;
  uint64_t length = 0;  // sum of the SGE lengths
};

// The ring keeps each WQE's SGEs in a pool of `max_sge` per slot (not kMaxSge), so a queue costs
// what it was created with; pop() hands out the full RecvWqe.
class RecvQueue {
 public:
  // `max_wr` WQEs of at most `max_sge` SGEs each; both are fixed for the queue's lifetime.
  RecvQueue(uint32_t max_wr, uint32_t max_sge);

  // 0, ENOMEM when full, EINVAL when the request has more SGEs than max_sge (ibv_post_recv).
  int post(const RecvWr& wr);
  std::optional<RecvWqe> pop();
  // Removes every WQE, oldest first, handing each to `fn` (flushing on the QP's move to ERR).
  void drain(const std::function<void(const RecvWqe&)>& fn);
  void clear() {
    head_ = tail_ = 0;
    head_slot_ = 0;
  }

  uint32_t size() const { return static_cast<uint32_t>(tail_ - head_); }
  uint32_t capacity() const { return static_cast<uint32_t>(ring_.size()); }
  uint32_t max_sge() const { return max_sge_; }
  bool empty() const { return head_ == tail_; }

  // SRQ limit (ibv_modify_srq srq_limit, IBA 11.2.3.2 / 10.2.9.3): once armed with a non-zero
  // limit, the first pop() that leaves fewer than `limit` WQEs calls the hook once and disarms
  // (the verbs layer raises IBV_EVENT_SRQ_LIMIT_REACHED). 0 disarms.
  void arm_limit(uint32_t limit) { limit_ = limit; }
  uint32_t limit() const { return limit_; }
  void set_limit_hook(std::function<void()> hook) { limit_hook_ = std::move(hook); }

 private:
  struct Slot {
    uint64_t wr_id = 0;
    uint64_t length = 0;
    uint32_t num_sge = 0;
  };
  RecvWqe take(uint64_t pos) const;
  void advance_head() {
    ++head_;
    head_slot_ = next_ring_slot(head_slot_, capacity());
  }

  std::vector<Slot> ring_;
  uint32_t max_sge_;
  std::vector<Sge> sges_;         // max_sge_ per slot
  uint64_t head_ = 0, tail_ = 0;  // absolute positions; slot = position % capacity
  uint32_t head_slot_ = 0;        // the head's slot (common/ring_slot.h)
  uint32_t limit_ = 0;
  std::function<void()> limit_hook_;
};

}  // namespace uroce::transport
