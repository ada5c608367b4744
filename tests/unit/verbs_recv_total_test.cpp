// The device's total of receive WQEs (DeviceTotals::take_recv_wqes, docs/security.md "Totals"):
// every QP's receive queue and every SRQ takes its WQEs from it at creation, a create past it
// fails with ENOMEM and is counted, and destroying the queue gives them back.
#include <gtest/gtest.h>

#include "verbs/device.h"
#include "verbs_test_support.h"

namespace uroce::verbs {
namespace {

uint64_t counter(const Device& d, const char* name) {
  for (const Counter& c : d.counters())
    if (c.name == name) return c.value;
  ADD_FAILURE() << name;
  return 0;
}

TEST(VerbsRecvTotal, CreatesPastTheDeviceTotalFailWithEnomemAndDestroysGiveBack) {
  DeviceConfig config;
  config.totals.recv_wqes = 40;
  testing::FakeWorld w(config);
  auto a = w.qp();  // 16 receive WQEs each (FakeWorld::qp)
  auto b = w.qp();
  EXPECT_EQ(counter(*w.device, "recv_wqes_allocated"), 32u);
  QpInitAttr init;
  init.send_cq = init.recv_cq = w.cq.get();
  init.cap.max_send_wr = 16;
  init.cap.max_recv_wr = 16;
  auto refused = w.pd->create_qp(init);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), ENOMEM);
  auto srq = w.pd->create_srq({8, 1, 0});
  ASSERT_TRUE(srq.ok());
  EXPECT_EQ(counter(*w.device, "recv_wqes_allocated"), 40u);
  auto refused_srq = w.pd->create_srq({1, 1, 0});
  ASSERT_FALSE(refused_srq.ok());
  EXPECT_EQ(refused_srq.error(), ENOMEM);
  EXPECT_EQ(counter(*w.device, "recv_wqe_total_refusals"), 2u);
  // A QP on the SRQ has no receive queue of its own: it takes none.
  init.srq = srq->get();
  auto on_srq = w.pd->create_qp(init);
  ASSERT_TRUE(on_srq.ok());
  EXPECT_EQ(counter(*w.device, "recv_wqes_allocated"), 40u);
  on_srq->reset();
  init.srq = nullptr;
  a.reset();
  EXPECT_EQ(counter(*w.device, "recv_wqes_allocated"), 24u);
  auto again = w.pd->create_qp(init);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(counter(*w.device, "recv_wqes_allocated"), 40u);
  again->reset();
  srq->reset();
  b.reset();
  EXPECT_EQ(counter(*w.device, "recv_wqes_allocated"), 0u);
  EXPECT_EQ(counter(*w.device, "recv_wqe_total_refusals"), 2u);
}

}  // namespace
}  // namespace uroce::verbs
