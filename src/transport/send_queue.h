#pragma once
// The send queue: a fixed ring of send WQEs shared by the requester (which turns them into
// packets) and the completer (which retires them, oldest first, into completions).
#include <cstdint>
#include <vector>

#include "common/check.h"
#include "common/psn.h"
#include "common/ring_slot.h"
#include "transport/types.h"

namespace uroce::transport {

enum class WqeState : uint8_t {
  kPosted,  // no packet sent yet
  kActive,  // PSNs assigned, some packets sent
  kSent,    // every packet sent; waiting for the ACK / response (RC)
  kDone,    // finished (status says how); the completer retires it in order
};

struct SendWqe {
  // The work request, copied at post time (the caller's SGE list lives only during post_send).
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t flags = 0;
  uint32_t imm = 0;
  uint32_t invalidate_rkey = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0, swap = 0;
  MwBindInfo bind{};
  AddressVector ah{};  // UD destination
  uint32_t remote_qpn = 0, remote_qkey = 0;
  uint32_t remote_srqn = 0;  // XRC initiator
  // num_sge entries in the send queue's SGE pool, max_send_sge of them reserved per slot.
  Sge* sge = nullptr;
  uint32_t num_sge = 0;
  uint64_t length = 0;
  bool is_inline = false;  // payload lives in the QP's inline slot for this WQE

  // Transport state.
  WqeState state = WqeState::kPosted;
  WcStatus status = WcStatus::kSuccess;
  bool signaled = false;
  Psn first_psn;
  uint32_t npsn = 0;  // PSNs the request uses: packets sent, or READ response packets expected
  uint64_t atomic_original = 0;

  Psn last_psn() const { return first_psn + static_cast<int32_t>(npsn - 1); }
  bool contains(Psn p) const {
    const int32_t d = p.distance_from(first_psn);
    return d >= 0 && static_cast<uint32_t>(d) < npsn;
  }
  bool is_read() const { return opcode == WrOpcode::kRdmaRead; }
  bool is_atomic() const {
    return opcode == WrOpcode::kAtomicCompareSwap || opcode == WrOpcode::kAtomicFetchAdd;
  }
  bool is_rd_atomic() const { return is_read() || is_atomic(); }
  // Carried out by the requester itself, without packets or PSNs (IBA 10.6.7).
  bool is_local() const {
    return opcode == WrOpcode::kBindMw || opcode == WrOpcode::kLocalInvalidate;
  }
};

// Absolute positions (never wrap in practice: 2^64 WQEs) index a ring of `capacity` slots. Each
// slot has room for `max_sge` SGEs in one pool beside the ring, so a QP created with one SGE does
// not carry sixteen per WQE (docs/security.md, "Scale").
class SendQueue {
 public:
  SendQueue(uint32_t capacity, uint32_t max_sge)
      : ring_(capacity == 0 ? 1 : capacity),
        max_sge_(max_sge > kMaxSge ? kMaxSge : max_sge),
        sges_(ring_.size() * max_sge_) {}

  bool full() const { return tail_ - head_ == ring_.size(); }
  bool empty() const { return tail_ == head_; }
  uint64_t head() const { return head_; }
  uint64_t tail() const { return tail_; }
  uint32_t capacity() const { return static_cast<uint32_t>(ring_.size()); }
  uint32_t max_sge() const { return max_sge_; }
  uint32_t slot(uint64_t pos) const {
    UROCE_DCHECK(pos >= head_ && pos - head_ <= ring_.size());
    return ring_slot(pos, head_, head_slot_, capacity());
  }

  SendWqe& at(uint64_t pos) {
    UROCE_DCHECK(pos >= head_ && pos < tail_);
    return ring_[slot(pos)];
  }
  const SendWqe& at(uint64_t pos) const {
    UROCE_DCHECK(pos >= head_ && pos < tail_);
    return ring_[slot(pos)];
  }
  SendWqe& push() {
    UROCE_CHECK(!full());
    const uint32_t s = slot(tail_++);
    SendWqe& w = ring_[s];
    w = SendWqe{};
    w.sge = sges_.data() + size_t{s} * max_sge_;
    return w;
  }
  void pop() {
    UROCE_CHECK(!empty());
    ++head_;
    head_slot_ = next_ring_slot(head_slot_, capacity());
  }
  void clear() {
    head_ = tail_ = 0;
    head_slot_ = 0;
  }

 private:
  std::vector<SendWqe> ring_;
  uint32_t max_sge_;
  std::vector<Sge> sges_;  // max_sge_ per slot
  uint64_t head_ = 0, tail_ = 0;
  uint32_t head_slot_ = 0;  // ring_slot(head_)
};

}  // namespace uroce::transport
