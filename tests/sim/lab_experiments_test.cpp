// The fabric experiments on small, fast configurations: each asserts the direction of the effect
// the experiment is about (docs/experiments.md), and that every byte of every flow verified.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "sim/experiments.h"
#include "sim/svg_plot.h"

namespace uroce::simlab {
namespace {

ExperimentParams small(Mode mode) {
  ExperimentParams p;
  p.mode = mode;
  p.dcqcn = transport::CcAlgorithm::kDcqcnMlx5;
  return p;
}

void expect_clean(const ExperimentResult& r) {
  EXPECT_TRUE(r.ok) << r.name << ": " << r.failure;
  EXPECT_EQ(r.number("flows_verified"), static_cast<double>(r.run.flows.size())) << r.name;
}

TEST(LabExperiments, IncastDcqcnCutsPausesAndQueue) {
  ExperimentParams p = small(Mode::kPfc);
  p.senders = 8;
  // 1 MiB each: at much less the start-up burst (every sender at line rate until its first CNP)
  // is all there is, and it pauses under either scheme.
  p.flow_bytes = 1 << 20;
  const ExperimentResult pfc = run_incast(p);
  p.mode = Mode::kPfcDcqcn;
  const ExperimentResult both = run_incast(p);
  p.mode = Mode::kDcqcnNoPfc;
  const ExperimentResult lossy = run_incast(p);
  expect_clean(pfc);
  expect_clean(both);
  expect_clean(lossy);
  // PFC alone keeps the queue at the pause threshold and pauses; DCQCN answers the marks.
  EXPECT_EQ(pfc.number("pause_frames"), 400);
  EXPECT_LE(both.number("pause_frames"), pfc.number("pause_frames") / 2);
  EXPECT_LT(both.number("queue_avg_bytes"), pfc.number("queue_avg_bytes"));
  EXPECT_EQ(both.number("cnps_received"), 1218);
  EXPECT_EQ(pfc.number("cnps_sent"), 0);
  EXPECT_EQ(pfc.number("drops"), 0);
  EXPECT_EQ(both.number("drops"), 0);
  // Without PFC nothing pauses; any drop is recovered (the data verified above).
  EXPECT_EQ(lossy.number("pause_frames"), 0);
  // PFC alone is work-conserving: the last flow ends within 25% of N*S/C.
  EXPECT_LT(pfc.number("last_over_ideal"), 1.25);
  EXPECT_GE(pfc.number("last_over_ideal"), 1.0);
}

TEST(LabExperiments, ParkingLotPfcIsUnfairDcqcnIsFairer) {
  ExperimentParams p = small(Mode::kPfc);
  p.flow_bytes = 1 << 20;
  const ExperimentResult pfc = run_parking_lot(p);
  p.mode = Mode::kPfcDcqcn;
  const ExperimentResult dcqcn = run_parking_lot(p);
  expect_clean(pfc);
  expect_clean(dcqcn);
  // PFC alone: the receiver's port serves its two ingress ports alike, ~25/25/50.
  EXPECT_NEAR(pfc.number("share_0"), 0.25, 0.05);
  EXPECT_NEAR(pfc.number("share_1"), 0.25, 0.05);
  EXPECT_NEAR(pfc.number("share_2"), 0.50, 0.05);
  EXPECT_GT(dcqcn.number("jain"), pfc.number("jain"));
  EXPECT_GE(dcqcn.number("jain"), 0.95);
  // PFC alone is work-conserving: the receiver's link is busy from start to last completion.
  EXPECT_GE(pfc.number("bottleneck_util"), 0.90);
  EXPECT_LE(pfc.number("bottleneck_util"), 1.0);
  // Every flow reports its completion and what congestion control did to it; the totals add up.
  double cnps = 0, cuts = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string k = "flow" + std::to_string(i) + "_";
    EXPECT_GT(dcqcn.number(k + "done_us"), 0) << i;
    EXPECT_GT(dcqcn.number(k + "gbps"), 0) << i;
    EXPECT_EQ(pfc.number(k + "cnps"), 0) << i;
    cnps += dcqcn.number(k + "cnps");
    cuts += dcqcn.number(k + "rate_cuts");
  }
  EXPECT_EQ(cnps, dcqcn.number("cnps_received"));
  EXPECT_EQ(cuts, dcqcn.number("rate_cuts"));
  EXPECT_GT(cuts, 0);
}

// HPCC's ns-3 DCQCN on its own switch settings at 100 Gb/s (DcqcnParams::hpcc; Kmin 400 KB,
// Kmax 1600 KB, Pmax 0.2, marking at dequeue; PFC far above Kmax): docs/experiments.md, "Held
// against HPCC's ns-3 DCQCN".
ExperimentParams hpcc(Mode mode) {
  ExperimentParams p = small(mode);
  p.dcqcn = transport::CcAlgorithm::kDcqcnHpcc;
  p.kmin_bytes = 400 * 1024;
  p.kmax_bytes = 1600 * 1024;
  p.pmax = 0.2;
  p.xoff_bytes = 4096 * 1024;
  p.mark_at_dequeue = true;
  return p;
}

// The convergence run both HPCC tests below make: two flows of 4 MiB, the second 100 us after the
// first.
ExperimentParams hpcc_convergence() {
  ExperimentParams p = hpcc(Mode::kPfcDcqcn);
  p.flows = 2;
  p.stagger_ns = 100'000;
  p.flow_bytes = 4 << 20;
  return p;
}

TEST(LabExperiments, ParkingLotSynchronizedStartDrivesHpccDcqcnToItsFloor) {
  // Three line-rate starts put ~1 MB above Kmin before the first CNP returns; while it drains
  // every QP is cut once per 4 us with alpha near 1, so each rate reaches the 1 Gb/s floor. This
  // is the rule set's behaviour (the same in HPCC's code), not a fault: it stays fair.
  ExperimentParams p = hpcc(Mode::kPfcDcqcn);
  p.flow_bytes = 1 << 20;
  const ExperimentResult deq = run_parking_lot(p);
  p.mark_at_dequeue = false;
  const ExperimentResult enq = run_parking_lot(p);
  expect_clean(deq);
  expect_clean(enq);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(deq.number("flow" + std::to_string(i) + "_min_rate_gbps"), 1.0) << i;
  }
  EXPECT_GE(deq.number("jain"), 0.95);
  EXPECT_EQ(deq.number("pause_frames"), 0);
  // A mark made at enqueue waits behind the queue it reports: feedback comes later and the queue
  // peaks higher.
  EXPECT_GT(enq.number("queue_max_bytes"), deq.number("queue_max_bytes"));
}

TEST(LabExperiments, ConvergenceTwoHpccDcqcnFlowsReachFairShareAtHighUtilization) {
  // Two flows, the second 100 us after the first; in the second half of the time both run, each
  // holds its fair share within 10% (Jain >= 0.99 for two flows) and the link is >= 90% busy.
  const ExperimentResult r = run_convergence(hpcc_convergence());
  expect_clean(r);
  EXPECT_GE(r.number("jain_second_half"), 0.99);
  EXPECT_GE(r.number("util_second_half"), 0.90);
  EXPECT_LE(r.number("util_second_half"), 1.0);
  EXPECT_EQ(r.number("pause_frames"), 0);
}

// Held against HPCC's ns-3 simulator run side by side (bench/hpcc_compare.py; docs/experiments.md,
// "uroce beside HPCC's ns-3 simulator"): the reference figures are the mean of HPCC's DCQCN over
// its random streams 1-5 on the same topology, flows and switch settings, and uroce's are its mean
// over seeds 1-5 likewise (one seed's queue average moves by a tenth with the ECN draw alone). The
// tolerances are HPCC's own spread over those streams plus the known model differences (uroce
// counts 1122 wire bytes per 1024-byte payload where HPCC counts 1048 per 1000, so its queues read
// ~5% longer and a line-bound phase takes ~5% longer; its Kmin/Kmax are KiB, 2.4% above HPCC's KB).
struct HpccReference {
  double util;          // bottleneck wire bytes over line rate, first start to last completion
  double last_done_us;  // the last flow's completion
  double queue_avg_kb, queue_max_kb;  // the bottleneck queue sampled every 2 us, 1000-byte KB
  double recover_us;  // the first 20 us window back at >= 90% after the link fell below 50%
};

// The same recovery figure bench/hpcc_compare.py computes, from the watched port's samples.
double recovery_us(const ExperimentResult& r) {
  const auto& s = r.run.samples;
  constexpr size_t kWindow = 10;  // 10 samples of 2 us
  bool fell = false;
  for (size_t a = 0; a + kWindow < s.size(); a += kWindow) {
    const double u = static_cast<double>(s[a + kWindow].port_tx_bytes[0] - s[a].port_tx_bytes[0]) *
                     8e9 / (r.line_rate_bps * static_cast<double>(s[a + kWindow].t - s[a].t));
    if (u < 0.5 && s[a].t > 0) fell = true;
    if (fell && u >= 0.9) return static_cast<double>(s[a].t) / 1e3;
  }
  return -1;
}

// Whether every flow's rate must have reached DCQCN's 1 Gb/s floor, as in HPCC's runs.
enum class Floor { kHeld, kNotHeld };

void expect_within_hpcc(const std::function<ExperimentResult(uint64_t seed)>& run,
                        const HpccReference& ref, Floor floor = Floor::kHeld) {
  constexpr uint64_t kSeeds = 5;
  HpccReference mean{};
  std::string name;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const ExperimentResult r = run(seed);
    name = r.name;
    expect_clean(r);
    EXPECT_EQ(r.number("pause_frames"), 0) << r.name << " seed " << seed;
    mean.util += r.number("bottleneck_util") / kSeeds;
    mean.last_done_us += r.number("last_done_us") / kSeeds;
    mean.queue_avg_kb += r.number("queue_avg_bytes") / 1e3 / kSeeds;
    mean.queue_max_kb += r.number("queue_max_bytes") / 1e3 / kSeeds;
    mean.recover_us += recovery_us(r) / kSeeds;
    if (floor == Floor::kNotHeld) continue;
    for (size_t i = 0; i < r.run.flows.size(); ++i)
      EXPECT_EQ(r.number("flow" + std::to_string(i) + "_min_rate_gbps"), 1.0)
          << r.name << " seed " << seed << " flow " << i;
  }
  EXPECT_NEAR(mean.util, ref.util, 0.05) << name;
  EXPECT_NEAR(mean.last_done_us, ref.last_done_us, 0.08 * ref.last_done_us) << name;
  EXPECT_NEAR(mean.queue_avg_kb, ref.queue_avg_kb, 0.25 * ref.queue_avg_kb) << name;
  EXPECT_NEAR(mean.queue_max_kb, ref.queue_max_kb, 0.20 * ref.queue_max_kb) << name;
  EXPECT_NEAR(mean.recover_us, ref.recover_us, 0.10 * ref.recover_us) << name;
}

TEST(LabExperiments, HpccDcqcnIncastWithinToleranceOfHpccNs3) {
  auto run = [](uint64_t seed) {
    ExperimentParams p = hpcc(Mode::kPfcDcqcn);
    p.seed = seed;
    p.senders = 8;
    p.flow_bytes = 1 << 20;
    return run_incast(p);
  };
  expect_within_hpcc(run, {0.619, 1137, 524, 2079, 464});
}

TEST(LabExperiments, HpccDcqcnParkingLotWithinToleranceOfHpccNs3) {
  auto run = [](uint64_t seed) {
    ExperimentParams p = hpcc(Mode::kPfcDcqcn);
    p.seed = seed;
    p.flow_bytes = 4 << 20;
    const ExperimentResult r = run_parking_lot(p);
    EXPECT_GE(r.number("jain"), 0.95) << "seed " << seed;
    return r;
  };
  expect_within_hpcc(run, {0.732, 1442, 158.6, 742, 476});
}

TEST(LabExperiments, HpccDcqcnConvergenceWithinToleranceOfHpccNs3) {
  // HPCC's second flow starts at line rate into a 100 Gb/s first flow: its floor can sit above
  // 1 Gb/s (1.1-4.1 Gb/s over its streams), so only the other figures are held.
  auto run = [](uint64_t seed) {
    ExperimentParams p = hpcc_convergence();
    p.seed = seed;
    return run_convergence(p);
  };
  expect_within_hpcc(run, {0.735, 958, 93.3, 674, 496}, Floor::kNotHeld);
}

TEST(LabExperiments, VictimFlowIsFreedByDcqcn) {
  ExperimentParams p = small(Mode::kPfc);
  // Long enough flows that the start-up burst (every sender at line rate before the first CNP)
  // does not dominate.
  p.senders = 4;
  p.flow_bytes = 2 << 20;
  const ExperimentResult pfc = run_victim(p);
  p.mode = Mode::kPfcDcqcn;
  const ExperimentResult dcqcn = run_victim(p);
  expect_clean(pfc);
  expect_clean(dcqcn);
  EXPECT_GT(dcqcn.number("victim_gbps"), pfc.number("victim_gbps"));
}

TEST(LabExperiments, LossCostsGoBackNGoodput) {
  ExperimentParams p = small(Mode::kPfc);
  p.flow_bytes = 1 << 20;
  double last = 1e9;
  for (double loss : {0.0, 1e-3, 1e-2}) {
    p.loss = loss;
    const ExperimentResult r = run_loss(p);
    expect_clean(r);
    EXPECT_LT(r.number("goodput_gbps"), last) << "loss " << loss;
    last = r.number("goodput_gbps");
    if (loss == 0) {
      EXPECT_EQ(r.number("retransmitted_packets"), 0);
    }
  }
}

TEST(LabExperiments, LossSelectiveRepeatBeatsGoBackNAtOnePercent) {
  // Experiment 5 runs go-back-N and selective repeat over the same lossy fabric: at 1e-2 selective
  // repeat resends about the lost packets only, go-back-N a window per loss.
  ExperimentParams p = small(Mode::kPfc);
  p.flow_bytes = 4 << 20;
  p.loss = 1e-2;
  const ExperimentResult r = run_loss(p);
  expect_clean(r);
  EXPECT_GE(r.number("goodput_gbps_sr"), r.number("goodput_gbps_gbn"));
  EXPECT_LT(r.number("retransmitted_bytes_sr"), r.number("retransmitted_bytes_gbn") / 10);
  EXPECT_EQ(r.number("ooo_buffered_sr"), 1953);
  EXPECT_EQ(r.number("ooo_buffered_gbn"), 0);
}

TEST(LabPlots, TicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(nice_ticks(0, 805, 8), (std::vector<double>{0, 200, 400, 600, 800}));
  EXPECT_EQ(nice_ticks(0, 1, 6), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(nice_ticks(0, 363, 6), (std::vector<double>{0, 100, 200, 300}));
}

TEST(LabPlots, OutputsGoToANewFolderWithLegendAndCaption) {
  ExperimentParams p = small(Mode::kPfcDcqcn);
  p.senders = 2;
  p.flow_bytes = 64 * 1024;
  const ExperimentResult r = run_incast(p);
  const std::string dir =
      (std::filesystem::temp_directory_path() / "uroce_lab_plots" / "nested").string();
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(write_outputs(r, dir, "incast"));
  for (const char* f :
       {"incast.csv", "incast-rate.svg", "incast-throughput.svg", "incast-queue.svg"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  std::ifstream svg(dir + "/incast-rate.svg");
  std::stringstream ss;
  ss << svg.rdbuf();
  const std::string text = ss.str();
  EXPECT_NE(text.find("flow 0: host 0 -&gt; 2"), std::string::npos);
  EXPECT_NE(text.find("flow 1: host 1 -&gt; 2"), std::string::npos);
  EXPECT_NE(text.find("seed 1"), std::string::npos);
  EXPECT_NE(text.find("time (us)"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(LabExperiments, SameSeedSameRun) {
  ExperimentParams p = small(Mode::kPfcDcqcn);
  p.senders = 4;
  p.flow_bytes = 128 * 1024;
  const ExperimentResult a = run_incast(p), b = run_incast(p);
  EXPECT_EQ(a.summary, b.summary);
}

}  // namespace
}  // namespace uroce::simlab
