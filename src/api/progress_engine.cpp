// The progress engine's thread: spin, then yield, then block until a packet, a kick or the next
// deadline.
#include "api/progress_engine.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

namespace uroce::api {

ProgressEngine::ProgressEngine(verbs::Device& device, ProgressOptions options)
    : dev_(device), link_(device.link()), options_(options) {}

ProgressEngine::~ProgressEngine() {
  stop();
  if (kick_fd_ >= 0) ::close(kick_fd_);
}

Nanos ProgressEngine::now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000u + static_cast<Nanos>(ts.tv_nsec);
}

int ProgressEngine::start() {
  if (thread_.joinable()) return EBUSY;
  if (kick_fd_ < 0) {
    kick_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (kick_fd_ < 0) return errno;
  }
  stop_.store(false);
  thread_ = std::thread([this] { loop(); });
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

ProgressStats ProgressEngine::stats() const {
  ProgressStats s;
  s.passes = passes_.load(std::memory_order_relaxed);
  s.sleeps = sleeps_.load(std::memory_order_relaxed);
  s.wakeups_by_kick = by_kick_.load(std::memory_order_relaxed);
  s.wakeups_by_packet = by_packet_.load(std::memory_order_relaxed);
  s.wakeups_by_timeout = by_timeout_.load(std::memory_order_relaxed);
  s.kicks_sent = kicks_sent_.load(std::memory_order_relaxed);
  return s;
}

void ProgressEngine::loop() {
  // Activity is judged by packets moved, not by progress()'s return: a QP waiting on a timer
  // returns a deadline, and waiting for it should not burn a core.
  const auto moved = [this] {
    const link::LinkCounters& c = link_.counters();
    return c.rx_packets + c.tx_packets + c.rx_drop_bad_icrc + c.rx_drop_malformed +
           c.rx_drop_not_roce;
  };
  uint64_t seen = moved();
  Nanos last_busy = now_ns();
  while (!stop_.load(std::memory_order_relaxed)) {
    Nanos now = now_ns();
    Nanos next = dev_.progress(now, options_.budget);
    passes_.fetch_add(1, std::memory_order_relaxed);
    if (const uint64_t m = moved(); m != seen) {
      seen = m;
      last_busy = now;
    }
    if (next <= now) continue;  // a budget ran out: more to do right away
    const Nanos idle = now - last_busy;
    if (idle < options_.spin_ns) continue;
    if (idle < options_.spin_ns + options_.yield_ns) {
      sched_yield();
      continue;
    }
    sleeping_.store(true);
    now = now_ns();
    next = dev_.progress(now, options_.budget);  // catches a post that raced with the store
    passes_.fetch_add(1, std::memory_order_relaxed);
    if (next <= now || moved() != seen) {
      sleeping_.store(false);
      continue;
    }
    block(now, next);
    sleeping_.store(false);
  }
}

void ProgressEngine::block(Nanos now, Nanos next) {
  const Nanos wait =
      std::min(next == kNever ? options_.max_sleep_ns : next - now, options_.max_sleep_ns);
  timespec ts{static_cast<time_t>(wait / 1'000'000'000u), static_cast<long>(wait % 1'000'000'000u)};
  pollfd fds[2] = {{kick_fd_, POLLIN, 0}, {link_.wait_fd(), POLLIN, 0}};
  const nfds_t n = link_.wait_fd() >= 0 ? 2 : 1;  // a link without an fd: deadlines and kicks
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  const int r = ::ppoll(fds, n, &ts, nullptr);
  if (r <= 0) {
    by_timeout_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (fds[0].revents & POLLIN) {
    uint64_t v;
    (void)!::read(kick_fd_, &v, sizeof v);
    by_kick_.fetch_add(1, std::memory_order_relaxed);
  }
  if (n == 2 && (fds[1].revents & POLLIN)) by_packet_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace uroce::api
