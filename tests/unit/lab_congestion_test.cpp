// DCQCN wired into the transport (transport/congestion.h, docs/cc.md "Wiring DCQCN into a QP"):
// CE-marked requests make the responder's QP send CNPs, at most one per interval and with the
// fields of IBA annex A17.9.2; a CNP cuts the requester's pacer by the reaction point's rule;
// with no more CNPs the timers bring the rate back.
#include <gtest/gtest.h>

#include "protocol/harness.h"

namespace uroce::transport::test {
namespace {

// Keeps what CaptureSink drops: the ECT bit and the traffic class each packet goes with.
struct TxRecord {
  std::vector<uint8_t> bytes;
  bool ect = true;
  uint8_t traffic_class = 0;
  Gid dgid{};
};
class RecordSink : public PacketSink {
 public:
  void transmit(const TxPacket& t) override {
    TxRecord r;
    r.bytes.assign(t.header.begin(), t.header.begin() + t.header_len);
    r.ect = t.ect;
    r.traffic_class = t.dest ? t.dest->traffic_class : 0;
    r.dgid = t.dest ? t.dest->dgid : Gid{};
    packets.push_back(std::move(r));
  }
  std::vector<TxRecord> cnps() const {
    std::vector<TxRecord> out;
    for (const auto& p : packets)
      if (!p.bytes.empty() && p.bytes[0] == wire::op::kCnp) out.push_back(p);
    return out;
  }
  std::vector<TxRecord> packets;
};

constexpr uint32_t kLocalQpn = 5, kRemoteQpn = 9;

QpConfig config(CcAlgorithm algo) {
  QpConfig c;
  c.dest_qpn = kRemoteQpn;
  c.path.dgid = gid_from_ipv4({10, 0, 0, 1});
  c.path.traffic_class = 26 << 2;
  c.qp_access_flags = kAccessRemoteWrite;
  c.congestion.algorithm = algo;
  c.congestion.line_rate_bps = 100e9;
  return c;
}

// An RDMA WRITE ONLY of 8 bytes at `psn`, CE-marked or not.
Packet write_only(FakeMemory::Region& r, uint32_t psn, bool ce) {
  Packet p = make_packet(wire::op::kRcWriteOnly, psn, pattern(8), kLocalQpn);
  p.hdr.reth = wire::Reth{r.va, r.key, 8};
  p.ce = ce;
  return p;
}

TEST(LabCongestion, CeMarkedRequestsGetOneCnpPerInterval) {
  Endpoint ep(QpType::kRc, kLocalQpn);
  auto& mr = ep.memory.add(4096, kAccessLocalWrite | kAccessRemoteWrite);
  ep.bring_up(config(CcAlgorithm::kDcqcnPaper));
  RecordSink out;
  // Paper NP interval: 50 us. CE at 0, 10, 49.999 and 50 us: CNPs at 0 and 50 only.
  const Nanos times[] = {0, 10'000, 49'999, 50'000};
  size_t cnps_after[] = {1, 1, 1, 2};
  for (size_t i = 0; i < 4; ++i) {
    ep.qp->receive(write_only(mr, static_cast<uint32_t>(i), true).rx(), times[i]);
    const bool due = cnps_after[i] > (i == 0 ? 0 : cnps_after[i - 1]);
    EXPECT_EQ(ep.qp->next_deadline(times[i]) == times[i], due) << "only a due CNP asks for now";
    ep.qp->transmit(times[i], out, 100);
    EXPECT_EQ(out.cnps().size(), cnps_after[i]) << "after CE " << i;
  }
  // A packet without CE earns nothing even after the interval.
  ep.qp->receive(write_only(mr, 4, false).rx(), 200'000);
  ep.qp->transmit(200'000, out, 100);
  EXPECT_EQ(out.cnps().size(), 2u);
  EXPECT_EQ(ep.qp->counters().ce_marked, 4u);
  EXPECT_EQ(ep.qp->counters().cnps_sent, 2u);

  for (const TxRecord& c : out.cnps()) {
    // IBA annex A17.9.2: BTH opcode 0x81, flags 0, P_Key 0xffff, BECN, DestQP = the sender's QP,
    // PSN 0, then 16 reserved zero bytes; not ECN-capable; DSCP 48.
    ASSERT_EQ(c.bytes.size(), 28u);
    const auto parsed = wire::parse_transport(c.bytes);
    ASSERT_TRUE(parsed.ok());
    EXPECT_TRUE(parsed->hdr.bth.becn);
    EXPECT_EQ(parsed->hdr.bth.dest_qp, kRemoteQpn);
    EXPECT_EQ(parsed->hdr.bth.psn.value(), 0u);
    EXPECT_EQ(parsed->hdr.bth.pkey, 0xffff);
    EXPECT_EQ(c.bytes[1], 0u);
    for (size_t i = 12; i < 28; ++i) EXPECT_EQ(c.bytes[i], 0u);
    EXPECT_FALSE(c.ect);
    EXPECT_EQ(c.traffic_class, 48 << 2);
    EXPECT_EQ(c.dgid, gid_from_ipv4({10, 0, 0, 1}));
  }
  // The data (ACKs) keeps its own class and stays ECN-capable.
  for (const TxRecord& p : out.packets) {
    if (p.bytes[0] == wire::op::kCnp) continue;
    EXPECT_EQ(p.traffic_class, 26 << 2);
    EXPECT_TRUE(p.ect);
  }
}

TEST(LabCongestion, Mlx5IntervalAndConfiguredInterval) {
  Endpoint ep(QpType::kRc, kLocalQpn);
  auto& mr = ep.memory.add(4096, kAccessLocalWrite | kAccessRemoteWrite);
  QpConfig c = config(CcAlgorithm::kDcqcnMlx5);
  ep.bring_up(c);
  RecordSink out;
  // mlx5 min_time_between_cnps: 4 us. CE every 1 us for 10 us: CNPs at 0, 4, 8 us.
  for (uint32_t i = 0; i <= 10; ++i) {
    ep.qp->receive(write_only(mr, i, true).rx(), i * 1000);
    ep.qp->transmit(i * 1000, out, 100);
  }
  EXPECT_EQ(out.cnps().size(), 3u);
}

TEST(LabCongestion, OffSendsNoCnpAndLeavesThePacerAlone) {
  Endpoint ep(QpType::kRc, kLocalQpn);
  auto& mr = ep.memory.add(4096, kAccessLocalWrite | kAccessRemoteWrite);
  ep.bring_up(config(CcAlgorithm::kOff));
  RecordSink out;
  ep.qp->receive(write_only(mr, 0, true).rx(), 0);
  ep.qp->transmit(0, out, 100);
  EXPECT_TRUE(out.cnps().empty());
  EXPECT_EQ(ep.qp->counters().ce_marked, 1u);
  EXPECT_EQ(ep.qp->counters().cnps_sent, 0u);
  ep.qp->receive(make_packet(wire::op::kCnp, 0, {}, kLocalQpn).rx(), 10);
  EXPECT_EQ(ep.qp->counters().cnps_received, 1u);
  EXPECT_EQ(ep.qp->pacer().rate_bps(), cc::Pacer::kUnlimited);
}

Packet cnp() {
  Packet p = make_packet(wire::op::kCnp, 0, {}, kLocalQpn);
  p.hdr.bth.becn = true;
  return p;
}

TEST(LabCongestion, CnpCutsThePacerRate) {
  Endpoint paper(QpType::kRc, kLocalQpn), mlx5(QpType::kRc, kLocalQpn);
  paper.bring_up(config(CcAlgorithm::kDcqcnPaper));
  mlx5.bring_up(config(CcAlgorithm::kDcqcnMlx5));
  EXPECT_EQ(paper.qp->pacer().rate_bps(), 100'000'000'000u) << "starts at line rate";
  paper.deliver(cnp(), 1000);
  mlx5.deliver(cnp(), 1000);
  // RC <- RC (1 - alpha/2) with the initial alpha: 1 (paper), 1023/1024 (mlx5).
  EXPECT_EQ(paper.qp->pacer().rate_bps(), 50'000'000'000u);
  EXPECT_NEAR(static_cast<double>(mlx5.qp->pacer().rate_bps()), 100e9 * (1 - 1023.0 / 2048), 1);
  EXPECT_EQ(paper.qp->counters().cnps_received, 1u);
  // A second CNP cuts again with alpha <- (1 - g) alpha + g = 1: to 25 Gb/s.
  paper.deliver(cnp(), 2000);
  EXPECT_EQ(paper.qp->pacer().rate_bps(), 25'000'000'000u);
}

TEST(LabCongestion, RateRecoversWithoutCnps) {
  Endpoint ep(QpType::kRc, kLocalQpn);
  ep.bring_up(config(CcAlgorithm::kDcqcnPaper));
  RecordSink out;
  const Nanos t0 = 1000;
  ep.deliver(cnp(), t0);
  ASSERT_EQ(ep.qp->pacer().rate_bps(), 50'000'000'000u);
  // Drive the QP only at the deadlines it asks for, as a device would.
  Nanos now = t0;
  uint64_t last = ep.qp->pacer().rate_bps();
  int wakeups = 0;
  while (now < t0 + 5 * 55'000) {
    now = ep.qp->next_deadline(now + 1);
    ASSERT_NE(now, kNever);
    ep.qp->transmit(now, out, 100);
    EXPECT_GE(ep.qp->pacer().rate_bps(), last);
    last = ep.qp->pacer().rate_bps();
    ++wakeups;
  }
  EXPECT_EQ(wakeups, 5) << "one wake-up per timer period T = 55 us";
  // Five fast-recovery steps RC <- (RT + RC)/2 toward RT = 100G: 100 - 50/32 Gb/s.
  EXPECT_NEAR(static_cast<double>(ep.qp->pacer().rate_bps()), 100e9 - 50e9 / 32, 2);
  // Left alone, it returns to line rate and the timers stop.
  for (int i = 0; i < 100000 && ep.qp->next_deadline(now + 1) != kNever; ++i) {
    now = ep.qp->next_deadline(now + 1);
    ep.qp->transmit(now, out, 100);
  }
  EXPECT_EQ(ep.qp->pacer().rate_bps(), 100'000'000'000u);
  EXPECT_EQ(ep.qp->next_deadline(now + 1), kNever);
  EXPECT_TRUE(out.cnps().empty());
}

TEST(LabCongestion, UdQpDropsCnps) {
  Endpoint ep(QpType::kUd, kLocalQpn);
  QpConfig c = config(CcAlgorithm::kDcqcnPaper);
  ep.bring_up(c);
  ep.deliver(cnp(), 0);
  EXPECT_EQ(ep.qp->counters().rx_dropped, 1u);
}

}  // namespace
}  // namespace uroce::transport::test
