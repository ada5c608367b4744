// Memory regions and protection domains: access flag validation, key checks each way (IBA
// 10.6.3), iova translation, and deregistration killing keys even against a running progress
// thread.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "verbs/device.h"
#include "verbs_test_support.h"

namespace uroce::verbs {
namespace {

using testing::FakeWorld;
using transport::kAccessLocalWrite;
using transport::kAccessRemoteAtomic;
using transport::kAccessRemoteRead;
using transport::kAccessRemoteWrite;

constexpr uint32_t kAll =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

TEST(VerbsMr, RemoteWriteOrAtomicWithoutLocalWriteIsEinval) {
  FakeWorld w;
  std::vector<uint8_t> buf(4096);
  for (uint32_t access : std::vector<uint32_t>{kAccessRemoteWrite, kAccessRemoteAtomic,
                                               kAccessRemoteWrite | kAccessRemoteRead,
                                               kAccessRemoteAtomic | kAccessRemoteRead}) {
    auto mr = w.pd->reg_mr(buf.data(), buf.size(), access);
    ASSERT_FALSE(mr.ok()) << access;
    EXPECT_EQ(mr.error(), EINVAL);
  }
  for (uint32_t access : std::vector<uint32_t>{0u, kAccessLocalWrite, kAccessRemoteRead, kAll,
                                               kAccessLocalWrite | kAccessRemoteWrite}) {
    EXPECT_TRUE(w.pd->reg_mr(buf.data(), buf.size(), access).ok()) << access;
  }
}

TEST(VerbsMr, UnknownAccessBitsZeroLengthAndWrappingRangesAreEinval) {
  FakeWorld w;
  std::vector<uint8_t> buf(64);
  EXPECT_EQ(w.pd->reg_mr(buf.data(), buf.size(), 1u << 9).error(), EINVAL);
  EXPECT_EQ(w.pd->reg_mr(buf.data(), 0, kAccessLocalWrite).error(), EINVAL);
  EXPECT_EQ(w.pd->reg_mr(nullptr, 64, kAccessLocalWrite).error(), EINVAL);
  EXPECT_EQ(w.pd->reg_mr(buf.data(), 64, ~uint64_t{0} - 10, 0).error(), EINVAL);
}

TEST(VerbsMr, HugeTlbIsAcceptedAsAHint) {
  FakeWorld w;
  std::vector<uint8_t> buf(4096);
  auto mr = w.pd->reg_mr(buf.data(), buf.size(), kAll | kAccessHugeTlb);
  ASSERT_TRUE(mr.ok());
  EXPECT_EQ((*mr)->length(), buf.size());
  if (on_demand_supported()) {
    EXPECT_TRUE(
        w.pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite | kAccessOnDemand | kAccessHugeTlb)
            .ok());
  }
}

TEST(VerbsMr, LkeyAndRkeyDifferAndKeysAreUniqueAndNonZero) {
  FakeWorld w;
  std::vector<uint8_t> buf(4096);
  std::set<uint32_t> keys;
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  for (int i = 0; i < 50; ++i) {
    auto mr = std::move(w.pd->reg_mr(buf.data(), buf.size(), kAll).value());
    EXPECT_NE(mr->lkey(), mr->rkey());
    EXPECT_NE(mr->lkey(), 0u);
    EXPECT_NE(mr->rkey(), 0u);
    EXPECT_TRUE(keys.insert(mr->lkey()).second);
    EXPECT_TRUE(keys.insert(mr->rkey()).second);
    mrs.push_back(std::move(mr));
  }
}

TEST(VerbsMr, LocalAndRemoteChecksPassForAGoodKeyAndTranslateIova) {
  FakeWorld w;
  std::vector<uint8_t> buf(4096);
  const uint64_t iova = 0x10000000;
  auto mr = std::move(w.pd->reg_mr(buf.data(), buf.size(), iova, kAll).value());
  EXPECT_EQ(mr->iova(), iova);
  auto p = w.pd->local(mr->lkey(), iova + 100, 200, kAccessLocalWrite);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, buf.data() + 100);
  auto r = w.pd->remote(mr->rkey(), iova + 4000, 96, kAccessRemoteWrite, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, buf.data() + 4000);
  // The whole region, exactly.
  EXPECT_TRUE(w.pd->remote(mr->rkey(), iova, 4096, kAccessRemoteRead, 0).ok());
  // ibv_reg_mr without iova: addresses are host addresses.
  auto mr2 = std::move(w.pd->reg_mr(buf.data(), buf.size(), kAll).value());
  auto h = w.pd->local(mr2->lkey(), reinterpret_cast<uint64_t>(buf.data()) + 8, 8, 0);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, buf.data() + 8);
}

TEST(VerbsMr, KeyUsedTheWrongWayIsNoSuchKey) {
  FakeWorld w;
  std::vector<uint8_t> buf(64);
  auto mr = std::move(w.pd->reg_mr(buf.data(), 64, 0, kAll).value());
  EXPECT_EQ(w.pd->remote(mr->lkey(), 0, 8, kAccessRemoteRead, 0).error(), KeyError::kNoSuchKey);
  EXPECT_EQ(w.pd->local(mr->rkey(), 0, 8, 0).error(), KeyError::kNoSuchKey);
  EXPECT_EQ(w.pd->local(0, 0, 8, 0).error(), KeyError::kNoSuchKey);
  EXPECT_EQ(w.pd->remote(0xffffffff, 0, 8, kAccessRemoteRead, 0).error(), KeyError::kNoSuchKey);
  EXPECT_EQ(w.pd->local(mr->lkey() ^ 0x80, 0, 8, 0).error(), KeyError::kNoSuchKey);
}

TEST(VerbsMr, KeyOfAnotherPdIsWrongPd) {
  FakeWorld w;
  auto pd2 = std::move(w.ctx->alloc_pd().value());
  std::vector<uint8_t> buf(64);
  auto mr = std::move(pd2->reg_mr(buf.data(), 64, 0, kAll).value());
  EXPECT_EQ(w.pd->local(mr->lkey(), 0, 8, 0).error(), KeyError::kWrongPd);
  EXPECT_EQ(w.pd->remote(mr->rkey(), 0, 8, kAccessRemoteRead, 0).error(), KeyError::kWrongPd);
  EXPECT_TRUE(pd2->local(mr->lkey(), 0, 8, 0).ok());
  EXPECT_EQ(pd2->users(), 1u);
  mr.reset();
  EXPECT_EQ(pd2->users(), 0u);
}

TEST(VerbsMr, RangesOutsideTheRegionAreOutOfBounds) {
  FakeWorld w;
  std::vector<uint8_t> buf(4096);
  const uint64_t iova = 0x1000;
  auto mr = std::move(w.pd->reg_mr(buf.data(), 4096, iova, kAll).value());
  auto oob = [&](uint64_t addr, uint32_t len) {
    auto l = w.pd->local(mr->lkey(), addr, len, 0);
    auto r = w.pd->remote(mr->rkey(), addr, len, kAccessRemoteRead, 0);
    return !l.ok() && l.error() == KeyError::kOutOfBounds && !r.ok() &&
           r.error() == KeyError::kOutOfBounds;
  };
  EXPECT_TRUE(oob(iova - 1, 1));           // just below
  EXPECT_TRUE(oob(iova - 8, 16));          // straddles the start
  EXPECT_TRUE(oob(iova + 4090, 8));        // straddles the end
  EXPECT_TRUE(oob(iova + 4096, 1));        // just past
  EXPECT_TRUE(oob(iova, 4097));            // one byte too long
  EXPECT_TRUE(oob(~uint64_t{0} - 2, 16));  // wraps the address space
  EXPECT_FALSE(oob(iova + 4095, 1));
}

TEST(VerbsMr, AccessNotGrantedIsAccessDenied) {
  FakeWorld w;
  std::vector<uint8_t> buf(64);
  auto ro = std::move(w.pd->reg_mr(buf.data(), 64, 0, kAccessRemoteRead).value());
  EXPECT_EQ(w.pd->remote(ro->rkey(), 0, 8, kAccessRemoteWrite, 0).error(), KeyError::kAccessDenied);
  EXPECT_EQ(w.pd->remote(ro->rkey(), 0, 8, kAccessRemoteAtomic, 0).error(),
            KeyError::kAccessDenied);
  EXPECT_TRUE(w.pd->remote(ro->rkey(), 0, 8, kAccessRemoteRead, 0).ok());
  // Without LOCAL_WRITE the region can be gathered from, not scattered into.
  EXPECT_EQ(w.pd->local(ro->lkey(), 0, 8, kAccessLocalWrite).error(), KeyError::kAccessDenied);
  EXPECT_TRUE(w.pd->local(ro->lkey(), 0, 8, 0).ok());
  auto wo =
      std::move(w.pd->reg_mr(buf.data(), 64, 0, kAccessLocalWrite | kAccessRemoteWrite).value());
  EXPECT_EQ(w.pd->remote(wo->rkey(), 0, 8, kAccessRemoteRead, 0).error(), KeyError::kAccessDenied);
  EXPECT_TRUE(w.pd->remote(wo->rkey(), 0, 8, kAccessRemoteWrite, 0).ok());
}

TEST(VerbsMr, ZeroLengthAccessIsAlwaysValid) {
  FakeWorld w;
  EXPECT_TRUE(w.pd->local(0x12345, 0, 0, kAccessLocalWrite).ok());
  EXPECT_TRUE(w.pd->remote(0x12345, 0, 0, kAccessRemoteWrite, 0).ok());
}

TEST(VerbsMr, DeregistrationKillsBothKeysAtOnceAndReuseGetsNewKeys) {
  FakeWorld w;
  std::vector<uint8_t> buf(64);
  auto mr = std::move(w.pd->reg_mr(buf.data(), 64, 0, kAll).value());
  uint32_t lkey = mr->lkey(), rkey = mr->rkey();
  mr.reset();
  EXPECT_EQ(w.pd->local(lkey, 0, 8, 0).error(), KeyError::kNoSuchKey);
  EXPECT_EQ(w.pd->remote(rkey, 0, 8, kAccessRemoteRead, 0).error(), KeyError::kNoSuchKey);
  // Cycle through every slot of a small table: the old keys stay dead while slots are reused.
  DeviceConfig cfg;
  cfg.attr.max_mr = 4;
  FakeWorld small(cfg);
  auto first = std::move(small.pd->reg_mr(buf.data(), 64, 0, kAll).value());
  uint32_t old_l = first->lkey(), old_r = first->rkey();
  first.reset();
  for (int i = 0; i < 20; ++i) {
    auto m = std::move(small.pd->reg_mr(buf.data(), 64, 0, kAll).value());
    EXPECT_NE(m->lkey(), old_l);
    EXPECT_NE(m->rkey(), old_r);
    EXPECT_EQ(small.pd->local(old_l, 0, 8, 0).error(), KeyError::kNoSuchKey);
    EXPECT_EQ(small.pd->remote(old_r, 0, 8, kAccessRemoteRead, 0).error(), KeyError::kNoSuchKey);
  }
}

TEST(VerbsMr, FullKeyTableIsEnomemAndFreesOnDereg) {
  DeviceConfig cfg;
  cfg.attr.max_mr = 3;
  FakeWorld w(cfg);
  std::vector<uint8_t> buf(64);
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  for (int i = 0; i < 3; ++i) mrs.push_back(std::move(w.pd->reg_mr(buf.data(), 64, 0).value()));
  EXPECT_EQ(w.pd->reg_mr(buf.data(), 64, 0).error(), ENOMEM);
  mrs.pop_back();
  EXPECT_TRUE(w.pd->reg_mr(buf.data(), 64, 0).ok());
}

// A deregistration that returns guarantees no later access: the fake transport, inside the
// progress pass, validates the rkey and then writes through the pointer slowly. Once the MR's
// destructor returns, no pass may validate or write any more.
TEST(VerbsMr, DeregistrationWaitsOutAProgressPassUsingTheMemory) {
  FakeWorld w;
  auto qp = w.qp();
  std::vector<uint8_t> buf(256);
  auto mr = std::move(w.pd->reg_mr(buf.data(), buf.size(), 0, kAll).value());
  EXPECT_EQ(testing::writes_after_destroy(w, *qp, mr->rkey(), 0, [&] { mr.reset(); }), 0);
}

// ibv_rereg_mr: the keys stay and take the new rights, PD and translation; a refused change
// leaves the MR as it was.
TEST(VerbsMr, ReregKeepsTheKeysAndAppliesNewAccessPdAndTranslation) {
  FakeWorld w;
  std::vector<uint8_t> first(4096), second(1024);
  auto mr = std::move(w.pd->reg_mr(first.data(), first.size(), 0x10000, kAll).value());
  const uint32_t lkey = mr->lkey(), rkey = mr->rkey();

  ASSERT_EQ(mr->rereg(*w.pd, first.data(), first.size(), 0x10000, kAccessLocalWrite), 0);
  EXPECT_EQ(mr->lkey(), lkey);
  EXPECT_EQ(mr->rkey(), rkey);
  EXPECT_EQ(mr->access(), kAccessLocalWrite);
  EXPECT_EQ(w.pd->remote(rkey, 0x10000, 8, kAccessRemoteWrite, 0).error(), KeyError::kAccessDenied);
  EXPECT_TRUE(w.pd->local(lkey, 0x10000, 8, kAccessLocalWrite).ok());

  ASSERT_EQ(mr->rereg(*w.pd, second.data(), second.size(), 0x20000, kAll), 0);
  EXPECT_EQ(mr->addr(), second.data());
  EXPECT_EQ(mr->length(), second.size());
  EXPECT_EQ(mr->iova(), 0x20000u);
  EXPECT_EQ(w.pd->local(lkey, 0x10000, 8, 0).error(), KeyError::kOutOfBounds);
  auto p = w.pd->remote(rkey, 0x20010, 8, kAccessRemoteWrite, 0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, second.data() + 0x10);
  EXPECT_EQ(w.pd->local(lkey, 0x20000, 1025, 0).error(), KeyError::kOutOfBounds);

  auto other = std::move(w.ctx->alloc_pd().value());
  EXPECT_EQ(w.pd->users(), 1u);
  ASSERT_EQ(mr->rereg(*other, second.data(), second.size(), 0x20000, kAll), 0);
  EXPECT_EQ(&mr->pd(), other.get());
  EXPECT_EQ(w.pd->users(), 0u);
  EXPECT_EQ(other->users(), 1u);
  EXPECT_EQ(w.pd->local(lkey, 0x20000, 8, 0).error(), KeyError::kWrongPd);
  EXPECT_TRUE(other->local(lkey, 0x20000, 8, 0).ok());

  // Refused: rights reg_mr refuses, a zero length; the MR keeps what it had.
  EXPECT_EQ(mr->rereg(*other, second.data(), second.size(), 0x20000, kAccessRemoteWrite), EINVAL);
  EXPECT_EQ(mr->rereg(*other, second.data(), 0, 0x20000, kAll), EINVAL);
  EXPECT_EQ(mr->rereg(*other, second.data(), second.size(), 0x20000, 1u << 9), EINVAL);
  EXPECT_EQ(mr->access(), kAll);
  EXPECT_EQ(mr->length(), second.size());
  EXPECT_TRUE(other->remote(rkey, 0x20000, 8, kAccessRemoteWrite, 0).ok());
  mr.reset();
  EXPECT_EQ(other->users(), 0u);
}

TEST(VerbsMr, ReregIsEinvalForAPdOfAnotherContextAndEbusyWhileAWindowIsBound) {
  FakeWorld w;
  std::vector<uint8_t> buf(4096);
  auto mr = std::move(
      w.pd->reg_mr(buf.data(), buf.size(), 0x10000, kAll | transport::kAccessMwBind).value());
  auto other_ctx = std::move(w.device->open().value());
  auto foreign_pd = std::move(other_ctx->alloc_pd().value());
  EXPECT_EQ(mr->rereg(*foreign_pd, buf.data(), buf.size(), 0x10000, kAll), EINVAL);
  EXPECT_EQ(&mr->pd(), w.pd.get());

  auto mw = std::move(w.pd->alloc_mw(MwType::kType2).value());
  const uint32_t window_key = next_window_key(mw->rkey());
  ASSERT_EQ(
      w.pd->bind_mw({mw->rkey(), window_key, mr->lkey(), 0x10000, 64, kAccessRemoteRead}, 0x40),
      WcStatus::kSuccess);
  EXPECT_EQ(mr->rereg(*w.pd, buf.data(), buf.size(), 0x10000, kAccessLocalWrite), EBUSY);
  EXPECT_EQ(mr->access(), kAll | transport::kAccessMwBind);
  ASSERT_TRUE(w.pd->invalidate(window_key, 0x40, false));
  EXPECT_EQ(mr->rereg(*w.pd, buf.data(), buf.size(), 0x10000, kAccessLocalWrite), 0);
}

}  // namespace
}  // namespace uroce::verbs
