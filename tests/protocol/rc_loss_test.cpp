// Two RC QPs over a seeded lossy, duplicating, reordering wire: every WR completes once,
// successfully, in order; data lands intact; atomics execute exactly once. Each seed runs with
// go-back-N on both ends, selective repeat on both ends, and each against the other.
#include "pair.h"

namespace uroce::transport::test {
namespace {

// The first offset where `got` differs from `want`, or -1 when they are equal.
long first_difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got.size() != want.size()) return static_cast<long>(std::min(got.size(), want.size()));
  const auto m = std::mismatch(got.begin(), got.end(), want.begin());
  return m.first == got.end() ? -1 : m.first - got.begin();
}

struct Modes {
  LossRecovery a, b;
};
class RcLoss : public ::testing::TestWithParam<std::tuple<uint64_t, int>> {
 protected:
  static constexpr Modes kModes[] = {
      {LossRecovery::kGoBackN, LossRecovery::kGoBackN},
      {LossRecovery::kSelectiveRepeat, LossRecovery::kSelectiveRepeat},
      {LossRecovery::kSelectiveRepeat, LossRecovery::kGoBackN},
      {LossRecovery::kGoBackN, LossRecovery::kSelectiveRepeat},
  };
  uint64_t seed() const { return std::get<0>(GetParam()); }
  Modes modes() const { return kModes[std::get<1>(GetParam())]; }
};

TEST_P(RcLoss, EveryOperationCompletesOnceInOrderWithIntactData) {
  QpConfig cfg;
  cfg.path_mtu_bytes = 256;
  cfg.timeout = 8;  // ~1 ms
  cfg.retry_cnt = 7;
  cfg.rnr_retry = 7;
  cfg.min_rnr_timer = 1;
  cfg.max_rd_atomic = 4;
  cfg.max_dest_rd_atomic = 4;
  cfg.max_psn_window = 64;
  Pair p(QpType::kRc, cfg, 0xfffff0, 0xffffe0);  // both PSN spaces wrap during the run
  {
    // Each end's own loss recovery, set before anything is sent (configure takes it all again).
    cfg.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    QpConfig ca = cfg, cb = cfg;
    ca.dest_qpn = Pair::kQpnB, ca.sq_psn = Psn(0xfffff0), ca.rq_psn = Psn(0xffffe0);
    cb.dest_qpn = Pair::kQpnA, cb.sq_psn = Psn(0xffffe0), cb.rq_psn = Psn(0xfffff0);
    ca.loss_recovery = modes().a;
    cb.loss_recovery = modes().b;
    p.a.qp->configure(ca);
    p.b.qp->configure(cb);
  }
  Lossy w(seed(), 0.08, 0.05, 0.05);
  auto& src = p.a.memory.add(64 * 1024, kAccessLocalWrite);
  auto& rd = p.a.memory.add(64 * 1024, kAccessLocalWrite);
  auto& rbuf = p.b.memory.add(64 * 1024, kAccessLocalWrite);
  auto& target = p.b.memory.add(
      64 * 1024, kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic | kAccessLocalWrite);
  src.data = pattern(src.data.size(), 3);
  target.data = pattern(target.data.size(), 9);
  std::vector<uint8_t> expect_target = target.data;
  constexpr int kOps = 120;
  const std::vector<uint8_t> read_source = target.data;  // READs read the lower half only
  // Every READ of a range lands at the same offset of `rd`, so overlapping READs agree; the
  // fetch-add results go to rd + 60000, above every READ.
  std::vector<uint8_t> expect_rd = rd.data;
  std::vector<uint8_t> expect_rbuf = rbuf.data;
  std::vector<uint32_t> send_len(kOps, 0);
  uint64_t first_packets = 0;  // what A sends when nothing is lost
  std::mt19937_64 gen(seed() * 7 + 1);
  std::vector<Sge> sges(kOps);
  uint64_t adds = 0;
  int sends = 0;
  for (int i = 0; i < kOps; ++i) {
    const uint32_t len = 1 + static_cast<uint32_t>(gen() % 2000);
    const uint32_t off = static_cast<uint32_t>(gen() % 16) * 1024;
    SendWr wr;
    wr.wr_id = i;
    wr.flags = kSendSignaled;
    switch (gen() % 4) {
      case 0:
        wr.opcode = WrOpcode::kSend;
        sges[i] = {src.va + off, len, src.key};
        ASSERT_EQ(p.b.post_recv(i, rbuf, 2048, static_cast<uint32_t>(sends % 30) * 2048), 0);
        std::copy_n(src.data.begin() + off, len, expect_rbuf.begin() + (sends % 30) * 2048);
        send_len[i] = len;
        first_packets += (len + 255) / 256;
        ++sends;
        break;
      case 1:
        wr.opcode = WrOpcode::kRdmaWrite;
        sges[i] = {src.va + off, len, src.key};
        wr.remote_addr = target.va + 32768 + off;
        std::copy_n(src.data.begin() + off, len, expect_target.begin() + 32768 + off);
        first_packets += (len + 255) / 256;
        break;
      case 2:
        wr.opcode = WrOpcode::kRdmaRead;
        sges[i] = {rd.va + off, len, rd.key};
        wr.remote_addr = target.va + off;
        std::copy_n(read_source.begin() + off, len, expect_rd.begin() + off);
        ++first_packets;
        break;
      default:
        wr.opcode = WrOpcode::kAtomicFetchAdd;
        sges[i] = {rd.va + 60000, 8, rd.key};
        wr.remote_addr = target.va + 30000 - 30000 % 8;
        wr.compare_add = 1;
        ++adds;
        ++first_packets;
        break;
    }
    wr.rkey = target.key;
    wr.sg_list = std::span<const Sge>(&sges[i], 1);
    ASSERT_EQ(p.a.qp->post_send(wr), 0);
  }
  // The atomic target lies in the READ half, above the highest byte a READ reads.
  uint64_t counter_before = 0;
  std::memcpy(&counter_before, read_source.data() + 30000 - 30000 % 8, 8);
  run_lossy(p, w);

  ASSERT_EQ(p.a.send_cq.entries.size(), static_cast<size_t>(kOps));
  for (int i = 0; i < kOps; ++i) {
    Completion c = p.a.send_cq.pop();
    EXPECT_EQ(c.wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(c.status, WcStatus::kSuccess) << "wr " << i;
  }
  ASSERT_EQ(p.b.recv_cq.entries.size(), static_cast<size_t>(sends));
  for (int i = 0; i < kOps; ++i) {
    if (send_len[i] == 0) continue;
    Completion c = p.b.recv_cq.pop();
    EXPECT_EQ(c.wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(c.status, WcStatus::kSuccess) << "wr " << i;
    EXPECT_EQ(c.byte_len, send_len[i]) << "wr " << i;
  }
  // A receive slot reused by a later SEND holds that SEND's bytes over the earlier one's.
  EXPECT_EQ(first_difference(rbuf.data, expect_rbuf), -1);
  uint64_t counter = 0;
  std::memcpy(&counter, target.data.data() + 30000 - 30000 % 8, 8);
  EXPECT_EQ(counter, counter_before + adds);  // exactly once each, despite duplicates
  if (adds > 0) {
    // The last fetch-add returns the value the ones before it left.
    const uint64_t last_fetched = counter_before + adds - 1;
    std::memcpy(expect_rd.data() + 60000, &last_fetched, 8);
  }
  EXPECT_EQ(first_difference(rd.data, expect_rd), -1);
  // READs leave the lower half as it was but for the counter; WRITEs fill the upper half.
  std::memcpy(expect_target.data() + 30000 - 30000 % 8, &counter, 8);
  EXPECT_EQ(first_difference(target.data, expect_target), -1);
  EXPECT_EQ(p.a.qp->state(), QpState::kRts);
  EXPECT_EQ(p.b.qp->state(), QpState::kRts);
  // A sends only requests: each packet is a first transmission or a counted retransmission.
  EXPECT_EQ(p.a.qp->counters().tx_packets,
            first_packets + p.a.qp->counters().retransmitted_packets);
  // How many go again follows from which packets the seeded wire loses and the two ends' modes;
  // the run is deterministic, so the count is too (a change here is a change in recovery).
  constexpr uint64_t kRetransmitted[8][4] = {
      {1087, 74, 662, 396}, {1303, 59, 680, 482}, {1028, 59, 647, 599},  {1163, 63, 550, 344},
      {1611, 83, 764, 726}, {844, 129, 627, 568}, {1116, 102, 668, 792}, {1065, 71, 712, 668},
  };
  EXPECT_EQ(p.a.qp->counters().retransmitted_packets,
            kRetransmitted[seed() - 1][std::get<1>(GetParam())]);
  std::printf(
      "seed %lu modes %d: tx %lu retx %lu timeouts %lu seqnak %lu dup %lu held %lu virtual %lu "
      "us\n",
      seed(), std::get<1>(GetParam()), p.a.qp->counters().tx_packets,
      p.a.qp->counters().retransmitted_packets, p.a.qp->counters().local_ack_timeouts,
      p.a.qp->counters().seq_naks_received, p.b.qp->counters().duplicate_requests,
      p.b.qp->counters().ooo_buffered, (p.now - 1000000) / 1000);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RcLoss,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8),
                                            ::testing::Range(0, 4)));

}  // namespace
}  // namespace uroce::transport::test
