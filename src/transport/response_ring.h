#pragma once
// The responder's output queue: ACKs, NAKs, READ responses and atomic ACKs in the order they were
// decided, a fixed ring that never grows. READ and atomic entries name a responder resource and
// the generation it had when queued: an entry whose resource was taken over since is stale.
#include <cstdint>
#include <vector>

#include "common/ring_slot.h"
#include "transport/qp_context.h"

namespace uroce::transport {

class ResponseRing {
 public:
  struct Response {
    enum class Kind : uint8_t { kAck, kRead, kAtomic } kind = Kind::kAck;  // kAck: ACK or NAK
    Psn psn;
    wire::Aeth aeth;
    uint32_t resource = 0;
    uint32_t generation = 0;  // of the resource when queued
  };
  // Every READ/atomic holds one of the QP's max_dest_rd_atomic resources while its response is
  // queued, ACKs between them coalesce, and at most one NAK is outstanding before the QP stops:
  // 2 * max_dest_rd_atomic + a few slots always suffice. Sized by that, not by the largest
  // max_dest_rd_atomic, since every QP has a ring (docs/security.md, "Scale").
  static constexpr uint32_t slots_for(uint32_t max_dest_rd_atomic) {
    return 2 * max_dest_rd_atomic + 8;
  }

  ResponseRing() : ring_(slots_for(0)) {}
  // Empties the ring and sizes it for `max_dest_rd_atomic` resources.
  void reset(uint32_t max_dest_rd_atomic) {
    ring_.assign(slots_for(max_dest_rd_atomic), Response{});
    clear();
  }

  void clear() {
    head_ = tail_ = 0;
    head_slot_ = 0;
  }
  bool empty() const { return head_ == tail_; }
  uint64_t size() const { return tail_ - head_; }
  // Appends `r`; false (and nothing queued) if the ring is full.
  bool push(const Response& r) {
    if (size() == ring_.size()) return false;
    ring_[slot(tail_++)] = r;
    return true;
  }
  // The last entry if it is an ACK (not a NAK) not yet sent, which a newer ACK or a NAK may
  // replace; nullptr otherwise.
  Response* pending_ack() {
    if (empty()) return nullptr;
    Response& last = ring_[slot(tail_ - 1)];
    return last.kind == Response::Kind::kAck && last.aeth.type() == wire::AckType::kAck ? &last
                                                                                        : nullptr;
  }
  Response& front() { return ring_[head_slot_]; }
  const Response& front() const { return ring_[head_slot_]; }
  void pop() {
    ++head_;
    head_slot_ = next_ring_slot(head_slot_, static_cast<uint32_t>(ring_.size()));
  }

 private:
  uint32_t slot(uint64_t pos) const {
    return ring_slot(pos, head_, head_slot_, static_cast<uint32_t>(ring_.size()));
  }

  std::vector<Response> ring_;
  uint64_t head_ = 0, tail_ = 0;
  uint32_t head_slot_ = 0;  // slot(head_)
};

}  // namespace uroce::transport
