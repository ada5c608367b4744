#include "fabric/event_loop.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace uroce::fabric {

EventLoop::EventLoop(uint64_t seed, size_t max_pending)
    : seed_(seed), rng_(seed), max_pending_(max_pending) {
  UROCE_CHECK(max_pending > 0);
  heap_.reserve(max_pending);
}

bool EventLoop::schedule_at(Nanos time, EventTarget& target, uint32_t kind, uint64_t arg) {
  return push(Event{time, 0, &target, arg, 0, kind, false});
}

bool EventLoop::schedule_late_at(Nanos time, uint64_t order, EventTarget& target, uint32_t kind,
                                 uint64_t arg) {
  return push(Event{time, 0, &target, arg, order, kind, true});
}

bool EventLoop::push(const Event& event) {
  if (event.time < now_) {
    ++counters_.rejected_past;
    return false;
  }
  if (pending() >= max_pending_) {
    ++counters_.rejected_full;
    return false;
  }
  heap_.push_back(event);
  heap_.back().seq = next_seq_++;
  sift_up(heap_.size() - 1);
  ++counters_.scheduled;
  if (pending() > counters_.max_pending) counters_.max_pending = pending();
  return true;
}

void EventLoop::sift_up(size_t i) {
  Event e = heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / kArity;
    if (!later(heap_[parent], e)) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

void EventLoop::sift_down(size_t i) {
  const size_t n = heap_.size();
  Event e = heap_[i];
  for (;;) {
    const size_t first = kArity * i + 1;
    if (first >= n) break;
    size_t child = first;
    const size_t end = std::min(first + kArity, n);
    for (size_t c = first + 1; c < end; ++c)
      if (later(heap_[child], heap_[c])) child = c;
    if (!later(e, heap_[child])) break;
    heap_[i] = heap_[child];
    i = child;
  }
  heap_[i] = e;
}

bool EventLoop::schedule_keyed_late_at(uint32_t key, Nanos time, uint64_t order,
                                       EventTarget& target, uint32_t kind, uint64_t arg) {
  if (time < now_) {
    ++counters_.rejected_past;
    return false;
  }
  if (key >= max_pending_) {
    ++counters_.rejected_full;
    return false;
  }
  if (key >= keyed_.size()) {
    keyed_.resize(key + 1);
    keyed_pos_.resize(key + 1, kNotQueued);
  }
  if (keyed_pos_[key] != kNotQueued) {
    keyed_remove(key);  // superseded: it never runs
  } else if (pending() >= max_pending_) {
    ++counters_.rejected_full;
    return false;
  }
  keyed_[key] = Event{time, next_seq_++, &target, arg, order, kind, true};
  keyed_heap_.push_back(key);
  keyed_pos_[key] = static_cast<uint32_t>(keyed_heap_.size() - 1);
  keyed_sift_up(keyed_heap_.size() - 1);
  ++counters_.scheduled;
  if (pending() > counters_.max_pending) counters_.max_pending = pending();
  return true;
}

void EventLoop::keyed_place(size_t i, uint32_t key) {
  keyed_heap_[i] = key;
  keyed_pos_[key] = static_cast<uint32_t>(i);
}

void EventLoop::keyed_sift_up(size_t i) {
  const uint32_t key = keyed_heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!later(keyed_[keyed_heap_[parent]], keyed_[key])) break;
    keyed_place(i, keyed_heap_[parent]);
    i = parent;
  }
  keyed_place(i, key);
}

void EventLoop::keyed_sift_down(size_t i) {
  const size_t n = keyed_heap_.size();
  const uint32_t key = keyed_heap_[i];
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && later(keyed_[keyed_heap_[child]], keyed_[keyed_heap_[child + 1]])) ++child;
    if (!later(keyed_[key], keyed_[keyed_heap_[child]])) break;
    keyed_place(i, keyed_heap_[child]);
    i = child;
  }
  keyed_place(i, key);
}

void EventLoop::keyed_remove(uint32_t key) {
  const size_t i = keyed_pos_[key];
  keyed_pos_[key] = kNotQueued;
  const uint32_t last = keyed_heap_.back();
  keyed_heap_.pop_back();
  if (i == keyed_heap_.size()) return;
  keyed_place(i, last);
  keyed_sift_up(i);
  keyed_sift_down(keyed_pos_[last]);
}

Event EventLoop::pop() {
  if (!keyed_heap_.empty() &&
      (heap_.empty() || later(heap_.front(), keyed_[keyed_heap_.front()]))) {
    const uint32_t key = keyed_heap_.front();
    keyed_remove(key);
    return keyed_[key];
  }
  Event top = heap_.front();
  heap_.front() = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0);
  return top;
}

void EventLoop::trace(uint64_t value) {
  // FNV-1a over 64-bit words, then a splitmix finaliser so nearby values spread.
  uint64_t mix = value;
  trace_hash_ = (trace_hash_ ^ splitmix64(mix)) * 0x100000001b3ull;
}

bool EventLoop::step() {
  if (pending() == 0) return false;
  const Event e = pop();
  UROCE_DCHECK(e.time >= now_);
  now_ = e.time;
  ++counters_.executed;
  trace(e.time);
  trace(uint64_t{e.kind} << 32 ^ e.arg);
  e.target->on_event(e.kind, e.arg, e.time);
  return true;
}

size_t EventLoop::run_until(Nanos deadline, size_t max_events) {
  size_t run = 0;
  while (run < max_events && pending() > 0 && next_time() <= deadline) {
    step();
    ++run;
  }
  if (deadline != kNever && deadline > now_ && next_time() > deadline) now_ = deadline;
  return run;
}

bool EventLoop::advance_to(Nanos time) {
  if (time < now_ || time > next_time() || time == kNever) return false;
  now_ = time;
  return true;
}

}  // namespace uroce::fabric
