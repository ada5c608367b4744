#include "transport/recv_queue.h"

#include <cerrno>

#include "common/check.h"
#include "common/ring_slot.h"

namespace uroce::transport {

RecvQueue::RecvQueue(uint32_t max_wr, uint32_t max_sge)
    : ring_(max_wr == 0 ? 1 : max_wr),
      max_sge_(max_sge > kMaxSge ? kMaxSge : max_sge),
      sges_(ring_.size() * max_sge_) {}

int RecvQueue::post(const RecvWr& wr) {
  if (wr.sg_list.size() > max_sge_) return EINVAL;
  if (size() == capacity()) return ENOMEM;
  const size_t slot = ring_slot(tail_, head_, head_slot_, capacity());
  Slot& w = ring_[slot];
  w.wr_id = wr.wr_id;
  w.num_sge = static_cast<uint32_t>(wr.sg_list.size());
  w.length = 0;
  Sge* sge = sges_.data() + slot * max_sge_;
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    sge[i] = wr.sg_list[i];
    w.length += wr.sg_list[i].length;
  }
  ++tail_;
  return 0;
}

RecvWqe RecvQueue::take(uint64_t pos) const {
  const size_t slot = ring_slot(pos, head_, head_slot_, capacity());
  const Slot& s = ring_[slot];
  RecvWqe w;
  w.wr_id = s.wr_id;
  w.num_sge = s.num_sge;
  w.length = s.length;
  const Sge* sge = sges_.data() + slot * max_sge_;
  for (uint32_t i = 0; i < s.num_sge; ++i) w.sge[i] = sge[i];
  return w;
}

std::optional<RecvWqe> RecvQueue::pop() {
  if (empty()) return std::nullopt;
  RecvWqe w = take(head_);
  advance_head();
  if (limit_ != 0 && size() < limit_) {
    limit_ = 0;
    if (limit_hook_) limit_hook_();
  }
  return w;
}

void RecvQueue::drain(const std::function<void(const RecvWqe&)>& fn) {
  // Bounded by the ring's size: each step removes one WQE.
  while (!empty()) {
    const RecvWqe w = take(head_);
    advance_head();
    fn(w);
  }
  UROCE_DCHECK(head_ == tail_);
}

}  // namespace uroce::transport
