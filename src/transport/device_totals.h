#pragma once
// Per-device totals of what QPs hold on their peers' behalf, beside each QP's own limits: the
// selective-repeat reorder buffers (payload held plus each buffer's slot table) and the READ and
// atomic responses queued or being sent (each on a responder resource). Without a total, many QPs
// each within its own limit could take unbounded memory (10,000 selective-repeat QPs with full
// reorder buffers hold tens of GiB) or work. At a cap the packet that needed more is dropped and
// counted; the peer recovers by its retry (docs/security.md, "Totals").
//
// One object per device (verbs::Device owns it; QpConfig::totals points to it). Null means no
// device totals, as in the sans-I/O tests of a lone QP.
//
// Threading: QPs of one device take and give from different threads (the progress pass, modify to
// RESET, destroy), so the counts are atomics.
#include <atomic>
#include <cstdint>

namespace uroce::transport {

struct DeviceTotalLimits {
  uint64_t reorder_bytes = 1ull << 30;  // reorder buffers: held payload plus slot tables
  uint32_t pending_responses = 4096;    // READ/atomic responses queued or being sent
  // Receive WQEs allocated by every QP's receive queue and every SRQ, taken at creation (the
  // verbs layer refuses the create with ENOMEM past it): as many as max_qp queues of max_qp_wr.
  uint64_t recv_wqes = uint64_t{1024} * 4096;
};

class DeviceTotals {
 public:
  using Limits = DeviceTotalLimits;
  explicit DeviceTotals(Limits limits = {}) : limits_(limits) {}

  // Reserves `n` bytes of reorder buffer; false, counted, if that would pass the cap.
  bool take_reorder_bytes(uint64_t n) {
    uint64_t cur = reorder_bytes_.load(std::memory_order_relaxed);
    do {
      if (n > limits_.reorder_bytes - cur) {
        reorder_cap_drops_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    } while (!reorder_bytes_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
    return true;
  }
  void give_reorder_bytes(uint64_t n) { reorder_bytes_.fetch_sub(n, std::memory_order_relaxed); }

  // Reserves one queued READ/atomic response; false, counted, at the cap.
  bool take_response() {
    uint32_t cur = responses_.load(std::memory_order_relaxed);
    do {
      if (cur >= limits_.pending_responses) {
        response_cap_drops_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    } while (!responses_.compare_exchange_weak(cur, cur + 1, std::memory_order_relaxed));
    return true;
  }
  void give_responses(uint32_t n) { responses_.fetch_sub(n, std::memory_order_relaxed); }

  // Reserves `n` receive WQEs for a queue being created; false, counted, past the cap.
  bool take_recv_wqes(uint64_t n) {
    uint64_t cur = recv_wqes_.load(std::memory_order_relaxed);
    do {
      if (n > limits_.recv_wqes - cur) {
        recv_wqe_refusals_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    } while (!recv_wqes_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
    return true;
  }
  void give_recv_wqes(uint64_t n) { recv_wqes_.fetch_sub(n, std::memory_order_relaxed); }

  const Limits& limits() const { return limits_; }
  uint64_t recv_wqes() const { return recv_wqes_.load(std::memory_order_relaxed); }
  uint64_t recv_wqe_refusals() const { return recv_wqe_refusals_.load(std::memory_order_relaxed); }
  uint64_t reorder_bytes() const { return reorder_bytes_.load(std::memory_order_relaxed); }
  uint64_t reorder_cap_drops() const { return reorder_cap_drops_.load(std::memory_order_relaxed); }
  uint32_t responses() const { return responses_.load(std::memory_order_relaxed); }
  uint64_t response_cap_drops() const {
    return response_cap_drops_.load(std::memory_order_relaxed);
  }

 private:
  const Limits limits_;
  std::atomic<uint64_t> reorder_bytes_{0}, reorder_cap_drops_{0};
  std::atomic<uint32_t> responses_{0};
  std::atomic<uint64_t> response_cap_drops_{0};
  std::atomic<uint64_t> recv_wqes_{0}, recv_wqe_refusals_{0};
};

}  // namespace uroce::transport
