#pragma once
// The one world core of the simulator: a fabric EventLoop (virtual clock, seeded randomness,
// links and switches) with verbs Devices and a driver's own actors attached to it as event
// targets. A device runs a progress pass when its event comes due and schedules its next event at
// the deadline the pass returns; a packet landing in its link's inbox wakes it, and the driver
// wakes it after a post (wake_now). Nothing polls on a fixed step: the clock jumps from one event
// to the next.
//
// Rounds. Devices and actors ("participants") are late events (fabric/event_loop.h): at any
// instant they act only after every fabric event due then, and within an instant they act in
// rounds, each participant at most once per round, in the order they were added. A participant
// woken for the current instant acts later in the same round if its turn is still to come, else
// in the next round. This is the order a driver gets by looping "run the fabric up to the next
// deadline, then give every due device a pass in turn", so a seeded world replays the same way
// however its participants are woken.
//
// The loop's late events belong to the core: nothing else may schedule_late_at on it.
// Not thread-safe: one world, one thread.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/types.h"
#include "fabric/event_loop.h"
#include "verbs/device.h"

namespace uroce::sim {

class WorldCore {
 public:
  using Action = std::function<void(Nanos now)>;
  using ParticipantId = size_t;
  // The event kind a link's arrival notification must carry (LossyNetwork::set_arrival_notify,
  // FabricLink::set_arrival_notify): the participant then acts at the arrival's instant.
  static constexpr uint32_t kWakeKind = 1;

  explicit WorldCore(fabric::EventLoop& loop);
  ~WorldCore();
  WorldCore(const WorldCore&) = delete;
  WorldCore& operator=(const WorldCore&) = delete;

  fabric::EventLoop& loop() { return loop_; }
  Nanos now() const { return loop_.now(); }

  // A device: acting is one progress pass at the event's time, then `after_pass` (the driver
  // polls its completions there; may be empty), then the device schedules itself at the deadline
  // the pass returned. It first acts when woken.
  ParticipantId add_device(verbs::Device& device, Action after_pass = {});
  // A driver's own work (posting, checking), acting in rounds like a device; it schedules itself
  // again with wake().
  ParticipantId add_actor(Action act);
  // The event target that wakes participant `id` for the instant it is called at, for a link's
  // arrival notification (kind kWakeKind).
  fabric::EventTarget& waker(ParticipantId id);

  // Participant `id` acts at `at` (clamped to now). A request later than one pending is ignored.
  void wake(ParticipantId id, Nanos at);
  void wake_now(ParticipantId id) { wake(id, now()); }
  // Every device acts in the next round.
  void wake_all_devices();
  // Makes a round happen at `at` even if no participant acts then (a sampler's tick): run()'s
  // round hook sees it.
  void round_at(Nanos at);
  // Ends run() as soon as the acting participant returns.
  void stop() { stop_ = true; }

  struct Limits {
    Nanos time = kNever;                         // no round starts after this virtual time
    uint64_t rounds = ~uint64_t{0};              // rounds in all
    uint64_t rounds_at_one_time = ~uint64_t{0};  // rounds in a row without the clock moving
  };
  enum class End : uint8_t {
    kDone,       // the round hook returned false
    kStopped,    // stop()
    kIdle,       // nothing left to happen: no fabric event, no participant due
    kTimeLimit,  // the next round would start after limits.time (at `next`)
    kRoundLimit,
    kStalled,  // limits.rounds_at_one_time hit: participants keep waking for the same instant
  };
  struct Outcome {
    End end = End::kStopped;
    uint64_t rounds = 0;
    Nanos next = kNever;  // kTimeLimit: when the next round would have started
  };
  // Runs rounds until a limit, stop(), or `on_round` (called as each round starts, after the
  // fabric events of its instant, before any participant acts; may be empty) returns false.
  // Between rounds the fabric runs up to the next round's instant.
  Outcome run(const std::function<bool(Nanos now)>& on_round, const Limits& limits);

 private:
  class Participant;
  void act(Participant& p, uint64_t round, Nanos now);
  uint64_t order(size_t rank, uint64_t round) const;

  fabric::EventLoop& loop_;
  std::vector<std::unique_ptr<Participant>> participants_;
  std::unique_ptr<Participant> ticker_;  // round_at(): acts first, does nothing
  // The round in progress at now(), or the one the next round at now() will be.
  uint64_t round_ = 0;
  size_t acting_rank_ = 0;  // rank of the participant acting now (ranks start at 1)
  bool in_round_ = false;
  Nanos round_time_ = 0;  // the instant round_ belongs to
  bool stop_ = false;
};

}  // namespace uroce::sim
