// Runs the checker harness (sim_harness.h) over many seeds.
//
//   UROCE_SIM_SEEDS=N     run seeds [UROCE_SIM_FIRST_SEED, +N) (default 1000 from 1)
//   UROCE_SIM_SEED=S      run only seed S (replay); add UROCE_SIM_VERBOSE=1 for every post and
//                         completion
//   UROCE_SIM_RECOVERY=gbn|sr|mixed  loss recovery of Sim.ManySeeds (default gbn); the
//                         ManySeedsSelectiveRepeat and ManySeedsMixed tests always use theirs
//                         (ManySeedsMixed runs 500 seeds unless UROCE_SIM_SEEDS says otherwise)
#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "sim/sim_harness.h"

namespace uroce::sim {
namespace {

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 0);
}

constexpr uint64_t kDefaultSeeds = 1000;

Recovery env_recovery() {
  const char* v = std::getenv("UROCE_SIM_RECOVERY");
  const std::string s = v == nullptr ? "" : v;
  if (s == "sr") return Recovery::kSelectiveRepeat;
  if (s == "mixed") return Recovery::kMixed;
  return Recovery::kGoBackN;
}

void run_seeds(Recovery recovery, uint64_t default_seeds = kDefaultSeeds) {
  SimOptions opt;
  opt.recovery = recovery;
  opt.verbose = env_u64("UROCE_SIM_VERBOSE", 0) != 0;
  uint64_t first = env_u64("UROCE_SIM_FIRST_SEED", 1);
  uint64_t count = env_u64("UROCE_SIM_SEEDS", default_seeds);
  if (std::getenv("UROCE_SIM_SEED") != nullptr) {
    first = env_u64("UROCE_SIM_SEED", 0);
    count = 1;
  }
  SimStats total;
  uint64_t failures = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t seed = first; seed < first + count; ++seed) {
    const SimResult r = run_world(seed, opt);
    if (opt.verbose || count == 1) {
      std::printf("seed %" PRIu64 ": %s\n  %s\n", seed, r.ok ? "ok" : "FAILED", r.config.c_str());
    }
    total.wrs += r.stats.wrs;
    total.completions += r.stats.completions;
    total.bytes_checked += r.stats.bytes_checked;
    total.rem_access_err += r.stats.rem_access_err;
    total.retry_exc_err += r.stats.retry_exc_err;
    total.flushed += r.stats.flushed;
    total.packets_sent += r.stats.packets_sent;
    total.packets_lost += r.stats.packets_lost;
    total.packets_corrupted += r.stats.packets_corrupted;
    total.retransmitted += r.stats.retransmitted;
    total.retransmitted_bytes += r.stats.retransmitted_bytes;
    total.ooo_buffered += r.stats.ooo_buffered;
    total.ooo_dropped += r.stats.ooo_dropped;
    total.driver_steps += r.stats.driver_steps;
    total.virtual_ns += r.stats.virtual_ns;
    if (!r.ok) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << " failed: " << r.failure << "\n  world: " << r.config
                    << "\n  replay: " << replay_command(seed, recovery);
      if (failures >= 5) break;  // the first few say enough; the rest would bury them
    }
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("sim (%s): %" PRIu64 " seeds from %" PRIu64 " in %.2f s: %" PRIu64 " WRs, %" PRIu64
              " completions (%" PRIu64 " REM_ACCESS_ERR, %" PRIu64 " RETRY_EXC_ERR, %" PRIu64
              " flushed), %" PRIu64 " bytes checked, %" PRIu64 " packets (%" PRIu64
              " lost, %" PRIu64 " corrupted, %" PRIu64 " retransmitted, %" PRIu64
              " held out of order, %" PRIu64 " dropped by a full reorder buffer), %" PRIu64
              " driver steps, %.3f s virtual\n",
              to_string(recovery), count, first, wall_s, total.wrs, total.completions,
              total.rem_access_err, total.retry_exc_err, total.flushed, total.bytes_checked,
              total.packets_sent, total.packets_lost, total.packets_corrupted, total.retransmitted,
              total.ooo_buffered, total.ooo_dropped, total.driver_steps, total.virtual_ns * 1e-9);
}

TEST(Sim, ManySeeds) {
  run_seeds(env_recovery());
}

// The same worlds (the workload and the network draw the same) with selective repeat on both
// ends, and with each QP end's mode drawn (a selective-repeat requester against a go-back-N
// responder must converge too).
TEST(Sim, ManySeedsSelectiveRepeat) {
  run_seeds(Recovery::kSelectiveRepeat);
}
// Half as many by default: the pairings are what it adds, and an ASan build pays ~20 s per 1,000.
TEST(Sim, ManySeedsMixed) {
  run_seeds(Recovery::kMixed, kDefaultSeeds / 2);
}

TEST(Sim, SameSeedSameTrace) {
  // Two runs of one seed in one process: same events, same completions, same final memory. Seeds
  // with loss, duplication, reordering and corruption drawn in (the first few of each kind).
  for (uint64_t seed : {3u, 17u, 1234u, 99991u}) {
    const SimResult a = run_world(seed);
    const SimResult b = run_world(seed);
    EXPECT_EQ(a.ok, b.ok) << seed;
    EXPECT_EQ(a.config, b.config) << seed;
    EXPECT_EQ(a.trace_hash, b.trace_hash) << "seed " << seed << " is not deterministic";
    EXPECT_EQ(a.stats.packets_sent, b.stats.packets_sent) << seed;
    EXPECT_EQ(a.stats.virtual_ns, b.stats.virtual_ns) << seed;
  }
  EXPECT_NE(run_world(5).trace_hash, run_world(6).trace_hash);
}

TEST(Sim, HeavyLossStillCompletesEverything) {
  // Loss pinned at 10% on every seed here (the many-seeds test draws 0..10%). The worlds are
  // deterministic, so what the wire lost over them is an exact count per recovery mode (the
  // modes resend differently, so the wire sees different packets).
  constexpr std::pair<Recovery, uint64_t> kLost[] = {
      {Recovery::kGoBackN, 466},
      {Recovery::kSelectiveRepeat, 243},
      {Recovery::kMixed, 379},
  };
  for (const auto& [rec, lost] : kLost) {
    SimOptions opt;
    opt.loss = 0.10;
    opt.recovery = rec;
    uint64_t total_lost = 0;
    for (uint64_t seed = 500'000; seed < 500'020; ++seed) {
      const SimResult r = run_world(seed, opt);
      EXPECT_TRUE(r.ok) << to_string(rec) << " seed " << seed << ": " << r.failure
                        << "\n  world: " << r.config;
      total_lost += r.stats.packets_lost;
    }
    EXPECT_EQ(total_lost, lost) << to_string(rec);
  }
}

TEST(Sim, SelectiveRepeatHoldsPacketsAndResendsLess) {
  // Over the same lossy worlds, selective repeat keeps out-of-order packets (so the reorder
  // buffer is exercised) and sends fewer payload bytes again than go-back-N.
  uint64_t gbn_bytes = 0, sr_bytes = 0, held = 0;
  for (uint64_t seed = 600'000; seed < 600'040; ++seed) {
    SimOptions opt;
    opt.loss = 0.05;
    const SimResult g = run_world(seed, opt);
    opt.recovery = Recovery::kSelectiveRepeat;
    const SimResult s = run_world(seed, opt);
    ASSERT_TRUE(g.ok && s.ok) << seed << ": " << g.failure << s.failure;
    gbn_bytes += g.stats.retransmitted_bytes;
    sr_bytes += s.stats.retransmitted_bytes;
    held += s.stats.ooo_buffered;
  }
  EXPECT_EQ(held, 502u);
  EXPECT_LT(sr_bytes, gbn_bytes);
  std::printf("retransmitted bytes over 40 worlds at 5%% loss: go-back-N %" PRIu64
              ", selective repeat %" PRIu64 "; %" PRIu64 " packets held\n",
              gbn_bytes, sr_bytes, held);
}

}  // namespace
}  // namespace uroce::sim
