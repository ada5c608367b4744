// UC over a seeded lossy, reordering wire: the sender completes everything without ACKs; the
// receiver completes only whole, intact messages (IBA 9.8.4), never a torn one.
#include "pair.h"

namespace uroce::transport::test {
namespace {

class UcLoss : public ::testing::TestWithParam<uint64_t> {};

TEST_P(UcLoss, OnlyWholeMessagesAreDelivered) {
  QpConfig cfg;
  cfg.path_mtu_bytes = 256;
  Pair p(QpType::kUc, cfg, 0xfffffa, 10);
  Lossy w(GetParam(), 0.05, 0.03, 0.05);
  constexpr int kMsgs = 60;
  constexpr uint32_t kSlot = 2048;
  auto& src = p.a.memory.add(kMsgs * kSlot, 0);
  auto& dst = p.b.memory.add(kMsgs * kSlot, kAccessLocalWrite);
  std::vector<uint32_t> lens(kMsgs);
  std::vector<Sge> sges(kMsgs);
  std::mt19937_64 gen(GetParam());
  for (int i = 0; i < kMsgs; ++i) {
    lens[i] = 1 + static_cast<uint32_t>(gen() % kSlot);
    auto data = pattern(lens[i], static_cast<uint8_t>(i * 13));
    std::copy(data.begin(), data.end(), src.data.begin() + i * kSlot);
    ASSERT_EQ(p.b.post_recv(i, dst, kSlot, i * kSlot), 0);
    sges[i] = {src.va + i * kSlot, lens[i], src.key};
    SendWr wr = make_wr(i, WrOpcode::kSendWithImm, &sges[i], 1);
    wr.imm = static_cast<uint32_t>(i);
    ASSERT_EQ(p.a.qp->post_send(wr), 0);
  }
  run_lossy(p, w);
  EXPECT_EQ(p.a.send_cq.entries.size(), static_cast<size_t>(kMsgs));
  for (auto& c : p.a.send_cq.entries) EXPECT_EQ(c.status, WcStatus::kSuccess);
  size_t delivered = 0;
  uint64_t last_wr = 0;
  for (const Completion& c : p.b.recv_cq.entries) {
    ASSERT_EQ(c.status, WcStatus::kSuccess);
    EXPECT_GE(c.wr_id, last_wr);  // receive WQEs complete in posting order
    last_wr = c.wr_id;
    const uint32_t id = c.imm_or_invalidated_rkey;
    ASSERT_LT(id, static_cast<uint32_t>(kMsgs));
    EXPECT_EQ(c.byte_len, lens[id]);
    auto expect = pattern(lens[id], static_cast<uint8_t>(id * 13));
    EXPECT_TRUE(std::equal(expect.begin(), expect.end(), dst.data.begin() + c.wr_id * kSlot))
        << "message " << id << " in WQE " << c.wr_id;
    ++delivered;
  }
  // Which messages the seeded wire tears is fixed by the seed, so the count is exact; every seed
  // here loses some and keeps most.
  constexpr size_t kDelivered[] = {35, 40, 35, 34};  // seeds 11 to 14
  EXPECT_EQ(delivered, kDelivered[GetParam() - 11]);
  std::printf("seed %lu: %zu of %d messages delivered\n", GetParam(), delivered, kMsgs);
  EXPECT_EQ(p.b.qp->state(), QpState::kRts);
}

INSTANTIATE_TEST_SUITE_P(Seeds, UcLoss, ::testing::Values(11, 12, 13, 14));

}  // namespace
}  // namespace uroce::transport::test
