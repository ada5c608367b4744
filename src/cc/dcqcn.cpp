#include "cc/dcqcn.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace uroce::cc {

DcqcnParams DcqcnParams::paper(double line_rate_bps) {
  DcqcnParams p;
  p.name = "paper";
  p.line_rate_bps = line_rate_bps;
  p.min_rate_bps = 1e6;
  p.g = 1.0 / 256;
  p.alpha_initial = 1.0;
  p.alpha_period_ns = 55'000;  // K
  p.alpha_on_grid = false;
  p.clamp_target_always = true;
  p.cut_period_ns = 0;
  p.increase_period_ns = 55'000;  // T
  p.increase_bytes = 10'000'000;  // B = 10 MB
  p.stage_threshold = 5;          // F
  p.ai_rate_bps = 40e6;
  p.hai_rate_bps = 200e6;
  return p;
}

DcqcnParams DcqcnParams::mlx5(double line_rate_bps) {
  DcqcnParams p;
  p.name = "mlx5";
  p.line_rate_bps = line_rate_bps;
  p.min_rate_bps = 1e6;             // rpg_min_rate
  p.g = (1024.0 - 1019.0) / 1024;   // dce_tcp_g: alpha <- 1019/1024 alpha (+ 5/1024 on a CNP)
  p.alpha_initial = 1023.0 / 1024;  // initial_alpha_value
  p.alpha_period_ns = 1'000;        // dce_tcp_rtt
  p.alpha_on_grid = true;
  p.clamp_target_always = false;   // clamp_tgt_rate 0
  p.cut_period_ns = 4'000;         // rate_reduce_monitor_period
  p.increase_period_ns = 300'000;  // rpg_time_reset
  // rpg_byte_reset 32767, read as 64-byte units as Isekai does (the unit is not documented).
  p.increase_bytes = 32767ull * 64;
  p.stage_threshold = 1;  // rpg_threshold
  p.ai_rate_bps = 5e6;    // rpg_ai_rate
  p.hai_rate_bps = 50e6;  // rpg_hai_rate
  return p;
}

DcqcnParams DcqcnParams::hpcc(double line_rate_bps) {
  DcqcnParams p;
  p.name = "hpcc";
  const double per_25g = line_rate_bps / 25e9;
  p.line_rate_bps = line_rate_bps;
  p.min_rate_bps = std::min(1e9, line_rate_bps);  // MIN_RATE
  p.g = 1.0 / 256;                                // EWMA_GAIN
  p.alpha_initial = 1.0;                          // set to 1 at the first CNP
  p.alpha_period_ns = 1'000;                      // ALPHA_RESUME_INTERVAL
  p.alpha_on_grid = true;
  p.clamp_target_always = false;   // CLAMP_TARGET_RATE 0
  p.cut_period_ns = 4'000;         // RATE_DECREASE_INTERVAL
  p.first_cnp_cuts = false;        // RateOnFirstCnp 1.0
  p.increase_period_ns = 300'000;  // RP_TIMER
  p.increase_bytes = 0;            // the mlx model has no byte counter
  // FAST_RECOVERY_TIMES 1: ns-3 counts stages from 0, this class from 1.
  p.stage_threshold = 2;
  p.hyper_step_grows = false;
  p.ai_rate_bps = 5e6 * per_25g;    // RATE_AI
  p.hai_rate_bps = 50e6 * per_25g;  // RATE_HAI
  return p;
}

Dcqcn::Dcqcn(const DcqcnParams& params)
    : p_(params),
      rc_bps_(params.line_rate_bps),
      rt_bps_(params.line_rate_bps),
      alpha_(params.alpha_initial) {
  UROCE_CHECK(p_.line_rate_bps > 0 && p_.min_rate_bps > 0 && p_.min_rate_bps <= p_.line_rate_bps);
  UROCE_CHECK(p_.g > 0 && p_.g <= 1 && p_.alpha_initial >= 0 && p_.alpha_initial <= 1);
  UROCE_CHECK(p_.alpha_period_ns > 0 && p_.increase_period_ns > 0);
  UROCE_CHECK(p_.first_cnp_cuts || p_.cut_period_ns > 0);
}

// Alpha after the ticks up to and including `now`, without changing state. Only the first tick
// can see a CNP (the flag clears there); the rest are pure decays, done in closed form so a QP
// idle for a second costs nothing.
double Dcqcn::alpha_at(Nanos now, Nanos* next_tick) const {
  double a = alpha_;
  Nanos next = alpha_next_;
  if (next != kNever && next <= now) {
    const uint64_t ticks = (now - next) / p_.alpha_period_ns + 1;
    uint64_t decays = ticks;
    if (p_.alpha_on_grid && cnp_in_alpha_period_) {
      a = (1 - p_.g) * a + p_.g;
      decays -= 1;
    }
    a *= std::pow(1 - p_.g, static_cast<double>(decays));
    next += ticks * p_.alpha_period_ns;
  }
  if (next_tick) *next_tick = next;
  return a;
}

double Dcqcn::alpha(Nanos now) const {
  return alpha_at(now, nullptr);
}

void Dcqcn::advance_alpha(Nanos now) {
  Nanos next = alpha_next_;
  alpha_ = alpha_at(now, &next);
  if (next != alpha_next_) cnp_in_alpha_period_ = false;
  alpha_next_ = next;
}

bool Dcqcn::increasing() const {
  return ever_cut_ && (rc_bps_ < p_.line_rate_bps || rt_bps_ < p_.line_rate_bps);
}

void Dcqcn::on_cnp(Nanos now) {
  on_timer(now);
  ++counters_.cnps;
  advance_alpha(now);
  if (p_.alpha_on_grid) {
    cnp_in_alpha_period_ = true;
    if (alpha_next_ == kNever) alpha_next_ = now + p_.alpha_period_ns;
  }
  if (!ever_cut_ && !p_.first_cnp_cuts) {
    // HPCC's first CNP: alpha restarts at 1 and the cut waits for the end of the period.
    if (cut_due_ == kNever) {
      alpha_ = 1.0;
      cnp_in_alpha_period_ = false;
      alpha_next_ = now + p_.alpha_period_ns;
      cut_due_ = now + p_.cut_period_ns;
    }
    return;
  }
  if (p_.cut_period_ns == 0 || !ever_cut_ || now >= last_cut_ + p_.cut_period_ns) {
    cut(now);
  } else if (cut_due_ == kNever) {
    cut_due_ = last_cut_ + p_.cut_period_ns;
  }
}

// The rate cut (paper figure 7 / section 3.1): RT <- RC, RC <- RC (1 - alpha/2), and in the
// paper's version alpha <- (1 - g) alpha + g right after. The increase state restarts.
void Dcqcn::cut(Nanos now) {
  advance_alpha(now);
  if (p_.clamp_target_always || t_stage_ != 0) rt_bps_ = rc_bps_;
  rc_bps_ = std::max(p_.min_rate_bps, rc_bps_ * (1 - alpha_ / 2));
  if (!p_.alpha_on_grid) {
    alpha_ = (1 - p_.g) * alpha_ + p_.g;
    alpha_next_ = now + p_.alpha_period_ns;  // K counts from the last CNP
  }
  t_stage_ = bc_stage_ = 0;
  bytes_since_ = 0;
  t_next_ = now + p_.increase_period_ns;
  last_cut_ = now;
  ever_cut_ = true;
  cut_due_ = kNever;
  ++counters_.cuts;
}

// One increase event, after timer T or byte counter B advanced its stage (section 3.1).
void Dcqcn::increase_event() {
  const uint32_t f = p_.stage_threshold;
  const uint32_t hi = std::max(t_stage_, bc_stage_);
  const uint32_t lo = p_.increase_bytes == 0 ? t_stage_ : std::min(t_stage_, bc_stage_);
  if (hi < f) {
    ++counters_.fast_recovery;
  } else if (lo > f) {
    // Hyper increase: the step grows with the number of rounds both counters spent past F.
    rt_bps_ += (p_.hyper_step_grows ? static_cast<double>(lo - f) : 1.0) * p_.hai_rate_bps;
    ++counters_.hyper_increase;
  } else {
    rt_bps_ += p_.ai_rate_bps;
    ++counters_.additive_increase;
  }
  rt_bps_ = std::min(rt_bps_, p_.line_rate_bps);
  rc_bps_ = std::min((rt_bps_ + rc_bps_) / 2, p_.line_rate_bps);
  // Halving the gap never closes it in floating point; within 1 b/s of line rate is line rate.
  if (p_.line_rate_bps - rc_bps_ < 1.0) rc_bps_ = p_.line_rate_bps;
  if (!increasing()) t_next_ = kNever;
}

void Dcqcn::on_timer(Nanos now) {
  for (uint32_t events = 0;; ++events) {
    const Nanos due = std::min(cut_due_, t_next_);
    if (due == kNever || due > now) return;
    if (events == kMaxTimerEventsPerCall) {
      ++counters_.timer_catchup_truncated;
      if (t_next_ <= now) t_next_ = now + p_.increase_period_ns;
      if (cut_due_ <= now) cut(now);
      return;
    }
    if (cut_due_ <= t_next_) {
      cut(cut_due_);
    } else {
      ++t_stage_;
      t_next_ += p_.increase_period_ns;
      increase_event();
    }
  }
}

void Dcqcn::on_bytes_sent(Nanos now, uint64_t bytes) {
  on_timer(now);
  if (p_.increase_bytes == 0) return;
  bytes_since_ += bytes;
  while (increasing() && bytes_since_ >= p_.increase_bytes) {
    bytes_since_ -= p_.increase_bytes;
    ++bc_stage_;
    increase_event();
  }
  // At line rate the counter stops; it restarts from zero at the next cut.
  if (!increasing()) bytes_since_ = 0;
}

Nanos Dcqcn::next_deadline() const {
  return std::min(cut_due_, t_next_);
}

}  // namespace uroce::cc
