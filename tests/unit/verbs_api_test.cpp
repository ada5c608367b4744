// The C++ API helpers of api/uroce.h: span registration, SGEs inside a region, and connect()
// bringing each QP type to RTS with the masks its type requires.
#include <gtest/gtest.h>

#include <vector>

#include "api/uroce.h"
#include "verbs_test_support.h"

namespace uroce {
namespace {

using verbs::testing::FakeWorld;

TEST(VerbsApi, SgeMustLieInsideTheRegion) {
  FakeWorld w;
  std::vector<std::byte> buf(4096);
  auto mr = std::move(reg_mr(*w.pd, buf, transport::kAccessLocalWrite).value());
  std::span<std::byte> all(buf);
  auto s = sge(*mr, all.subspan(100, 200));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->addr, reinterpret_cast<uint64_t>(buf.data()) + 100);
  EXPECT_EQ(s->length, 200u);
  EXPECT_EQ(s->lkey, mr->lkey());
  EXPECT_TRUE(w.pd->local(s->lkey, s->addr, s->length, transport::kAccessLocalWrite).ok());
  EXPECT_TRUE(sge(*mr, all).ok());
  std::vector<std::byte> other(16);
  EXPECT_EQ(sge(*mr, other).error(), EINVAL);
  EXPECT_EQ(sge(*mr, std::span<const std::byte>(buf.data() + 4000, 200)).error(), EINVAL);
}

TEST(VerbsApi, ConnectBringsEveryQpTypeToRts) {
  for (QpType t : {QpType::kRc, QpType::kUc, QpType::kUd}) {
    FakeWorld w;
    auto qp = w.qp(t);
    Endpoint peer{gid_from_ipv4({10, 0, 0, 2}), 0x99, 5};
    ASSERT_EQ(connect(*qp, 77, peer), 0) << int(t);
    EXPECT_EQ(qp->state(), QpState::kRts);
    QpAttr a = qp->query();
    EXPECT_EQ(a.sq_psn, 77u);
    if (t != QpType::kUd) {
      EXPECT_EQ(a.dest_qp_num, 0x99u);
      EXPECT_EQ(a.rq_psn, 5u);
    }
    // A second connect fails at RESET->INIT: the QP is not in RESET.
    EXPECT_EQ(connect(*qp, 77, peer), EINVAL);
  }
}

TEST(VerbsApi, ConnectReportsABadPeer) {
  FakeWorld w;
  auto qp = w.qp(QpType::kRc);
  Endpoint nobody;  // zero GID: no route
  EXPECT_EQ(connect(*qp, 1, nobody), EINVAL);
  EXPECT_EQ(qp->state(), QpState::kInit);
}

}  // namespace
}  // namespace uroce
