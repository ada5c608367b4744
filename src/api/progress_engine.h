#pragma once
// The progress engine: what keeps a device's NIC work moving (segmenting, acknowledging, answering
// READs and atomics, retransmitting on timers) in real time. It calls Device::progress(now, budget)
// with CLOCK_MONOTONIC time, one pass at a time, from whichever thread gets there first:
//
//   - its own thread (start()), so one-sided operations complete while the target application
//     does nothing at all;
//   - an application thread that has just posted or found its CQ empty (drive()): doing the NIC's
//     work on the thread that waits for it keeps wake-ups off the data path, which matters on a
//     2-core machine where a thread wake-up can cost a scheduler tick;
//   - or only the caller (pump(), pump_or_wait()), for a process that wants one thread in all, as
//     `uroce bench` does so that client and server each fit on one core.
//
// One adaptive policy decides when to stop spinning, for the thread and for pump_or_wait() alike:
// busy-poll while packets move and for spin_ns after the last one (a ping-pong's reply arrives
// without a wake-up), then pass with sched_yield() in between for yield_ns (hands the core to
// anyone who wants it), then block in ppoll() on the link's wait_fd() (and a kick eventfd, or the
// caller's fd) until a packet, a kick, or the device's next deadline (retransmit, ACK coalescing,
// pacing), capped by max_sleep_ns.
//
// Threading: start(), stop() and the destructor from one controlling thread; kick(), drive() and
// stats() from any thread; pump() and pump_or_wait() from any thread (passes are serialised).
// The device and its link must outlive the engine.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>

#include "common/types.h"
#include "verbs/device.h"

namespace uroce::api {

struct ProgressOptions {
  Nanos spin_ns = 50'000;            // busy-poll this long after the last packet
  Nanos yield_ns = 200'000;          // then poll with sched_yield() between passes this long
  Nanos max_sleep_ns = 100'000'000;  // cap on one blocking wait (a safety net, not a timer)
  // pump_or_wait() keeps spinning rather than block for less than this: a poll() round trip
  // costs about as much.
  Nanos min_block_ns = 20'000;
  size_t budget = verbs::Device::kDefaultBudget;  // packets per progress() pass
  // pump_or_wait() also yields the core after every 8th pass that moved nothing while it spins
  // (yielding after every pass put a system call in the ping-pong's path): with more busy
  // threads than cores (two spinning bench processes beside a build), a spinner that never
  // yields holds its core for a whole time slice while its peer waits for it, and a ping-pong
  // round trip becomes a scheduler tick instead of microseconds (docs/performance.md, "Tuning
  // behind the code's constants").
  bool yield_on_empty_spin = false;
  // While an application thread has driven a pass within this long, the engine's thread, when it
  // sleeps, waits for kicks and timers only, not for packets: the application will take them,
  // and waking a second thread per packet costs both a wake-up (expensive in a VM)
  // and the contention for the pass. 0: always wake on packets.
  Nanos app_driving_ns = 0;
  // While the application keeps polling, the sleeping thread looks again after app_driving_ns,
  // then after twice as long each time it finds the program still polling, up to this (0: no
  // growth). Each look is a wake-up and a context switch on a core the program is using; the
  // price is how late the thread takes over from a program that stops polling without arming a
  // CQ (at most this long; ibv_req_notify_cq hands over at once).
  Nanos app_driving_max_ns = 0;
  // posted(): a post into a QP with at least this many request packets unacknowledged, while an
  // application thread polls (app_driving_ns), runs no pass of its own; the program's next empty
  // poll sends it with whatever else was posted meanwhile. A pass per post sends each message in
  // a system call of its own (one per 64 KiB WRITE through perftest, against one per 255
  // packets in `uroce bench`), and the wire has the pipe's packets to carry meanwhile. 0: every
  // post runs a pass.
  uint32_t post_batch_packets = 0;
  // The engine's thread blocks every signal, so a signal meant for the program (qperf's SIGALRM)
  // reaches one of the program's own threads and interrupts its blocking calls with EINTR.
  bool block_signals = true;
};

struct ProgressStats {
  uint64_t passes = 0;  // Device::progress calls
  uint64_t sleeps = 0;  // blocking waits entered
  uint64_t wakeups_by_kick = 0, wakeups_by_packet = 0, wakeups_by_timeout = 0;
  uint64_t kicks_sent = 0;     // kick() calls that had to write the eventfd
  uint64_t inline_passes = 0;  // passes run by drive() / pump() on a caller's thread
  uint64_t posts_batched = 0;  // posts posted() left to the next poll
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

  // Wakes the thread if it sleeps. Cheap when it is awake: one atomic load.
  void kick();
  // After a post, or when a poll found nothing: one pass on the calling thread unless another
  // thread is in one (after a post, `app_polls` false, a pass that only sends); the engine's thread
  // then carries on with whatever that pass left (work beyond the budget, or a timer earlier than
  // the one it sleeps until). `app_polls`: the caller is an application thread polling for
  // completions, which will call again soon; work a pass left then waits for that call (or for the
  // thread, within app_driving_ns) instead of waking the thread.
  // Returns whether the pass it ran kept ACKs for the next (verbs::Device::acks_kept_by_last_pass).
  bool drive(bool app_polls = false);
  // After drive() said so: a pass that hands up the ACKs kept, and transmits nothing (what is
  // queued leaves with the caller's next post, as it would have after one full pass). Nothing if
  // another thread is in a pass (it takes them).
  void receive_kept();
  // After a post into a QP that had `packets_in_flight` request packets unacknowledged: drive(),
  // or nothing while that pipe is full and an application thread polls
  // (ProgressOptions::post_batch_packets). Returns whether it left the post to the next poll.
  bool posted(uint32_t packets_in_flight);
  // The application stopped polling (it armed a CQ for events and may block): the thread takes
  // packets again at once.
  void app_stopped_polling();
  // An application thread polled and found completions (no pass, so drive() did not see it): the
  // thread does not spin beside it. One relaxed store, for a call made per completion batch.
  void app_polled() { app_polled_.store(true, std::memory_order_relaxed); }

  // One pass on the calling thread (waits for a pass in progress elsewhere). Returns the next
  // time the device has work: `now` if a budget ran out, kNever when idle.
  Nanos pump();
  // pump(), and when the policy says the device is idle, block on the link and `extra_fd` (-1:
  // none) for at most `max_wait_ns` or until the device's next deadline. For a caller that runs
  // the NIC on its own thread without start().
  void pump_or_wait(int extra_fd, Nanos max_wait_ns);

  ProgressStats stats() const;

  static Nanos now_ns();

 private:
  // The shared adaptive policy: tracks when packets last moved.
  enum class Idle { kBusy, kYield, kBlock };
  Idle idleness(Nanos now);
  // Whether an application thread that last drove a pass at `drove` (last_drive_, 0: not
  // polling) is still polling at `now`: it drove one within app_driving_ns.
  bool app_driving(Nanos drove, Nanos now) const;
  uint64_t packets_moved() const;

  void loop();
  // deaf: wait for kicks and the deadline only, not for packets. Returns whether it timed out.
  bool block(Nanos now, Nanos next, bool deaf = false);
  // A deaf block() until `until`, with sleeping_ set so that a kick still wakes the thread.
  // Returns whether it timed out.
  bool sleep_beside_app(Nanos now, Nanos until);
  // With mu_ held. `budget` 0: options_.budget.
  Nanos pass(Nanos now, verbs::Device::PassScope scope = verbs::Device::PassScope::kFull,
             size_t budget = 0);

  verbs::Device& dev_;
  link::Link& link_;
  const ProgressOptions options_;
  int kick_fd_ = -1;
  std::mutex mu_;            // one progress() at a time (verbs/device.h)
  uint64_t seen_moved_ = 0;  // guarded by mu_, as is last_busy_
  Nanos last_busy_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<Nanos> sleep_until_{0};  // the sleeping thread's timeout; 0 while awake
  static constexpr uint64_t kEmptySpinsPerYield = 8;
  // The packets a post's second pass may send beside a polling caller before the rest goes to
  // the thread (drive()): a message's tail and the responses owed, not a pipe of posts.
  static constexpr size_t kPostTailPackets = 16;
  // The longest the thread sleeps when it found a caller's pass in progress: a bound on how late
  // a timer can be if that pass ended before the thread's sleep_until_ was visible to it.
  static constexpr Nanos kContendedSleepNs = 200'000;
  uint64_t empty_spins_ = 0;  // pump_or_wait's empty passes while spinning (guarded by the caller)
  std::atomic<Nanos> last_drive_{0};     // when a polling application last ran a pass
  std::atomic<bool> app_polled_{false};  // a poll found completions since the thread last looked
  std::thread thread_;

  std::atomic<uint64_t> passes_{0}, sleeps_{0}, by_kick_{0}, by_packet_{0}, by_timeout_{0},
      kicks_sent_{0}, inline_passes_{0}, posts_batched_{0};
};

}  // namespace uroce::api
