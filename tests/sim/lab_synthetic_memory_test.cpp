// Synthetic memory (sim/synthetic_memory.h): the pattern catches a misplaced or changed byte, and a
// world on it moves flows with nothing resident per flow and every byte checked where it landed,
// with the same completion times as the same world on real buffers.
#include <gtest/gtest.h>

#include <vector>

#include "sim/synthetic_memory.h"
#include "sim/world.h"

namespace uroce::simlab {
namespace {

TEST(LabSyntheticMemory, PatternCatchesMisplacedAndChangedBytes) {
  std::vector<uint8_t> buf(4096 + 3);
  const uint64_t iova = (uint64_t{5} << 40) + 13;  // unaligned: head and tail byte by byte
  sim::fill_synthetic(iova, buf);
  EXPECT_EQ(sim::count_synthetic_mismatches(iova, buf), 0u);
  for (size_t i : {size_t{0}, size_t{100}, buf.size() - 1})
    EXPECT_EQ(buf[i], sim::synthetic_byte(iova + i)) << i;
  // The same bytes checked one word away: every word differs.
  const uint64_t moved = sim::count_synthetic_mismatches(iova + 8, buf);
  EXPECT_GT(moved, buf.size() / 2);
  buf[1000] ^= 0x10;
  buf[1001] ^= 0x01;
  EXPECT_EQ(sim::count_synthetic_mismatches(iova, buf), 2u);
}

// Every byte, at lengths and alignments that leave words outside the 8-word vector steps (the
// generator and checker take a vector path where the CPU has one).
TEST(LabSyntheticMemory, EveryByteMatchesThePatternAtAnyLengthAndAlignment) {
  for (size_t len :
       {size_t{1}, size_t{7}, size_t{63}, size_t{64}, size_t{65}, size_t{200}, size_t{4136}}) {
    for (uint64_t offset : {uint64_t{0}, uint64_t{3}, uint64_t{8}, uint64_t{61}}) {
      const uint64_t iova = (uint64_t{9} << 36) + offset;
      std::vector<uint8_t> buf(len);
      sim::fill_synthetic(iova, buf);
      size_t wrong = 0;
      for (size_t i = 0; i < len; ++i) wrong += buf[i] != sim::synthetic_byte(iova + i);
      ASSERT_EQ(wrong, 0u) << len << " at " << offset;
      ASSERT_EQ(sim::count_synthetic_mismatches(iova, buf), 0u) << len << " at " << offset;
      buf[len - 1] ^= 0x80;  // the last byte: a tail word or byte
      buf[len / 2] ^= 0x01;  // one in the middle (the same byte when len is 1)
      EXPECT_EQ(sim::count_synthetic_mismatches(iova, buf), len == 1 ? 1u : 2u)
          << len << " at " << offset;
    }
  }
}

WorldConfig config(bool synthetic, bool trusted_wire) {
  WorldConfig cfg;
  cfg.synthetic_memory = synthetic;
  cfg.trusted_wire = trusted_wire;
  return cfg;
}

RunResult run_dumbbell(bool synthetic, bool trusted_wire = false) {
  auto spec = fabric::parse_topology("dumbbell left=2 right=1 rate=100G delay=1us");
  auto w = World::create(config(synthetic, trusted_wire), spec.value());
  EXPECT_TRUE(w.ok());
  World& world = **w;
  EXPECT_EQ(world.add_flow({0, 2, 1 << 20, 0}), 0);
  EXPECT_EQ(world.add_flow({1, 2, 300'000, 0}), 1);
  return world.run();
}

TEST(LabSyntheticMemory, FlowsAreVerifiedAndTimedAsOnRealBuffers) {
  const RunResult real = run_dumbbell(false);
  const RunResult synthetic = run_dumbbell(true);
  ASSERT_TRUE(real.ok) << real.failure;
  ASSERT_TRUE(synthetic.ok) << synthetic.failure;
  ASSERT_EQ(synthetic.flows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(synthetic.flows[i].verified) << i;
    EXPECT_EQ(synthetic.flows[i].receiver.rx_bytes, synthetic.flows[i].spec.bytes) << i;
    // Memory's content never changes what goes on the wire or when.
    EXPECT_EQ(synthetic.flows[i].done_ns, real.flows[i].done_ns) << i;
  }
  EXPECT_EQ(synthetic.synthetic_mismatched_bytes, 0u);
  EXPECT_EQ(synthetic.synthetic_refused, 0u);
  // Every placed byte was checked, once: the responder's key check of each message (longer than
  // a packet) is not materialized.
  EXPECT_EQ(synthetic.synthetic_checked_bytes, uint64_t{(1 << 20) + 300'000});
  EXPECT_EQ(real.synthetic_checked_bytes, 0u);
}

// On a trusted wire the payload crosses the fabric by reference (a descriptor, rebuilt on arrival):
// the same packets and times, every byte still checked where it lands.
TEST(LabSyntheticMemory, PayloadByReferenceIsVerifiedAndTimedAsCarried) {
  const RunResult carried = run_dumbbell(true);
  const RunResult by_reference = run_dumbbell(true, true);
  ASSERT_TRUE(by_reference.ok) << by_reference.failure;
  ASSERT_EQ(by_reference.flows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(by_reference.flows[i].verified) << i;
    EXPECT_EQ(by_reference.flows[i].done_ns, carried.flows[i].done_ns) << i;
  }
  EXPECT_EQ(by_reference.fabric.delivered_bytes, carried.fabric.delivered_bytes);
  EXPECT_EQ(by_reference.synthetic_mismatched_bytes, 0u);
  EXPECT_EQ(by_reference.synthetic_checked_bytes, uint64_t{(1 << 20) + 300'000});
  EXPECT_EQ(by_reference.link_rx_drops, 0u);
  EXPECT_EQ(carried.link_tx_by_reference, 0u);
  // Every data packet: 1 MiB and 300,000 B in 1,024-byte packets (the path MTU).
  EXPECT_EQ(by_reference.link_tx_by_reference, 1024u + 293);
}

}  // namespace
}  // namespace uroce::simlab
