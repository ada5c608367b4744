#pragma once
// Extension point: a new experiment is a run_<name>() here, a name in sim_cli.cpp and a direction
// test in tests/sim/lab_experiments_test.cpp (docs/architecture.md).
// The fabric experiments of docs/experiments.md, each a function of its parameters and seed:
// incast, victim flow, parking lot, convergence and loss. Each returns its numbers and can write a
// CSV time series and an SVG plot that record every parameter and the seed.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/world.h"

namespace uroce::simlab {

// How the fabric and the ends handle congestion.
enum class Mode : uint8_t {
  kPfc,         // lossless priority, no congestion control (PFC alone)
  kPfcDcqcn,    // lossless priority and DCQCN
  kDcqcnNoPfc,  // DCQCN on a lossy priority: drops recovered by go-back-N
};
const char* to_string(Mode m);
bool parse_mode(const std::string& s, Mode* out);

struct ExperimentParams {
  uint64_t seed = 1;
  Mode mode = Mode::kPfc;
  transport::CcAlgorithm dcqcn = transport::CcAlgorithm::kDcqcnMlx5;  // when the mode uses DCQCN
  uint32_t senders = 8;                                               // incast, victim
  uint64_t flow_bytes = 1 << 20;                                      // per flow
  uint64_t rate_bps = 100'000'000'000;
  Nanos delay_ns = 1000;
  uint32_t path_mtu = 1024;
  uint64_t kmin_bytes = 20 * 1024, kmax_bytes = 200 * 1024;
  double pmax = 0.2;
  bool mark_at_dequeue = false;  // ECN marking at egress dequeue (HPCC's ns-3) instead of enqueue
  uint64_t xoff_bytes = 256 * 1024;
  uint64_t buffer_bytes = 12 << 20;
  Nanos stagger_ns = 200'000;  // convergence: time between flow starts
  uint32_t flows = 3;          // convergence: flows
  double loss = 0;             // loss: per-packet loss rate end to end
  uint32_t psn_window = 0;     // loss: both runs' max_psn_window (0 = about one BDP)
  Nanos sample_ns = 2'000;
};

struct ExperimentResult {
  std::string name;
  bool ok = true;
  std::string failure;
  // Every parameter and the seed, then every measured number, in order, as "key=value".
  std::vector<std::pair<std::string, std::string>> params, summary;
  RunResult run;
  double line_rate_bps = 0;                     // what utilization is measured against
  double number(const std::string& key) const;  // a summary value; NaN if absent
};

ExperimentResult run_incast(const ExperimentParams& p);
ExperimentResult run_victim(const ExperimentParams& p);
ExperimentResult run_parking_lot(const ExperimentParams& p);
ExperimentResult run_convergence(const ExperimentParams& p);
ExperimentResult run_loss(const ExperimentParams& p);

// Creates `dir` if needed and writes <dir>/<stem>.csv (parameters and summary as '#' lines, then
// the sampled series) and three figures: <stem>-rate.svg (each sender's DCQCN rate),
// <stem>-throughput.svg (per-flow throughput and the bottleneck's utilization) and
// <stem>-queue.svg (the watched queue). False on an I/O error.
bool write_outputs(const ExperimentResult& r, const std::string& dir, const std::string& stem);

}  // namespace uroce::simlab
