#pragma once
// Virtual time and a deterministic discrete-event loop. Everything in a simulated world (links,
// switches, PFC timers, devices' progress) runs as events on one EventLoop, which owns the world's
// clock and its one seeded random generator, so a world is a pure function of its seed. Devices
// are event targets too: the world core (sim/world_core.h) schedules a device's progress pass at
// the deadline its previous pass returned, and a packet arriving for it wakes it.
//
// Events are small PODs (target, kind, 64-bit argument) run in the order (time, late, order,
// insertion sequence): two ordinary events due at the same nanosecond run in the order they were
// scheduled, never in an order that depends on the queue's layout or on pointer values. Late
// events (schedule_late_at) run after every ordinary event due at their nanosecond, in the order
// their caller gives: the world core's devices act once the fabric has settled for that instant.
//
// Ordinary events are nearly all a serialisation time or a link delay ahead, so they sit in a
// timing wheel of one FIFO per nanosecond over the next kWheelSpan nanoseconds (scheduling and
// running one is O(1): an append, a pop and a bitmap scan to the next busy nanosecond); only those
// further ahead wait in a heap and move into the wheel, in order, as the clock comes within the
// span. Events live in a pool of slots reused through a free list, grown as first needed (no
// allocation per event once a run has reached its high-water mark).
//
// Not thread-safe: one world, one thread. Several worlds may run side by side (no globals).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/types.h"
#include "fabric/sim_random.h"

namespace uroce::fabric {

// Anything that receives events. `kind` and `arg` mean whatever the target says they mean (a port
// number, a packet slot, a timer generation to ignore stale timers: there is no cancel, a target
// that re-arms a timer bumps a generation and passes it in `arg`).
class EventTarget {
 public:
  virtual ~EventTarget() = default;
  virtual void on_event(uint32_t kind, uint64_t arg, Nanos now) = 0;
};

// What peek() shows and step() runs. `seq` and `order` are kept for late events only (an ordinary
// event's are 0: it runs in scheduling order among those of its nanosecond, which the queue keeps).
struct Event {
  Nanos time = 0;
  uint64_t seq = 0;
  EventTarget* target = nullptr;
  uint64_t arg = 0;
  uint64_t order = 0;  // late events: their order among the late events of one nanosecond
  uint32_t kind = 0;
  bool late = false;
};

struct EventLoopCounters {
  uint64_t scheduled = 0, executed = 0;
  uint64_t rejected_full = 0;  // schedule_*() refused: the queue was at its bound
  uint64_t rejected_past = 0;  // schedule_at() refused: the time was before now()
  size_t max_pending = 0;      // high-water mark of the queue
};

class EventLoop {
 public:
  static constexpr size_t kDefaultMaxPending = size_t{1} << 16;
  // How far ahead an ordinary event goes straight into the wheel (nanoseconds).
  static constexpr Nanos kWheelSpan = Nanos{1} << 13;

  explicit EventLoop(uint64_t seed, size_t max_pending = kDefaultMaxPending);
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  Nanos now() const { return now_; }
  uint64_t seed() const { return seed_; }
  Rng& rng() { return rng_; }

  // Schedules `target.on_event(kind, arg, time)`. Returns false, and counts it, when the queue is
  // at its bound or `time` is in the past; the caller decides whether that is a drop or a bug.
  [[nodiscard]] bool schedule_at(Nanos time, EventTarget& target, uint32_t kind, uint64_t arg = 0);
  [[nodiscard]] bool schedule_after(Nanos delay, EventTarget& target, uint32_t kind,
                                    uint64_t arg = 0) {
    return schedule_at(delay >= kNever - now_ ? kNever : now_ + delay, target, kind, arg);
  }

  // Like schedule_at, for an event that runs after every ordinary event due at `time` (including
  // ones scheduled while those run); late events due together run by increasing `order`, then in
  // the order they were scheduled.
  [[nodiscard]] bool schedule_late_at(Nanos time, uint64_t order, EventTarget& target,
                                      uint32_t kind, uint64_t arg = 0);

  // A keyed late event: like schedule_late_at, but at most one is pending per `key` (0 ..
  // max_pending): scheduling again replaces the one pending, which then never runs. For a target
  // that re-arms often (the world core's devices), so superseded events do not fill the queue.
  [[nodiscard]] bool schedule_keyed_late_at(uint32_t key, Nanos time, uint64_t order,
                                            EventTarget& target, uint32_t kind, uint64_t arg = 0);

  // Time of the earliest pending event; kNever if none.
  Nanos next_time() const {
    const Event* e = peek();
    return e == nullptr ? kNever : e->time;
  }
  // The event step() would run next; null if none. Valid until the next schedule or step.
  const Event* peek() const { return peeked_valid_ ? peeked_ : find_next(); }
  size_t pending() const { return wheel_count_ + far_.size() + late_.size() + keyed_heap_.size(); }
  size_t capacity() const { return max_pending_; }

  // Runs the earliest event (advancing now() to its time). False if there was none.
  bool step();
  // Runs events due at or before `deadline`, at most `max_events` of them, then advances now() to
  // `deadline` if every due event ran (and deadline != kNever). Returns the number run.
  size_t run_until(Nanos deadline, size_t max_events = ~size_t{0});
  // Moves the clock forward without running anything; only up to the next pending event.
  // Returns false (and leaves the clock) if that would skip an event or go backwards.
  bool advance_to(Nanos time);

  // A running hash of every executed event's (time, kind, arg): equal hashes for two runs of the
  // same seed are the determinism check. Pointers are left out (they differ between processes).
  uint64_t trace_hash() const { return trace_hash_; }
  // Lets other components fold their own observations (a packet's bytes, a completion) into the
  // same trace.
  void trace(uint64_t value);

  const EventLoopCounters& counters() const { return counters_; }

 private:
  static bool later(const Event& a, const Event& b) {
    if (a.time != b.time) return a.time > b.time;
    if (a.late != b.late) return a.late;
    if (a.order != b.order) return a.order > b.order;
    return a.seq > b.seq;
  }
  const Event* find_next() const;  // what peek() shows, found and kept until it changes
  bool admit(Nanos time);          // the checks and counters every schedule call shares
  void counted_pending();
  void set_now(Nanos time);
  uint32_t earliest_ordinary() const;  // its slot, kNil if none
  Event pop();

  // The pool of ordinary events' slots; `next` links a wheel FIFO. A slot is written when its
  // event is scheduled and read when it runs, usually long enough after to have left the cache:
  // only what running it needs, two slots to a cache line.
  static constexpr uint32_t kNil = ~uint32_t{0};
  struct alignas(32) Slot {
    Nanos time = 0;
    EventTarget* target = nullptr;
    uint64_t arg = 0;
    uint32_t kind = 0;
    uint32_t next = kNil;
  };
  static_assert(sizeof(Slot) == 32);
  uint32_t take_slot(Nanos time, EventTarget& target, uint32_t kind, uint64_t arg);
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;

  // The wheel: ordinary events due in [now_, now_ + kWheelSpan), bucket time % kWheelSpan. A bit
  // per bucket says it is busy, and a bit per 64 buckets says a word of those is non-zero.
  static constexpr size_t kWheelMask = kWheelSpan - 1;
  struct Fifo {
    uint32_t head = kNil;
    uint32_t tail = kNil;
  };
  void wheel_append(uint32_t slot);
  size_t busy_bucket_from(size_t bucket) const;  // the first busy one at or after, circularly
  std::vector<Fifo> wheel_;
  std::vector<uint64_t> busy_;
  std::vector<uint64_t> busy_words_;
  size_t wheel_count_ = 0;
  // The wheel's earliest event's slot, or kNil when not known (found again by the next peek).
  mutable uint32_t wheel_front_ = kNil;
  // What peek() found, until the next schedule or step (a driver peeks several times per event).
  mutable const Event* peeked_ = nullptr;
  mutable bool peeked_valid_ = false;
  mutable Event peeked_ordinary_;  // an ordinary event peek() found, copied out of its slot

  // Ordinary events beyond the wheel's span: a 4-ary heap of (time, seq, slot).
  struct Far {
    Nanos time;
    uint64_t seq;
    uint32_t slot;
  };
  static bool far_later(const Far& a, const Far& b) {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
  static constexpr size_t kArity = 4;
  void far_sift_up(size_t i);
  void far_sift_down(size_t i);
  std::vector<Far> far_;

  // Late events not keyed (rare: the world core's round ticker), a binary heap.
  std::vector<Event> late_;

  // The keyed events: keyed_[key] is the event, keyed_heap_ a binary heap of their sort keys
  // (copied in, so sifting reads no event), keyed_pos_[key] its index there (kNotQueued if none is
  // pending). A superseding event takes its key's place and sifts from there.
  static constexpr uint32_t kNotQueued = ~uint32_t{0};
  struct Keyed {
    Nanos time;
    uint64_t order;
    uint64_t seq;
    uint32_t key;
  };
  static bool keyed_later(const Keyed& a, const Keyed& b) {
    if (a.time != b.time) return a.time > b.time;
    if (a.order != b.order) return a.order > b.order;
    return a.seq > b.seq;
  }
  void keyed_place(size_t i, const Keyed& k);
  void keyed_sift_up(size_t i);
  void keyed_sift_down(size_t i);
  void keyed_remove(uint32_t key);
  std::vector<Event> keyed_;
  std::vector<Keyed> keyed_heap_;
  std::vector<uint32_t> keyed_pos_;

  uint64_t seed_;
  Rng rng_;
  Nanos now_ = 0;
  uint64_t next_seq_ = 0;
  size_t max_pending_;
  uint64_t trace_hash_ = 0xcbf29ce484222325ull;
  EventLoopCounters counters_;
};

}  // namespace uroce::fabric
