#include "fabric/event_loop.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "common/check.h"

namespace uroce::fabric {

EventLoop::EventLoop(uint64_t seed, size_t max_pending)
    : wheel_(kWheelSpan),
      busy_(kWheelSpan / 64),
      busy_words_(kWheelSpan / 64 / 64),
      seed_(seed),
      rng_(seed),
      max_pending_(max_pending) {
  UROCE_CHECK(max_pending > 0 && max_pending < kNil);
}

bool EventLoop::admit(Nanos time) {
  if (time < now_) {
    ++counters_.rejected_past;
    return false;
  }
  if (pending() >= max_pending_) {
    ++counters_.rejected_full;
    return false;
  }
  return true;
}

void EventLoop::counted_pending() {
  peeked_valid_ = false;
  ++counters_.scheduled;
  if (pending() > counters_.max_pending) counters_.max_pending = pending();
}

uint32_t EventLoop::take_slot(Nanos time, EventTarget& target, uint32_t kind, uint64_t arg) {
  const Slot s{time, &target, arg, kind, kNil};
  uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(s);
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = s;
  }
  return slot;
}

bool EventLoop::schedule_at(Nanos time, EventTarget& target, uint32_t kind, uint64_t arg) {
  if (!admit(time)) return false;
  const uint64_t seq = next_seq_++;
  const uint32_t slot = take_slot(time, target, kind, arg);
  if (time - now_ < kWheelSpan) {
    wheel_append(slot);
  } else {
    far_.push_back(Far{time, seq, slot});
    far_sift_up(far_.size() - 1);
  }
  counted_pending();
  return true;
}

bool EventLoop::schedule_late_at(Nanos time, uint64_t order, EventTarget& target, uint32_t kind,
                                 uint64_t arg) {
  if (!admit(time)) return false;
  late_.push_back(Event{time, next_seq_++, &target, arg, order, kind, true});
  std::push_heap(late_.begin(), late_.end(), later);
  counted_pending();
  return true;
}

void EventLoop::wheel_append(uint32_t slot) {
  const Nanos time = slots_[slot].time;
  const size_t bucket = time & kWheelMask;
  Fifo& f = wheel_[bucket];
  if (f.tail == kNil) {
    f.head = slot;
    busy_[bucket / 64] |= uint64_t{1} << (bucket % 64);
    busy_words_[bucket / 4096] |= uint64_t{1} << (bucket / 64 % 64);
  } else {
    slots_[f.tail].next = slot;
  }
  f.tail = slot;
  ++wheel_count_;
  // A known front stays the front unless this one is earlier (a later one at the same time queues
  // behind it).
  if (wheel_front_ != kNil && time < slots_[wheel_front_].time) wheel_front_ = slot;
}

size_t EventLoop::busy_bucket_from(size_t bucket) const {
  // Within the bucket's own word, then the next non-zero word by the summary, then from 0.
  size_t word = bucket / 64;
  uint64_t bits = busy_[word] & (~uint64_t{0} << (bucket % 64));
  if (bits != 0) return word * 64 + static_cast<size_t>(std::countr_zero(bits));
  for (size_t w = word + 1;;) {
    if (w >= busy_.size()) w = 0;
    // Summary bits of words at or after w.
    const size_t sw = w / 64;
    uint64_t summary = busy_words_[sw] & (~uint64_t{0} << (w % 64));
    if (summary != 0) {
      const size_t found = sw * 64 + static_cast<size_t>(std::countr_zero(summary));
      return found * 64 + static_cast<size_t>(std::countr_zero(busy_[found]));
    }
    w = (sw + 1) * 64;
  }
}

uint32_t EventLoop::earliest_ordinary() const {
  if (wheel_count_ > 0) {
    if (wheel_front_ == kNil) wheel_front_ = wheel_[busy_bucket_from(now_ & kWheelMask)].head;
    return wheel_front_;
  }
  return far_.empty() ? kNil : far_.front().slot;
}

const Event* EventLoop::find_next() const {
  const Event* best = nullptr;
  if (const uint32_t slot = earliest_ordinary(); slot != kNil) {
    const Slot& s = slots_[slot];
    peeked_ordinary_ = Event{s.time, 0, s.target, s.arg, 0, s.kind, false};
    best = &peeked_ordinary_;
  }
  if (!late_.empty() && (best == nullptr || later(*best, late_.front()))) best = &late_.front();
  if (!keyed_heap_.empty()) {
    const Event* k = &keyed_[keyed_heap_.front().key];
    if (best == nullptr || later(*best, *k)) best = k;
  }
  peeked_ = best;
  peeked_valid_ = true;
  return best;
}

void EventLoop::far_sift_up(size_t i) {
  const Far e = far_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / kArity;
    if (!far_later(far_[parent], e)) break;
    far_[i] = far_[parent];
    i = parent;
  }
  far_[i] = e;
}

void EventLoop::far_sift_down(size_t i) {
  const size_t n = far_.size();
  const Far e = far_[i];
  for (;;) {
    const size_t first = kArity * i + 1;
    if (first >= n) break;
    size_t child = first;
    const size_t end = std::min(first + kArity, n);
    for (size_t c = first + 1; c < end; ++c)
      if (far_later(far_[child], far_[c])) child = c;
    if (!far_later(e, far_[child])) break;
    far_[i] = far_[child];
    i = child;
  }
  far_[i] = e;
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
  if (keyed_pos_[key] == kNotQueued && pending() >= max_pending_) {
    ++counters_.rejected_full;
    return false;
  }
  keyed_[key] = Event{time, next_seq_++, &target, arg, order, kind, true};
  const Keyed k{time, order, keyed_[key].seq, key};
  if (keyed_pos_[key] != kNotQueued) {  // superseded: the pending one never runs
    const size_t i = keyed_pos_[key];
    keyed_heap_[i] = k;
    keyed_sift_up(i);
    keyed_sift_down(keyed_pos_[key]);
  } else {
    keyed_heap_.push_back(k);
    keyed_pos_[key] = static_cast<uint32_t>(keyed_heap_.size() - 1);
    keyed_sift_up(keyed_heap_.size() - 1);
  }
  counted_pending();
  return true;
}

void EventLoop::keyed_place(size_t i, const Keyed& k) {
  keyed_heap_[i] = k;
  keyed_pos_[k.key] = static_cast<uint32_t>(i);
}

void EventLoop::keyed_sift_up(size_t i) {
  const Keyed k = keyed_heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!keyed_later(keyed_heap_[parent], k)) break;
    keyed_place(i, keyed_heap_[parent]);
    i = parent;
  }
  keyed_place(i, k);
}

void EventLoop::keyed_sift_down(size_t i) {
  const size_t n = keyed_heap_.size();
  const Keyed k = keyed_heap_[i];
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && keyed_later(keyed_heap_[child], keyed_heap_[child + 1])) ++child;
    if (!keyed_later(k, keyed_heap_[child])) break;
    keyed_place(i, keyed_heap_[child]);
    i = child;
  }
  keyed_place(i, k);
}

// Bottom-up (Floyd): the hole left at i moves down to a leaf along the earlier child, one
// comparison a level, and the heap's last entry fills it from there, rising as far as it must
// (usually not far: it was a leaf). The pops come out in the same order as with a plain sift-down:
// the keys are all distinct.
void EventLoop::keyed_remove(uint32_t key) {
  size_t i = keyed_pos_[key];
  keyed_pos_[key] = kNotQueued;
  const Keyed last = keyed_heap_.back();
  keyed_heap_.pop_back();
  const size_t n = keyed_heap_.size();
  if (i == n) return;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && keyed_later(keyed_heap_[child], keyed_heap_[child + 1])) ++child;
    keyed_place(i, keyed_heap_[child]);
    i = child;
  }
  keyed_place(i, last);
  keyed_sift_up(i);
}

Event EventLoop::pop() {
  const Event* next = peek();
  peeked_valid_ = false;
  if (next->late) {
    if (!keyed_heap_.empty() && next == &keyed_[keyed_heap_.front().key]) {
      const uint32_t key = keyed_heap_.front().key;
      keyed_remove(key);
      return keyed_[key];
    }
    std::pop_heap(late_.begin(), late_.end(), later);
    const Event e = late_.back();
    late_.pop_back();
    return e;
  }
  const Event e = peeked_ordinary_;  // peek() copied it out of its slot
  uint32_t slot;
  if (wheel_count_ > 0) {
    slot = wheel_front_;  // peek() found it
    const size_t bucket = e.time & kWheelMask;
    Fifo& f = wheel_[bucket];
    f.head = slots_[slot].next;
    if (f.head == kNil) {
      f.tail = kNil;
      busy_[bucket / 64] &= ~(uint64_t{1} << (bucket % 64));
      if (busy_[bucket / 64] == 0)
        busy_words_[bucket / 4096] &= ~(uint64_t{1} << (bucket / 64 % 64));
      wheel_front_ = kNil;
    } else {
      wheel_front_ = f.head;
    }
    --wheel_count_;
    // The next event's slot was last touched when it was scheduled, long enough ago to have left
    // the cache: fetch it while this event runs.
    if (wheel_count_ > 0) {
      if (wheel_front_ == kNil) wheel_front_ = wheel_[busy_bucket_from(bucket)].head;
      __builtin_prefetch(&slots_[wheel_front_]);
    }
  } else {
    slot = far_.front().slot;
    far_.front() = far_.back();
    far_.pop_back();
    if (!far_.empty()) far_sift_down(0);
  }
  free_slots_.push_back(slot);
  return e;
}

void EventLoop::set_now(Nanos time) {
  now_ = time;
  // Far events the wheel's span now reaches move in, earliest first: none of their nanoseconds
  // had been within the span, so each FIFO they join is empty or holds only moved events, and
  // stays in scheduling order.
  while (!far_.empty() && far_.front().time - now_ < kWheelSpan) {
    const uint32_t slot = far_.front().slot;
    far_.front() = far_.back();
    far_.pop_back();
    if (!far_.empty()) far_sift_down(0);
    wheel_append(slot);
  }
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
  if (e.time != now_) set_now(e.time);
  ++counters_.executed;
  // One mix per event: the time spread by an odd multiplier, so (time, kind, arg) stay apart.
  trace(e.time * 0x9e3779b97f4a7c15ull ^ (uint64_t{e.kind} << 32 ^ e.arg));
  e.target->on_event(e.kind, e.arg, e.time);
  return true;
}

size_t EventLoop::run_until(Nanos deadline, size_t max_events) {
  size_t run = 0;
  while (run < max_events && pending() > 0 && next_time() <= deadline) {
    step();
    ++run;
  }
  if (deadline != kNever && deadline > now_ && next_time() > deadline) set_now(deadline);
  return run;
}

bool EventLoop::advance_to(Nanos time) {
  if (time < now_ || time > next_time() || time == kNever) return false;
  set_now(time);
  return true;
}

}  // namespace uroce::fabric
