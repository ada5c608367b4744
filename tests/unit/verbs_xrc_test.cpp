// XRC in the verbs layer (verbs/xrc.h): domains and their lifetimes and bounds, XRC SRQs as the
// transport reaches them (find, pop, CQ, memory), XRC QPs without CQs, and the XRC columns of the
// QP state table. The transport is the fake of verbs_test_support.h; tests/abi/xrc_test.cpp runs
// traffic.
#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "verbs/xrc.h"
#include "verbs_test_support.h"

namespace uroce::verbs {
namespace {

using testing::FakeWorld;

SrqAttr srq_attr(uint32_t max_wr = 4) {
  return {max_wr, 1, 0};
}

TEST(VerbsXrc, DomainCountsItsSrqsAndTargetQpsAndReleasesEverything) {
  FakeWorld w;
  const uint32_t ctx_users = w.ctx->users();
  auto xrcd = std::move(w.ctx->open_xrcd().value());
  EXPECT_EQ(w.ctx->users(), ctx_users + 2);  // the domain and its hidden PD
  EXPECT_EQ(xrcd->users(), 0u);

  auto srq = std::move(xrcd->create_srq(*w.pd, *w.cq, srq_attr()).value());
  EXPECT_EQ(xrcd->users(), 1u);
  EXPECT_EQ(w.pd->users(), 1u);
  EXPECT_EQ(w.cq->users(), 1u);
  EXPECT_NE(srq->srq_num(), 0u);
  EXPECT_EQ(srq->users(), 0u);  // target QPs reach it by number, not by holding it

  QpInitAttr t;
  t.qp_type = QpType::kXrcRecv;
  auto tgt = std::move(xrcd->create_qp(t).value());
  EXPECT_EQ(xrcd->users(), 2u);
  EXPECT_EQ(xrcd->target_qps(), 1u);
  EXPECT_EQ(tgt->init_attr().send_cq, nullptr);
  EXPECT_EQ(tgt->init_attr().recv_cq, nullptr);
  EXPECT_EQ(tgt->init_attr().cap.max_recv_wr, 0u);
  EXPECT_EQ(w.cq->users(), 1u);  // the target holds no CQ

  tgt.reset();
  EXPECT_EQ(xrcd->users(), 1u);
  srq.reset();
  EXPECT_EQ(xrcd->users(), 0u);
  EXPECT_EQ(w.pd->users(), 0u);
  EXPECT_EQ(w.cq->users(), 0u);
  xrcd.reset();
  EXPECT_EQ(w.ctx->users(), ctx_users);
}

TEST(VerbsXrc, FindReachesOnlyTheDomainsOwnSrqs) {
  FakeWorld w;
  auto d1 = std::move(w.ctx->open_xrcd().value());
  auto d2 = std::move(w.ctx->open_xrcd().value());
  auto a = std::move(d1->create_srq(*w.pd, *w.cq, srq_attr()).value());
  auto b = std::move(d1->create_srq(*w.pd, *w.cq, srq_attr()).value());
  auto other = std::move(d2->create_srq(*w.pd, *w.cq, srq_attr()).value());
  EXPECT_NE(a->srq_num(), b->srq_num());
  EXPECT_NE(a->srq_num(), other->srq_num());  // numbers are device-wide
  EXPECT_EQ(d1->find(a->srq_num()), static_cast<transport::XrcSrq*>(a.get()));
  EXPECT_EQ(d1->find(b->srq_num()), static_cast<transport::XrcSrq*>(b.get()));
  EXPECT_EQ(d1->find(other->srq_num()), nullptr);  // an SRQ of another domain
  EXPECT_EQ(d2->find(a->srq_num()), nullptr);
  EXPECT_EQ(d1->find(0), nullptr);
  const uint32_t gone = b->srq_num();
  b.reset();
  EXPECT_EQ(d1->find(gone), nullptr);
}

TEST(VerbsXrc, SrqGivesItsWqesCqAndPdMemoryToTheTransport) {
  FakeWorld w;
  auto xrcd = std::move(w.ctx->open_xrcd().value());
  auto srq = std::move(xrcd->create_srq(*w.pd, *w.cq, srq_attr(2)).value());
  transport::XrcSrq& t = *srq;
  EXPECT_FALSE(t.pop().has_value());
  transport::Sge sge{0x1000, 64, 7};
  transport::RecvWr wr;
  wr.wr_id = 41;
  wr.sg_list = {&sge, 1};
  ASSERT_EQ(srq->post_recv(wr), 0);
  wr.wr_id = 42;
  ASSERT_EQ(srq->post_recv(wr), 0);
  EXPECT_EQ(srq->post_recv(wr), ENOMEM);  // max_wr 2
  auto first = t.pop();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->wr_id, 41u);
  EXPECT_EQ(&t.cq(), static_cast<transport::CompletionSink*>(w.cq.get()));
  EXPECT_EQ(&t.memory(), static_cast<transport::MemoryAccess*>(w.pd.get()));
}

TEST(VerbsXrc, BoundsOnDomainsSrqsAndTargetQps) {
  DeviceConfig config;
  config.attr.max_xrcd = 2;
  config.attr.max_srq = 1;
  config.attr.max_xrcd_target_qps = 2;
  FakeWorld w(config);
  auto d1 = std::move(w.ctx->open_xrcd().value());
  auto d2 = std::move(w.ctx->open_xrcd().value());
  EXPECT_EQ(w.ctx->open_xrcd().error(), ENOMEM);
  d2.reset();
  EXPECT_TRUE(w.ctx->open_xrcd().ok());  // the slot came back (and went again)

  auto srq = std::move(d1->create_srq(*w.pd, *w.cq, srq_attr()).value());
  EXPECT_EQ(d1->create_srq(*w.pd, *w.cq, srq_attr()).error(), ENOMEM);
  EXPECT_EQ(d1->create_srq(*w.pd, *w.cq, srq_attr(0)).error(), EINVAL);
  SrqAttr too_deep = srq_attr(w.device->attr().max_srq_wr + 1);
  EXPECT_EQ(d1->create_srq(*w.pd, *w.cq, too_deep).error(), EINVAL);

  QpInitAttr t;
  t.qp_type = QpType::kXrcRecv;
  auto q1 = std::move(d1->create_qp(t).value());
  auto q2 = std::move(d1->create_qp(t).value());
  EXPECT_EQ(d1->create_qp(t).error(), ENOMEM);
  EXPECT_EQ(d1->target_qps(), 2u);
  q1.reset();
  EXPECT_TRUE(d1->create_qp(t).ok());
}

TEST(VerbsXrc, ObjectsOfAnotherContextAndWrongTypesAreEinval) {
  FakeWorld w;
  auto xrcd = std::move(w.ctx->open_xrcd().value());
  auto ctx2 = std::move(w.device->open().value());
  auto pd2 = std::move(ctx2->alloc_pd().value());
  auto cq2 = std::move(ctx2->create_cq(4).value());
  EXPECT_EQ(xrcd->create_srq(*pd2, *w.cq, srq_attr()).error(), EINVAL);
  EXPECT_EQ(xrcd->create_srq(*w.pd, *cq2, srq_attr()).error(), EINVAL);

  QpInitAttr a;
  a.qp_type = QpType::kRc;
  a.send_cq = a.recv_cq = w.cq.get();
  EXPECT_EQ(xrcd->create_qp(a).error(), EINVAL);  // a domain makes only targets
  // A target needs a domain: not from a PD of the program.
  a.qp_type = QpType::kXrcRecv;
  EXPECT_EQ(w.pd->create_qp(a).error(), EINVAL);
  a.xrcd = xrcd.get();  // nor by naming a domain whose hidden PD it is not
  EXPECT_EQ(w.pd->create_qp(a).error(), EINVAL);
  // An initiator needs a send CQ and no receive CQ; what it is given for receives is ignored.
  a = {};
  a.qp_type = QpType::kXrcSend;
  EXPECT_EQ(w.pd->create_qp(a).error(), EINVAL);
  a.send_cq = w.cq.get();
  a.recv_cq = cq2.get();  // another context's, ignored
  auto ini = w.pd->create_qp(a);
  ASSERT_TRUE(ini.ok());
  EXPECT_EQ((*ini)->init_attr().recv_cq, nullptr);
  EXPECT_EQ((*ini)->init_attr().cap.max_recv_wr, 0u);
  EXPECT_EQ(w.cq->users(), 1u);
  EXPECT_EQ(cq2->users(), 0u);
  transport::RecvWr rwr;
  EXPECT_EQ((*ini)->post_recv(rwr), EINVAL);  // nothing to receive into
}

TEST(VerbsXrc, StateTableXrcColumns) {
  // Initiator: RC's requester attributes; target: RC's responder ones (Linux qp_state_table).
  const uint32_t rtr = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  EXPECT_EQ(transition_masks(QpState::kInit, QpState::kRtr, QpType::kXrcSend).required, rtr);
  EXPECT_EQ(transition_masks(QpState::kInit, QpState::kRtr, QpType::kXrcRecv).required,
            rtr | kQpMaxDestRdAtomic | kQpMinRnrTimer);
  EXPECT_EQ(transition_masks(QpState::kRtr, QpState::kRts, QpType::kXrcSend).required,
            kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpSqPsn | kQpMaxQpRdAtomic);
  EXPECT_EQ(transition_masks(QpState::kRtr, QpState::kRts, QpType::kXrcRecv).required,
            kQpTimeout | kQpSqPsn);
  EXPECT_TRUE(transition_masks(QpState::kRtr, QpState::kRts, QpType::kXrcRecv).optional &
              kQpMinRnrTimer);
  EXPECT_FALSE(transition_masks(QpState::kRtr, QpState::kRts, QpType::kXrcSend).optional &
               kQpMinRnrTimer);
  EXPECT_EQ(transition_masks(QpState::kReset, QpState::kInit, QpType::kXrcSend).required,
            kQpPkeyIndex | kQpPort | kQpAccessFlags);
  EXPECT_FALSE(transition_masks(QpState::kSqe, QpState::kRts, QpType::kXrcSend).valid);
  EXPECT_TRUE(transition_masks(QpState::kRts, QpState::kErr, QpType::kXrcRecv).valid);
}

TEST(VerbsXrc, TargetWalksToRtsWithItsMasksAndRefusesPosts) {
  FakeWorld w;
  auto xrcd = std::move(w.ctx->open_xrcd().value());
  QpInitAttr t;
  t.qp_type = QpType::kXrcRecv;
  auto tgt = std::move(xrcd->create_qp(t).value());
  QpAttr a = testing::good_attr(QpState::kInit);
  ASSERT_EQ(tgt->modify(a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  a = testing::good_attr(QpState::kRtr);
  const uint32_t rtr = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  EXPECT_EQ(tgt->modify(a, rtr), EINVAL);  // a responder needs MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER
  ASSERT_EQ(tgt->modify(a, rtr | kQpMaxDestRdAtomic | kQpMinRnrTimer), 0);
  a = testing::good_attr(QpState::kRts);
  EXPECT_EQ(tgt->modify(a, kQpState | kQpTimeout | kQpSqPsn | kQpRetryCnt), EINVAL);
  ASSERT_EQ(tgt->modify(a, kQpState | kQpTimeout | kQpSqPsn), 0);
  EXPECT_EQ(tgt->state(), QpState::kRts);
  transport::RecvWr rwr;
  EXPECT_EQ(tgt->post_recv(rwr), EINVAL);
}

}  // namespace
}  // namespace uroce::verbs
