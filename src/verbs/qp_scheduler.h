#pragma once
// What lets a progress pass cost what its work costs, not what the device's QP count costs
// (Device::progress; docs/architecture.md, "Progress passes"): the set of QPs that may have
// something to send now (the ready set, ordered by slot so the round robin keeps its order) and
// the deadlines of the others (a min-heap). Each QP has one slot, reused after it is destroyed.
// Not thread-safe: the device guards both with its scheduling lock.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/types.h"

namespace uroce::verbs {

// A set of slot numbers as a bitmap with a summary level above every 64 words, so finding the
// next member after a slot costs a few word scans at any size (three levels at 100,000 slots).
class ReadySet {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // Makes room for slots [0, slots); members are kept. Never shrinks.
  void reserve(uint32_t slots);
  uint32_t capacity() const { return capacity_; }
  // True if `slot` was not a member.
  bool insert(uint32_t slot);
  // True if `slot` was a member.
  bool erase(uint32_t slot);
  bool contains(uint32_t slot) const;
  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The smallest member >= `from`, or kNone.
  uint32_t next_from(uint32_t from) const;

 private:
  uint64_t find(size_t level, uint64_t from) const;
  void set_bit(size_t level, uint64_t index);
  void clear_bit(size_t level, uint64_t index);

  // levels_[0] has a bit per slot; bit w of levels_[k + 1] says whether word w of levels_[k] has
  // any bit set. The top level is one word.
  std::vector<std::vector<uint64_t>> levels_;
  uint32_t capacity_ = 0;
  uint32_t size_ = 0;
};

// Deadlines of QPs that are not ready, earliest first. An entry is current while its QP's
// timer sequence number is the one the entry was pushed with: rescheduling or readying a QP
// gives it a new number instead of searching the heap, and stale entries are dropped when they
// reach the top or when compact() runs.
class TimerHeap {
 public:
  struct Entry {
    Nanos at = kNever;
    uint32_t slot = 0;
    uint64_t seq = 0;
  };
  void push(const Entry& e);
  bool empty() const { return heap_.empty(); }
  const Entry& top() const { return heap_.front(); }
  void pop();
  size_t size() const { return heap_.size(); }
  // Keeps only the entries `current` accepts.
  template <typename Current>
  void compact(Current current) {
    std::erase_if(heap_, [&](const Entry& e) { return !current(e); });
    rebuild();
  }

 private:
  void rebuild();
  std::vector<Entry> heap_;
};

}  // namespace uroce::verbs
