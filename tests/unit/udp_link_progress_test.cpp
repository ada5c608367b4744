// The progress engine over real UDP links: two verbs devices on 127.77.40.x, each driven only by
// its engine's thread. The target application never calls anything after setup (it sleeps), yet
// RDMA WRITEs land in its memory and complete at the initiator; idle engines block instead of
// spinning.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "api/nic.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/qp.h"

namespace uroce::api {
namespace {

using namespace std::chrono_literals;
using transport::QpState;

// The value of a verbs call that must succeed, or null with a test failure naming it.
template <typename T>
std::unique_ptr<T> take(Result<std::unique_ptr<T>> r, const char* what) {
  if (!r.ok()) {
    ADD_FAILURE() << what << ": " << std::strerror(r.error());
    return nullptr;
  }
  return std::move(*r);
}

// One side: a NIC (link, device, engine; the engine's thread not started) and the verbs objects of
// one RC QP with one registered buffer.
struct Side {
  std::unique_ptr<Nic> nic;
  verbs::Device* dev = nullptr;
  ProgressEngine* engine = nullptr;
  std::unique_ptr<verbs::Context> ctx;
  std::unique_ptr<verbs::ProtectionDomain> pd;
  std::unique_ptr<verbs::CompletionQueue> cq;
  std::vector<uint8_t> buf;
  std::unique_ptr<verbs::MemoryRegion> mr;
  std::unique_ptr<verbs::QueuePair> qp;

  Side(const std::string& addr, size_t bytes, const ProgressOptions& progress,
       bool transmit_before_receive = false)
      : buf(bytes) {
    NicOptions o;
    o.link.address = addr;
    o.device.transmit_before_receive = transmit_before_receive;
    o.device.port.active_mtu = verbs::Mtu::k4096;
    o.progress = progress;
    if (!(nic = take(open_nic(o), ("open " + addr).c_str()))) return;
    dev = &nic->device();
    engine = &nic->engine();
    if (!(ctx = take(dev->open(), "open")) || !(pd = take(ctx->alloc_pd(), "alloc_pd")) ||
        !(cq = take(ctx->create_cq(1024), "create_cq")))
      return;
    mr = take(pd->reg_mr(buf.data(), buf.size(),
                         transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                             transport::kAccessRemoteRead),
              "reg_mr");
    verbs::QpInitAttr init;
    init.send_cq = init.recv_cq = cq.get();
    init.cap.max_send_wr = 256;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_wr = 16;
    init.cap.max_recv_sge = 1;
    qp = take(pd->create_qp(init), "create_qp");
  }
  ~Side() {
    if (engine) engine->stop();  // no pass while the objects go
    // Children before parents (verbs/device.h), the NIC last.
    qp.reset();
    mr.reset();
    cq.reset();
    pd.reset();
    ctx.reset();
    nic.reset();
  }

  void connect(const Side& peer) {
    verbs::QpAttr a;
    a.port_num = 1;
    a.qp_access_flags = transport::kAccessRemoteWrite | transport::kAccessRemoteRead;
    a.qp_state = QpState::kInit;
    ASSERT_EQ(qp->modify(a, verbs::kQpState | verbs::kQpPkeyIndex | verbs::kQpPort |
                                verbs::kQpAccessFlags),
              0);
    a.qp_state = QpState::kRtr;
    a.path_mtu = verbs::Mtu::k4096;
    a.dest_qp_num = peer.qp->qp_num();
    a.rq_psn = 1000;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = true;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = peer.dev->gid();
    ASSERT_EQ(
        qp->modify(a, verbs::kQpState | verbs::kQpAv | verbs::kQpPathMtu | verbs::kQpDestQpn |
                          verbs::kQpRqPsn | verbs::kQpMaxDestRdAtomic | verbs::kQpMinRnrTimer),
        0);
    a.qp_state = QpState::kRts;
    a.sq_psn = 1000;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    ASSERT_EQ(qp->modify(a, verbs::kQpState | verbs::kQpSqPsn | verbs::kQpTimeout |
                                verbs::kQpRetryCnt | verbs::kQpRnrRetry | verbs::kQpMaxQpRdAtomic),
              0);
  }
};

// An initiator and a target on PREFIX.1 and PREFIX.2 with 64 KiB buffers, their RC QPs connected.
struct ConnectedPair {
  Side init, target;
  ConnectedPair(const std::string& prefix, const ProgressOptions& o)
      : init(prefix + ".1", 64 << 10, o), target(prefix + ".2", 64 << 10, o) {
    if (!init.qp || !target.qp) return;
    init.connect(target);
    target.connect(init);
  }
};

// Options for the policy tests: spin `spin_ns` after traffic, no yield phase, and sleeps and an
// application's polling window longer than any test, so that only the events under test end them
// (app_stopped_polling() ends the window).
ProgressOptions policy_options(Nanos spin_ns) {
  ProgressOptions o;
  o.spin_ns = spin_ns;
  o.yield_ns = 0;
  o.max_sleep_ns = 10'000'000'000;
  o.app_driving_ns = 10'000'000'000;
  return o;
}

// A signalled 4 KiB RDMA WRITE from the start of `from`'s buffer to `to`'s, gathering from `sge`.
transport::SendWr write_4k(const Side& from, const Side& to, transport::Sge& sge, uint64_t id) {
  sge = {reinterpret_cast<uint64_t>(from.buf.data()), 4096, from.mr->lkey()};
  transport::SendWr wr;
  wr.wr_id = id;
  wr.opcode = transport::WrOpcode::kRdmaWrite;
  wr.flags = transport::kSendSignaled;
  wr.sg_list = {&sge, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(to.buf.data());
  wr.rkey = to.mr->rkey();
  return wr;
}

// Posts `count` signalled 4 KiB WRITEs from `init` to `target`, one at a time: after each post
// calls `posted()`, then until it completes calls `step()` (which must move the packets) and polls
// init's CQ, pausing `pause` between steps. Returns the completions (fewer if 10 s pass).
template <typename Posted, typename Step>
std::vector<transport::Completion> write_one_at_a_time(const Side& init, const Side& target,
                                                       uint64_t count, Posted posted, Step step,
                                                       std::chrono::microseconds pause) {
  transport::Sge sge;
  transport::SendWr wr = write_4k(init, target, sge, 0);
  std::vector<transport::Completion> done;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (uint64_t i = 0; i < count && std::chrono::steady_clock::now() < deadline; ++i) {
    wr.wr_id = i;
    if (init.qp->post_send(wr) != 0) break;
    posted();
    while (done.size() <= i && std::chrono::steady_clock::now() < deadline) {
      step();
      std::array<transport::Completion, 4> wc;
      const size_t got = init.cq->poll(wc);
      done.insert(done.end(), wc.begin(), wc.begin() + got);
      std::this_thread::sleep_for(pause);
    }
  }
  return done;
}

TEST(ProgressEngine, StartsStopsAndRestartsCleanly) {
  ProgressOptions o;
  o.max_sleep_ns = 10'000'000'000;  // so only the kick can end the wait quickly
  Side a("127.77.67.1", 4096, o);
  ASSERT_TRUE(a.engine);
  ProgressEngine& e = *a.engine;
  EXPECT_FALSE(e.running());
  ASSERT_EQ(e.start(), 0);
  EXPECT_EQ(e.start(), EBUSY);
  std::this_thread::sleep_for(20ms);
  e.stop();
  EXPECT_FALSE(e.running());
  e.stop();  // idempotent
  ASSERT_EQ(e.start(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  e.kick();
  e.stop();  // wakes a blocked thread at once rather than after max_sleep_ns
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

TEST(ProgressEngine, WritesCompleteWhileTheTargetSleepsAndIdleEnginesBlock) {
  constexpr size_t kBytes = 1 << 20, kChunk = 64 << 10;
  ProgressOptions o;
  o.max_sleep_ns = 10'000'000'000;  // nothing but packets, deadlines and kicks wakes an engine
  Side init("127.77.40.1", kBytes, o), target("127.77.40.2", kBytes, o);
  ASSERT_TRUE(init.qp && target.qp);
  init.connect(target);
  target.connect(init);
  for (size_t i = 0; i < kBytes; ++i) init.buf[i] = static_cast<uint8_t>(i * 7 + i / 4096);

  ProgressEngine &ei = *init.engine, &et = *target.engine;
  ASSERT_EQ(ei.start(), 0);
  ASSERT_EQ(et.start(), 0);
  // Both idle: asleep in ppoll within a quarter millisecond (allow for a loaded machine).
  for (int i = 0; i < 2000 && (ei.stats().sleeps == 0 || et.stats().sleeps == 0); ++i)
    std::this_thread::sleep_for(1ms);
  // Once asleep they stay so: no packet, no deadline and no kick comes, and max_sleep_ns is 10 s.
  ASSERT_EQ(ei.stats().sleeps, 1u);
  ASSERT_EQ(et.stats().sleeps, 1u);

  // The target's application thread does nothing from here on; this thread is the initiator's.
  const size_t n = kBytes / kChunk;
  std::vector<transport::Sge> sges(n);
  for (size_t i = 0; i < n; ++i) {
    sges[i] = {reinterpret_cast<uint64_t>(init.buf.data() + i * kChunk), kChunk, init.mr->lkey()};
    transport::SendWr wr;
    wr.wr_id = i;
    wr.opcode = transport::WrOpcode::kRdmaWrite;
    wr.flags = transport::kSendSignaled;
    wr.sg_list = {&sges[i], 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(target.buf.data() + i * kChunk);
    wr.rkey = target.mr->rkey();
    ASSERT_EQ(init.qp->post_send(wr), 0);
    ei.kick();
  }
  std::vector<transport::Completion> done;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (done.size() < n && std::chrono::steady_clock::now() < deadline) {
    std::array<transport::Completion, 16> wc;
    const size_t got = init.cq->poll(wc);
    done.insert(done.end(), wc.begin(), wc.begin() + got);
    if (got == 0) std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(done.size(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(done[i].status, transport::WcStatus::kSuccess) << i;
    EXPECT_EQ(done[i].wr_id, i);
  }
  EXPECT_EQ(target.buf, init.buf);
  // The first post found the initiator's engine asleep; later ones kick only if it slept again
  // in between, which is the scheduler's choice.
  EXPECT_GE(ei.stats().kicks_sent, 1u);
  EXPECT_LE(ei.stats().kicks_sent, n);

  // Idle again: after spin and yield (a quarter millisecond) both block; in 300 ms they make a
  // handful of passes instead of millions of spins.
  std::this_thread::sleep_for(20ms);
  const ProgressStats before = et.stats();
  std::this_thread::sleep_for(300ms);
  const ProgressStats after = et.stats();
  EXPECT_LT(after.passes - before.passes, 100u);
  ei.stop();
  et.stop();
  // Only a packet could end the target's first sleep; each later sleep ends once at most.
  const ProgressStats target_final = et.stats();
  EXPECT_GE(target_final.wakeups_by_packet, 1u);
  EXPECT_LE(target_final.wakeups_by_packet, target_final.sleeps);
  EXPECT_EQ(target.nic->link().counters().rx_drop_bad_icrc, 0u);
}

// Posts `n` signalled WRITEs of `chunk` bytes from init.buf to target.buf at the same offsets.
void post_writes(Side& init, Side& target, size_t n, size_t chunk,
                 std::vector<transport::Sge>& sges) {
  sges.resize(n);
  for (size_t i = 0; i < n; ++i) {
    sges[i] = {reinterpret_cast<uint64_t>(init.buf.data() + i * chunk),
               static_cast<uint32_t>(chunk), init.mr->lkey()};
    transport::SendWr wr;
    wr.wr_id = i;
    wr.opcode = transport::WrOpcode::kRdmaWrite;
    wr.flags = transport::kSendSignaled;
    wr.sg_list = {&sges[i], 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(target.buf.data() + i * chunk);
    wr.rkey = target.mr->rkey();
    ASSERT_EQ(init.qp->post_send(wr), 0);
  }
}

TEST(ProgressEngine, OneCallerThreadDrivesBothDevicesWithoutEngineThreads) {
  // uroce bench's shape: no engine thread, the application's own loop is the NIC.
  constexpr size_t kBytes = 256 << 10, kChunk = 16 << 10, kN = kBytes / kChunk;
  ProgressOptions o;
  o.spin_ns = 100'000;
  o.yield_ns = 0;
  Side init("127.77.68.1", kBytes, o), target("127.77.68.2", kBytes, o);
  ASSERT_TRUE(init.qp && target.qp);
  init.connect(target);
  target.connect(init);
  for (size_t i = 0; i < kBytes; ++i) init.buf[i] = static_cast<uint8_t>(i * 13 + i / 1000);
  ProgressEngine &ei = *init.engine, &et = *target.engine;
  std::vector<transport::Sge> sges;
  post_writes(init, target, kN, kChunk, sges);
  size_t done = 0, rounds = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (done < kN && std::chrono::steady_clock::now() < deadline) {
    ++rounds;
    ei.pump_or_wait(-1, 1'000'000);
    et.pump_or_wait(-1, 1'000'000);
    std::array<transport::Completion, 16> wc;
    const size_t got = init.cq->poll(wc);
    for (size_t i = 0; i < got; ++i) {
      EXPECT_EQ(wc[i].status, transport::WcStatus::kSuccess);
      EXPECT_EQ(wc[i].wr_id, done + i);
    }
    done += got;
  }
  ASSERT_EQ(done, kN);
  EXPECT_EQ(target.buf, init.buf);
  EXPECT_FALSE(ei.running());
  // Every pass ran on this thread, one per pump_or_wait.
  EXPECT_EQ(ei.stats().inline_passes, rounds);
  EXPECT_EQ(ei.stats().passes, rounds);
  EXPECT_EQ(et.stats().inline_passes, rounds);
  EXPECT_EQ(et.stats().passes, rounds);

  // Idle: once spin_ns has passed, pump_or_wait blocks for its max_wait instead of returning at
  // once, so a caller's loop does not burn the core.
  std::this_thread::sleep_for(1ms);
  const uint64_t sleeps = et.stats().sleeps;
  const auto t0 = std::chrono::steady_clock::now();
  et.pump_or_wait(-1, 30'000'000);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
  EXPECT_EQ(et.stats().sleeps, sleeps + 1);
}

TEST(ProgressEngine, ApplicationThreadsDriveBesideTheEngineThread) {
  // The ABI's shape: the engine thread runs, and posting threads also drive() the device; passes
  // never overlap (verbs/device.h), every WRITE completes once, in order.
  constexpr size_t kBytes = 512 << 10, kChunk = 8 << 10, kN = kBytes / kChunk;
  ProgressOptions o;
  o.spin_ns = 0;
  o.yield_ns = 0;
  Side init("127.77.43.1", kBytes, o), target("127.77.43.2", kBytes, o);
  ASSERT_TRUE(init.qp && target.qp);
  init.connect(target);
  target.connect(init);
  for (size_t i = 0; i < kBytes; ++i) init.buf[i] = static_cast<uint8_t>(i * 5 + i / 333);
  ProgressEngine &ei = *init.engine, &et = *target.engine;
  ASSERT_EQ(ei.start(), 0);
  ASSERT_EQ(et.start(), 0);
  std::vector<transport::Sge> sges;
  post_writes(init, target, kN, kChunk, sges);
  std::atomic<bool> finished{false};
  std::vector<std::thread> drivers;
  for (int t = 0; t < 2; ++t)
    drivers.emplace_back([&] {
      while (!finished.load()) {
        ei.drive();
        et.drive();
        std::this_thread::yield();
      }
    });
  std::vector<transport::Completion> done;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  // drive() only try_locks, so on a loaded machine (two cores, a sanitizer) the engine thread can
  // win every attempt while traffic flows; it sleeps once the transfer is over, so the drivers
  // keep going until one of their passes has run too.
  while ((done.size() < kN || ei.stats().inline_passes == 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::array<transport::Completion, 16> wc;
    const size_t got = init.cq->poll(wc);
    done.insert(done.end(), wc.begin(), wc.begin() + got);
    if (got == 0) ei.drive();
  }
  finished.store(true);
  for (auto& t : drivers) t.join();
  ASSERT_EQ(done.size(), kN);
  for (size_t i = 0; i < kN; ++i) {
    EXPECT_EQ(done[i].status, transport::WcStatus::kSuccess) << i;
    EXPECT_EQ(done[i].wr_id, i);
  }
  EXPECT_EQ(target.buf, init.buf);
  ei.stop();
  et.stop();
  // The loop above waited for a caller's pass; how the rest split between the callers and the
  // engine thread is the scheduler's choice.
  const ProgressStats init_final = ei.stats();
  EXPECT_GE(init_final.inline_passes, 1u);
  EXPECT_LE(init_final.inline_passes, init_final.passes);
}

TEST(ProgressEngine, APollingApplicationKeepsPacketsAndArmingACqHandsThemBack) {
  // The ABI's policy: while an application thread polls (drive(true)), the sleeping engine thread
  // is not woken by packets; once the program arms a CQ for events it is again.
  const ProgressOptions o = policy_options(0);
  // The initiator is driven by hand (its engine is never used).
  ConnectedPair pair("127.77.44", o);
  ASSERT_TRUE(pair.init.qp && pair.target.qp);
  Side &init = pair.init, &target = pair.target;
  ProgressEngine& et = *target.engine;
  ASSERT_EQ(et.start(), 0);
  et.drive(/*app_polls=*/true);
  std::this_thread::sleep_for(20ms);  // the thread goes to sleep, leaving packets to the app
  auto write_once = [&](uint64_t id) {
    transport::Sge sge;
    const transport::SendWr wr = write_4k(init, target, sge, id);
    ASSERT_EQ(init.qp->post_send(wr), 0);
    init.dev->progress(ProgressEngine::now_ns());
  };
  write_once(1);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(et.stats().wakeups_by_packet, 0u);  // the WRITE waits for the polling application

  et.app_stopped_polling();  // the program is about to block: the thread serves packets again
  write_once(2);
  std::vector<transport::Completion> done;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (done.size() < 2 && std::chrono::steady_clock::now() < deadline) {
    init.dev->progress(ProgressEngine::now_ns());
    std::array<transport::Completion, 4> wc;
    const size_t got = init.cq->poll(wc);
    done.insert(done.end(), wc.begin(), wc.begin() + got);
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].status, transport::WcStatus::kSuccess);
  et.stop();
}

TEST(ProgressEngine, TheThreadDoesNotSpinBesideAPollingApplication) {
  // The ABI's policy: the thread spins after traffic only while no application thread polls. Beside
  // a polling one it would take that thread's core; a spin longer than the test would show here as
  // thousands of passes on the thread, against the few of its wake-ups.
  const ProgressOptions o = policy_options(10'000'000'000);
  ConnectedPair pair("127.77.45", o);
  ASSERT_TRUE(pair.init.qp && pair.target.qp);
  Side &init = pair.init, &target = pair.target;
  ProgressEngine& et = *target.engine;
  ASSERT_EQ(et.start(), 0);
  // A thread that has just started spins as after traffic; the program's first poll stops it.
  et.drive(/*app_polls=*/true);
  std::this_thread::sleep_for(5ms);
  const ProgressStats before = et.stats();
  constexpr uint64_t kWrites = 20;
  // The target's program polls, so packets move on its thread and the engine's thread sees recent
  // traffic whenever it runs.
  const std::vector<transport::Completion> done = write_one_at_a_time(
      init, target, kWrites, [] {},
      [&] {
        init.dev->progress(ProgressEngine::now_ns());
        et.drive(/*app_polls=*/true);
      },
      1ms);
  ASSERT_EQ(done.size(), kWrites);
  std::this_thread::sleep_for(20ms);
  const ProgressStats s = et.stats();
  EXPECT_EQ(s.wakeups_by_packet, before.wakeups_by_packet);
  // Each of the thread's passes is one after a wake-up (a pass of the program's that found more
  // to do kicks it) or one that catches a post racing its sleep.
  const uint64_t thread_passes =
      (s.passes - s.inline_passes) - (before.passes - before.inline_passes);
  EXPECT_LE(thread_passes, 2 * (s.sleeps - before.sleeps + 1));
  et.stop();
}

TEST(ProgressEngine, APostDoesNotWakeTheThreadThatSleepsBesideAPollingApplication) {
  // Each post arms the QP's retransmission timer (67 ms at timeout 14). The thread asleep beside a
  // polling application wakes within app_driving_ns anyway, sooner than that timer: a post must not
  // kick it. (It did when the thread counted itself asleep until the device's next deadline, which
  // was "never" while nothing was outstanding: a wake-up per message that then shared the polling
  // thread's core, ib_send_lat's slow mode, docs/performance.md.)
  ProgressOptions o = policy_options(0);
  o.app_driving_ns = 50'000'000;
  ConnectedPair pair("127.77.47", o);
  ASSERT_TRUE(pair.init.qp && pair.target.qp);
  Side &init = pair.init, &target = pair.target;
  ProgressEngine& ei = *init.engine;
  ASSERT_EQ(ei.start(), 0);
  ei.drive(/*app_polls=*/true);  // the program polls: its first poll wakes the thread once
  std::this_thread::sleep_for(5ms);
  const ProgressStats before = ei.stats();
  constexpr uint64_t kWrites = 10;
  const std::vector<transport::Completion> done = write_one_at_a_time(
      init, target, kWrites, [&] { ei.drive(); },  // as ibv_post_send does
      [&] {
        target.dev->progress(ProgressEngine::now_ns());
        ei.drive(/*app_polls=*/true);
      },
      500us);
  ASSERT_EQ(done.size(), kWrites);
  for (const transport::Completion& c : done) EXPECT_EQ(c.status, transport::WcStatus::kSuccess);
  EXPECT_EQ(ei.stats().kicks_sent, before.kicks_sent);
  EXPECT_EQ(ei.stats().wakeups_by_kick, before.wakeups_by_kick);
  ei.stop();
}

// Polls `engine` as a program's empty ibv_poll_cq does, every `pause`, for `how_long`.
void poll_for(ProgressEngine& engine, std::chrono::milliseconds how_long,
              std::chrono::microseconds pause) {
  const auto end = std::chrono::steady_clock::now() + how_long;
  while (std::chrono::steady_clock::now() < end) {
    engine.drive(/*app_polls=*/true);
    std::this_thread::sleep_for(pause);
  }
}

// The policy options with a polling window of `driving_ns` whose looks grow to `max_ns`.
ProgressOptions growing_looks(Nanos driving_ns, Nanos max_ns) {
  ProgressOptions o = policy_options(0);
  o.app_driving_ns = driving_ns;
  o.app_driving_max_ns = max_ns;
  return o;
}

TEST(ProgressEngine, TheThreadLooksLessOftenAndRunsNoPassWhileAnApplicationKeepsPolling) {
  // Beside a program that keeps polling, the thread's only job is to notice when it stops. Each
  // look doubles the time to the next, from app_driving_ns to app_driving_max_ns, and runs no
  // pass (the program's passes run the timers too): over 300 ms with 2 ms / 16 ms that is about
  // 20 looks, where a look every app_driving_ns would be 150, each with a pass.
  ConnectedPair pair("127.77.54", growing_looks(2'000'000, 16'000'000));
  ASSERT_TRUE(pair.init.qp && pair.target.qp);
  ProgressEngine& et = *pair.target.engine;
  ASSERT_EQ(et.start(), 0);
  poll_for(et, 20ms, 100us);  // the thread has gone to sleep beside the program
  const ProgressStats before = et.stats();
  poll_for(et, 300ms, 100us);
  const ProgressStats s = et.stats();
  const uint64_t looks = s.wakeups_by_timeout - before.wakeups_by_timeout;
  // A program descheduled for longer than app_driving_ns (a loaded machine) starts the growth
  // again, or finds the thread listening to the socket instead (no looks at all), so the bound
  // leaves room for a few such stalls.
  EXPECT_LE(looks, 60u);
  const uint64_t thread_passes =
      (s.passes - s.inline_passes) - (before.passes - before.inline_passes);
  EXPECT_LE(thread_passes, 8u) << looks << " looks";
  et.stop();
}

TEST(ProgressEngine, TheThreadTakesOverFromAProgramThatStopsPollingWithoutArmingACq) {
  // The price of looking less often: a program that polled for long, then stops calling (it
  // computes) without ibv_req_notify_cq, has its packets handled once the thread next looks,
  // within app_driving_max_ns, by the thread alone.
  ConnectedPair pair("127.77.55", growing_looks(1'000'000, 8'000'000));
  ASSERT_TRUE(pair.init.qp && pair.target.qp);
  Side &init = pair.init, &target = pair.target;
  ProgressEngine& et = *target.engine;
  ASSERT_EQ(et.start(), 0);
  for (size_t i = 0; i < init.buf.size(); ++i) init.buf[i] = static_cast<uint8_t>(i * 11 + 3);
  poll_for(et, 60ms, 100us);  // long enough for the thread's looks to reach the cap
  const ProgressStats before = et.stats();
  // The target's program makes no call from here on.
  const std::vector<transport::Completion> done = write_one_at_a_time(
      init, target, 3, [] {}, [&] { init.dev->progress(ProgressEngine::now_ns()); }, 200us);
  ASSERT_EQ(done.size(), 3u);
  for (const transport::Completion& c : done) EXPECT_EQ(c.status, transport::WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(init.buf.begin(), init.buf.begin() + 4096, target.buf.begin()));
  const ProgressStats s = et.stats();
  // The thread placed them: at its next look, or woken by the first packet when it was
  // listening (a loaded machine can stall the polling loop past the window before it ends).
  EXPECT_EQ(s.inline_passes, before.inline_passes);
  et.stop();
}

uint64_t nic_counter(const Nic& nic, const std::string& name) {
  for (const verbs::Counter& c : nic.counters())
    if (c.name == name) return c.value;
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

// Pumps both sides' engines until `init`'s CQ has given `n` completions, or 10 s have passed.
std::vector<transport::Completion> pump_for_completions(Side& init, Side& target, size_t n) {
  std::vector<transport::Completion> done;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (done.size() < n && std::chrono::steady_clock::now() < deadline) {
    target.engine->pump();
    init.engine->pump();
    std::array<transport::Completion, 16> wc;
    const size_t got = init.cq->poll(wc);
    done.insert(done.end(), wc.begin(), wc.begin() + got);
  }
  return done;
}

TEST(ProgressEngine, APostFinishesASmallTailItselfBesideAPollingProgram) {
  // A 1 MiB WRITE is exactly a pass's budget, so the ACK this side owed left one packet behind,
  // and the kick for it woke the thread onto a core two spinning programs hold, once a message.
  // Beside a polling program a post now sends such a tail itself (up to 16 packets); more is the
  // thread's (or the next poll's) as before, and a program that is not polling gets one pass.
  ProgressOptions two_per_pass = policy_options(0);
  two_per_pass.budget = 2;
  ConnectedPair pair("127.77.69", two_per_pass);
  ASSERT_TRUE(pair.init.qp && pair.target.qp);
  ProgressEngine& e = *pair.init.engine;  // no thread: only the calls below run passes
  Side &init = pair.init, &target = pair.target;
  std::iota(init.buf.begin(), init.buf.end(), uint8_t{3});
  std::vector<transport::Sge> sges;
  sges.reserve(8);
  uint64_t next_id = 0;
  auto write = [&](size_t bytes) {
    sges.push_back({reinterpret_cast<uint64_t>(init.buf.data()), static_cast<uint32_t>(bytes),
                    init.mr->lkey()});
    transport::SendWr wr;
    wr.wr_id = next_id++;
    wr.opcode = transport::WrOpcode::kRdmaWrite;
    wr.flags = transport::kSendSignaled;
    wr.sg_list = {&sges.back(), 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(target.buf.data());
    wr.rkey = target.mr->rkey();
    EXPECT_EQ(init.qp->post_send(wr), 0);
  };
  auto sent = [&] { return init.nic->link().counters().tx_packets; };
  e.drive(/*app_polls=*/true);  // the program polls its CQ
  ProgressStats before = e.stats();
  write(4 * 4096);  // 4 packets: the budget's 2, then a tail of 2
  EXPECT_FALSE(e.posted(0));
  EXPECT_EQ(sent(), 4u);
  EXPECT_EQ(e.stats().passes, before.passes + 2);
  before = e.stats();
  write(16 * 4096);  // 32 packets: 2, then 16, and 14 left for the thread or the next poll
  write(16 * 4096);
  EXPECT_FALSE(e.posted(0));
  EXPECT_EQ(sent(), 4u + 18);
  EXPECT_EQ(e.stats().passes, before.passes + 2);
  e.app_stopped_polling();
  before = e.stats();
  const uint64_t at = sent();
  while (sent() < 4u + 32) e.drive();  // no program polls: a pass each, 2 packets each
  EXPECT_EQ(e.stats().passes, before.passes + (4u + 32 - at) / 2);

  const std::vector<transport::Completion> done = pump_for_completions(init, target, 3);
  ASSERT_EQ(done.size(), 3u);
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].status, transport::WcStatus::kSuccess);
    EXPECT_EQ(done[i].wr_id, i);
  }
  EXPECT_EQ(std::memcmp(target.buf.data(), init.buf.data(), init.buf.size()), 0);
}

TEST(ProgressEngine, APostIntoAFullPipeLeavesItsSendToTheNextPoll) {
  // perftest's ib_write_bw posts a WR per ibv_post_send; a pass per post made a send call per
  // 64 KiB message. With at least post_batch_packets unacknowledged and the program polling, a
  // post sends nothing itself: the next empty poll sends every such post in one pass.
  ProgressOptions o = policy_options(0);
  o.post_batch_packets = 8;
  ConnectedPair pair("127.77.48", o);
  ASSERT_TRUE(pair.init.qp && pair.target.qp);
  Side &init = pair.init, &target = pair.target;
  ProgressEngine& e = *init.engine;  // no thread: only the calls below run passes
  for (size_t i = 0; i < init.buf.size(); ++i) init.buf[i] = static_cast<uint8_t>(i * 7 + 1);
  constexpr size_t kChunk = 8 << 10;  // two packets per WRITE at MTU 4096
  constexpr size_t kWrites = (64 << 10) / kChunk;
  std::vector<transport::Sge> sges(kWrites);
  auto post = [&](size_t i) {
    sges[i] = {reinterpret_cast<uint64_t>(init.buf.data() + i * kChunk), kChunk, init.mr->lkey()};
    transport::SendWr wr;
    wr.wr_id = i;
    wr.opcode = transport::WrOpcode::kRdmaWrite;
    wr.flags = transport::kSendSignaled;
    wr.sg_list = {&sges[i], 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(target.buf.data() + i * kChunk);
    wr.rkey = target.mr->rkey();
    EXPECT_EQ(init.qp->post_send(wr), 0);
    return e.posted(init.qp->packets_in_flight_at_post());
  };
  e.drive(/*app_polls=*/true);  // the program polls its CQ
  // The target runs no pass: nothing is acknowledged, so the pipe only fills.
  for (size_t i = 0; i < kWrites / 2; ++i) EXPECT_FALSE(post(i)) << i;  // 0, 2, 4, 6 in flight
  EXPECT_EQ(init.nic->link().counters().tx_packets, 8u);
  const uint64_t calls = nic_counter(*init.nic, "link_tx_calls");
  EXPECT_EQ(calls, 4u);  // a send call per post
  const ProgressStats before = e.stats();
  for (size_t i = kWrites / 2; i < kWrites; ++i) EXPECT_TRUE(post(i)) << i;
  EXPECT_EQ(e.stats().posts_batched, before.posts_batched + kWrites / 2);
  EXPECT_EQ(e.stats().passes, before.passes);
  EXPECT_EQ(init.nic->link().counters().tx_packets, 8u);
  e.drive(/*app_polls=*/true);  // the next empty poll sends all four in one call
  EXPECT_EQ(init.nic->link().counters().tx_packets, 16u);
  EXPECT_EQ(nic_counter(*init.nic, "link_tx_calls"), calls + 1);
  // A program that arms its CQ may block: its posts run their own pass again.
  e.app_stopped_polling();
  EXPECT_FALSE(post(0));
  EXPECT_EQ(init.nic->link().counters().tx_packets, 18u);

  const std::vector<transport::Completion> done = pump_for_completions(init, target, kWrites + 1);
  ASSERT_EQ(done.size(), kWrites + 1);
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].status, transport::WcStatus::kSuccess);
    EXPECT_EQ(done[i].wr_id, i < kWrites ? i : 0);
  }
  EXPECT_EQ(std::memcmp(target.buf.data(), init.buf.data(), init.buf.size()), 0);
}

TEST(ProgressEngine, APollThatFindsCompletionsAlsoStopsTheThreadSpinning) {
  // A program whose polls always find completions (the spinning thread did the work) never
  // drives a pass; its polls still mark it as present, so the thread sleeps instead of spinning on
  // beside it. A thread that has just started spins as after traffic: without the mark it would
  // spin for the whole of spin_ns.
  ProgressOptions o = policy_options(10'000'000'000);
  o.app_driving_ns = 0;  // no empty poll: only the mark can stop the spin
  Side side("127.77.46.1", 4096, o);
  ASSERT_TRUE(side.qp);
  ProgressEngine& e = *side.engine;
  ASSERT_EQ(e.start(), 0);
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(e.stats().sleeps, 0u);  // spinning
  e.app_polled();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (e.stats().sleeps == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  const ProgressStats asleep = e.stats();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(asleep.sleeps, 1u);
  EXPECT_EQ(e.stats().passes, asleep.passes);  // and stays asleep: nothing to do
  e.stop();
}

// The ping-pong's order of events (uroce bench --lat, perftest's send_lat): a SEND, the reply,
// and behind the reply in the same receive batch the ACK of the SEND (the link sends requests
// first). With the device driven by the caller between passes (transmit_before_receive), the pass
// that completes the reply returns at once and leaves the ACK for the next pass, so the caller sees
// the reply without waiting for the ACK's work.
TEST(ProgressEngine, AReplysCompletionDoesNotWaitForTheAckReadBehindIt) {
  Side ping("127.77.49.1", 4096, ProgressOptions{}, true);
  Side pong("127.77.49.2", 4096, ProgressOptions{}, true);
  ASSERT_TRUE(ping.qp && pong.qp);
  ping.connect(pong);
  pong.connect(ping);
  auto post_recv = [](Side& s, uint64_t id) {
    transport::Sge sge{reinterpret_cast<uint64_t>(s.buf.data()) + 2048, 64, s.mr->lkey()};
    transport::RecvWr r;
    r.wr_id = id;
    r.sg_list = {&sge, 1};
    ASSERT_EQ(s.qp->post_recv(r), 0);
  };
  auto post_send = [](Side& s, uint64_t id) {
    transport::Sge sge{reinterpret_cast<uint64_t>(s.buf.data()), 8, s.mr->lkey()};
    transport::SendWr w;
    w.wr_id = id;
    w.opcode = transport::WrOpcode::kSend;
    w.flags = transport::kSendSignaled;
    w.sg_list = {&sge, 1};
    ASSERT_EQ(s.qp->post_send(w), 0);
  };
  // Passes of `s` until its CQ holds a completion (10 s at most); returns the last pass's answer.
  auto pass_until_completion = [](Side& s) {
    Nanos next = kNever;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (s.cq->size() == 0 && std::chrono::steady_clock::now() < deadline)
      next = s.dev->progress(ProgressEngine::now_ns());
    return next;
  };
  post_recv(ping, 1);
  post_recv(pong, 2);
  post_send(ping, 10);
  ping.dev->progress(ProgressEngine::now_ns());  // the SEND leaves
  pass_until_completion(pong);                   // and completes pong's receive
  std::array<transport::Completion, 4> wc;
  ASSERT_EQ(pong.cq->poll(wc), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  post_send(pong, 20);
  pong.dev->progress(ProgressEngine::now_ns());  // the reply, then the ACK of ping's SEND

  const Nanos next = pass_until_completion(ping);
  ASSERT_EQ(ping.cq->poll(wc), 1u);
  EXPECT_EQ(wc[0].wr_id, 1u) << "the reply's receive completes first";
  EXPECT_EQ(wc[0].status, transport::WcStatus::kSuccess);
  EXPECT_LE(next, ProgressEngine::now_ns()) << "the deferred ACK makes the next pass due now";
  EXPECT_TRUE(ping.dev->acks_kept_by_last_pass());
  ping.dev->progress(ProgressEngine::now_ns());  // takes the ACK the link kept
  ASSERT_EQ(ping.cq->poll(wc), 1u);
  EXPECT_EQ(wc[0].wr_id, 10u);
  EXPECT_EQ(wc[0].status, transport::WcStatus::kSuccess);
}

}  // namespace
}  // namespace uroce::api
