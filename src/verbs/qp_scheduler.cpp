#include "verbs/qp_scheduler.h"

#include <algorithm>
#include <bit>

#include "common/check.h"

namespace uroce::verbs {

void ReadySet::reserve(uint32_t slots) {
  if (slots <= capacity_) return;
  uint32_t cap = capacity_ == 0 ? 64 : capacity_;
  while (cap < slots) cap = cap > UINT32_MAX / 2 ? UINT32_MAX : cap * 2;
  std::vector<uint64_t> bits = levels_.empty() ? std::vector<uint64_t>{} : levels_[0];
  bits.resize((uint64_t{cap} + 63) / 64, 0);
  levels_.clear();
  levels_.push_back(std::move(bits));
  while (levels_.back().size() > 1) {
    const std::vector<uint64_t>& below = levels_.back();
    std::vector<uint64_t> above((below.size() + 63) / 64, 0);
    for (size_t w = 0; w < below.size(); ++w)
      if (below[w] != 0) above[w / 64] |= uint64_t{1} << (w % 64);
    levels_.push_back(std::move(above));
  }
  capacity_ = cap;
}

void ReadySet::set_bit(size_t level, uint64_t index) {
  for (; level < levels_.size(); ++level, index /= 64) {
    uint64_t& word = levels_[level][index / 64];
    const bool was_empty = word == 0;
    word |= uint64_t{1} << (index % 64);
    if (!was_empty) return;
  }
}

void ReadySet::clear_bit(size_t level, uint64_t index) {
  for (; level < levels_.size(); ++level, index /= 64) {
    uint64_t& word = levels_[level][index / 64];
    word &= ~(uint64_t{1} << (index % 64));
    if (word != 0) return;
  }
}

bool ReadySet::insert(uint32_t slot) {
  UROCE_CHECK(slot < capacity_);
  if (contains(slot)) return false;
  set_bit(0, slot);
  ++size_;
  return true;
}

bool ReadySet::erase(uint32_t slot) {
  if (slot >= capacity_ || !contains(slot)) return false;
  clear_bit(0, slot);
  --size_;
  return true;
}

bool ReadySet::contains(uint32_t slot) const {
  return slot < capacity_ && (levels_[0][slot / 64] >> (slot % 64)) & 1;
}

uint64_t ReadySet::find(size_t level, uint64_t from) const {
  const std::vector<uint64_t>& words = levels_[level];
  const uint64_t w = from / 64;
  if (w >= words.size()) return kNone;
  const uint64_t here = words[w] & (~uint64_t{0} << (from % 64));
  if (here != 0) return w * 64 + static_cast<uint64_t>(std::countr_zero(here));
  if (level + 1 == levels_.size()) return kNone;
  // The next non-empty word after w, from the level above; then its first bit.
  const uint64_t next_word = find(level + 1, w + 1);
  if (next_word == kNone) return kNone;
  return next_word * 64 + static_cast<uint64_t>(std::countr_zero(words[next_word]));
}

uint32_t ReadySet::next_from(uint32_t from) const {
  if (size_ == 0 || from >= capacity_) return kNone;
  const uint64_t found = find(0, from);
  return found >= capacity_ ? kNone : static_cast<uint32_t>(found);
}

namespace {
// std::*_heap keep the largest first: "later" makes the earliest deadline the top.
bool later(const TimerHeap::Entry& a, const TimerHeap::Entry& b) {
  return a.at > b.at;
}
}  // namespace

void TimerHeap::push(const Entry& e) {
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(), later);
}

void TimerHeap::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  heap_.pop_back();
}

void TimerHeap::rebuild() {
  std::make_heap(heap_.begin(), heap_.end(), later);
}

}  // namespace uroce::verbs
