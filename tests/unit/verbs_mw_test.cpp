// Memory windows (IBA 10.6.7): the bind rules, which key a bound window answers to and through
// which QP, invalidation, and what a window does to its MR's lifetime. The transport's side
// (binds in posting order, completions) is tests/protocol/rc_local_ops_test.cpp; a window used
// across the wire is in verbs_loopback_test.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "verbs/device.h"
#include "verbs_test_support.h"

namespace uroce::verbs {
namespace {

using testing::FakeWorld;
using transport::kAccessLocalWrite;
using transport::kAccessMwBind;
using transport::kAccessRemoteAtomic;
using transport::kAccessRemoteRead;
using transport::kAccessRemoteWrite;
using transport::MwBindInfo;

constexpr uint32_t kQp = 0x40, kOtherQp = 0x41;

struct Windows : ::testing::Test {
  Windows() : buf(8192) {
    mr = std::move(w.pd->reg_mr(buf.data(), buf.size(), 0x10000,
                                kAccessLocalWrite | kAccessRemoteRead | kAccessMwBind)
                       .value());
  }
  MwBindInfo bind_of(const MemoryWindow& mw, uint32_t new_rkey, uint64_t addr, uint64_t len,
                     uint32_t access) const {
    return {mw.rkey(), new_rkey, mr->lkey(), addr, len, access};
  }
  FakeWorld w;
  std::vector<uint8_t> buf;
  std::unique_ptr<MemoryRegion> mr;
};

TEST_F(Windows, AType2WindowAnswersOnlyToItsBoundKeyThroughItsQpAndInsideItsRange) {
  auto mw = std::move(w.pd->alloc_mw(MwType::kType2).value());
  const uint32_t key = next_window_key(mw->rkey());
  // Unbound: no key of it works.
  EXPECT_EQ(w.pd->remote(mw->rkey(), 0x10000, 8, kAccessRemoteRead, kQp).error(),
            KeyError::kNoSuchKey);
  ASSERT_EQ(w.pd->bind_mw(bind_of(*mw, key, 0x10100, 256, kAccessRemoteRead), kQp),
            WcStatus::kSuccess);
  EXPECT_EQ(mr->windows_bound(), 1u);
  auto p = w.pd->remote(key, 0x10180, 16, kAccessRemoteRead, kQp);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, buf.data() + 0x180);
  EXPECT_EQ(w.pd->remote(key, 0x10180, 16, kAccessRemoteRead, kOtherQp).error(),
            KeyError::kWrongPd);  // type 2B: bound to the QP that bound it
  EXPECT_EQ(w.pd->remote(mw->rkey(), 0x10180, 16, kAccessRemoteRead, kQp).error(),
            KeyError::kNoSuchKey);  // the key byte matters
  EXPECT_EQ(w.pd->remote(key, 0x100f8, 16, kAccessRemoteRead, kQp).error(), KeyError::kOutOfBounds);
  EXPECT_EQ(w.pd->remote(key, 0x101f8, 16, kAccessRemoteRead, kQp).error(), KeyError::kOutOfBounds);
  EXPECT_EQ(w.pd->remote(key, 0x10100, 8, kAccessRemoteWrite, kQp).error(),
            KeyError::kAccessDenied);
  EXPECT_EQ(w.pd->local(key, 0x10100, 8, 0).error(), KeyError::kNoSuchKey);  // no L_Key

  // Bound: no second bind until invalidated; a peer on another QP may not invalidate it.
  EXPECT_EQ(w.pd->bind_mw(bind_of(*mw, next_window_key(key), 0x10100, 64, kAccessRemoteRead), kQp),
            WcStatus::kMwBindErr);
  EXPECT_FALSE(w.pd->invalidate(key, kOtherQp, /*remote=*/true));
  EXPECT_FALSE(w.pd->invalidate(mw->rkey(), kQp, /*remote=*/true));  // not its current key
  EXPECT_TRUE(w.pd->invalidate(key, kQp, /*remote=*/true));
  EXPECT_FALSE(w.pd->invalidate(key, kQp, /*remote=*/false));  // already free
  EXPECT_EQ(mr->windows_bound(), 0u);
  EXPECT_EQ(w.pd->remote(key, 0x10180, 16, kAccessRemoteRead, kQp).error(), KeyError::kNoSuchKey);
  // Free again: bound anew with a new key, which a local invalidate (any QP of the PD) frees.
  ASSERT_EQ(
      w.pd->bind_mw(bind_of(*mw, next_window_key(key), 0x10000, 8192, kAccessRemoteRead), kOtherQp),
      WcStatus::kSuccess);
  EXPECT_TRUE(w.pd->remote(next_window_key(key), 0x11ff8, 8, kAccessRemoteRead, kOtherQp).ok());
  EXPECT_TRUE(w.pd->invalidate(next_window_key(key), kQp, /*remote=*/false));
}

TEST_F(Windows, EveryBindRuleIsABindError) {
  auto mw = std::move(w.pd->alloc_mw(MwType::kType2).value());
  const uint32_t key = next_window_key(mw->rkey());
  std::vector<uint8_t> other(64);
  auto no_bind = std::move(w.pd->reg_mr(other.data(), other.size(), kAccessLocalWrite).value());
  auto read_only = std::move(
      w.pd->reg_mr(other.data(), other.size(), kAccessMwBind | kAccessRemoteRead).value());
  auto other_pd = std::move(w.ctx->alloc_pd().value());
  auto foreign_mw = std::move(other_pd->alloc_mw(MwType::kType2).value());
  auto foreign_mr = std::move(
      other_pd->reg_mr(other.data(), other.size(), kAccessLocalWrite | kAccessMwBind).value());

  const MwBindInfo good = bind_of(*mw, key, 0x10000, 64, kAccessRemoteRead);
  std::vector<std::pair<const char*, MwBindInfo>> bad;
  auto with = [&](const char* why, auto change) {
    MwBindInfo b = good;
    change(b);
    bad.emplace_back(why, b);
  };
  with("the MR lacks MW_BIND", [&](MwBindInfo& b) { b.mr_lkey = no_bind->lkey(); });
  with("a remote-write window over a read-only MR", [&](MwBindInfo& b) {
    b.mr_lkey = read_only->lkey();
    b.addr = read_only->iova();
    b.access = kAccessRemoteWrite;
  });
  with("an atomic window over a read-only MR", [&](MwBindInfo& b) {
    b.mr_lkey = read_only->lkey();
    b.addr = read_only->iova();
    b.access = kAccessRemoteAtomic;
  });
  with("the range starts before the MR", [](MwBindInfo& b) { b.addr = 0xff00; });
  with("the range ends past the MR", [](MwBindInfo& b) { b.length = 8193; });
  with("the range wraps", [](MwBindInfo& b) { b.length = ~uint64_t{0}; });
  with("another index", [&](MwBindInfo& b) { b.new_rkey = key + 0x100; });
  with("an unknown right", [](MwBindInfo& b) { b.access |= 1u << 7; });
  with("the MR's rkey for its lkey", [&](MwBindInfo& b) { b.mr_lkey = mr->rkey(); });
  with("another PD's MR", [&](MwBindInfo& b) { b.mr_lkey = foreign_mr->lkey(); });
  with("another PD's window", [&](MwBindInfo& b) {
    b.mw_rkey = foreign_mw->rkey();
    b.new_rkey = next_window_key(foreign_mw->rkey());
  });
  with("an MR named as the window", [&](MwBindInfo& b) {
    b.mw_rkey = mr->rkey();
    b.new_rkey = next_window_key(mr->rkey());
  });
  for (const auto& [why, b] : bad) EXPECT_EQ(w.pd->bind_mw(b, kQp), WcStatus::kMwBindErr) << why;
  EXPECT_EQ(mr->windows_bound(), 0u);
  EXPECT_EQ(w.pd->bind_mw(good, kQp), WcStatus::kSuccess);
  // A window's rights come from the bind, not the MR's remote rights: a remote-write window over
  // an MR registered for remote read only (but locally writable) is allowed.
  auto rw = std::move(w.pd->alloc_mw(MwType::kType2).value());
  EXPECT_EQ(
      w.pd->bind_mw(bind_of(*rw, next_window_key(rw->rkey()), 0x10000, 8, kAccessRemoteWrite), kQp),
      WcStatus::kSuccess);
  EXPECT_TRUE(w.pd->remote(next_window_key(rw->rkey()), 0x10000, 8, kAccessRemoteWrite, kQp).ok());
  // MR keys and type 1 windows cannot be invalidated.
  EXPECT_FALSE(w.pd->invalidate(mr->rkey(), kQp, false));
}

TEST_F(Windows, AType1WindowIsThePdsRebindsInPlaceAndUnbindsWithLengthZero) {
  auto mw = std::move(w.pd->alloc_mw(MwType::kType1).value());
  const uint32_t k1 = next_window_key(mw->rkey()), k2 = next_window_key(k1);
  ASSERT_EQ(w.pd->bind_mw(bind_of(*mw, k1, 0x10000, 64, kAccessRemoteRead), kQp),
            WcStatus::kSuccess);
  EXPECT_TRUE(w.pd->remote(k1, 0x10000, 64, kAccessRemoteRead, kOtherQp).ok());  // any QP
  EXPECT_FALSE(w.pd->invalidate(k1, kQp, false));  // type 1: only a bind changes it
  ASSERT_EQ(w.pd->bind_mw(bind_of(*mw, k2, 0x10040, 64, kAccessRemoteRead), kOtherQp),
            WcStatus::kSuccess);
  EXPECT_EQ(mr->windows_bound(), 1u);
  EXPECT_EQ(w.pd->remote(k1, 0x10040, 8, kAccessRemoteRead, kQp).error(), KeyError::kNoSuchKey);
  EXPECT_TRUE(w.pd->remote(k2, 0x10040, 8, kAccessRemoteRead, kQp).ok());
  // Unbind: no MR (ibv_bind_mw with a null mr and length 0).
  ASSERT_EQ(w.pd->bind_mw(MwBindInfo{mw->rkey(), next_window_key(k2), 0, 0, 0, 0}, kQp),
            WcStatus::kSuccess);
  EXPECT_EQ(mr->windows_bound(), 0u);
  EXPECT_EQ(w.pd->remote(k2, 0x10040, 8, kAccessRemoteRead, kQp).error(), KeyError::kNoSuchKey);
}

TEST_F(Windows, DeallocAndMrDestructionEndTheBinding) {
  auto mw = std::move(w.pd->alloc_mw(MwType::kType2).value());
  const uint32_t key = next_window_key(mw->rkey());
  ASSERT_EQ(w.pd->bind_mw(bind_of(*mw, key, 0x10000, 64, kAccessRemoteRead), kQp),
            WcStatus::kSuccess);
  EXPECT_EQ(w.pd->users(), 2u);  // the MR and the window
  mw.reset();
  EXPECT_EQ(mr->windows_bound(), 0u);
  EXPECT_EQ(w.pd->remote(key, 0x10000, 8, kAccessRemoteRead, kQp).error(), KeyError::kNoSuchKey);
  EXPECT_EQ(w.pd->users(), 1u);

  // An MR destroyed with a window bound (the C++ API; ibv_dereg_mr refuses with EBUSY) takes
  // the binding with it: the window's key is dead and the window may be bound elsewhere.
  auto mw2 = std::move(w.pd->alloc_mw(MwType::kType2).value());
  const uint32_t key2 = next_window_key(mw2->rkey());
  ASSERT_EQ(w.pd->bind_mw(bind_of(*mw2, key2, 0x10000, 64, kAccessRemoteRead), kQp),
            WcStatus::kSuccess);
  mr.reset();
  EXPECT_EQ(w.pd->remote(key2, 0x10000, 8, kAccessRemoteRead, kQp).error(), KeyError::kNoSuchKey);
  EXPECT_FALSE(w.pd->invalidate(key2, kQp, false));
}

TEST(VerbsMw, TypesAndTheDeviceLimitAreChecked) {
  DeviceConfig config;
  config.attr.max_mw = 3;
  FakeWorld w(config);
  EXPECT_EQ(w.pd->alloc_mw(static_cast<MwType>(3)).error(), EINVAL);
  std::vector<std::unique_ptr<MemoryWindow>> mws;
  for (int i = 0; i < 3; ++i) mws.push_back(std::move(w.pd->alloc_mw(MwType::kType2).value()));
  EXPECT_EQ(w.pd->alloc_mw(MwType::kType1).error(), ENOMEM);
  mws.pop_back();
  EXPECT_TRUE(w.pd->alloc_mw(MwType::kType1).ok());
  // Windows do not take MR slots: max_mr registrations still fit.
  std::vector<uint8_t> buf(64);
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  for (uint32_t i = 0; i < w.device->attr().max_mr; ++i)
    mrs.push_back(std::move(w.pd->reg_mr(buf.data(), buf.size(), 0).value()));
}

TEST(VerbsMw, DeallocWaitsOutAProgressPassWritingThroughTheWindow) {
  // As for an MR (verbs_mr_test.cpp): once the window is gone, nothing writes through it, even a
  // pass that checked its key a moment before.
  FakeWorld w;
  auto qp = w.qp();
  std::vector<uint8_t> buf(256);
  auto mr =
      std::move(w.pd->reg_mr(buf.data(), buf.size(), 0, kAccessLocalWrite | kAccessMwBind).value());
  auto mw = std::move(w.pd->alloc_mw(MwType::kType2).value());
  const uint32_t key = next_window_key(mw->rkey());
  ASSERT_EQ(w.pd->bind_mw({mw->rkey(), key, mr->lkey(), 0, 256, kAccessRemoteWrite}, kQp),
            WcStatus::kSuccess);
  EXPECT_EQ(testing::writes_after_destroy(w, *qp, key, kQp, [&] { mw.reset(); }), 0);
  EXPECT_EQ(mr->windows_bound(), 0u);
}

}  // namespace
}  // namespace uroce::verbs
