#include "transport/recv_queue.h"

#include <cerrno>

#include "common/check.h"

namespace uroce::transport {

RecvQueue::RecvQueue(uint32_t max_wr, uint32_t max_sge)
    : ring_(max_wr == 0 ? 1 : max_wr), max_sge_(max_sge > kMaxSge ? kMaxSge : max_sge) {}

int RecvQueue::post(const RecvWr& wr) {
  if (wr.sg_list.size() > max_sge_) return EINVAL;
  if (size() == capacity()) return ENOMEM;
  RecvWqe& w = ring_[tail_ % ring_.size()];
  w.wr_id = wr.wr_id;
  w.num_sge = static_cast<uint32_t>(wr.sg_list.size());
  w.length = 0;
  for (uint32_t i = 0; i < w.num_sge; ++i) {
    w.sge[i] = wr.sg_list[i];
    w.length += wr.sg_list[i].length;
  }
  ++tail_;
  return 0;
}

std::optional<RecvWqe> RecvQueue::pop() {
  if (empty()) return std::nullopt;
  RecvWqe w = ring_[head_ % ring_.size()];
  ++head_;
  if (limit_ != 0 && size() < limit_) {
    limit_ = 0;
    if (limit_hook_) limit_hook_();
  }
  return w;
}

void RecvQueue::drain(const std::function<void(const RecvWqe&)>& fn) {
  // Bounded by the ring's size: each step removes one WQE.
  while (!empty()) {
    const RecvWqe w = ring_[head_ % ring_.size()];
    ++head_;
    fn(w);
  }
  UROCE_DCHECK(head_ == tail_);
}

}  // namespace uroce::transport
