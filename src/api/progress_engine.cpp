// The progress engine: passes on its own thread or on callers', and one idle policy for both.
#include "api/progress_engine.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "link/clock.h"

namespace uroce::api {

ProgressEngine::ProgressEngine(verbs::Device& device, ProgressOptions options)
    : dev_(device), link_(device.link()), options_(options) {
  seen_moved_ = packets_moved();
  last_busy_ = now_ns();
}

ProgressEngine::~ProgressEngine() {
  stop();
  if (kick_fd_ >= 0) ::close(kick_fd_);
}

Nanos ProgressEngine::now_ns() {
  return link::monotonic_ns();
}

int ProgressEngine::start() {
  if (thread_.joinable()) return EBUSY;
  if (kick_fd_ < 0) {
    kick_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (kick_fd_ < 0) return errno;
  }
  stop_.store(false);
  sigset_t all, old;
  if (options_.block_signals) {
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);  // the new thread inherits this mask
  }
  thread_ = std::thread([this] { loop(); });
  if (options_.block_signals) pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return 0;
}

void ProgressEngine::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  const uint64_t one = 1;
  (void)!::write(kick_fd_, &one, sizeof one);
  thread_.join();
  uint64_t drained;
  (void)!::read(kick_fd_, &drained, sizeof drained);
}

void ProgressEngine::kick() {
  // Pairs with the sleeping_ store in loop() (both sequentially consistent): either the engine's
  // last pass before sleeping saw the caller's post, or the caller sees it asleep and wakes it.
  if (!sleeping_.load()) return;
  kicks_sent_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t one = 1;
  (void)!::write(kick_fd_, &one, sizeof one);
}

uint64_t ProgressEngine::packets_moved() const {
  // Activity is judged by packets moved, not by progress()'s return: a QP waiting on a timer
  // returns a deadline, and waiting for it should not burn a core.
  const link::LinkCounters& c = link_.counters();
  return c.rx_packets + c.tx_packets + c.rx_drop_bad_icrc + c.rx_drop_malformed +
         c.rx_drop_not_roce;
}

Nanos ProgressEngine::pass(Nanos now, verbs::Device::PassScope scope, size_t budget) {
  const Nanos next = dev_.progress(now, budget == 0 ? options_.budget : budget, scope);
  passes_.fetch_add(1, std::memory_order_relaxed);
  if (const uint64_t m = packets_moved(); m != seen_moved_) {
    seen_moved_ = m;
    last_busy_ = now;
  }
  return next;
}

ProgressEngine::Idle ProgressEngine::idleness(Nanos now) {
  const Nanos idle = now > last_busy_ ? now - last_busy_ : 0;
  if (idle < options_.spin_ns) return Idle::kBusy;
  if (idle < options_.spin_ns + options_.yield_ns) return Idle::kYield;
  return Idle::kBlock;
}

bool ProgressEngine::app_driving(Nanos drove, Nanos now) const {
  return options_.app_driving_ns > 0 && drove != 0 &&
         (now < drove || now - drove < options_.app_driving_ns);
}

bool ProgressEngine::drive(bool app_polls) {
  const bool polling = app_polls && options_.app_driving_ns > 0;
  // One clock read per call: a program that polls an empty CQ calls this in a tight loop, and
  // try_lock does not wait, so the pass below runs at this same time.
  const Nanos now = now_ns();
  // A thread that went to sleep before the application started polling waits on the socket too:
  // wake it once, so that it sleeps again without it.
  if (polling && last_drive_.exchange(now, std::memory_order_relaxed) == 0) kick();
  if (!mu_.try_lock()) {
    // The pass in progress may have missed this caller's post. A poll posted nothing: that pass
    // takes whatever has arrived, and the caller polls again. Kicking here for polls made the
    // thread's last pass before sleeping a magnet for kicks (an eventfd write per failed poll,
    // then a wake-up and another pass), docs/performance.md, "The drop-in path".
    if (!app_polls) kick();
    return false;
  }
  // After a post, send only: what has arrived is for the caller's next poll (or the thread), and
  // a receive call right after a send seldom finds anything yet.
  Nanos next =
      pass(now, app_polls ? verbs::Device::PassScope::kFull : verbs::Device::PassScope::kSendOnly);
  // A post's pass that left a little (a 1 MiB WRITE is the whole budget, and an ACK this side
  // owed rides with it) finishes here beside a polling caller: a kick per message woke the thread
  // onto a core two spinning programs hold (a WRITE rendezvous of 1 MiB through UCX took half as
  // long again). Much left (a pipe of posts) still goes to the thread, which sends on while the
  // program posts.
  if (!app_polls && next <= now && app_driving(last_drive_.load(std::memory_order_relaxed), now))
    next = pass(now, verbs::Device::PassScope::kSendOnly, kPostTailPackets);
  const bool acks_kept = dev_.acks_kept_by_last_pass();
  mu_.unlock();
  inline_passes_.fetch_add(1, std::memory_order_relaxed);
  // Work left for now (a budget spent, responses a transmit-first pass left behind) goes to the
  // polling caller's next call; otherwise to the thread, as does a timer earlier than its wait.
  // A post's leftover wakes the thread even beside a polling program: the thread then sends on
  // while the program posts, and ib_send_bw lost without it (docs/performance.md, "80f4c55").
  const Nanos asleep_until = sleep_until_.load();
  if ((next <= now && !polling) || (next > now && asleep_until != 0 && next < asleep_until)) kick();
  return acks_kept;
}

void ProgressEngine::receive_kept() {
  if (!mu_.try_lock()) return;
  pass(now_ns(), verbs::Device::PassScope::kReceiveOnly);
  mu_.unlock();
  inline_passes_.fetch_add(1, std::memory_order_relaxed);
}

bool ProgressEngine::posted(uint32_t packets_in_flight) {
  if (options_.post_batch_packets > 0 && packets_in_flight >= options_.post_batch_packets &&
      app_driving(last_drive_.load(std::memory_order_relaxed), now_ns())) {
    // The thread sleeps deaf until at most app_driving_ns after that poll, so the post waits no
    // longer than the acknowledgements of the packets in flight already do.
    posts_batched_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  drive();
  return false;
}

void ProgressEngine::app_stopped_polling() {
  if (last_drive_.exchange(0, std::memory_order_relaxed) != 0) kick();
}

Nanos ProgressEngine::pump() {
  std::lock_guard lock(mu_);
  inline_passes_.fetch_add(1, std::memory_order_relaxed);
  return pass(now_ns());
}

void ProgressEngine::pump_or_wait(int extra_fd, Nanos max_wait_ns) {
  Nanos now, next;
  Idle idle;
  bool moved;
  {
    std::lock_guard lock(mu_);
    inline_passes_.fetch_add(1, std::memory_order_relaxed);
    now = now_ns();
    next = pass(now);
    moved = last_busy_ == now;
    idle = idleness(now);
  }
  if (next <= now) return;
  if (idle == Idle::kBusy) {
    if (options_.yield_on_empty_spin && !moved && ++empty_spins_ % kEmptySpinsPerYield == 0)
      sched_yield();
    return;
  }
  if (idle == Idle::kYield) {
    sched_yield();
    return;
  }
  const Nanos wait = std::min(next - now, max_wait_ns);
  if (wait < options_.min_block_ns) return;
  pollfd fds[2] = {{link_.wait_fd(), POLLIN, 0}, {extra_fd, POLLIN, 0}};
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  timespec ts{static_cast<time_t>(wait / 1'000'000'000u), static_cast<long>(wait % 1'000'000'000u)};
  const int r = ::ppoll(fds, extra_fd >= 0 ? 2 : 1, &ts, nullptr);
  if (r <= 0)
    by_timeout_.fetch_add(1, std::memory_order_relaxed);
  else if (fds[0].revents & POLLIN)
    by_packet_.fetch_add(1, std::memory_order_relaxed);
}

ProgressStats ProgressEngine::stats() const {
  ProgressStats s;
  s.passes = passes_.load(std::memory_order_relaxed);
  s.sleeps = sleeps_.load(std::memory_order_relaxed);
  s.wakeups_by_kick = by_kick_.load(std::memory_order_relaxed);
  s.wakeups_by_packet = by_packet_.load(std::memory_order_relaxed);
  s.wakeups_by_timeout = by_timeout_.load(std::memory_order_relaxed);
  s.kicks_sent = kicks_sent_.load(std::memory_order_relaxed);
  s.inline_passes = inline_passes_.load(std::memory_order_relaxed);
  s.posts_batched = posts_batched_.load(std::memory_order_relaxed);
  return s;
}

void ProgressEngine::loop() {
  // Whether the last sleep ended by its timeout. Beside an application thread that still polls,
  // such a wake-up finds nothing the application's next poll would not do (its passes run the
  // timers too): the thread looks, and sleeps again without a pass, each time twice as long up
  // to app_driving_max_ns (a wake-up costs the program's core a context switch each way).
  bool timed_out = false;
  // How long the thread leaves a polling application alone before it looks again.
  Nanos patience = options_.app_driving_ns;
  const Nanos max_patience = std::max(options_.app_driving_max_ns, options_.app_driving_ns);
  while (!stop_.load(std::memory_order_relaxed)) {
    if (timed_out) {
      const Nanos now = now_ns();
      if (app_driving(last_drive_.load(std::memory_order_relaxed), now)) {
        patience = std::min(2 * patience, max_patience);
        timed_out = sleep_beside_app(now, now + patience);
        continue;
      }
    }
    timed_out = false;
    patience = options_.app_driving_ns;
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      // A caller's pass is running (drive() or pump()). Queueing on the mutex would put this
      // thread in a futex sleep and the caller's unlock into a futex wake, a system call and a
      // wake-up each (docs/performance.md, "The drop-in path"). That pass takes what has
      // arrived; this thread sleeps as it would when idle, and what the pass leaves wakes it
      // (drive() kicks a sleeping thread for work left or a timer before sleep_until_). It does
      // not listen to the socket meanwhile: the packets waiting there are that pass's.
      sleeping_.store(true);
      const Nanos now = now_ns();
      sleep_until_.store(now + kContendedSleepNs);
      if (mu_.try_lock()) {  // the pass ended meanwhile: run one here after all
        mu_.unlock();
      } else {
        timed_out = block(now, now + kContendedSleepNs, /*deaf=*/true);
      }
      sleep_until_.store(0);
      sleeping_.store(false);
      continue;
    }
    Nanos now = now_ns();
    Nanos next = pass(now);
    if (next <= now) {
      // A budget ran out: more to do right away. While an application thread polls, that work
      // is its next poll's, as drive() leaves it: two threads of one process taking turns at
      // the passes hold two cores, and where busy threads outnumber cores that preempts the
      // peer's (docs/performance.md, "The drop-in path").
      const Nanos drove = last_drive_.load(std::memory_order_relaxed);
      if (!app_driving(drove, now)) continue;
      lock.unlock();
      timed_out = sleep_beside_app(now, std::max(now, drove) + options_.app_driving_ns);
      continue;
    }
    // The thread spins only while no application thread polls: beside a polling thread of the
    // same process it would take that thread's core, while a program that waits elsewhere (the
    // passive side of ib_read_lat or ib_write_bw) leaves the core idle and would otherwise pay a
    // wake-up for every request that arrives after a short pause. A poll that found completions
    // counts too: the thread that spins takes every packet, so the program's polls find its
    // completions and never drive, and both would spin on for good.
    const bool polled = app_polled_.load(std::memory_order_relaxed) &&
                        app_polled_.exchange(false, std::memory_order_relaxed);
    const Idle idle = polled || app_driving(last_drive_.load(std::memory_order_relaxed), now)
                          ? Idle::kBlock
                          : idleness(now);
    if (idle == Idle::kBusy) continue;
    if (idle == Idle::kYield) {
      lock.unlock();
      sched_yield();
      continue;
    }
    sleeping_.store(true);
    now = now_ns();
    const uint64_t before = seen_moved_;
    next = pass(now);  // catches a post that raced with the store
    const bool moved = seen_moved_ != before;
    lock.unlock();
    if (next <= now || moved) {
      sleeping_.store(false);
      continue;
    }
    timed_out = block(now, next);
    sleep_until_.store(0);
    sleeping_.store(false);
  }
}

bool ProgressEngine::sleep_beside_app(Nanos now, Nanos until) {
  sleeping_.store(true);
  const bool timed_out = block(now, until, /*deaf=*/true);
  sleep_until_.store(0);
  sleeping_.store(false);
  return timed_out;
}

bool ProgressEngine::block(Nanos now, Nanos next, bool deaf) {
  Nanos wait = std::min(next == kNever ? options_.max_sleep_ns : next - now, options_.max_sleep_ns);
  // An application thread that drove a pass lately is polling: leave the packets to it, and look
  // again once it may have stopped.
  const Nanos drove = last_drive_.load(std::memory_order_relaxed);
  // (`now` was read before this thread's last pass: an application may have polled since.)
  const bool driven = deaf || app_driving(drove, now);
  if (driven && !deaf) wait = std::min(wait, drove + options_.app_driving_ns - now);
  // Until it wakes, not until the device's next deadline: drive() kicks it for a deadline earlier
  // than this only, and a polling application's thread is looked at again within app_driving_ns
  // anyway. (Each post arms a retransmission timer milliseconds away; against a sleep "until the
  // device's next deadline", kNever when nothing was outstanding, that woke the thread for every
  // message, and the thread then shared the polling thread's core.)
  sleep_until_.store(now + wait);
  timespec ts{static_cast<time_t>(wait / 1'000'000'000u), static_cast<long>(wait % 1'000'000'000u)};
  pollfd fds[2] = {{kick_fd_, POLLIN, 0}, {link_.wait_fd(), POLLIN, 0}};
  // A link without an fd: deadlines and kicks only.
  const nfds_t n = link_.wait_fd() >= 0 && !driven ? 2 : 1;
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  const int r = ::ppoll(fds, n, &ts, nullptr);
  if (r <= 0) {
    by_timeout_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (fds[0].revents & POLLIN) {
    uint64_t v;
    (void)!::read(kick_fd_, &v, sizeof v);
    by_kick_.fetch_add(1, std::memory_order_relaxed);
  }
  if (n == 2 && (fds[1].revents & POLLIN)) by_packet_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace uroce::api
