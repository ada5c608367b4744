// The event loop and the random generator under the lossy network: ordering, ties, bounds,
// determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fabric/event_loop.h"
#include "fabric/sim_random.h"

namespace uroce::fabric {
namespace {

struct Recorder : EventTarget {
  struct Seen {
    uint32_t kind;
    uint64_t arg;
    Nanos now;
  };
  std::vector<Seen> seen;
  void on_event(uint32_t kind, uint64_t arg, Nanos now) override {
    seen.push_back({kind, arg, now});
  }
};

TEST(FabricEventLoop, RunsInTimeOrderAndTiesInInsertionOrder) {
  EventLoop loop(1);
  Recorder r;
  // Scheduled out of order, with several ties at t=50.
  ASSERT_TRUE(loop.schedule_at(100, r, 1, 0));
  ASSERT_TRUE(loop.schedule_at(50, r, 2, 0));
  ASSERT_TRUE(loop.schedule_at(50, r, 2, 1));
  ASSERT_TRUE(loop.schedule_at(10, r, 3, 0));
  ASSERT_TRUE(loop.schedule_at(50, r, 2, 2));
  EXPECT_EQ(loop.next_time(), 10u);
  EXPECT_EQ(loop.run_until(kNever), 5u);
  ASSERT_EQ(r.seen.size(), 5u);
  EXPECT_EQ(r.seen[0].now, 10u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(r.seen[1 + i].now, 50u);
    EXPECT_EQ(r.seen[1 + i].arg, i) << "ties must run in the order they were scheduled";
  }
  EXPECT_EQ(r.seen[4].now, 100u);
  EXPECT_EQ(loop.now(), 100u);
}

// Late events (the world core's devices) run after every ordinary event of their nanosecond, even
// one an ordinary event schedules for that nanosecond, and among themselves by order, then FIFO.
TEST(FabricEventLoop, LateEventsRunAfterTheInstantsOrdinaryOnesByOrder) {
  EventLoop loop(1);
  Recorder r;
  struct Chain : EventTarget {
    EventLoop* loop;
    Recorder* r;
    void on_event(uint32_t, uint64_t, Nanos now) override {
      EXPECT_TRUE(loop->schedule_at(now, *r, 1, 99));  // same nanosecond, scheduled last
    }
  } chain;
  chain.loop = &loop;
  chain.r = &r;
  ASSERT_TRUE(loop.schedule_late_at(50, 7, r, 2, 0));
  ASSERT_TRUE(loop.schedule_late_at(50, 3, r, 2, 1));
  ASSERT_TRUE(loop.schedule_late_at(50, 7, r, 2, 2));
  ASSERT_TRUE(loop.schedule_at(50, chain, 0));
  ASSERT_TRUE(loop.schedule_late_at(40, 9, r, 2, 3));
  const Event* first = loop.peek();
  ASSERT_TRUE(first != nullptr);
  const bool first_late = first->late;
  const Nanos first_time = first->time;
  EXPECT_TRUE(first_late);
  EXPECT_EQ(first_time, 40u);
  EXPECT_EQ(loop.run_until(kNever), 6u);
  ASSERT_EQ(r.seen.size(), 5u);
  const uint64_t want[] = {3, 99, 1, 0, 2};
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(r.seen[i].arg, want[i]) << i;
  EXPECT_TRUE(loop.peek() == nullptr);
}

TEST(FabricEventLoop, KeyedLateEventsReplaceTheirKeysPendingOneAndInterleaveByOrder) {
  EventLoop loop(1, 8);
  Recorder r;
  ASSERT_TRUE(loop.schedule_keyed_late_at(1, 90, 5, r, 2, 10));  // replaced below: never runs
  ASSERT_TRUE(loop.schedule_keyed_late_at(2, 50, 4, r, 2, 20));
  ASSERT_TRUE(loop.schedule_late_at(50, 4, r, 2, 30));  // same time and order, scheduled later
  ASSERT_TRUE(loop.schedule_keyed_late_at(1, 50, 1, r, 2, 11));
  ASSERT_TRUE(loop.schedule_at(50, r, 1, 40));  // ordinary: before every late event at 50
  EXPECT_EQ(loop.pending(), 4u);
  EXPECT_FALSE(loop.schedule_keyed_late_at(8, 60, 0, r, 2, 0));  // key beyond the bound
  EXPECT_EQ(loop.counters().rejected_full, 1u);
  EXPECT_EQ(loop.run_until(kNever), 4u);
  ASSERT_EQ(r.seen.size(), 4u);
  const uint64_t want[] = {40, 11, 20, 30};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(r.seen[i].arg, want[i]) << i;
  // A key may be scheduled again once its event ran.
  ASSERT_TRUE(loop.schedule_keyed_late_at(1, 70, 0, r, 2, 12));
  EXPECT_EQ(loop.run_until(kNever), 1u);
  EXPECT_EQ(r.seen.back().arg, 12u);
  EXPECT_TRUE(loop.peek() == nullptr);
}

// Events beyond the wheel's span wait apart and join it as the clock nears: still in time order,
// ties in scheduling order, also against an event scheduled for the same nanosecond after it
// joined, and across several spans.
TEST(FabricEventLoop, FarEventsKeepTimeAndInsertionOrder) {
  EventLoop loop(1, 4096);
  Recorder r;
  Rng rng(11);
  const Nanos span = EventLoop::kWheelSpan;
  const Nanos far = 2 * span + 7;
  // A chain: at `far - 3` (reached through three spans), schedule for `far`, where a far event
  // from the start already waits.
  struct Chain : EventTarget {
    EventLoop* loop;
    Recorder* r;
    Nanos at;
    void on_event(uint32_t, uint64_t, Nanos) override {
      EXPECT_TRUE(loop->schedule_at(at, *r, 5, 5000));
    }
  } chain;
  chain.loop = &loop;
  chain.r = &r;
  chain.at = far;
  ASSERT_TRUE(loop.schedule_at(far, r, 5, 4999));
  ASSERT_TRUE(loop.schedule_at(far - 3, chain, 0));
  for (uint64_t i = 0; i < 1500; ++i) {
    // Clustered times, so ties are common on both sides of each span boundary.
    const Nanos t = rng.below(4) * span + rng.below(16) * (span / 16) + rng.below(3);
    ASSERT_TRUE(loop.schedule_at(t, r, 0, i));
  }
  EXPECT_EQ(loop.run_until(kNever), 1503u);
  ASSERT_EQ(r.seen.size(), 1502u);
  size_t at_far = 0;
  for (size_t i = 1; i < r.seen.size(); ++i) {
    ASSERT_LE(r.seen[i - 1].now, r.seen[i].now) << i;
    if (r.seen[i - 1].now == r.seen[i].now) {
      ASSERT_LT(r.seen[i - 1].arg, r.seen[i].arg) << i;
    }
    if (r.seen[i].arg == 4999) at_far = i;
  }
  ASSERT_GT(at_far, 0u);
  EXPECT_EQ(r.seen[at_far].now, far);
  EXPECT_EQ(r.seen[at_far + 1].arg, 5000u);  // scheduled later for the same nanosecond: after
}

TEST(FabricEventLoop, ManyTiesKeepInsertionOrderThroughHeapChurn) {
  EventLoop loop(1, 4096);
  Recorder r;
  Rng rng(7);
  for (uint64_t i = 0; i < 2000; ++i) ASSERT_TRUE(loop.schedule_at(rng.below(20), r, 0, i));
  loop.run_until(kNever);
  ASSERT_EQ(r.seen.size(), 2000u);
  for (size_t i = 1; i < r.seen.size(); ++i) {
    ASSERT_LE(r.seen[i - 1].now, r.seen[i].now);
    if (r.seen[i - 1].now == r.seen[i].now) {
      ASSERT_LT(r.seen[i - 1].arg, r.seen[i].arg);
    }
  }
}

TEST(FabricEventLoop, RunUntilStopsAtDeadlineAndAdvancesClock) {
  EventLoop loop(1);
  Recorder r;
  ASSERT_TRUE(loop.schedule_at(10, r, 0));
  ASSERT_TRUE(loop.schedule_at(30, r, 0));
  EXPECT_EQ(loop.run_until(20), 1u);
  EXPECT_EQ(loop.now(), 20u);
  EXPECT_EQ(loop.pending(), 1u);
  // An event may schedule another at its own time: it still runs in this pass.
  struct Chain : EventTarget {
    EventLoop* loop;
    int left = 3;
    void on_event(uint32_t, uint64_t, Nanos) override {
      if (--left > 0) {
        EXPECT_TRUE(loop->schedule_after(0, *this, 0));
      }
    }
  } chain;
  chain.loop = &loop;
  ASSERT_TRUE(loop.schedule_after(0, chain, 0));
  EXPECT_EQ(loop.run_until(20), 3u);
  EXPECT_EQ(chain.left, 0);
  // max_events bounds a pass; the clock stays at the last event run.
  EXPECT_EQ(loop.run_until(100, 0), 0u);
  EXPECT_EQ(loop.now(), 20u);
  EXPECT_FALSE(loop.advance_to(31)) << "would skip the event at 30";
  EXPECT_TRUE(loop.advance_to(30));
  EXPECT_FALSE(loop.advance_to(29)) << "never backwards";
}

TEST(FabricEventLoop, BoundedQueueAndPastTimesAreRefusedAndCounted) {
  EventLoop loop(1, 3);
  Recorder r;
  EXPECT_TRUE(loop.schedule_at(5, r, 0));
  EXPECT_TRUE(loop.schedule_at(6, r, 0));
  EXPECT_TRUE(loop.schedule_at(7, r, 0));
  EXPECT_FALSE(loop.schedule_at(8, r, 0));
  EXPECT_EQ(loop.counters().rejected_full, 1u);
  EXPECT_EQ(loop.counters().max_pending, 3u);
  loop.run_until(6);
  EXPECT_FALSE(loop.schedule_at(5, r, 0));
  EXPECT_EQ(loop.counters().rejected_past, 1u);
  EXPECT_TRUE(loop.schedule_at(8, r, 0));
  loop.run_until(kNever);
  EXPECT_EQ(r.seen.size(), 4u);
  EXPECT_EQ(loop.counters().executed, 4u);
}

TEST(FabricEventLoop, SameSeedSameTraceDifferentSeedDifferentTrace) {
  auto run = [](uint64_t seed) {
    EventLoop loop(seed);
    Recorder r;
    for (int i = 0; i < 100; ++i) {
      const Nanos t = loop.rng().below(1000);
      EXPECT_TRUE(loop.schedule_at(t, r, 0, loop.rng().next()));
    }
    loop.run_until(kNever);
    return loop.trace_hash();
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(FabricRng, KnownStreamAndBoundedDraws) {
  // Pins the generator: a replayed seed must give the same stream on every platform and library.
  Rng a(0);
  Rng b(0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next(), b.next());
  Rng c(12345);
  const uint64_t first = c.next();
  Rng d(12345);
  EXPECT_EQ(first, d.next());
  EXPECT_NE(Rng(1).next(), Rng(2).next());

  Rng r(99);
  std::vector<int> hist(10, 0);
  for (int i = 0; i < 100000; ++i) {
    const uint64_t v = r.below(10);
    ASSERT_LT(v, 10u);
    ++hist[v];
  }
  for (int h : hist) EXPECT_NEAR(h, 10000, 500);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t v = r.between(5, 7);
    ASSERT_GE(v, 5u);
    ASSERT_LE(v, 7u);
    const double u = r.unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
  EXPECT_EQ(r.below(0), 0u);
  EXPECT_FALSE(r.chance(0));
  EXPECT_TRUE(r.chance(1));
  int hits = 0;
  for (int i = 0; i < 100000; ++i) hits += r.chance(0.1);
  EXPECT_NEAR(hits, 10000, 600);
}

}  // namespace
}  // namespace uroce::fabric
