// The token bucket with debt: exact send times at several rates, the burst cap, the window, and
// rate changes.
#include <gtest/gtest.h>

#include <cstdint>

#include "cc/pacer.h"

namespace uroce::cc {
namespace {

TEST(Pacer, UnlimitedNeverWaits) {
  Pacer p;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(p.may_send(5, 4096, 0));
    EXPECT_EQ(p.next_send_time(5, 4096), 5u);
    p.on_sent(5, 4096);
  }
}

TEST(Pacer, WindowLimitsPacketsInFlightAtAnyRate) {
  Pacer p;
  p.set_window(4);
  EXPECT_TRUE(p.may_send(0, 1024, 3));
  EXPECT_FALSE(p.may_send(0, 1024, 4));
  EXPECT_FALSE(p.may_send(0, 1024, 100));
  p.set_rate(1'000'000'000);
  EXPECT_TRUE(p.may_send(0, 1024, 3));
  EXPECT_FALSE(p.may_send(0, 1024, 4));
  p.set_window(0);
  EXPECT_TRUE(p.may_send(0, 1024, 100000));
}

// A greedy sender of 1024-byte packets with a 64 KiB burst: 65 packets go at t = 0 (64 empty the
// bucket, the 65th goes into debt), then packet 65 + j goes at ceil(j * 8192 bits / rate), exactly:
// credit is kept in integers, so nothing is lost to rounding and the long-run rate is the set rate.
// 1 Mb/s: 8192000 ns apart; 1 Gb/s: 8192; 40 Gb/s: 204.8; 100 Gb/s: 81.92; 400 Gb/s: 20.48.
class PacerRate : public ::testing::TestWithParam<uint64_t> {};

TEST_P(PacerRate, SendTimesFollowTheRateExactly) {
  const uint64_t rate = GetParam();
  Pacer p;
  p.set_rate(rate, 64 * 1024);
  Nanos t = 0;
  for (int i = 0; i < 65; ++i) {
    ASSERT_TRUE(p.may_send(0, 1024, 0)) << i;
    p.on_sent(0, 1024);
  }
  EXPECT_FALSE(p.may_send(0, 1024, 0));
  for (uint64_t j = 1; j <= 2000; ++j) {
    t = p.next_send_time(t, 1024);
    const unsigned __int128 num = static_cast<unsigned __int128>(j) * 8192 * 1'000'000'000;
    const Nanos expect = static_cast<Nanos>((num + rate - 1) / rate);
    ASSERT_EQ(t, expect) << "packet 65+" << j << " at " << rate << " b/s";
    ASSERT_TRUE(p.may_send(t, 1024, 0));
    if (t > 0) {
      ASSERT_FALSE(p.may_send(t - 1, 1024, 0));
    }
    p.on_sent(t, 1024);
  }
}

INSTANTIATE_TEST_SUITE_P(Rates, PacerRate,
                         ::testing::Values(1'000'000ull, 1'000'000'000ull, 40'000'000'000ull,
                                           100'000'000'000ull, 400'000'000'000ull));

TEST(Pacer, IdleTimeEarnsAtMostOneBurst) {
  Pacer p;
  p.set_rate(1'000'000'000, 8 * 1024);
  p.on_sent(0, 1024);
  // A second idle earns 125 MB at 1 Gb/s, capped at the 8 KiB burst: 8 packets drain it, the 9th
  // goes into debt, the 10th waits.
  const Nanos t = 1'000'000'000;
  EXPECT_DOUBLE_EQ(p.credit_bytes(t), 8 * 1024);
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(p.may_send(t, 1024, 0)) << i;
    p.on_sent(t, 1024);
  }
  EXPECT_FALSE(p.may_send(t, 1024, 0));
  EXPECT_EQ(p.next_send_time(t, 1024), t + 8192);  // 1024 B of debt at 1 bit/ns
}

TEST(Pacer, PacketLargerThanTheBurstStillGoesAndIsPaidFor) {
  Pacer p;
  p.set_rate(8'000'000'000, 1024);  // 1 byte/ns
  EXPECT_TRUE(p.may_send(0, 9000, 0));
  p.on_sent(0, 9000);
  EXPECT_DOUBLE_EQ(p.credit_bytes(0), 1024.0 - 9000);
  EXPECT_EQ(p.next_send_time(0, 9000), 7976u);  // 7976 bytes of debt at 1 byte/ns
}

TEST(Pacer, RateChangeSettlesCreditAtTheOldRate) {
  // 1 Gb/s, burst 1024: one packet empties the bucket, a second puts it 1024 B in debt. By 4096 ns
  // it has earned back 512 B (1 bit/ns), 512 B of debt left.
  Pacer a, b;
  for (Pacer* p : {&a, &b}) {
    p->set_rate(1'000'000'000, 1024);
    p->on_sent(0, 1024);
    p->on_sent(0, 1024);
  }
  // Settled: the 512 B left take 2048 ns at 2 Gb/s (2 bits/ns): next send at 6144.
  a.set_rate_at(4096, 2'000'000'000);
  EXPECT_EQ(a.next_send_time(4096, 1024), 6144u);
  // Unsettled: all 4096 ns are counted at the new rate, 1024 B earned: may send at once.
  b.set_rate(2'000'000'000, 1024);
  EXPECT_EQ(b.next_send_time(4096, 1024), 4096u);
}

TEST(Pacer, RateCutDropsSavedCreditSoTheCutHoldsAtOnce) {
  // A flow at 100 Gb/s with a full 64 KiB bucket (fresh: nothing sent yet) is cut to 50 Gb/s at
  // 1000 ns. The next packet may go at once, but the one after it must wait for its 1024 bytes at
  // the new rate: 1024 * 8 / 50 = 163.84 -> 164 ns. Before the fix the saved 64 KiB let it send
  // 64 packets back to back at line rate first.
  Pacer p;
  p.set_rate(100'000'000'000);
  p.set_rate_at(1000, 50'000'000'000);
  EXPECT_EQ(p.next_send_time(1000, 1024), 1000u);
  p.on_sent(1000, 1024);
  EXPECT_EQ(p.next_send_time(1000, 1024), 1164u);
  // The same after some sending at the old rate: at 100 Gb/s 1024 B earn back in 81.92 ns, so the
  // bucket is full again by 2000 ns; the cut at 2000 ns leaves none of it.
  Pacer q;
  q.set_rate(100'000'000'000);
  q.on_sent(1000, 1024);
  q.set_rate_at(2000, 50'000'000'000);
  EXPECT_DOUBLE_EQ(q.credit_bytes(2000), 0.0);
  q.on_sent(2000, 1024);
  EXPECT_EQ(q.next_send_time(2000, 1024), 2164u);
  // A rate increase keeps what was saved (recovery is not penalised).
  Pacer r;
  r.set_rate(10'000'000'000, 4096);
  r.on_sent(0, 1024);
  r.set_rate_at(100'000, 20'000'000'000);
  EXPECT_DOUBLE_EQ(r.credit_bytes(100'000), 4096.0);
}

TEST(Pacer, UnlimitedToLimitedStartsWithAFullBucket) {
  Pacer p;
  for (int i = 0; i < 10; ++i) p.on_sent(100, 4096);
  p.set_rate_at(100, 1'000'000'000);
  EXPECT_DOUBLE_EQ(p.credit_bytes(100), 64 * 1024);
}

}  // namespace
}  // namespace uroce::cc
