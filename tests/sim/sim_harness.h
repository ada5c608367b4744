#pragma once
// The seeded checker harness: builds a world of N verbs Devices on SimLinks over one LossyNetwork,
// runs a random workload of every RC opcode through it in virtual time, and checks the outcome
// against a model. A world, its workload and its misbehaviour are all functions of one 64-bit
// seed, so a failing seed replays exactly (see docs/simulation.md).
//
// Checkers:
//  - every posted WR completes exactly once, in posting order per queue, with the right status
//    (success; REM_ACCESS_ERR for a deliberately bad key/range/permission; then WR_FLUSH_ERR;
//    RETRY_EXC_ERR only on a lossy network);
//  - every byte a WRITE, SEND or READ moved is right at its destination, and every byte no
//    successful operation may touch (guards around every buffer, outside every MR, the targets of
//    bad requests, read-only memory) still holds its initial value;
//  - atomics execute exactly once: per-QP compare-and-swap chains follow a model, shared
//    fetch-add counters end at exactly the sum of the completed adds, originals are distinct;
//  - the run finishes (all work completed) within a bound of virtual time and of driver steps.
#include <cstdint>
#include <string>

#include "common/types.h"

namespace uroce::sim {

// Faults the harness injects itself, standing in for a broken transport, to show that each
// checker can fail (tests/sim/sim_checkers_test.cpp).
enum class Fault : uint8_t {
  kNone,
  kStrayWrite,           // a byte written just past the end of an MR
  kWrongData,            // a byte of a completed WRITE's destination changed
  kDoubleAtomic,         // a fetch-add executed once more than it completed
  kLostCompletion,       // the first send completion never reaches the checker
  kDuplicateCompletion,  // the first send completion reaches it twice
  kBlackHole,            // halfway through, the network drops everything; no ACK timeout
};

// How the RC QPs recover lost packets (transport::LossRecovery). Selective repeat worlds also
// draw the requester's PSN window (the BDP cap); mixed worlds draw each QP end's mode, so a
// selective-repeat requester meets a go-back-N responder and the other way round.
enum class Recovery : uint8_t { kGoBackN, kSelectiveRepeat, kMixed };
const char* to_string(Recovery r);

struct SimOptions {
  bool verbose = false;  // print the world's configuration, every post, packet and completion
  // Overrides of the seed-drawn world (negative / 0 = draw from the seed).
  double loss = -1;
  int nodes = 0;
  int wrs_per_node = 0;
  Fault fault = Fault::kNone;
  Recovery recovery = Recovery::kGoBackN;
};

struct SimStats {
  uint64_t wrs = 0, completions = 0, bytes_checked = 0;
  uint64_t success = 0, rem_access_err = 0, retry_exc_err = 0, flushed = 0;
  uint64_t packets_sent = 0, packets_lost = 0, packets_corrupted = 0, packets_duplicated = 0;
  uint64_t retransmitted = 0;
  uint64_t retransmitted_bytes = 0, ooo_buffered = 0, ooo_dropped = 0;
  Nanos virtual_ns = 0;
  uint64_t driver_steps = 0;
};

struct SimResult {
  bool ok = true;
  std::string failure;      // what a checker saw, with enough context to start debugging
  std::string config;       // one line: the world the seed drew
  uint64_t trace_hash = 0;  // events, completions and final memory: equal runs, equal hashes
  SimStats stats;
};

SimResult run_world(uint64_t seed, const SimOptions& options = {});

// The command that replays `seed` (printed on failure).
std::string replay_command(uint64_t seed, Recovery recovery = Recovery::kGoBackN);

}  // namespace uroce::sim
