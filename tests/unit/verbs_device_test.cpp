// The device: attributes and queries, progress() (demultiplexing by DestQP with counted drops,
// round-robin transmit within a budget, deadlines), port events, counters, address handles, SRQs,
// and enum values equal to libibverbs'.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <map>
#include <thread>

#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "verbs_test_support.h"

namespace uroce::verbs {
namespace {

using testing::FakeWorld;

template <typename A, typename B>
constexpr bool eq(A a, B b) {
  return static_cast<long long>(a) == static_cast<long long>(b);
}
using testing::good_attr;

void to_rts(QueuePair& qp) {
  ASSERT_EQ(
      qp.modify(good_attr(QpState::kInit), kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  ASSERT_EQ(qp.modify(good_attr(QpState::kRtr), kQpState | kQpAv | kQpPathMtu | kQpDestQpn |
                                                    kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer),
            0);
  ASSERT_EQ(qp.modify(good_attr(QpState::kRts), kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt |
                                                    kQpRnrRetry | kQpMaxQpRdAtomic),
            0);
}

uint64_t counter(const std::vector<Counter>& cs, std::string_view name) {
  for (const Counter& c : cs)
    if (c.name == name) return c.value;
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

TEST(VerbsDevice, AttributesAndQueries) {
  FakeWorld w;
  EXPECT_EQ(w.device->gid(), gid_from_ipv4({10, 0, 0, 1}));
  // The GID's low eight bytes (::ffff:10.0.0.1) with the universal/local bit flipped, as a
  // modified EUI-64.
  EXPECT_EQ(w.device->attr().node_guid, 0x0200ffff0a000001u);
  EXPECT_EQ(w.device->attr().atomic_cap, AtomicCap::kHca);
  auto port = w.ctx->query_port(1);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(port->state, PortState::kActive);
  EXPECT_EQ(port->link_layer, kLinkLayerEthernet);
  EXPECT_EQ(w.ctx->query_port(2).error(), EINVAL);
  // The GID table: the one address twice, RoCEv2 at 0 and RoCE v1 at 1.
  EXPECT_EQ(port->gid_tbl_len, 2);
  EXPECT_EQ(w.ctx->query_gid(1, 0).value(), w.device->gid());
  EXPECT_EQ(w.ctx->query_gid(1, 1).value(), w.device->gid());
  EXPECT_EQ(w.ctx->query_gid(1, 2).error(), EINVAL);
  EXPECT_EQ(w.ctx->query_gid(1, -1).error(), EINVAL);
  EXPECT_EQ(w.ctx->query_gid(2, 0).error(), EINVAL);
  EXPECT_EQ(w.ctx->query_gid_type(1, 0).value(), GidType::kRoceV2);
  EXPECT_EQ(w.ctx->query_gid_type(1, 1).value(), GidType::kRoceV1);
  EXPECT_EQ(w.ctx->query_gid_type(1, 2).error(), EINVAL);
  EXPECT_EQ(w.ctx->query_gid_type(2, 1).error(), EINVAL);
  EXPECT_EQ(w.ctx->query_pkey(1, 0).value(), 0xffff);
  // Two devices on different addresses hand out different GUIDs and keys.
  testing::FakeLink other_link(gid_from_ipv4({10, 0, 0, 9}));
  Device other(other_link);
  EXPECT_NE(other.attr().node_guid, w.device->attr().node_guid);
}

TEST(VerbsDevice, ProgressDemultiplexesByDestQpAndCountsDrops) {
  FakeWorld w;
  auto a = w.qp(), b = w.qp();
  to_rts(*a);
  ASSERT_EQ(
      b->modify(good_attr(QpState::kInit), kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  w.link.inject(a->qp_num());
  w.link.inject(a->qp_num());
  w.link.inject(b->qp_num());  // INIT: dropped (IBA 10.3.1)
  w.link.inject(0x777777);     // nobody
  w.device->progress(0);
  EXPECT_EQ(w.fake(*a).counters_.rx_packets, 2u);
  EXPECT_EQ(w.fake(*b).counters_.rx_packets, 0u);
  auto c = w.device->counters();
  EXPECT_EQ(counter(c, "rx_unknown_qpn_drops"), 1u);
  EXPECT_EQ(counter(c, "rx_qp_state_drops"), 1u);
  EXPECT_EQ(counter(c, "rx_packets"), 2u);
  EXPECT_EQ(w.link.flushes, 1);  // one transmit round per pass
}

TEST(VerbsDevice, ASendOnlyPassTransmitsAndLeavesArrivalsInTheLink) {
  FakeWorld w;
  auto a = w.qp();
  to_rts(*a);
  transport::SendWr s;
  ASSERT_EQ(a->post_send(s), 0);
  w.link.inject(a->qp_num());
  w.device->progress(0, Device::kDefaultBudget, Device::PassScope::kSendOnly);
  EXPECT_EQ(w.link.sent.size(), 1u);
  EXPECT_EQ(w.fake(*a).counters_.rx_packets, 0u);  // still queued in the link
  w.device->progress(0);
  EXPECT_EQ(w.fake(*a).counters_.rx_packets, 1u);
  EXPECT_EQ(w.link.sent.size(), 1u);
}

TEST(VerbsDevice, TransmitIsRoundRobinWithinTheBudget) {
  DeviceConfig cfg;
  cfg.tx_quantum = 2;
  FakeWorld w(cfg);
  std::vector<std::unique_ptr<QueuePair>> qps;
  for (int i = 0; i < 3; ++i) {
    qps.push_back(w.qp());
    to_rts(*qps.back());
    for (uint64_t id = 0; id < 10; ++id) {
      transport::SendWr s;
      s.wr_id = id;
      ASSERT_EQ(qps.back()->post_send(s), 0);
    }
  }
  // A budget of 12 with a quantum of 2: two turns each, so every QP sends 4.
  EXPECT_EQ(w.device->progress(5, 12), 5u);  // the budget ran out: more work now
  std::map<uint8_t, int> per_qp;
  for (const auto& p : w.link.sent) ++per_qp[p.header[0]];
  ASSERT_EQ(per_qp.size(), 3u);
  for (auto& [q, n] : per_qp) EXPECT_EQ(n, 4) << int(q);
  // The rest drains; then the device is idle.
  Nanos next = 0;
  for (int i = 0; i < 10 && next != kNever; ++i) next = w.device->progress(6, 12);
  EXPECT_EQ(next, kNever);
  EXPECT_EQ(w.link.sent.size(), 30u);
}

TEST(VerbsDevice, ProgressReturnsTheEarliestQpDeadline) {
  FakeWorld w;
  auto a = w.qp(), b = w.qp();
  to_rts(*a);
  to_rts(*b);
  w.fake(*a).deadline = 5000;
  w.fake(*b).deadline = 3000;
  EXPECT_EQ(w.device->progress(100), 3000u);
  // A deadline is asked for when a QP is visited: b's timer wakes it at 3000, and then it has
  // none.
  w.fake(*b).deadline = kNever;
  EXPECT_EQ(w.device->progress(200), 3000u);
  EXPECT_EQ(w.device->progress(3000), 5000u);
}

TEST(VerbsDevice, PortStateChangesRaiseEventsOnEveryContext) {
  FakeWorld w;
  auto ctx2 = std::move(w.device->open().value());
  w.device->set_port_state(PortState::kDown);
  EXPECT_EQ(w.ctx->query_port(1)->state, PortState::kDown);
  w.device->set_port_state(PortState::kActive);
  for (Context* c : {w.ctx.get(), ctx2.get()}) {
    auto e1 = c->async_events().get();
    auto e2 = c->async_events().get();
    ASSERT_TRUE(e1.ok() && e2.ok());
    EXPECT_EQ(e1->type, EventType::kPortErr);
    EXPECT_EQ(e2->type, EventType::kPortActive);
    EXPECT_EQ(e2->port, 1);
  }
  // A down port moves nothing.
  auto qp = w.qp();
  to_rts(*qp);
  transport::SendWr s;
  ASSERT_EQ(qp->post_send(s), 0);
  w.device->set_port_state(PortState::kDown);
  EXPECT_EQ(w.device->progress(0), kNever);
  EXPECT_TRUE(w.link.sent.empty());
}

TEST(VerbsDevice, CountersSumOverLiveAndDestroyedQps) {
  FakeWorld w;
  auto a = w.qp();
  to_rts(*a);
  for (int i = 0; i < 3; ++i) w.link.inject(a->qp_num());
  w.device->progress(0);
  {
    auto b = w.qp();
    to_rts(*b);
    for (int i = 0; i < 2; ++i) w.link.inject(b->qp_num());
    w.device->progress(0);
    EXPECT_EQ(counter(w.device->counters(), "rx_packets"), 5u);
  }
  EXPECT_EQ(counter(w.device->counters(), "rx_packets"), 5u);  // b's count survives b
  auto per_qp = a->counters();
  EXPECT_EQ(counter(per_qp, "rx_packets"), 3u);
  for (const char* name :
       {"out_of_sequence", "duplicate_request", "rnr_nak_retry_err", "local_ack_timeout_err",
        "packet_seq_err", "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"})
    counter(per_qp, name);
}

TEST(VerbsDevice, AddressHandlesNeedAGlobalRoute) {
  FakeWorld w;
  AhAttr ah;
  ah.grh.dgid = gid_from_ipv4({10, 0, 0, 7});
  ah.grh.flow_label = 0x12345;
  auto h = w.pd->create_ah(ah);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ((*h)->av().dgid, ah.grh.dgid);
  EXPECT_EQ((*h)->av().flow_label, 0x12345u);
  EXPECT_EQ((*h)->av().udp_src_port & 0xc000, 0xc000);
  EXPECT_EQ(w.pd->users(), 1u);
  ah.is_global = false;
  EXPECT_EQ(w.pd->create_ah(ah).error(), EINVAL);
  ah.is_global = true;
  ah.port_num = 2;
  EXPECT_EQ(w.pd->create_ah(ah).error(), EINVAL);
  h.value().reset();
  EXPECT_EQ(w.pd->users(), 0u);
}

TEST(VerbsDevice, SharedReceiveQueueLimitsAndLimitEvent) {
  FakeWorld w;
  EXPECT_EQ(w.pd->create_srq({0, 1, 0}).error(), EINVAL);
  EXPECT_EQ(w.pd->create_srq({8, transport::kMaxSge + 1, 0}).error(), EINVAL);
  auto srq = std::move(w.pd->create_srq({8, 2, 0}).value());
  EXPECT_EQ(srq->query().max_wr, 8u);
  EXPECT_EQ(srq->modify({0, 0, 9}, kSrqLimit), EINVAL);
  EXPECT_EQ(srq->modify({16, 0, 0}, kSrqMaxWr), EINVAL);
  ASSERT_EQ(srq->modify({0, 0, 2}, kSrqLimit), 0);
  EXPECT_EQ(srq->query().srq_limit, 2u);
  transport::RecvWr r;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(srq->post_recv(r), 0);
  EXPECT_EQ(srq->post_recv(r), ENOMEM);
  // A QP on the SRQ: its own post_recv is EINVAL.
  QpInitAttr a;
  a.send_cq = a.recv_cq = w.cq.get();
  a.srq = srq.get();
  auto qp = std::move(w.pd->create_qp(a).value());
  ASSERT_EQ(
      qp->modify(good_attr(QpState::kInit), kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  EXPECT_EQ(qp->post_recv(r), EINVAL);
  EXPECT_EQ(srq->users(), 1u);
  qp.reset();
  EXPECT_EQ(srq->users(), 0u);
}

TEST(VerbsDevice, EnumValuesEqualLibibverbs) {
  static_assert(eq(kQpState, IBV_QP_STATE) && eq(kQpCurState, IBV_QP_CUR_STATE) &&
                eq(kQpEnSqdAsyncNotify, IBV_QP_EN_SQD_ASYNC_NOTIFY) &&
                eq(kQpAccessFlags, IBV_QP_ACCESS_FLAGS) && eq(kQpPkeyIndex, IBV_QP_PKEY_INDEX) &&
                eq(kQpPort, IBV_QP_PORT) && eq(kQpQkey, IBV_QP_QKEY) && eq(kQpAv, IBV_QP_AV) &&
                eq(kQpPathMtu, IBV_QP_PATH_MTU) && eq(kQpTimeout, IBV_QP_TIMEOUT) &&
                eq(kQpRetryCnt, IBV_QP_RETRY_CNT) && eq(kQpRnrRetry, IBV_QP_RNR_RETRY) &&
                eq(kQpRqPsn, IBV_QP_RQ_PSN) && eq(kQpMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC) &&
                eq(kQpAltPath, IBV_QP_ALT_PATH) && eq(kQpMinRnrTimer, IBV_QP_MIN_RNR_TIMER) &&
                eq(kQpSqPsn, IBV_QP_SQ_PSN) && eq(kQpMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC) &&
                eq(kQpPathMigState, IBV_QP_PATH_MIG_STATE) && eq(kQpCap, IBV_QP_CAP) &&
                eq(kQpDestQpn, IBV_QP_DEST_QPN) && eq(kQpRateLimit, IBV_QP_RATE_LIMIT));
  static_assert(eq(int(EventType::kCqErr), IBV_EVENT_CQ_ERR) &&
                eq(int(EventType::kQpFatal), IBV_EVENT_QP_FATAL) &&
                eq(int(EventType::kPortActive), IBV_EVENT_PORT_ACTIVE) &&
                eq(int(EventType::kPortErr), IBV_EVENT_PORT_ERR) &&
                eq(int(EventType::kSrqLimitReached), IBV_EVENT_SRQ_LIMIT_REACHED) &&
                eq(int(EventType::kGidChange), IBV_EVENT_GID_CHANGE));
  static_assert(eq(Mtu::k256, IBV_MTU_256) && eq(Mtu::k4096, IBV_MTU_4096));
  static_assert(eq(int(PortState::kActive), IBV_PORT_ACTIVE) &&
                eq(int(PortState::kDown), IBV_PORT_DOWN));
  static_assert(eq(int(QpState::kSqe), IBV_QPS_SQE) && eq(int(QpState::kErr), IBV_QPS_ERR));
  static_assert(eq(int(QpType::kRc), IBV_QPT_RC) && eq(int(QpType::kUd), IBV_QPT_UD));
  static_assert(eq(kSrqMaxWr, IBV_SRQ_MAX_WR) && eq(kSrqLimit, IBV_SRQ_LIMIT));
  static_assert(eq(int(AtomicCap::kHca), IBV_ATOMIC_HCA));
  static_assert(eq(kLinkLayerEthernet, IBV_LINK_LAYER_ETHERNET));
  static_assert(mtu_bytes(Mtu::k1024) == 1024 && mtu_bytes(Mtu::k4096) == 4096);
  SUCCEED();
}

// DeviceConfig::single_threaded: a device's locks lock unless the device belongs to one thread.
TEST(VerbsDeviceMutex, LocksUnlessSingleThreaded) {
  auto taken_elsewhere = [](auto& mu) {
    bool got = false;
    std::thread([&] {
      got = mu.try_lock();
      if (got) mu.unlock();
    }).join();
    return got;
  };
  DeviceMutex locking;
  locking.lock();
  EXPECT_FALSE(taken_elsewhere(locking));
  locking.unlock();
  EXPECT_TRUE(taken_elsewhere(locking));
  DeviceMutex single;
  single.set_single_threaded(true);
  single.lock();
  EXPECT_TRUE(taken_elsewhere(single));
  single.unlock();

  DeviceSharedMutex shared;
  shared.lock();
  EXPECT_FALSE(taken_elsewhere(shared));
  shared.unlock();
  shared.set_single_threaded(true);
  shared.lock();
  EXPECT_TRUE(taken_elsewhere(shared));
  shared.unlock();
}

}  // namespace
}  // namespace uroce::verbs
