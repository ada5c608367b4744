// DCQCN reaction point against rate trajectories worked out by hand (each expected number is
// derived in the comment beside it, never by calling the code under test).
#include <gtest/gtest.h>

#include "cc/dcqcn.h"

namespace uroce::cc {
namespace {

constexpr Nanos kUs = 1000;
constexpr double kG = 1e9, kM = 1e6;

TEST(Dcqcn, StartsAtLineRateWithNothingPending) {
  Dcqcn d(DcqcnParams::paper(40 * kG));
  EXPECT_EQ(d.rate_bps(), 40'000'000'000u);
  EXPECT_EQ(d.next_deadline(), kNever);
  d.on_bytes_sent(5 * kUs, 100'000'000);  // no CNP yet: the byte counter does nothing
  EXPECT_EQ(d.rate_bps(), 40'000'000'000u);
  EXPECT_EQ(d.counters().additive_increase + d.counters().fast_recovery, 0u);
}

// Paper parameters, 40 Gb/s: g = 1/256, K = T = 55 us, F = 5, R_AI = 40 Mb/s, alpha0 = 1.
TEST(Dcqcn, PaperCutFastRecoveryThenAdditiveIncrease) {
  Dcqcn d(DcqcnParams::paper(40 * kG));
  // CNP at 0: RT = 40G, RC = 40G (1 - 1/2) = 20G, alpha = (255/256)*1 + 1/256 = 1.
  d.on_cnp(0);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 20 * kG);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 40 * kG);
  EXPECT_DOUBLE_EQ(d.alpha(0), 1.0);
  EXPECT_EQ(d.next_deadline(), 55 * kUs);
  // CNP at 10 us (no alpha tick yet): RT = 20G, RC = 10G; timer T restarts: next event at 65 us.
  d.on_cnp(10 * kUs);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 10 * kG);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 20 * kG);
  EXPECT_EQ(d.next_deadline(), 65 * kUs);
  // Fast recovery, RC = (RT + RC) / 2 with RT = 20G: 15, 17.5, 18.75, 19.375 G at T = 1..4.
  const double fr[] = {15 * kG, 17.5 * kG, 18.75 * kG, 19.375 * kG};
  for (int i = 0; i < 4; ++i) {
    d.on_timer(d.next_deadline());
    EXPECT_DOUBLE_EQ(d.current_rate_bps(), fr[i]) << i;
    EXPECT_DOUBLE_EQ(d.target_rate_bps(), 20 * kG);
  }
  EXPECT_EQ(d.time_stage(), 4u);
  // T = 5 = F: max(T, BC) is not below F, min is not above: additive increase.
  // RT = 20.04G, RC = (20.04 + 19.375) / 2 = 19.7075G.
  d.on_timer(285 * kUs);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 20.04 * kG);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 19.7075 * kG);
  // T = 6: RT = 20.08G, RC = (20.08 + 19.7075) / 2 = 19.89375G.
  d.on_timer(340 * kUs);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 20.08 * kG);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 19.89375 * kG);
  EXPECT_EQ(d.counters().fast_recovery, 4u);
  EXPECT_EQ(d.counters().additive_increase, 2u);
  EXPECT_EQ(d.counters().cuts, 2u);
}

TEST(Dcqcn, PaperAlphaDecaysEveryKWithoutCnpAndScalesTheNextCut) {
  Dcqcn d(DcqcnParams::paper(40 * kG));
  d.on_cnp(0);  // RC 20G, RT 40G, alpha 1
  // One K without a CNP: alpha = 255/256 = 0.99609375; two: (255/256)^2 = 0.9922027587890625.
  EXPECT_DOUBLE_EQ(d.alpha(54 * kUs), 1.0);
  EXPECT_DOUBLE_EQ(d.alpha(55 * kUs), 0.99609375);
  EXPECT_DOUBLE_EQ(d.alpha(110 * kUs), 0.9922027587890625);
  // Timer T at 55 and 110 us: RC = (40+20)/2 = 30G, then (40+30)/2 = 35G.
  // CNP at 120 us: RT = 35G; RC = 35G (1 - 0.9922027587890625/2) = 17636451721.191406;
  // alpha = (255/256) 0.9922027587890625 + 1/256 = 0.9922332167625427.
  d.on_cnp(120 * kUs);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 35 * kG);
  EXPECT_NEAR(d.current_rate_bps(), 17636451721.191406, 1e-3);
  EXPECT_NEAR(d.alpha(120 * kUs), 0.9922332167625427, 1e-15);
  // K restarts at the CNP: no decay until 175 us.
  EXPECT_NEAR(d.alpha(174 * kUs), 0.9922332167625427, 1e-15);
  EXPECT_LT(d.alpha(175 * kUs), 0.99);
}

// Small made-up parameters so the byte counter and hyper increase show within a few steps:
// line 1 Gb/s, F = 2, B = 1000 B, T = 100 us, R_AI = 10 Mb/s, R_HAI = 100 Mb/s.
TEST(Dcqcn, ByteCounterAndHyperIncrease) {
  DcqcnParams p = DcqcnParams::paper(1 * kG);
  p.stage_threshold = 2;
  p.increase_bytes = 1000;
  p.increase_period_ns = 100 * kUs;
  p.ai_rate_bps = 10 * kM;
  p.hai_rate_bps = 100 * kM;
  Dcqcn d(p);
  d.on_cnp(0);        // RT 1000M, RC 500M, alpha 1
  d.on_cnp(1 * kUs);  // RT 500M, RC 250M; T restarts: events at 101, 201, ... us
  // Each step: (T, BC) -> rule -> RT, RC = (RT + RC) / 2.
  d.on_bytes_sent(2 * kUs, 999);  // not a whole B yet
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 250 * kM);
  d.on_bytes_sent(2 * kUs, 1);  // (0,1) max < F: fast recovery, RC 375
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 375 * kM);
  d.on_bytes_sent(3 * kUs, 1000);  // (0,2) AI: RT 510, RC 442.5
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 510 * kM);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 442.5 * kM);
  d.on_bytes_sent(4 * kUs, 1000);  // (0,3) AI: RT 520, RC 481.25
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 481.25 * kM);
  d.on_timer(101 * kUs);  // (1,3) AI: RT 530, RC 505.625
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 505.625 * kM);
  d.on_timer(201 * kUs);  // (2,3) AI: RT 540, RC 522.8125
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 522.8125 * kM);
  d.on_timer(301 * kUs);  // (3,3) min > F: hyper, i = 3-2 = 1: RT 640, RC 581.40625
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 640 * kM);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 581.40625 * kM);
  d.on_bytes_sent(302 * kUs, 1000);  // (3,4) hyper i = 1: RT 740, RC 660.703125
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 660.703125 * kM);
  d.on_timer(401 * kUs);  // (4,4) hyper i = 2: RT 940, RC 800.3515625
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 940 * kM);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 800.3515625 * kM);
  d.on_timer(501 * kUs);  // (5,4) hyper i = 2: RT 1140 -> line 1000, RC 900.17578125
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 1000 * kM);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 900.17578125 * kM);
  EXPECT_EQ(d.counters().fast_recovery, 1u);
  EXPECT_EQ(d.counters().additive_increase, 4u);
  EXPECT_EQ(d.counters().hyper_increase, 4u);
}

TEST(Dcqcn, ReturnsToLineRateAndStopsItsTimer) {
  Dcqcn d(DcqcnParams::paper(40 * kG));
  d.on_cnp(0);
  // RT stays 40G (clamped), so RC halves its gap to 40G each T: within 1 b/s after ~35 events.
  int events = 0;
  while (d.next_deadline() != kNever && events < 1000) {
    d.on_timer(d.next_deadline());
    ++events;
  }
  EXPECT_EQ(d.rate_bps(), 40'000'000'000u);
  EXPECT_GT(events, 30);
  EXPECT_LT(events, 60);
}

TEST(Dcqcn, RateNeverFallsBelowMinimum) {
  Dcqcn d(DcqcnParams::paper(40 * kG));
  for (int i = 0; i < 100; ++i) d.on_cnp(static_cast<Nanos>(i) * kUs);
  EXPECT_EQ(d.rate_bps(), 1'000'000u);  // 40G / 2^100 would be far below rpg_min_rate 1 Mb/s
  EXPECT_EQ(d.counters().cuts, 100u);
}

// mlx5 defaults, 100 Gb/s: alpha0 = 1023/1024, g = 5/1024 on a 1 us grid, cuts at most every 4 us.
TEST(Dcqcn, Mlx5CutsAtMostOncePerMonitorPeriod) {
  Dcqcn d(DcqcnParams::mlx5(100 * kG));
  // First CNP cuts at once: RC = 100G (1 - (1023/1024)/2) = 50048828125.
  d.on_cnp(0);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 50048828125.0);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 100 * kG);
  // Alpha ticks: at 1 us it rises (CNP in [0,1)): a1 = (1019/1024) a0 + 5/1024 = 0.999028205871582.
  EXPECT_NEAR(d.alpha(1 * kUs), 0.999028205871582, 1e-15);
  // CNP at 2 us: within 4 us of the last cut, so the cut waits for 4 us.
  d.on_cnp(2 * kUs);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 50048828125.0);
  EXPECT_EQ(d.next_deadline(), 4 * kUs);
  // Ticks: 2 us decays (no CNP in [1,2)), 3 us rises (CNP at 2 us), 4 us decays:
  // a4 = 0.9893243140426327. Cut at 4 us: no timer-T event since the last cut and
  // clamp_tgt_rate = 0, so RT stays 100G; RC = 50048828125 (1 - a4/2) = 25291566848.298378.
  d.on_timer(4 * kUs);
  EXPECT_NEAR(d.current_rate_bps(), 25291566848.298378, 1e-2);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 100 * kG);
  EXPECT_EQ(d.counters().cuts, 2u);
  EXPECT_EQ(d.counters().cnps, 2u);
  // rpg_time_reset = 300 us after the cut: T = 1 = F, so additive increase; RT 100G + 5M clamps
  // to 100G; RC = (100G + 25291566848.298378) / 2 = 62645783424.149185.
  EXPECT_EQ(d.next_deadline(), 304 * kUs);
  d.on_timer(304 * kUs);
  EXPECT_NEAR(d.current_rate_bps(), 62645783424.149185, 1e-2);
  EXPECT_EQ(d.counters().additive_increase, 1u);
}

// HPCC's ns-3 DCQCN (run.py --cc dcqcn at 100 Gb/s): the first CNP does not cut, it sets alpha to
// 1 and the cut comes 4 us later; g = 1/256 on a 1 us grid; no byte counter, so timer T alone
// walks fast recovery (one step), additive, then hyper increase; minimum rate 1 Gb/s.
TEST(Dcqcn, HpccFirstCnpWaitsForThePeriodThenTimerAloneRecovers) {
  const DcqcnParams p = DcqcnParams::hpcc(100 * kG);
  EXPECT_DOUBLE_EQ(p.ai_rate_bps, 20 * kM);  // 5 Mb/s per 25 Gb/s
  EXPECT_DOUBLE_EQ(p.hai_rate_bps, 200 * kM);
  EXPECT_DOUBLE_EQ(p.min_rate_bps, 1 * kG);
  Dcqcn d(p);
  d.on_cnp(0);
  EXPECT_DOUBLE_EQ(d.current_rate_bps(), 100 * kG);
  EXPECT_EQ(d.next_deadline(), 4 * kUs);
  // Ticks at 1..4 us see no CNP (the first one's flag is cleared): a4 = (255/256)^4 =
  // 0.9844663145486265; RT stays 100G (no timer event yet); RC = 100G (1 - a4/2).
  d.on_timer(4 * kUs);
  EXPECT_NEAR(d.current_rate_bps(), 50776684272.56867, 1e-3);
  EXPECT_DOUBLE_EQ(d.target_rate_bps(), 100 * kG);
  EXPECT_EQ(d.counters().cuts, 1u);
  // CNP at 5 us, inside the period: the cut waits for 8 us. Ticks: 5 decays, 6 rises (CNP in
  // [5,6)), 7 and 8 decay: a8 = 0.9730497165074751; RC = 50776684272.56867 (1 - a8/2).
  d.on_cnp(5 * kUs);
  EXPECT_EQ(d.next_deadline(), 8 * kUs);
  d.on_timer(8 * kUs);
  EXPECT_NEAR(d.current_rate_bps(), 26072565154.262413, 1e-3);
  // No byte counter: sending never raises the rate.
  d.on_bytes_sent(9 * kUs, 1'000'000'000);
  EXPECT_NEAR(d.current_rate_bps(), 26072565154.262413, 1e-3);
  // T at 308 us: fast recovery, RC = (100G + RC) / 2; 608 us: additive (RT 100G + 20M clamps to
  // 100G); 908 us: hyper (RT clamps again). RC halves the gap to 100G each time.
  const double rc[] = {63036282577.13121, 81518141288.56561, 90759070644.2828};
  for (int i = 0; i < 3; ++i) {
    d.on_timer((308 + 300 * i) * kUs);
    EXPECT_NEAR(d.current_rate_bps(), rc[i], 1e-3) << i;
  }
  EXPECT_EQ(d.counters().fast_recovery, 1u);
  EXPECT_EQ(d.counters().additive_increase, 1u);
  EXPECT_EQ(d.counters().hyper_increase, 1u);
}

TEST(Dcqcn, LateTimerCatchesUpInOrder) {
  // One on_timer call long after the events gives the same rate as calling it at each deadline.
  Dcqcn a(DcqcnParams::paper(40 * kG)), b(DcqcnParams::paper(40 * kG));
  a.on_cnp(0);
  a.on_cnp(10 * kUs);
  b.on_cnp(0);
  b.on_cnp(10 * kUs);
  while (a.next_deadline() <= 2000 * kUs) a.on_timer(a.next_deadline());
  b.on_timer(2000 * kUs);
  EXPECT_DOUBLE_EQ(a.current_rate_bps(), b.current_rate_bps());
  EXPECT_DOUBLE_EQ(a.target_rate_bps(), b.target_rate_bps());
  EXPECT_EQ(a.time_stage(), b.time_stage());
}

}  // namespace
}  // namespace uroce::cc
