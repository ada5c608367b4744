#pragma once
// The progress engine: one thread per device that keeps the NIC moving while the application is
// busy elsewhere or asleep (a one-sided WRITE or READ must complete without the target calling
// anything). It calls Device::progress(now, budget) with CLOCK_MONOTONIC time and adapts:
//   - busy-polls while packets flow and for spin_ns after the last one (catches a ping-pong's
//     reply without a wake-up);
//   - then polls with sched_yield() between passes for yield_ns (gives the core to anyone who
//     wants it: on a 2-core machine two processes must not starve each other);
//   - then blocks in ppoll() on the link's wait_fd() and a kick eventfd, with a timeout equal to
//     the device's next deadline (retransmit, ACK coalescing, pacing), capped by max_sleep_ns.
// Application threads call kick() after posting work so a sleeping engine wakes at once.
//
// Threading: start(), stop() and the destructor from one controlling thread; kick() and stats()
// from any thread. The device and its link must outlive the engine (or its stop()).
#include <atomic>
#include <cstdint>
#include <thread>

#include "common/types.h"
#include "verbs/device.h"

namespace uroce::api {

struct ProgressOptions {
  Nanos spin_ns = 50'000;            // busy-poll this long after the last packet
  Nanos yield_ns = 200'000;          // then poll with sched_yield() between passes this long
  Nanos max_sleep_ns = 100'000'000;  // cap on one blocking wait (a safety net, not a timer)
  size_t budget = verbs::Device::kDefaultBudget;  // packets per progress() pass
};

struct ProgressStats {
  uint64_t passes = 0;  // Device::progress calls
  uint64_t sleeps = 0;  // blocking waits entered
  uint64_t wakeups_by_kick = 0, wakeups_by_packet = 0, wakeups_by_timeout = 0;
  uint64_t kicks_sent = 0;  // kick() calls that had to write the eventfd
};

class ProgressEngine {
 public:
  explicit ProgressEngine(verbs::Device& device, ProgressOptions options = {});
  ~ProgressEngine();
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Starts the thread: 0, EBUSY if already running, or the errno of eventfd().
  int start();
  // Stops and joins the thread (it finishes its current pass first). Idempotent.
  void stop();
  bool running() const { return thread_.joinable(); }

  // Wakes the thread if it sleeps (after a post). Cheap when it is awake: one atomic load.
  void kick();

  ProgressStats stats() const;

 private:
  void loop();
  void block(Nanos now, Nanos next);
  static Nanos now_ns();

  verbs::Device& dev_;
  link::Link& link_;
  const ProgressOptions options_;
  int kick_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::thread thread_;

  std::atomic<uint64_t> passes_{0}, sleeps_{0}, by_kick_{0}, by_packet_{0}, by_timeout_{0},
      kicks_sent_{0};
};

}  // namespace uroce::api
