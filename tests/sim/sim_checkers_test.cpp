// The checkers can fail: each fault the harness injects (standing in for a transport bug) must be
// caught, on every seed tried, with a message that names what went wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/sim_harness.h"

namespace uroce::sim {
namespace {

struct Case {
  Fault fault;
  const char* must_say;
};

class SimCheckers : public ::testing::TestWithParam<Case> {};

TEST_P(SimCheckers, InjectedFaultIsCaught) {
  const Case c = GetParam();
  SimOptions opt;
  opt.fault = c.fault;
  opt.loss = 0;  // a clean network, so nothing but the fault can fail the run
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    // A lost last completion leaves its queue waiting forever: caught as a deadlock instead.
    const SimResult clean = run_world(seed, SimOptions{.loss = 0});
    ASSERT_TRUE(clean.ok) << "seed " << seed << " fails without a fault: " << clean.failure;
    const SimResult r = run_world(seed, opt);
    EXPECT_FALSE(r.ok) << "seed " << seed << ": fault not caught";
    // must_say lists the acceptable messages, separated by '|'.
    bool said = false;
    for (size_t at = 0, bar; at != std::string::npos;
         at = bar == std::string::npos ? bar : bar + 1) {
      bar = std::string_view(c.must_say).find('|', at);
      said |=
          r.failure.find(std::string_view(c.must_say).substr(at, bar - at)) != std::string::npos;
    }
    EXPECT_TRUE(said) << "seed " << seed << " failed for another reason: " << r.failure;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, SimCheckers,
    ::testing::Values(Case{Fault::kStrayWrite, "no operation (guard or untouched)"},
                      Case{Fault::kWrongData, "; target of"},
                      Case{Fault::kDoubleAtomic, "counter 0: added"},
                      Case{Fault::kLostCompletion, "send completion wr_id=|deadlock"},
                      Case{Fault::kDuplicateCompletion, "send completion wr_id="},
                      Case{Fault::kBlackHole, "deadlock"}));

}  // namespace
}  // namespace uroce::sim
