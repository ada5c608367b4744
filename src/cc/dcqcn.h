#pragma once
// DCQCN reaction point (RP): the sender side of DCQCN (Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments", SIGCOMM 2015, section 3.1 and figure 7). One instance per QP.
// Pure: time and events are passed in, the current rate comes out and is fed to
// cc::Pacer::set_rate.
//
//   on_cnp(now)            a CNP arrived for this QP (the NP saw CE-marked packets)
//   on_bytes_sent(now, n)  the QP put n bytes on the wire (drives the byte counter B)
//   on_timer(now)          call when now >= next_deadline() (timer T, and the mlx5 cut timer)
//   rate_bps()             the current rate RC
//
// Every entry point first fires the timers that are due, so calling on_timer late never reorders
// events; it only delays their effect on the pacer.
#include <cstdint>
#include <string_view>

#include "common/types.h"

namespace uroce::cc {

struct DcqcnParams {
  std::string_view name;
  double line_rate_bps = 100e9;  // RC and RT start here and never exceed it
  double min_rate_bps = 1e6;     // RC never drops below this
  double g = 1.0 / 256;          // alpha gain
  double alpha_initial = 1.0;
  // Alpha timer K. Paper: decay alpha once per K without a CNP, the timer restarting at each CNP.
  // mlx5 (alpha_on_grid): every K, alpha rises if a CNP came in that period, else decays.
  Nanos alpha_period_ns = 55'000;
  bool alpha_on_grid = false;
  // At a cut, RT <- RC. Paper: always. mlx5 clamp_tgt_rate=0: only if timer T fired since the last
  // cut, so a burst of cuts keeps the older, higher target and recovers to it faster.
  bool clamp_target_always = true;
  // 0: cut at every CNP (paper). Otherwise at most one cut per period (mlx5
  // rate_reduce_monitor_period): the first CNP cuts at once, later ones in the period cut at its
  // end.
  Nanos cut_period_ns = 0;
  Nanos increase_period_ns = 55'000;     // timer T
  uint64_t increase_bytes = 10'000'000;  // byte counter B; 0 disables it
  uint32_t stage_threshold = 5;          // F
  double ai_rate_bps = 40e6;             // R_AI
  double hai_rate_bps = 200e6;           // R_HAI
  // false (HPCC's ns-3 mlx model, RateOnFirstCnp 1.0): the first CNP only sets alpha to 1 and
  // starts the cut period; the first cut comes at its end. Needs cut_period_ns > 0.
  bool first_cnp_cuts = true;
  // Hyper increase adds (stages past F) x R_HAI (paper) or a fixed R_HAI (HPCC's ns-3).
  bool hyper_step_grows = true;
  // With increase_bytes 0 the timer stage alone selects fast recovery / additive / hyper.

  // The paper's values (section 5; the authors' simulator bobzhuyb/ns3-rdma and its fluid-model
  // script; docs/cc.md, "Parameter sets"). R_HAI is not settled in the sources;
  // 200 Mb/s is the authors' sample configuration.
  static DcqcnParams paper(double line_rate_bps);
  // ConnectX-4+ firmware defaults (mlxconfig dump; Linux mlx5/cong.c names; semantics from Google
  // Isekai rdma_roce_cc_dcqcn.cc): rpg_time_reset 300 us, rpg_byte_reset 32767 x 64 B,
  // rpg_threshold 1, rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s, rpg_min_rate 1 Mb/s, dce_tcp_g 1019
  // (g = 5/1024), dce_tcp_rtt 1 us, rate_reduce_monitor_period 4 us, initial_alpha_value 1023.
  static DcqcnParams mlx5(double line_rate_bps);
  // HPCC's ns-3 simulator (alibaba-edu/High-Precision-Congestion-Control, run.py --cc dcqcn,
  // rdma-hw.cc mlx model), its rates scaled to the line rate as run.py does (bw/25): alpha on a
  // 1 us grid with g 1/256, at most one cut per 4 us, no cut on the first CNP, timer T 300 us, no
  // byte counter, one fast-recovery step, R_AI 5 and R_HAI 50 Mb/s per 25 Gb/s, minimum 1 Gb/s.
  static DcqcnParams hpcc(double line_rate_bps);
};

struct DcqcnCounters {
  uint64_t cnps = 0, cuts = 0;
  uint64_t fast_recovery = 0, additive_increase = 0, hyper_increase = 0;
  uint64_t timer_catchup_truncated = 0;  // on_timer fell so far behind that periods were skipped
};

class Dcqcn {
 public:
  explicit Dcqcn(const DcqcnParams& params);

  void on_cnp(Nanos now);
  void on_bytes_sent(Nanos now, uint64_t bytes);
  void on_timer(Nanos now);
  // The next time on_timer must run; kNever while nothing is pending (at line rate, no cut due).
  Nanos next_deadline() const;

  uint64_t rate_bps() const { return static_cast<uint64_t>(rc_bps_); }
  double current_rate_bps() const { return rc_bps_; }
  double target_rate_bps() const { return rt_bps_; }
  // Alpha as of `now` (the paper's alpha decays lazily between events).
  double alpha(Nanos now) const;
  uint32_t time_stage() const { return t_stage_; }
  uint32_t byte_stage() const { return bc_stage_; }
  const DcqcnCounters& counters() const { return counters_; }
  const DcqcnParams& params() const { return p_; }

  // Bounds one on_timer call; beyond it the periods are skipped and counted.
  static constexpr uint32_t kMaxTimerEventsPerCall = 1u << 20;

 private:
  void advance_alpha(Nanos now);
  double alpha_at(Nanos now, Nanos* next_tick) const;
  bool increasing() const;
  void cut(Nanos now);
  void increase_event();

  DcqcnParams p_;
  double rc_bps_;  // current rate RC
  double rt_bps_;  // target rate RT
  double alpha_;
  Nanos alpha_next_ = kNever;  // next alpha tick
  bool cnp_in_alpha_period_ = false;
  Nanos last_cut_ = 0;
  bool ever_cut_ = false;
  Nanos cut_due_ = kNever;    // pending mlx5 cut
  Nanos t_next_ = kNever;     // next timer-T event
  uint64_t bytes_since_ = 0;  // towards the next byte-counter event
  uint32_t t_stage_ = 0, bc_stage_ = 0;
  DcqcnCounters counters_;
};

}  // namespace uroce::cc
