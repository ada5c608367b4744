#include "cli/bench.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "api/uroce.h"
#include "cli/node.h"
#include "core/pattern.h"
#include "core/report.h"
#include "core/stats.h"

namespace uroce::tools {

namespace {

constexpr int kOobTimeoutMs = 30'000;
// Completion timestamps kept per message size; a duration run stops posting at this bound.
constexpr uint64_t kMaxRecordedCompletions = uint64_t{16} << 20;

enum ExitCode { kOk = 0, kSetup = 1, kOob = 2, kWrFailed = 3, kVerify = 4, kStalled = 5 };

const char* test_name(BenchTest t) {
  switch (t) {
    case BenchTest::kWrite:
      return "write";
    case BenchTest::kRead:
      return "read";
    case BenchTest::kSend:
      return "send";
    case BenchTest::kAtomic:
      return "atomic";
  }
  return "?";
}

template <typename... Args>
int fail(int code, fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(stderr, "uroce bench: {}\n", fmt::format(f, std::forward<Args>(args)...));
  return code;
}

// Each side's buffer is two regions of `region` bytes: A (offset 0) is where data leaves from,
// B (offset region) is where it lands: write and send go from the client's A to the server's B,
// read from the server's A to the client's B, ping-pong both ways. Atomics count at the server's
// B and return their results into slots of the client's B.
uint64_t region_bytes(const BenchParams& p) {
  uint64_t largest = 0;
  for (uint64_t s : p.sizes) largest = std::max(largest, s);
  uint64_t r = std::max<uint64_t>({largest, uint64_t{p.depth} * 8, 64});
  return (r + 63) & ~uint64_t{63};
}

uint32_t step_seed(const BenchParams& p, uint32_t index) {
  return p.seed * 1000003u + index;
}

// The inverse of the pattern: differs from what a correct transfer writes at every byte.
void poison(std::span<uint8_t> b, uint32_t seed) {
  fill_pattern(b, seed);
  for (auto& x : b) x = static_cast<uint8_t>(~x);
}

// Ping-pong tags live in the last byte of a message and are never 0, so a poisoned buffer whose
// last byte is zeroed never looks like a message that arrived.
uint8_t tag_of(uint64_t i) {
  return static_cast<uint8_t>(i % 255 + 1);
}
uint8_t read_byte(const uint8_t* p) {
  return std::atomic_ref<const uint8_t>(*p).load();
}

std::string counters_text(const std::vector<Counter>& cs) {
  std::string t;
  for (const auto& c : cs) t += fmt::format("{} {}\n", c.name, c.value);
  return t;
}

std::vector<std::pair<std::string, uint64_t>> parse_counters(std::span<const uint8_t> text) {
  std::vector<std::pair<std::string, uint64_t>> out;
  std::string s(text.begin(), text.end());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    std::string line = s.substr(pos, nl - pos);
    pos = nl + 1;
    size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    out.emplace_back(line.substr(0, sp), std::strtoull(line.c_str() + sp + 1, nullptr, 10));
  }
  return out;
}

// Drains what is left after a failed work request (the QP is in ERR and flushes the rest,
// IBA 10.8.3.3), for at most a second, and says how many there were.
uint64_t drain_flushed(Node& node) {
  Completion wc[64];
  uint64_t flushed = 0;
  Nanos end = monotonic_ns() + 1'000'000'000;
  while (monotonic_ns() < end) {
    node.pump();
    size_t n = node.poll_cq(wc);
    flushed += n;
    if (n == 0) ::usleep(1000);
  }
  return flushed;
}

int report_wc_error(Node& node, const Completion& wc, const BenchOptions& o) {
  fmt::print(stderr,
             "uroce bench: work request {} failed: {} (status {}, vendor_err {:#x}; timeout {}, "
             "retry_cnt {}, rnr_retry {})\n",
             wc.wr_id, wc_status_name(wc.status), static_cast<int>(wc.status), wc.vendor_err,
             o.timeout, o.retry_cnt, o.rnr_retry);
  uint64_t flushed = drain_flushed(node);
  if (flushed)
    fmt::print(stderr, "uroce bench: {} more work requests completed in error\n", flushed);
  return kWrFailed;
}

// ---- Client ------------------------------------------------------------------------------------

struct StepOutcome {
  int rc = kOk;
  uint64_t iterations = 0;
  BandwidthSummary bw;
  LatencySummary lat;
};

// One row of --interval: what completed in (t - interval, t] and where DCQCN stood at t.
struct IntervalSample {
  uint64_t bytes = 0;  // the message size
  double t_s = 0;      // since the size started
  double gbps = 0;
  uint64_t rate_mbps = 0;  // the QP's DCQCN rate; 0 with congestion control off
  uint64_t low_mbps = 0;   // the lowest of the rates read every millisecond in the interval
  uint64_t rate_cuts = 0;  // so far, on this QP
  uint64_t cnps_handled = 0;
};

uint64_t find_counter(const std::vector<Counter>& cs, std::string_view name) {
  for (const auto& c : cs)
    if (c.name == name) return c.value;
  return 0;
}

std::string format_interval(const IntervalSample& s) {
  return fmt::format(
      " interval {:>8.3f} s {:>10} B {:>9.3f} Gb/s  dcqcn rate {:>7} Mb/s (low {:>7})  cuts {:>7}"
      "  cnps {:>7}\n",
      s.t_s, s.bytes, s.gbps, s.rate_mbps, s.low_mbps, s.rate_cuts, s.cnps_handled);
}

class Client {
 public:
  Client(const BenchOptions& o, Node& node, uint64_t region)
      : o_(o), p_(o.params), node_(node), region_(region) {}

  StepOutcome run(uint32_t index, uint64_t size) {
    seed_ = step_seed(p_, index);
    size_ = size;
    auto buf = node_.buffer();
    fill_pattern(buf.subspan(0, region_), seed_);
    poison(buf.subspan(region_, region_), seed_);
    buf[region_ + std::max<uint64_t>(size, 1) - 1] = 0;
    StepOutcome out;
    if (p_.mode == BenchMode::kBandwidth) {
      out.rc = bandwidth(out);
    } else {
      out.rc = latency(out);
    }
    return out;
  }

  const std::vector<IntervalSample>& intervals() const { return intervals_; }

  // The client's own verdict (read and ping-pong data land here).
  int64_t verify_local(uint64_t iterations) const {
    auto buf = node_.buffer();
    if (!p_.verify || iterations == 0) return -1;
    if (p_.test == BenchTest::kRead) return find_mismatch(buf.subspan(region_, size_), seed_);
    if (p_.mode == BenchMode::kLatency && p_.test == BenchTest::kWrite && size_ > 1)
      return find_mismatch(buf.subspan(region_, size_ - 1), seed_);
    return -1;
  }

 private:
  uint32_t len() const { return static_cast<uint32_t>(size_); }
  uint64_t target() const { return p_.duration_ms ? kMaxRecordedCompletions : p_.iterations; }
  Nanos end_time(Nanos start) const {
    return p_.duration_ms ? start + Nanos{p_.duration_ms} * 1'000'000 : kNever;
  }

  int post_one(uint64_t i, bool signaled = true) {
    switch (p_.test) {
      case BenchTest::kWrite:
        return node_.post_write(i, 0, len(), region_, signaled);
      case BenchTest::kRead:
        return node_.post_read(i, region_, len(), 0, signaled);
      case BenchTest::kSend:
        return node_.post_send(i, 0, len(), signaled);
      case BenchTest::kAtomic:
        return node_.post_fetch_add(i, region_ + (i % p_.depth) * 8, region_, 1, signaled);
    }
    return EINVAL;
  }

  // Atomics: fetch-and-add of 1 from 0 returns each value below the count exactly once.
  int check_atomic(uint64_t wr_id) {
    if (!p_.verify) return kOk;
    uint64_t v;
    std::memcpy(&v, node_.buffer().data() + region_ + (wr_id % p_.depth) * 8, 8);
    if (v >= seen_.size() || seen_[v])
      return fail(kVerify, "atomic {} returned {}, which is out of range or repeated", wr_id, v);
    seen_[v] = true;
    return kOk;
  }

  int bandwidth(StepOutcome& out) {
    // Every cq_mod-th request asks for a completion, and the last: a completion stands for every
    // request before it (a send queue completes in order).
    const uint64_t mod = o_.cq_mod;
    if (mod > p_.depth)
      return fail(kSetup, "--cq-mod {} is more than the depth {}: nothing would complete", mod,
                  p_.depth);
    uint64_t goal = target(), posted = 0, completed = 0;
    if (p_.test == BenchTest::kAtomic && p_.verify) seen_.assign(p_.duration_ms ? 0 : goal, false);
    std::vector<uint64_t> done;
    done.reserve(p_.duration_ms ? 1 << 16 : goal);
    Completion wc[64];
    Nanos start = monotonic_ns(), end = end_time(start), last = start;
    const Nanos interval = static_cast<Nanos>(o_.interval_s * 1e9);
    Nanos tick_at = interval ? start + interval : kNever, tick_from = start;
    uint64_t tick_completed = 0;
    // DCQCN recovers from a cut within milliseconds, so one reading per interval would mostly
    // miss the cuts: the rate is also read every millisecond and the interval keeps its lowest.
    Nanos peek_at = interval ? start : kNever;
    low_mbps_ = UINT64_MAX;
    while (completed < posted || posted < goal) {
      Nanos now = monotonic_ns();
      // The run ends at the next request that asks for a completion.
      if (now >= end) goal = std::min(goal, (posted + mod - 1) / mod * mod);
      if (now >= peek_at) {
        low_mbps_ = std::min(low_mbps_, find_counter(node_.qp_counters(), "rp_rate_mbps"));
        peek_at = now + 1'000'000;
      }
      if (now >= tick_at) {
        sample_interval(now - start, now - tick_from, completed - tick_completed);
        tick_from = now;
        tick_completed = completed;
        tick_at = std::max(tick_at + interval, now);  // a late tick is not repeated
      }
      while (posted < goal && posted - completed < p_.depth) {
        if (p_.test == BenchTest::kAtomic && p_.verify && posted >= seen_.size())
          seen_.resize(std::max<size_t>(1024, seen_.size() * 2), false);
        const bool signaled = (posted + 1) % mod == 0 || posted + 1 == goal;
        if (int err = post_one(posted, signaled))
          return fail(kWrFailed, "post {} failed: {}", posted, std::strerror(err));
        ++posted;
      }
      node_.pump();
      size_t n = node_.poll_cq(wc);
      now = monotonic_ns();
      for (size_t i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::kSuccess) return report_wc_error(node_, wc[i], o_);
        if (wc[i].wr_id < completed || wc[i].wr_id >= posted)
          return fail(kVerify, "completion of request {} out of order ({} of {} done)", wc[i].wr_id,
                      completed, posted);
        for (; completed <= wc[i].wr_id; ++completed) {
          if (p_.test == BenchTest::kAtomic)
            if (int rc = check_atomic(completed)) return rc;
          done.push_back(now);
        }
        last = now;
      }
      if (n == 0 && now - last > Nanos(o_.stall_timeout_s) * 1'000'000'000)
        return fail(kStalled, "no completion for {} s ({} of {} done)", o_.stall_timeout_s,
                    completed, posted);
    }
    out.iterations = completed;
    // The window spans two queue depths (and a tenth of the run), so that at least one full
    // queue's messages were both posted and completed inside it: a window of the messages that
    // were already in flight when it began would report a burst of ACKs as bandwidth.
    size_t window = std::max<size_t>(2 * size_t{p_.depth}, done.size() / 10);
    out.bw = summarize_bandwidth(p_.test == BenchTest::kAtomic ? 8 : size_, start, done, window);
    return kOk;
  }

  // Waits until `done()` holds, pumping the NIC and reaping send completions.
  template <typename Done>
  int wait_for(Done done, uint64_t& outstanding, std::span<Completion> recvs, size_t& nrecv) {
    Completion wc[16];
    Nanos last = monotonic_ns();
    while (!done()) {
      node_.pump_or_wait(-1, 1'000'000);
      size_t n = node_.poll_cq(wc);
      for (size_t i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::kSuccess) return report_wc_error(node_, wc[i], o_);
        if (wc[i].opcode == WcOpcode::kRecv) {
          if (nrecv < recvs.size()) recvs[nrecv++] = wc[i];
        } else {
          --outstanding;
          if (p_.test == BenchTest::kAtomic)
            if (int rc = check_atomic(wc[i].wr_id)) return rc;
        }
        last = monotonic_ns();
      }
      if (n == 0 && monotonic_ns() - last > Nanos(o_.stall_timeout_s) * 1'000'000'000)
        return fail(kStalled, "no completion for {} s", o_.stall_timeout_s);
    }
    return kOk;
  }

  int latency(StepOutcome& out) {
    if (p_.test == BenchTest::kWrite && size_ == 0)
      return fail(kSetup, "write latency signals with the last byte: sizes must be >= 1");
    uint64_t goal = target(), outstanding = 0;
    if (p_.test == BenchTest::kAtomic && p_.verify) seen_.assign(goal, false);
    if (p_.test == BenchTest::kSend)
      while (recv_posted_ < p_.depth) {
        if (int err = node_.post_recv(recv_posted_, region_, static_cast<uint32_t>(region_)))
          return fail(kWrFailed, "post_recv failed: {}", std::strerror(err));
        ++recv_posted_;
      }
    std::vector<uint64_t> samples;
    samples.reserve(p_.duration_ms ? 1 << 16 : goal);
    uint8_t* buf = node_.buffer().data();
    Completion recvs[1];
    Nanos start = monotonic_ns(), end = end_time(start);
    for (uint64_t i = 0; i < goal && monotonic_ns() < end; ++i) {
      Nanos t0 = monotonic_ns();
      size_t nrecv = 0;
      int rc = kOk;
      switch (p_.test) {
        case BenchTest::kWrite: {
          uint8_t tag = tag_of(i);
          buf[size_ - 1] = tag;
          if (int err = node_.post_write(i, 0, len(), region_))
            return fail(kWrFailed, "post_write failed: {}", std::strerror(err));
          ++outstanding;
          const uint8_t* last = buf + region_ + size_ - 1;
          rc = wait_for([&] { return read_byte(last) == tag; }, outstanding, recvs, nrecv);
          break;
        }
        case BenchTest::kSend: {
          if (int err = node_.post_send(i, 0, len()))
            return fail(kWrFailed, "post_send failed: {}", std::strerror(err));
          ++outstanding;
          rc = wait_for([&] { return nrecv == 1; }, outstanding, recvs, nrecv);
          if (rc == kOk && p_.verify &&
              (recvs[0].byte_len != size_ || find_mismatch({buf + region_, size_}, seed_) != -1))
            return fail(kVerify, "message {} came back wrong ({} bytes)", i, recvs[0].byte_len);
          if (rc == kOk) {
            if (int err = node_.post_recv(i, region_, static_cast<uint32_t>(region_)))
              return fail(kWrFailed, "post_recv failed: {}", std::strerror(err));
          }
          break;
        }
        case BenchTest::kRead:
        case BenchTest::kAtomic:
          if (int err = post_one(i)) return fail(kWrFailed, "post failed: {}", std::strerror(err));
          ++outstanding;
          rc = wait_for([&] { return outstanding == 0; }, outstanding, recvs, nrecv);
          break;
      }
      if (rc != kOk) return rc;
      Nanos dt = monotonic_ns() - t0;
      // Ping-pong tests report half the round trip, as perftest's write_lat and send_lat do.
      bool pingpong = p_.test == BenchTest::kWrite || p_.test == BenchTest::kSend;
      samples.push_back(pingpong ? dt / 2 : dt);
    }
    // Let the last signalled writes or sends complete before the next size reuses the buffers.
    size_t nrecv_tail = 0;
    int rc = wait_for([&] { return outstanding == 0; }, outstanding, recvs, nrecv_tail);
    if (rc != kOk) return rc;
    out.iterations = samples.size();
    out.lat = summarize_latency(samples);
    return kOk;
  }

  // Bounded like the completion record: a longer run keeps its first kMaxIntervals rows.
  static constexpr size_t kMaxIntervals = 1u << 20;
  void sample_interval(Nanos since_start, Nanos span, uint64_t messages) {
    if (intervals_.size() >= kMaxIntervals) return;
    std::vector<Counter> cs = node_.qp_counters();
    IntervalSample s;
    s.bytes = size_;
    s.t_s = static_cast<double>(since_start) / 1e9;
    uint64_t per = p_.test == BenchTest::kAtomic ? 8 : size_;
    s.gbps = span ? static_cast<double>(messages * per) * 8 / static_cast<double>(span) : 0;
    s.rate_mbps = find_counter(cs, "rp_rate_mbps");
    s.low_mbps = std::min(low_mbps_, s.rate_mbps);
    low_mbps_ = UINT64_MAX;
    s.rate_cuts = find_counter(cs, "rp_cnp_rate_cuts");
    s.cnps_handled = find_counter(cs, "rp_cnp_handled");
    intervals_.push_back(s);
    if (o_.json_path != "-") {
      fmt::print("{}", format_interval(s));
      std::fflush(stdout);
    }
  }

  const BenchOptions& o_;
  const BenchParams& p_;
  Node& node_;
  uint64_t region_;
  uint32_t seed_ = 0;
  uint64_t size_ = 0;
  uint64_t recv_posted_ = 0;
  std::vector<bool> seen_;
  std::vector<IntervalSample> intervals_;
  uint64_t low_mbps_ = UINT64_MAX;  // lowest DCQCN rate read in the current interval
};

// ---- Server ------------------------------------------------------------------------------------

class Server {
 public:
  Server(const BenchOptions& o, const BenchParams& p, Node& node, OobChannel& ch, uint64_t region)
      : o_(o), p_(p), node_(node), ch_(ch), region_(region) {}

  // Prepares a size (phase 0), serves it until the client's phase 1, and returns the verdict.
  int serve(const Step& start) {
    seed_ = step_seed(p_, start.index);
    size_ = start.bytes;
    auto buf = node_.buffer();
    fill_pattern(buf.subspan(0, region_), seed_);
    poison(buf.subspan(region_, region_), seed_);
    buf[region_ + std::max<uint64_t>(size_, 1) - 1] = 0;
    if (p_.test == BenchTest::kAtomic) std::memset(buf.data() + region_, 0, 8);
    served_ = 0;
    received_ = 0;
    status_ = 0;
    mismatch_ = -1;
    top_up_recvs();
    StepAck ack{start.index, static_cast<uint32_t>(status_), -1};
    if (int err = ch_.send(OobType::kStepAck, encode(ack)))
      return fail(kOob, "out-of-band send: {}", std::strerror(err));
    Step end;
    if (int rc = serve_until_end(end)) return rc;
    if (status_ == 0) verify(end.iterations);
    StepAck verdict{start.index, static_cast<uint32_t>(status_), mismatch_};
    if (int err = ch_.send(OobType::kStepAck, encode(verdict)))
      return fail(kOob, "out-of-band send: {}", std::strerror(err));
    return kOk;
  }

 private:
  void top_up_recvs() {
    if (p_.test != BenchTest::kSend) return;
    while (recv_posted_ < p_.depth) {
      if (int err = node_.post_recv(recv_posted_, region_, static_cast<uint32_t>(region_))) {
        fail(kWrFailed, "post_recv failed: {}", std::strerror(err));
        status_ = err;
        return;
      }
      ++recv_posted_;
    }
  }

  void verify(uint64_t iterations) {
    if (!p_.verify || iterations == 0) return;
    auto buf = node_.buffer();
    if (p_.test == BenchTest::kWrite) {
      uint64_t n = p_.mode == BenchMode::kLatency ? size_ - 1 : size_;
      mismatch_ = find_mismatch(buf.subspan(region_, n), seed_);
    } else if (p_.test == BenchTest::kAtomic && p_.mode == BenchMode::kBandwidth) {
      uint64_t v;
      std::memcpy(&v, buf.data() + region_, 8);
      if (v != iterations) {
        fmt::print(stderr, "uroce bench: counter is {} after {} fetch-and-adds\n", v, iterations);
        mismatch_ = 0;
      }
    }
    if (mismatch_ >= 0) status_ = EIO;
  }

  void on_completion(const Completion& wc) {
    if (wc.status != WcStatus::kSuccess) {
      fmt::print(stderr, "uroce bench: server work request {} failed: {}\n", wc.wr_id,
                 wc_status_name(wc.status));
      status_ = EIO;
      return;
    }
    if (wc.opcode != WcOpcode::kRecv) return;
    --recv_posted_;
    ++received_;
    uint8_t* b = node_.buffer().data() + region_;
    if (p_.verify && status_ == 0 &&
        (wc.byte_len != size_ || find_mismatch({b, size_}, seed_) != -1)) {
      fmt::print(stderr, "uroce bench: message {} of {} bytes arrived wrong ({} bytes)\n",
                 received_, size_, wc.byte_len);
      status_ = EIO;
      mismatch_ = 0;
    }
    top_up_recvs();
    if (p_.mode == BenchMode::kLatency) {
      if (int err = node_.post_send(received_, 0, static_cast<uint32_t>(size_))) status_ = err;
    }
  }

  // Ping-pong write: answer each tag that lands in B with the same tag from A.
  void answer_writes() {
    uint8_t* buf = node_.buffer().data();
    uint8_t want = tag_of(served_);
    if (read_byte(buf + region_ + size_ - 1) != want) return;
    buf[size_ - 1] = want;
    if (int err = node_.post_write(served_, 0, static_cast<uint32_t>(size_), region_))
      status_ = err;
    ++served_;
  }

  int serve_until_end(Step& end) {
    Completion wc[64];
    bool have_end = false;
    Nanos last = monotonic_ns();
    Nanos next_oob_check = 0;
    for (;;) {
      if (p_.mode == BenchMode::kLatency && p_.test == BenchTest::kWrite && size_ > 0 &&
          status_ == 0)
        answer_writes();
      node_.pump_or_wait(ch_.fd(), 1'000'000);
      size_t n = node_.poll_cq(wc);
      for (size_t i = 0; i < n; ++i) on_completion(wc[i]);
      if (n) last = monotonic_ns();
      // The client's end-of-run message is looked for every 200 us, not every pass: a poll()
      // per pass put a system call into every ping-pong half trip.
      if (!have_end && monotonic_ns() >= next_oob_check) {
        next_oob_check = monotonic_ns() + 200'000;
        pollfd pfd{ch_.fd(), POLLIN, 0};
        if (::poll(&pfd, 1, 0) > 0) {
          auto m = ch_.expect(OobType::kStep, kOobTimeoutMs);
          if (!m) return fail(kOob, "client went away mid-run: {}", std::strerror(m.error()));
          auto s = decode_step(m->payload);
          if (!s || s->phase != 1) return fail(kOob, "out-of-band protocol error");
          end = *s;
          have_end = true;
          last = monotonic_ns();
        }
      }
      // A send test ends when every message the client completed has been received here too.
      if (have_end && (p_.test != BenchTest::kSend || received_ >= end.iterations || status_ != 0))
        return kOk;
      // Before the client's phase 1 a one-sided test has nothing to complete here, and the client
      // ends the wait (or its closed socket does); after it, receives must keep arriving.
      if (have_end && n == 0 && monotonic_ns() - last > Nanos(o_.stall_timeout_s) * 1'000'000'000)
        return fail(kStalled, "no progress for {} s", o_.stall_timeout_s);
    }
  }

  const BenchOptions& o_;
  const BenchParams& p_;
  Node& node_;
  OobChannel& ch_;
  uint64_t region_;
  uint32_t seed_ = 0;
  uint64_t size_ = 0;
  uint64_t served_ = 0, received_ = 0, recv_posted_ = 0;
  int status_ = 0;
  int64_t mismatch_ = -1;
};

NodeOptions node_options(const BenchOptions& o, const BenchParams& p) {
  NodeOptions n;
  n.address = o.address;
  n.mtu = p.mtu;
  n.depth = p.depth;
  n.recv_depth = p.depth;
  n.buffer_bytes = bench_buffer_bytes(p);
  n.timeout = o.timeout;
  n.retry_cnt = o.retry_cnt;
  n.rnr_retry = o.rnr_retry;
  n.pcap_path = o.pcap_path;
  n.link = o.link;
  n.roce_v1 = o.roce_v1;
  n.vlan_id = o.vlan_id;
  n.raw_unbatched = o.raw_unbatched;
  n.xdp_zero_copy = o.xdp_zero_copy;
  n.xdp_generic = o.xdp_generic;
  n.congestion = o.congestion;
  n.loss_recovery = o.loss_recovery;
  n.write_segments = o.write_segments;
  n.max_psn_window = o.max_psn_window;
  return n;
}

// Both sides: swap connection data, bring the QP to RTS, and agree that both are there.
int exchange_and_connect(OobChannel& ch, Node& node, bool server, ConnInfo& remote) {
  ConnInfo local = node.local_info();
  if (server) {
    if (int err = ch.send(OobType::kConnInfo, encode(local)))
      return fail(kOob, "out-of-band send: {}", std::strerror(err));
  }
  auto m = ch.expect(OobType::kConnInfo, kOobTimeoutMs);
  if (!m) return fail(kOob, "no connection data from the peer: {}", std::strerror(m.error()));
  auto r = decode_conn_info(m->payload);
  if (!r) return fail(kOob, "malformed connection data from the peer");
  remote = *r;
  if (!server) {
    if (int err = ch.send(OobType::kConnInfo, encode(local)))
      return fail(kOob, "out-of-band send: {}", std::strerror(err));
  }
  if (int err = node.connect(remote))
    return fail(kSetup, "cannot connect the QP: {}", std::strerror(err));
  if (int err = ch.send(OobType::kReady, {}))
    return fail(kOob, "out-of-band send: {}", std::strerror(err));
  auto ready = ch.expect(OobType::kReady, kOobTimeoutMs);
  if (!ready) return fail(kOob, "peer never became ready: {}", std::strerror(ready.error()));
  return kOk;
}

RunInfo run_info(const BenchOptions& o, Node& node, const ConnInfo& remote) {
  RunInfo info;
  info.test = test_name(o.params.test);
  info.mode = o.params.mode == BenchMode::kLatency ? "lat" : "bw";
  info.device = node.device_name() + " (" + o.address + ")";
  info.mtu = o.params.mtu;
  info.depth = o.params.depth;
  info.cq_mod = o.params.mode == BenchMode::kBandwidth ? o.cq_mod : 1;
  info.verify = o.params.verify;
  ConnInfo l = node.local_info();
  info.local = {l.qpn, l.psn, l.rkey, l.addr, gid_to_string(l.gid)};
  info.remote = {remote.qpn, remote.psn, remote.rkey, remote.addr, gid_to_string(remote.gid)};
  return info;
}

using CounterList = std::vector<std::pair<std::string, uint64_t>>;

CounterList to_list(const std::vector<Counter>& cs) {
  CounterList l;
  for (const auto& c : cs) l.emplace_back(std::string(c.name), c.value);
  return l;
}

void print_counters(std::FILE* f, const CounterList& local, const CounterList& remote) {
  fmt::print(f, " {:<28} {:>16} {:>16}\n", "counter", "local", "remote");
  for (size_t i = 0; i < local.size(); ++i) {
    uint64_t r = 0;
    for (const auto& [name, value] : remote)
      if (name == local[i].first) r = value;
    fmt::print(f, " {:<28} {:>16} {:>16}\n", local[i].first, local[i].second, r);
  }
}

int write_stats_file(const std::string& path, const CounterList& local, const CounterList& remote) {
  std::ofstream f(path);
  for (const auto& [n, v] : local) f << "local." << n << ' ' << v << '\n';
  for (const auto& [n, v] : remote) f << "remote." << n << ' ' << v << '\n';
  f.close();
  return f ? kOk : fail(kSetup, "cannot write {}", path);
}

}  // namespace

uint64_t bench_buffer_bytes(const BenchParams& p) {
  return 2 * region_bytes(p);
}

int run_bench_server(const BenchOptions& o) {
  auto listener = OobListener::listen(o.address, o.port);
  if (!listener)
    return fail(kSetup, "cannot listen on {}:{}: {}", o.address, o.port,
                std::strerror(listener.error()));
  if (!o.quiet) fmt::print("uroce bench: waiting for a client on {}:{}\n", o.address, o.port);
  std::fflush(stdout);
  auto ch = listener->accept(o.accept_timeout_s * 1000);
  if (!ch)
    return fail(kOob, "no client within {} s: {}", o.accept_timeout_s, std::strerror(ch.error()));
  auto pm = ch->expect(OobType::kParams, kOobTimeoutMs);
  if (!pm) return fail(kOob, "no parameters from the client: {}", std::strerror(pm.error()));
  auto params = decode_bench_params(pm->payload);
  if (!params) return fail(kOob, "malformed or out-of-range parameters from the client");
  std::string error;
  auto node = Node::open(node_options(o, *params), error);
  if (!node) {
    std::string text = "server: " + error;
    (void)ch->send(OobType::kError, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
    return fail(kSetup, "{}", error);
  }
  ConnInfo remote;
  if (int rc = exchange_and_connect(*ch, *node, true, remote)) return rc;
  Server server(o, *params, *node, *ch, region_bytes(*params));
  for (;;) {
    auto m = ch->recv(kOobTimeoutMs * 10);
    if (!m) return fail(kOob, "client went away: {}", std::strerror(m.error()));
    if (m->type == OobType::kBye) break;
    auto s = m->type == OobType::kStep ? decode_step(m->payload) : Result<Step>(Err(EPROTO));
    if (!s || s->phase != 0) return fail(kOob, "out-of-band protocol error");
    if (int rc = server.serve(*s)) return rc;
  }
  std::string text = counters_text(node->device_counters());
  (void)ch->send(OobType::kCounters, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  if (!o.quiet) fmt::print("uroce bench: run complete\n");
  return kOk;
}

int run_bench_client(const BenchOptions& o) {
  const BenchParams& p = o.params;
  std::string error;
  auto node = Node::open(node_options(o, p), error);
  if (!node) return fail(kSetup, "{}", error);
  auto ch = OobChannel::connect(o.peer, o.port, o.accept_timeout_s * 1000, o.address);
  if (!ch)
    return fail(kOob, "cannot reach the server at {}:{}: {}", o.peer, o.port,
                std::strerror(ch.error()));
  if (int err = ch->send(OobType::kParams, encode(p)))
    return fail(kOob, "out-of-band send: {}", std::strerror(err));
  ConnInfo remote;
  if (int rc = exchange_and_connect(*ch, *node, false, remote)) {
    if (!ch->last_peer_error().empty()) fail(rc, "{}", ch->last_peer_error());
    return rc;
  }
  RunInfo info = run_info(o, *node, remote);
  bool table = o.json_path != "-";
  bool lat = p.mode == BenchMode::kLatency;
  if (table) {
    if (o.congestion.algorithm != CcAlgorithm::kOff || o.loss_recovery != LossRecovery::kGoBackN)
      fmt::print(" Congestion control: {} (line rate {} Gb/s), loss recovery: {}\n",
                 cc_algorithm_name(o.congestion.algorithm), o.congestion.line_rate_bps / 1e9,
                 loss_recovery_name(o.loss_recovery));
    fmt::print("{}{}", format_header(info), lat ? format_lat_columns() : format_bw_columns());
    std::fflush(stdout);
  }
  Json json;
  json.begin_object();
  json_run_info(json, info);
  json.begin_array("results");
  Client client(o, *node, region_bytes(p));
  int rc = kOk;
  for (uint32_t i = 0; i < p.sizes.size() && rc == kOk; ++i) {
    uint64_t size = p.sizes[i];
    if (int err = ch->send(OobType::kStep, encode(Step{i, 0, size, 0})))
      return fail(kOob, "out-of-band send: {}", std::strerror(err));
    auto ack = ch->expect(OobType::kStepAck, kOobTimeoutMs);
    if (!ack)
      return fail(kOob, "server did not start size {}: {}", size, std::strerror(ack.error()));
    StepOutcome out = client.run(i, size);
    if (out.rc != kOk) return out.rc;
    if (int err = ch->send(OobType::kStep, encode(Step{i, 1, size, out.iterations})))
      return fail(kOob, "out-of-band send: {}", std::strerror(err));
    auto verdict_msg = ch->expect(OobType::kStepAck, kOobTimeoutMs);
    if (!verdict_msg)
      return fail(kOob, "no verdict from the server: {}", std::strerror(verdict_msg.error()));
    auto verdict = decode_step_ack(verdict_msg->payload);
    if (!verdict) return fail(kOob, "malformed verdict from the server");
    int64_t local_bad = client.verify_local(out.iterations);
    if (verdict->status != 0 || verdict->mismatch_at >= 0 || local_bad >= 0) {
      rc = fail(kVerify,
                "size {}: data verification failed (server status {}, server byte {}, "
                "local byte {})",
                size, verdict->status, verdict->mismatch_at, local_bad);
    }
    if (lat) {
      out.lat.samples = out.iterations;
      if (table) fmt::print("{}", format_lat_row(size, out.lat));
      json_lat(json, size, out.lat);
    } else {
      if (table) fmt::print("{}", format_bw_row(out.bw));
      json_bw(json, out.bw);
    }
    std::fflush(stdout);
  }
  json.end_array();
  json.begin_object("cc")
      .field("algorithm", cc_algorithm_name(o.congestion.algorithm))
      .field("line_rate_gbps", o.congestion.line_rate_bps / 1e9)
      .field("recovery", loss_recovery_name(o.loss_recovery))
      .end_object();
  json.field("write_segments", write_segments_name(o.write_segments));
  if (o.interval_s > 0) {
    json.begin_array("intervals");
    for (const IntervalSample& s : client.intervals()) {
      json.begin_object()
          .field("bytes", s.bytes)
          .field("t_s", s.t_s)
          .field("gbps", s.gbps)
          .field("dcqcn_rate_mbps", s.rate_mbps)
          .field("dcqcn_low_mbps", s.low_mbps)
          .field("rate_cuts", s.rate_cuts)
          .field("cnps_handled", s.cnps_handled)
          .end_object();
    }
    json.end_array();
  }
  (void)ch->send(OobType::kBye, {});
  auto cm = ch->expect(OobType::kCounters, kOobTimeoutMs);
  CounterList local = to_list(node->device_counters());
  CounterList remote_counters = cm ? parse_counters(cm->payload) : CounterList{};
  if (table) fmt::print("{}", format_rule());
  if (o.print_counters && table) print_counters(stdout, local, remote_counters);
  json.begin_object("counters");
  for (auto* side : {&local, &remote_counters}) {
    json.begin_object(side == &local ? "local" : "remote");
    for (const auto& [n, v] : *side) json.field(n, v);
    json.end_object();
  }
  json.end_object().field("verified", p.verify && rc == kOk).end_object();
  if (!o.json_path.empty()) {
    if (o.json_path == "-") {
      fmt::print("{}\n", json.str());
    } else {
      std::ofstream f(o.json_path);
      f << json.str() << '\n';
      if (!f) return fail(kSetup, "cannot write {}", o.json_path);
    }
  }
  if (!o.stats_path.empty())
    if (int src = write_stats_file(o.stats_path, local, remote_counters)) return src;
  return rc;
}

int run_bench_demo(const BenchOptions& o) {
  BenchOptions server = o;
  server.address = o.peer;
  server.quiet = true;
  server.pcap_path.clear();
  server.port = o.port;
  pid_t pid = ::fork();
  if (pid < 0) return fail(kSetup, "fork: {}", std::strerror(errno));
  if (pid == 0) {
    std::fclose(stdin);
    ::_exit(run_bench_server(server));
  }
  int rc = run_bench_client(o);
  int status = 0;
  // The server ends when the client says goodbye or goes away; a bounded wait still guards it.
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (i == 199) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
    ::usleep(50'000);
  }
  int server_rc = WIFEXITED(status) ? WEXITSTATUS(status) : kSetup;
  return rc != kOk ? rc : server_rc;
}

}  // namespace uroce::tools
