// The per-QP switches of congestion control and loss recovery (QpInitAttr::congestion,
// QpInitAttr::loss_recovery) reach the transport: through a fake transport, every configure
// carries them; through the real transport, a CE-marked packet makes a CNP only on a QP that
// turned DCQCN on, and a CNP cuts the sender's rate only where DCQCN is on.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "api/uroce.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "verbs_test_support.h"
#include "wire/packet.h"

namespace uroce::verbs {
namespace {

using transport::CcAlgorithm;
using transport::LossRecovery;

uint64_t counter(const QueuePair& qp, std::string_view name) {
  for (const Counter& c : qp.counters())
    if (c.name == name) return c.value;
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

TEST(VerbsCcSwitch, EveryConfigureCarriesTheSwitches) {
  testing::FakeLink link;
  std::vector<testing::FakeTransportQp*> made;
  DeviceConfig dc;
  dc.transport_factory = [&](QpType, uint32_t qpn, const QpCapabilities& caps,
                             transport::MemoryAccess& mem, transport::CompletionSink& s,
                             transport::CompletionSink& r, transport::RecvQueue*) {
    auto q = std::make_unique<testing::FakeTransportQp>(qpn, caps, mem, s, r);
    made.push_back(q.get());
    return std::unique_ptr<transport::TransportQp>(std::move(q));
  };
  Device dev(link, dc);
  auto ctx = std::move(dev.open().value());
  auto pd = std::move(ctx->alloc_pd().value());
  auto cq = std::move(ctx->create_cq(16).value());
  QpInitAttr a;
  a.send_cq = a.recv_cq = cq.get();
  a.congestion.algorithm = CcAlgorithm::kDcqcnMlx5;
  a.congestion.line_rate_bps = 5e9;
  a.congestion.cnp_interval_ns = 20'000;
  a.loss_recovery = LossRecovery::kSelectiveRepeat;
  a.max_psn_window = 96;
  auto qp = std::move(pd->create_qp(a).value());
  ASSERT_EQ(made.size(), 1u);
  Endpoint remote{gid_from_ipv4({10, 0, 0, 2}), 0x42, 7};
  ASSERT_EQ(uroce::connect(*qp, 1, remote), 0);
  ASSERT_GE(made[0]->configures, 3);  // INIT, RTR, RTS
  const transport::QpConfig& c = made[0]->config;
  EXPECT_EQ(c.congestion.algorithm, CcAlgorithm::kDcqcnMlx5);
  EXPECT_EQ(c.congestion.line_rate_bps, 5e9);
  EXPECT_EQ(c.congestion.cnp_interval_ns, 20'000u);
  EXPECT_EQ(c.loss_recovery, LossRecovery::kSelectiveRepeat);
  EXPECT_EQ(c.max_psn_window, 96u);
  EXPECT_EQ(c.dest_qpn, 0x42u);  // and the ordinary attributes still arrive with them

  // The defaults are what the transport did before the switches existed.
  QpInitAttr plain;
  plain.send_cq = plain.recv_cq = cq.get();
  auto qp2 = std::move(pd->create_qp(plain).value());
  ASSERT_EQ(uroce::connect(*qp2, 1, remote), 0);
  EXPECT_EQ(made[1]->config.congestion.algorithm, CcAlgorithm::kOff);
  EXPECT_EQ(made[1]->config.loss_recovery, LossRecovery::kGoBackN);
  EXPECT_EQ(made[1]->config.max_psn_window, transport::QpConfig{}.max_psn_window);
  qp2.reset();
  qp.reset();
}

// A device's totals: events add up (destroyed QPs included), the rate gauge is the sum over live
// QPs, the minimum the smallest non-zero one among them, and a destroyed QP leaves no gauge.
TEST(VerbsCcSwitch, DeviceCombinesRateGaugesOverLiveQps) {
  testing::FakeWorld w;
  auto device_counter = [&](std::string_view name) {
    for (const Counter& c : w.device->counters())
      if (c.name == name) return c.value;
    ADD_FAILURE() << "no device counter " << name;
    return uint64_t{0};
  };
  auto a = w.qp(), b = w.qp(), off = w.qp();
  w.fake(*a).counters_.rate_cuts = 3;
  w.fake(*a).counters_.dcqcn_rate_mbps = 4000;
  w.fake(*a).counters_.dcqcn_min_rate_mbps = 1500;
  w.fake(*b).counters_.rate_cuts = 2;
  w.fake(*b).counters_.dcqcn_rate_mbps = 6000;
  w.fake(*b).counters_.dcqcn_min_rate_mbps = 2500;  // `off` keeps 0: DCQCN off, not a minimum
  EXPECT_EQ(device_counter("rp_cnp_rate_cuts"), 5u);
  EXPECT_EQ(device_counter("rp_rate_mbps"), 10'000u);
  EXPECT_EQ(device_counter("rp_min_rate_mbps"), 1500u);
  a.reset();
  EXPECT_EQ(device_counter("rp_cnp_rate_cuts"), 5u);  // a's cuts stay in the total
  EXPECT_EQ(device_counter("rp_rate_mbps"), 6000u);   // its rate does not
  EXPECT_EQ(device_counter("rp_min_rate_mbps"), 2500u);
  b.reset();
  off.reset();
  EXPECT_EQ(device_counter("rp_rate_mbps"), 0u);
  EXPECT_EQ(device_counter("rp_min_rate_mbps"), 0u);
  EXPECT_EQ(device_counter("rp_cnp_rate_cuts"), 5u);
}

using testing::PairLink;

struct Side {
  Side(PairLink& l, CcAlgorithm cc) : dev(l) {
    ctx = std::move(dev.open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(256).value());
    mem.resize(256 * 1024);
    mr = std::move(pd->reg_mr(mem.data(), mem.size(),
                              transport::kAccessLocalWrite | transport::kAccessRemoteWrite)
                       .value());
    QpInitAttr a;
    a.send_cq = a.recv_cq = cq.get();
    a.cap.max_send_wr = 64;
    a.congestion.algorithm = cc;
    a.congestion.line_rate_bps = 10e9;
    qp = std::move(pd->create_qp(a).value());
  }
  ~Side() {
    qp.reset();
    mr.reset();
    cq.reset();
    pd.reset();
    ctx.reset();
  }
  Device dev;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<uint8_t> mem;
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<QueuePair> qp;
};

struct CcRun {
  uint64_t marked = 0, cnps_sent = 0, cnps_handled = 0, cuts = 0;
  uint64_t rate_mbps = 0, min_rate_mbps = 0;  // the sender's DCQCN gauges
  uint64_t completions = 0;
};

// A writes 32 x 4 KiB to B over a wire that marks every packet B receives; B answers CE with
// CNPs if B's QP has DCQCN on; A cuts its rate if A's has.
CcRun run_marked_writes(CcAlgorithm sender, CcAlgorithm receiver) {
  PairLink la(gid_from_ipv4({10, 0, 0, 1})), lb(gid_from_ipv4({10, 0, 0, 2}));
  la.connect(lb);
  lb.connect(la);
  lb.mark_ce = true;
  Side a(la, sender), b(lb, receiver);
  EXPECT_EQ(uroce::connect(*a.qp, 100, {b.dev.gid(), b.qp->qp_num(), 200}), 0);
  EXPECT_EQ(uroce::connect(*b.qp, 200, {a.dev.gid(), a.qp->qp_num(), 100}), 0);
  constexpr int kWrites = 32;
  for (int i = 0; i < kWrites; ++i) {
    transport::Sge sge{reinterpret_cast<uint64_t>(a.mem.data()) + i * 4096u, 4096, a.mr->lkey()};
    transport::SendWr w;
    w.wr_id = static_cast<uint64_t>(i);
    w.opcode = transport::WrOpcode::kRdmaWrite;
    w.flags = transport::kSendSignaled;
    w.sg_list = {&sge, 1};
    w.remote_addr = reinterpret_cast<uint64_t>(b.mem.data()) + i * 4096u;
    w.rkey = b.mr->rkey();
    EXPECT_EQ(a.qp->post_send(w), 0);
  }
  CcRun r;
  std::array<transport::Completion, 16> out;
  Nanos now = 0;
  for (int pass = 0; pass < 200'000 && r.completions < kWrites; ++pass) {
    testing::step_pair(now, a.dev, b.dev);
    size_t k = a.cq->poll(out);
    for (size_t i = 0; i < k; ++i) EXPECT_EQ(out[i].status, transport::WcStatus::kSuccess);
    r.completions += k;
  }
  r.marked = counter(*b.qp, "np_ecn_marked_roce_packets");
  r.cnps_sent = counter(*b.qp, "np_cnp_sent");
  r.cnps_handled = counter(*a.qp, "rp_cnp_handled");
  r.cuts = counter(*a.qp, "rp_cnp_rate_cuts");
  r.rate_mbps = counter(*a.qp, "rp_rate_mbps");
  r.min_rate_mbps = counter(*a.qp, "rp_min_rate_mbps");
  return r;
}

TEST(VerbsCcSwitch, CeMakesCnpsOnlyWhereDcqcnIsOn) {
  CcRun off = run_marked_writes(CcAlgorithm::kOff, CcAlgorithm::kOff);
  EXPECT_EQ(off.completions, 32u);
  EXPECT_EQ(off.marked, 128u);  // the marks are counted either way
  EXPECT_EQ(off.cnps_sent, 0u);
  EXPECT_EQ(off.cnps_handled, 0u);
  EXPECT_EQ(off.rate_mbps, 0u);  // no DCQCN, no rate
  EXPECT_EQ(off.min_rate_mbps, 0u);

  CcRun on = run_marked_writes(CcAlgorithm::kDcqcnMlx5, CcAlgorithm::kDcqcnMlx5);
  EXPECT_EQ(on.completions, 32u);
  EXPECT_EQ(on.marked, 128u);                // 32 x 4 KiB in 1 KiB packets
  EXPECT_EQ(on.cnps_sent, 67u);              // the pacer charged headers and framing too (6248514)
  EXPECT_EQ(on.cnps_handled, on.cnps_sent);  // a lossless wire
  EXPECT_EQ(on.cuts, 67u);
  // Every packet marked: the rate only falls (10 Gb/s line rate, alpha starts near 1).
  EXPECT_LT(on.min_rate_mbps, 5'001u);
  EXPECT_GE(on.rate_mbps, on.min_rate_mbps);
  EXPECT_LT(on.rate_mbps, 10'000u);

  // The receiver's switch decides whether CNPs go; the sender's whether they cut.
  CcRun np_only = run_marked_writes(CcAlgorithm::kOff, CcAlgorithm::kDcqcnPaper);
  EXPECT_EQ(np_only.cnps_sent, 1u);  // the paper's 50 us apart: the run is shorter
  EXPECT_EQ(np_only.cnps_handled, np_only.cnps_sent);  // counted ...
  EXPECT_EQ(np_only.cuts, 0u);                         // ... but no cut
  EXPECT_EQ(np_only.min_rate_mbps, 0u);
}

// The environment the drop-in libibverbs reads (api/uroce.h, docs/cc.md).
TEST(VerbsCcSwitch, EnvironmentChoosesPerQpOptions) {
  std::map<std::string, std::string> env;
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  std::vector<std::string> errors;
  QpTransportOptions o = qp_transport_options_from_env(&errors, get);
  EXPECT_EQ(o.congestion.algorithm, CcAlgorithm::kOff);
  EXPECT_EQ(o.congestion.line_rate_bps, kDefaultCcLineRateBps);
  EXPECT_EQ(o.loss_recovery, LossRecovery::kGoBackN);
  EXPECT_EQ(o.write_segments, WriteSegments::kPerPacket);
  EXPECT_TRUE(errors.empty());

  env = {{"UROCE_CC", "dcqcn"},
         {"UROCE_CC_LINE_GBPS", "2.5"},
         {"UROCE_CC_CNP_INTERVAL_US", "50"},
         {"UROCE_LOSS_RECOVERY", "sr"},
         {"UROCE_WRITE_SEGMENTS", "message"}};
  o = qp_transport_options_from_env(&errors, get);
  EXPECT_EQ(o.write_segments, WriteSegments::kPerMessage);
  EXPECT_EQ(o.congestion.algorithm, CcAlgorithm::kDcqcnMlx5);
  EXPECT_EQ(o.congestion.line_rate_bps, 2.5e9);
  EXPECT_EQ(o.congestion.cnp_interval_ns, 50'000u);
  EXPECT_EQ(o.loss_recovery, LossRecovery::kSelectiveRepeat);
  EXPECT_TRUE(errors.empty());
  env["UROCE_CC"] = "dcqcn-paper";
  EXPECT_EQ(qp_transport_options_from_env(&errors, get).congestion.algorithm,
            CcAlgorithm::kDcqcnPaper);
  env["UROCE_CC"] = "dcqcn-hpcc";
  EXPECT_EQ(qp_transport_options_from_env(&errors, get).congestion.algorithm,
            CcAlgorithm::kDcqcnHpcc);

  // Bad values keep the defaults and say why, one line each.
  env = {{"UROCE_CC", "cubic"},
         {"UROCE_CC_LINE_GBPS", "0"},
         {"UROCE_CC_CNP_INTERVAL_US", "5x"},
         {"UROCE_LOSS_RECOVERY", "irn"},
         {"UROCE_WRITE_SEGMENTS", "jumbo"}};
  o = qp_transport_options_from_env(&errors, get);
  EXPECT_EQ(o.write_segments, WriteSegments::kPerPacket);
  EXPECT_EQ(o.congestion.algorithm, CcAlgorithm::kOff);
  EXPECT_EQ(o.congestion.line_rate_bps, kDefaultCcLineRateBps);
  EXPECT_EQ(o.congestion.cnp_interval_ns, 0u);
  EXPECT_EQ(o.loss_recovery, LossRecovery::kGoBackN);
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_NE(errors[0].find("UROCE_CC=cubic"), std::string::npos);
}

}  // namespace
}  // namespace uroce::verbs
