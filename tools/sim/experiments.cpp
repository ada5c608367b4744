#include "sim/experiments.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "sim/svg_plot.h"

namespace uroce::simlab {
namespace {

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

const char* cc_name(transport::CcAlgorithm a) {
  switch (a) {
    case transport::CcAlgorithm::kOff:
      return "off";
    case transport::CcAlgorithm::kDcqcnPaper:
      return "paper";
    case transport::CcAlgorithm::kDcqcnMlx5:
      return "mlx5";
    case transport::CcAlgorithm::kDcqcnHpcc:
      return "hpcc";
  }
  return "?";
}

bool uses_dcqcn(Mode m) {
  return m != Mode::kPfc;
}

fabric::TopologySpec base_topology(const ExperimentParams& p) {
  fabric::TopologySpec t;
  t.link.rate_bps = p.rate_bps;
  t.link.delay_ns = p.delay_ns;
  t.sw.buffer_bytes = p.buffer_bytes;
  t.sw.ecn.kmin_bytes = p.kmin_bytes;
  t.sw.ecn.kmax_bytes = p.kmax_bytes;
  t.sw.ecn.pmax = p.pmax;
  t.sw.ecn.mark_at_dequeue = p.mark_at_dequeue;
  t.sw.xoff_bytes = p.xoff_bytes;
  // DCQCN without PFC: the data class is lossy, so a full buffer drops.
  if (p.mode == Mode::kDcqcnNoPfc) t.sw.lossless_mask = 0;
  return t;
}

WorldConfig world_config(const ExperimentParams& p) {
  WorldConfig c;
  c.seed = p.seed;
  c.path_mtu = p.path_mtu;
  c.sample_ns = p.sample_ns;
  c.cc.line_rate_bps = static_cast<double>(p.rate_bps);
  c.cc.algorithm = uses_dcqcn(p.mode) ? p.dcqcn : transport::CcAlgorithm::kOff;
  return c;
}

ExperimentResult start(const std::string& name, const ExperimentParams& p) {
  ExperimentResult r;
  r.name = name;
  r.line_rate_bps = static_cast<double>(p.rate_bps);
  auto& k = r.params;
  k.emplace_back("experiment", name);
  k.emplace_back("seed", std::to_string(p.seed));
  k.emplace_back("mode", to_string(p.mode));
  k.emplace_back("dcqcn", uses_dcqcn(p.mode) ? cc_name(p.dcqcn) : "off");
  k.emplace_back("senders", std::to_string(p.senders));
  k.emplace_back("flows", std::to_string(p.flows));
  k.emplace_back("flow_bytes", std::to_string(p.flow_bytes));
  k.emplace_back("rate_bps", std::to_string(p.rate_bps));
  k.emplace_back("delay_ns", std::to_string(p.delay_ns));
  k.emplace_back("path_mtu", std::to_string(p.path_mtu));
  k.emplace_back("kmin_bytes", std::to_string(p.kmin_bytes));
  k.emplace_back("kmax_bytes", std::to_string(p.kmax_bytes));
  k.emplace_back("pmax", num(p.pmax));
  k.emplace_back("ecn_mark", p.mark_at_dequeue ? "dequeue" : "enqueue");
  k.emplace_back("xoff_bytes", std::to_string(p.xoff_bytes));
  k.emplace_back("buffer_bytes", std::to_string(p.buffer_bytes));
  k.emplace_back("stagger_ns", std::to_string(p.stagger_ns));
  k.emplace_back("loss", num(p.loss));
  k.emplace_back("sample_ns", std::to_string(p.sample_ns));
  return r;
}

void put(ExperimentResult& r, const std::string& key, double v) {
  r.summary.emplace_back(key, num(v));
}

// Common numbers of every run: completion, verification, fabric and transport counters.
void summarize(ExperimentResult& r) {
  const RunResult& run = r.run;
  if (!run.ok) {
    r.ok = false;
    r.failure = run.failure;
  }
  Nanos last = 0;
  uint64_t cnps_sent = 0, cnps_received = 0, ce = 0, retx = 0, verified = 0;
  for (const FlowResult& f : run.flows) {
    last = std::max(last, f.done_ns);
    cnps_sent += f.receiver.cnps_sent;
    cnps_received += f.sender.cnps_received;
    ce += f.receiver.ce_marked;
    retx += f.sender.retransmitted_packets;
    verified += f.verified ? 1 : 0;
  }
  if (verified != run.flows.size() && r.ok) {
    r.ok = false;
    r.failure = "a flow's data did not verify";
  }
  put(r, "flows_verified", static_cast<double>(verified));
  put(r, "last_done_us", static_cast<double>(last) / 1e3);
  put(r, "pause_frames", static_cast<double>(run.fabric.pause_frames));
  put(r, "drops", static_cast<double>(run.fabric.drops_buffer + run.fabric.drops_bit_error));
  put(r, "ecn_marked", static_cast<double>(run.fabric.ecn_marked));
  put(r, "ce_received", static_cast<double>(ce));
  put(r, "cnps_sent", static_cast<double>(cnps_sent));
  put(r, "cnps_received", static_cast<double>(cnps_received));
  put(r, "retransmitted_packets", static_cast<double>(retx));
  // Per flow: completion, throughput over its own lifetime, what congestion control did to it.
  uint64_t cuts = 0;
  for (size_t i = 0; i < run.flows.size(); ++i) {
    const FlowResult& f = run.flows[i];
    const std::string k = "flow" + std::to_string(i) + "_";
    const bool done = f.done_ns != kNever;
    put(r, k + "done_us", done ? static_cast<double>(f.done_ns) / 1e3 : -1);
    put(r, k + "gbps",
        done && f.done_ns > f.spec.start_ns ? static_cast<double>(f.spec.bytes) * 8 /
                                                  static_cast<double>(f.done_ns - f.spec.start_ns)
                                            : 0);
    put(r, k + "cnps", static_cast<double>(f.sender.cnps_received));
    put(r, k + "rate_cuts", static_cast<double>(f.sender.rate_cuts));
    put(r, k + "min_rate_gbps", static_cast<double>(f.sender.dcqcn_min_rate_mbps) / 1e3);
    cuts += f.sender.rate_cuts;
  }
  put(r, "rate_cuts", static_cast<double>(cuts));
  // The bottleneck (first watched port): wire bytes it sent against line rate, from the first
  // flow's start to the last completion. Only experiments that watch a port have one.
  if (!run.samples.empty() && !run.samples.front().port_tx_bytes.empty() && last > 0) {
    Nanos first_start = kNever;
    for (const FlowResult& f : run.flows) first_start = std::min(first_start, f.spec.start_ns);
    uint64_t a = 0, b = 0;
    bool have_a = false;
    for (const Sample& s : run.samples) {
      if (!have_a && s.t >= first_start) a = s.port_tx_bytes[0], have_a = true;
      if (s.t <= last) b = s.port_tx_bytes[0];
    }
    const double span = static_cast<double>(last - first_start);
    put(r, "bottleneck_util",
        span > 0 ? static_cast<double>(b - a) * 8e9 / (r.line_rate_bps * span) : 0);
  }
}

// Average and maximum of watched port `i` over the samples up to `until`.
std::pair<double, double> queue_stats(const RunResult& run, size_t i, Nanos until) {
  double sum = 0, mx = 0;
  size_t n = 0;
  for (const Sample& s : run.samples) {
    if (s.t > until || i >= s.queue_bytes.size()) continue;
    sum += static_cast<double>(s.queue_bytes[i]);
    mx = std::max(mx, static_cast<double>(s.queue_bytes[i]));
    ++n;
  }
  return {n ? sum / static_cast<double>(n) : 0, mx};
}

// Bytes flow `i` received in [t0, t1], from the samples.
double rx_between(const RunResult& run, size_t i, Nanos t0, Nanos t1) {
  uint64_t a = 0, b = 0;
  bool have_a = false;
  for (const Sample& s : run.samples) {
    if (!have_a && s.t >= t0) {
      a = s.rx_bytes[i];
      have_a = true;
    }
    if (s.t <= t1) b = s.rx_bytes[i];
  }
  return have_a && b > a ? static_cast<double>(b - a) : 0;
}

// Wire bytes watched port 0 sent in [t0, t1] over line rate: the bottleneck's utilization in a
// window (a steady state, away from the start-up transient).
double util_between(const ExperimentResult& r, Nanos t0, Nanos t1) {
  uint64_t a = 0, b = 0;
  Nanos ta = 0, tb = 0;
  bool have_a = false;
  for (const Sample& s : r.run.samples) {
    if (s.port_tx_bytes.empty()) return 0;
    if (!have_a && s.t >= t0) a = s.port_tx_bytes[0], ta = s.t, have_a = true;
    if (s.t <= t1) b = s.port_tx_bytes[0], tb = s.t;
  }
  if (!have_a || tb <= ta) return 0;
  return static_cast<double>(b - a) * 8e9 / (r.line_rate_bps * static_cast<double>(tb - ta));
}

Result<std::unique_ptr<World>, std::string> make_world(const ExperimentParams& p,
                                                       fabric::TopologySpec t) {
  return World::create(world_config(p), t);
}

}  // namespace

const char* to_string(Mode m) {
  switch (m) {
    case Mode::kPfc:
      return "pfc";
    case Mode::kPfcDcqcn:
      return "pfc+dcqcn";
    case Mode::kDcqcnNoPfc:
      return "dcqcn-nopfc";
  }
  return "?";
}

bool parse_mode(const std::string& s, Mode* out) {
  for (Mode m : {Mode::kPfc, Mode::kPfcDcqcn, Mode::kDcqcnNoPfc}) {
    if (s == to_string(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

double ExperimentResult::number(const std::string& key) const {
  for (const auto& [k, v] : summary)
    if (k == key) return std::strtod(v.c_str(), nullptr);
  return std::numeric_limits<double>::quiet_NaN();
}

// N senders and one receiver on one switch; every sender writes flow_bytes to the receiver.
ExperimentResult run_incast(const ExperimentParams& p) {
  ExperimentResult r = start("incast", p);
  fabric::TopologySpec t = base_topology(p);
  t.shape = fabric::TopologySpec::Shape::kStar;
  t.hosts = p.senders + 1;
  auto w = make_world(p, t);
  if (!w) {
    r.ok = false;
    r.failure = w.error();
    return r;
  }
  World& world = **w;
  const fabric::HostId rx = p.senders;
  world.watch_port(world.port_to_host(rx));
  for (uint32_t i = 0; i < p.senders; ++i) world.add_flow({i, rx, p.flow_bytes, 0});
  r.run = world.run();
  summarize(r);
  const double last = r.number("last_done_us");
  const auto [avg, mx] = queue_stats(r.run, 0, r.run.end_ns);
  put(r, "queue_avg_bytes", avg);
  put(r, "queue_max_bytes", mx);
  // The ideal: every payload byte through the receiver's link at line rate.
  const double ideal_us = static_cast<double>(p.senders) * static_cast<double>(p.flow_bytes) * 8e6 /
                          static_cast<double>(p.rate_bps);
  put(r, "ideal_us", ideal_us);
  put(r, "last_over_ideal", last / ideal_us);
  return r;
}

// Victim flow: incast senders on both switches of a dumbbell into one receiver on the right, plus
// one flow from the left to another right-side host whose path is not congested. PFC pauses the
// shared inter-switch link and so slows the victim; DCQCN keeps the queue short and frees it.
ExperimentResult run_victim(const ExperimentParams& p) {
  ExperimentResult r = start("victim", p);
  fabric::TopologySpec t = base_topology(p);
  t.shape = fabric::TopologySpec::Shape::kDumbbell;
  const uint32_t left_senders = p.senders / 2, right_senders = p.senders - left_senders;
  t.left = left_senders + 1;    // + the victim's sender
  t.right = right_senders + 2;  // + the incast receiver and the victim's receiver
  // The shared link has room for every left sender at line rate, so the only congestion is at
  // the receiver's port: whatever slows the victim is pause spreading, not its own bottleneck.
  t.bottleneck_bps = p.rate_bps * (left_senders + 1);
  auto w = make_world(p, t);
  if (!w) {
    r.ok = false;
    r.failure = w.error();
    return r;
  }
  World& world = **w;
  const fabric::HostId victim_src = left_senders;
  const fabric::HostId first_right = t.left;
  const fabric::HostId rx = first_right + right_senders;
  const fabric::HostId victim_dst = rx + 1;
  world.watch_port(world.port_to_host(rx));
  for (uint32_t i = 0; i < left_senders; ++i) world.add_flow({i, rx, p.flow_bytes, 0});
  for (uint32_t i = 0; i < right_senders; ++i)
    world.add_flow({first_right + i, rx, p.flow_bytes, 0});
  const int victim = world.add_flow({victim_src, victim_dst, p.flow_bytes, 0});
  r.run = world.run();
  summarize(r);
  const FlowResult& v = r.run.flows[static_cast<size_t>(victim)];
  put(r, "victim_done_us", static_cast<double>(v.done_ns) / 1e3);
  put(r, "victim_gbps", static_cast<double>(p.flow_bytes) * 8 / static_cast<double>(v.done_ns));
  const auto [avg, mx] = queue_stats(r.run, 0, r.run.end_ns);
  put(r, "queue_avg_bytes", avg);
  put(r, "queue_max_bytes", mx);
  return r;
}

// Parking lot: two senders on the left switch and one on the right all write to one right-side
// receiver. With PFC alone the receiver's port serves its two ingress ports evenly, so the left
// pair shares one half (~25/25/50); DCQCN marks each flow alike and moves toward a third each.
ExperimentResult run_parking_lot(const ExperimentParams& p) {
  ExperimentResult r = start("parking-lot", p);
  fabric::TopologySpec t = base_topology(p);
  t.shape = fabric::TopologySpec::Shape::kDumbbell;
  t.left = 2;
  t.right = 2;
  auto w = make_world(p, t);
  if (!w) {
    r.ok = false;
    r.failure = w.error();
    return r;
  }
  World& world = **w;
  const fabric::HostId rx = 3;
  world.watch_port(world.port_to_host(rx));
  for (fabric::HostId h : {0u, 1u, 2u}) world.add_flow({h, rx, p.flow_bytes, 0});
  r.run = world.run();
  summarize(r);
  // Shares while all three run: up to the first completion, after a warm-up of 10%.
  Nanos first = kNever;
  for (const FlowResult& f : r.run.flows) first = std::min(first, f.done_ns);
  if (first == kNever) first = r.run.end_ns;
  const Nanos t0 = first / 10;
  std::vector<double> x;
  double total = 0;
  for (size_t i = 0; i < 3; ++i) {
    x.push_back(rx_between(r.run, i, t0, first));
    total += x.back();
  }
  for (size_t i = 0; i < 3; ++i) put(r, "share_" + std::to_string(i), total > 0 ? x[i] / total : 0);
  put(r, "jain", jain_index(x));
  put(r, "util_second_half", util_between(r, first / 2, first));
  const auto [avg, mx] = queue_stats(r.run, 0, r.run.end_ns);
  put(r, "queue_avg_bytes", avg);
  put(r, "queue_max_bytes", mx);
  return r;
}

// Convergence: `flows` flows from the left of a dumbbell to one right-side receiver, starting
// stagger_ns apart; the shares while all run, and Jain's index of them.
ExperimentResult run_convergence(const ExperimentParams& p) {
  ExperimentResult r = start("convergence", p);
  fabric::TopologySpec t = base_topology(p);
  t.shape = fabric::TopologySpec::Shape::kDumbbell;
  t.left = p.flows;
  t.right = 1;
  auto w = make_world(p, t);
  if (!w) {
    r.ok = false;
    r.failure = w.error();
    return r;
  }
  World& world = **w;
  const fabric::HostId rx = p.flows;
  // The bottleneck is the left switch's port onto the shared link (all flows come from the left).
  fabric::SwitchFabric& fab = world.fabric();
  const fabric::NodeId left = fab.port_node(fab.peer(fab.host_port(0)));
  world.watch_port(fab.routes(left, rx).at(0));
  for (uint32_t i = 0; i < p.flows; ++i)
    world.add_flow({i, rx, p.flow_bytes, static_cast<Nanos>(i) * p.stagger_ns});
  r.run = world.run();
  summarize(r);
  Nanos first = kNever;
  for (const FlowResult& f : r.run.flows) first = std::min(first, f.done_ns);
  const Nanos all_on = static_cast<Nanos>(p.flows - 1) * p.stagger_ns;
  std::vector<double> x;
  for (size_t i = 0; i < p.flows; ++i)
    x.push_back(first > all_on ? rx_between(r.run, i, all_on, first) : 0);
  put(r, "all_running_us", static_cast<double>(first > all_on ? first - all_on : 0) / 1e3);
  put(r, "jain", jain_index(x));
  // The second half of the window in which all flows run: the state they converged to.
  const Nanos mid = first > all_on ? all_on + (first - all_on) / 2 : all_on;
  std::vector<double> y;
  for (size_t i = 0; i < p.flows; ++i)
    y.push_back(first > all_on ? rx_between(r.run, i, mid, first) : 0);
  put(r, "jain_second_half", jain_index(y));
  put(r, "util_second_half", first > all_on ? util_between(r, mid, first) : 0);
  double qsum = 0;
  size_t qn = 0;
  for (const Sample& s : r.run.samples) {
    if (s.t < mid || s.t > first || s.queue_bytes.empty()) continue;
    qsum += static_cast<double>(s.queue_bytes[0]);
    ++qn;
  }
  put(r, "queue_avg_second_half", qn ? qsum / static_cast<double>(qn) : 0);
  const auto [avg, mx] = queue_stats(r.run, 0, r.run.end_ns);
  put(r, "queue_avg_bytes", avg);
  put(r, "queue_max_bytes", mx);
  return r;
}

// Loss: one flow over a two-link star whose links lose frames to bit errors, so that a data
// packet is lost end to end with probability `loss`, run twice on the same fabric and seed: with
// go-back-N (flow 0 of the result) and with selective repeat (flow 1). Both use the same PSN
// window, about one bandwidth-delay product, which is what selective repeat needs (the window is
// its BDP cap, as in IRN) and what keeps go-back-N's resend per loss to one window. Goodput against
// line rate, and what each resent.
ExperimentResult run_loss(const ExperimentParams& p) {
  ExperimentResult r = start("loss", p);
  fabric::TopologySpec t = base_topology(p);
  t.shape = fabric::TopologySpec::Shape::kStar;
  t.hosts = 2;
  // Two links in series: each loses 1 - sqrt(1 - loss) of the frames of a full data packet.
  const double frame_bits = (p.path_mtu + 20.0 + 8 + 12 + 4 + fabric::kEthOverheadBytes) *
                            8;  // IPv4 + UDP + BTH + RETH-less
  const double per_link = 1 - std::sqrt(1 - p.loss);
  t.link.bit_error_rate = p.loss > 0 ? -std::log1p(-per_link) / frame_bits : 0;
  // One BDP: the round trip is four link delays plus a full frame's serialisation per hop and the
  // NIC FIFO drained at line rate on the way out; half as much again for ACK coalescing.
  const double rtt_ns = 4.0 * static_cast<double>(p.delay_ns) +
                        4 * frame_bits * 1e9 / static_cast<double>(p.rate_bps) +
                        16 * 1024 * 8 * 1e9 / static_cast<double>(p.rate_bps);
  const uint32_t window =
      p.psn_window != 0 ? p.psn_window
                        : static_cast<uint32_t>(std::ceil(
                              1.5 * rtt_ns * static_cast<double>(p.rate_bps) / 8e9 / p.path_mtu));
  r.params.emplace_back("psn_window", std::to_string(window));
  RunResult runs[2];
  const transport::LossRecovery modes[2] = {transport::LossRecovery::kGoBackN,
                                            transport::LossRecovery::kSelectiveRepeat};
  for (int i = 0; i < 2; ++i) {
    WorldConfig c = world_config(p);
    c.loss_recovery = modes[i];
    c.max_psn_window = window;
    auto w = World::create(c, t);
    if (!w) {
      r.ok = false;
      r.failure = w.error();
      return r;
    }
    (*w)->add_flow({0, 1, p.flow_bytes, 0});
    runs[i] = (*w)->run();
  }
  // One result with two flows, so the CSV and SVG show both: sample rows padded with the last
  // sample of the run that ended first.
  r.run = runs[0];
  if (!runs[1].ok && r.run.ok)
    r.run.ok = false, r.run.failure = "selective repeat: " + runs[1].failure;
  r.run.end_ns = std::max(runs[0].end_ns, runs[1].end_ns);
  r.run.flows.push_back(runs[1].flows.at(0));
  const size_t n = std::max(runs[0].samples.size(), runs[1].samples.size());
  r.run.samples.clear();
  for (size_t s = 0; s < n; ++s) {
    const Sample& a = runs[0].samples[std::min(s, runs[0].samples.size() - 1)];
    const Sample& b = runs[1].samples[std::min(s, runs[1].samples.size() - 1)];
    Sample x = s < runs[0].samples.size() ? a : b;
    x.rate_bps = {a.rate_bps.at(0), b.rate_bps.at(0)};
    x.rx_bytes = {a.rx_bytes.at(0), b.rx_bytes.at(0)};
    x.cnps_received = {a.cnps_received.at(0), b.cnps_received.at(0)};
    x.rate_cuts = {a.rate_cuts.at(0), b.rate_cuts.at(0)};
    x.pause_frames = a.pause_frames + b.pause_frames;
    r.run.samples.push_back(std::move(x));
  }
  r.run.fabric.drops_bit_error += runs[1].fabric.drops_bit_error;
  summarize(r);
  put(r, "bit_error_rate", t.link.bit_error_rate);
  // goodput_gbps stays go-back-N's, as before selective repeat existed.
  put(r, "goodput_gbps",
      static_cast<double>(p.flow_bytes) * 8 / static_cast<double>(r.run.flows[0].done_ns));
  const char* suffix[2] = {"_gbn", "_sr"};
  for (int i = 0; i < 2; ++i) {
    const FlowResult& f = r.run.flows[static_cast<size_t>(i)];
    const std::string k = suffix[i];
    put(r, "goodput_gbps" + k,
        static_cast<double>(p.flow_bytes) * 8 / static_cast<double>(f.done_ns));
    put(r, "frames_lost" + k, static_cast<double>(runs[i].fabric.drops_bit_error));
    put(r, "retransmitted_packets" + k, static_cast<double>(f.sender.retransmitted_packets));
    put(r, "retransmitted_bytes" + k, static_cast<double>(f.sender.retransmitted_bytes));
    put(r, "timeouts" + k, static_cast<double>(f.sender.local_ack_timeouts));
    put(r, "seq_naks" + k, static_cast<double>(f.sender.seq_naks_received));
    put(r, "ooo_buffered" + k, static_cast<double>(f.receiver.ooo_buffered));
  }
  return r;
}

namespace {

// Throughput of flow `i` over the `span` samples ending at sample `s`, in Gb/s.
double flow_gbps(const RunResult& run, size_t i, size_t s, size_t span) {
  const Sample& a = run.samples[s - span];
  const Sample& b = run.samples[s];
  return static_cast<double>(b.rx_bytes[i] - a.rx_bytes[i]) * 8 / static_cast<double>(b.t - a.t);
}

// Utilization of the first watched port over the same span, 0..1.
double port_util(const RunResult& run, size_t s, size_t span, double line_rate_bps) {
  const Sample& a = run.samples[s - span];
  const Sample& b = run.samples[s];
  if (b.port_tx_bytes.empty()) return 0;
  return static_cast<double>(b.port_tx_bytes[0] - a.port_tx_bytes[0]) * 8e9 /
         (line_rate_bps * static_cast<double>(b.t - a.t));
}

std::string param(const ExperimentResult& r, const std::string& key) {
  for (const auto& [k, v] : r.params)
    if (k == key) return v;
  return "?";
}

std::string flow_name(const ExperimentResult& r, size_t i) {
  const FlowSpec& f = r.run.flows[i].spec;
  std::string n = "flow " + std::to_string(i) + ": host " + std::to_string(f.src) + " -> " +
                  std::to_string(f.dst);
  if (r.name == "loss") n = i == 0 ? "go-back-N" : "selective repeat";
  return n;
}

// The caption every figure carries: the run's parameters, seed and headline results.
std::vector<std::string> caption(const ExperimentResult& r) {
  std::vector<std::string> lines;
  lines.push_back(r.name + ", seed " + param(r, "seed") + ", mode " + param(r, "mode") +
                  ", DCQCN " + param(r, "dcqcn") + "; " +
                  num(std::strtod(param(r, "rate_bps").c_str(), nullptr) / 1e9) + " Gb/s links, " +
                  param(r, "delay_ns") + " ns propagation, MTU " + param(r, "path_mtu") + " B, " +
                  param(r, "flow_bytes") + " B per flow");
  lines.push_back("ECN Kmin " + param(r, "kmin_bytes") + " B, Kmax " + param(r, "kmax_bytes") +
                  " B, Pmax " + param(r, "pmax") + " at " + param(r, "ecn_mark") + "; PFC XOFF " +
                  param(r, "xoff_bytes") + " B per ingress port; buffer " +
                  param(r, "buffer_bytes") + " B; sample " + param(r, "sample_ns") + " ns");
  for (const auto& keys : {std::vector<const char*>{"bottleneck_util", "jain", "last_done_us",
                                                    "queue_avg_bytes", "queue_max_bytes"},
                           std::vector<const char*>{"pause_frames", "cnps_received", "rate_cuts",
                                                    "drops", "retransmitted_packets"}}) {
    std::string res;
    for (const char* k : keys) {
      const double v = r.number(k);
      if (!std::isnan(v)) res += std::string(res.empty() ? "" : ", ") + k + " " + num(v);
    }
    lines.push_back("results: " + res);
  }
  return lines;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

}  // namespace

bool write_outputs(const ExperimentResult& r, const std::string& dir, const std::string& stem) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return false;
  const RunResult& run = r.run;
  const size_t nf = run.flows.size();
  const size_t nq = run.samples.empty() ? 0 : run.samples[0].queue_bytes.size();
  {
    std::ofstream csv(dir + "/" + stem + ".csv");
    for (const auto& [k, v] : r.params) csv << "# " << k << "=" << v << "\n";
    for (const auto& [k, v] : r.summary) csv << "# result " << k << "=" << v << "\n";
    csv << "t_us";
    for (size_t q = 0; q < nq; ++q) csv << ",queue" << q << "_bytes";
    if (nq > 0) csv << ",bottleneck_util";
    for (size_t i = 0; i < nf; ++i) csv << ",flow" << i << "_rate_gbps";
    for (size_t i = 0; i < nf; ++i) csv << ",flow" << i << "_tput_gbps";
    for (size_t i = 0; i < nf; ++i) csv << ",flow" << i << "_cnps";
    for (size_t i = 0; i < nf; ++i) csv << ",flow" << i << "_rate_cuts";
    csv << ",pause_frames\n";
    for (size_t s = 0; s < run.samples.size(); ++s) {
      const Sample& x = run.samples[s];
      csv << num(static_cast<double>(x.t) / 1e3);
      for (uint64_t q : x.queue_bytes) csv << "," << q;
      if (nq > 0) csv << "," << num(s > 0 ? port_util(run, s, 1, r.line_rate_bps) : 0);
      for (uint64_t rb : x.rate_bps) csv << "," << num(static_cast<double>(rb) / 1e9);
      for (size_t i = 0; i < nf; ++i) csv << "," << num(s > 0 ? flow_gbps(run, i, s, 1) : 0);
      for (uint64_t c : x.cnps_received) csv << "," << c;
      for (uint64_t c : x.rate_cuts) csv << "," << c;
      csv << "," << x.pause_frames << "\n";
    }
    if (!csv) return false;
  }
  // Figures: one question each, the same look for every experiment. Throughput and utilization
  // are averaged over 5 samples so the figure shows trends, not single packets.
  constexpr size_t kSmooth = 5;
  const std::vector<std::string> cap = caption(r);
  const std::string sample_us = num(std::strtod(param(r, "sample_ns").c_str(), nullptr) / 1e3);
  Plot rate{r.name + ": sending rate set by DCQCN", "time (us)", "rate (Gb/s)", {}, cap, 0};
  Plot tput{r.name + ": throughput per flow (" +
                num(static_cast<double>(kSmooth) * std::strtod(sample_us.c_str(), nullptr)) +
                " us average) and bottleneck utilization",
            "time (us)",
            "throughput (Gb/s)",
            {},
            cap,
            0};
  Plot queue{r.name + ": queue at the bottleneck port", "time (us)", "queue (KB)", {}, cap, 0};
  for (size_t i = 0; i < nf; ++i) {
    PlotSeries ps{flow_name(r, i), {}, false}, ts{flow_name(r, i), {}, false};
    for (size_t s = 0; s < run.samples.size(); ++s) {
      const double t = static_cast<double>(run.samples[s].t) / 1e3;
      ps.points.emplace_back(t, static_cast<double>(run.samples[s].rate_bps[i]) / 1e9);
      if (s >= kSmooth) ts.points.emplace_back(t, flow_gbps(run, i, s, kSmooth));
    }
    rate.series.push_back(std::move(ps));
    tput.series.push_back(std::move(ts));
  }
  if (nq > 0) {
    PlotSeries us{"bottleneck (util x line)", {}, true};
    PlotSeries qs{"data queue (KB)", {}, false};
    for (size_t s = 0; s < run.samples.size(); ++s) {
      const double t = static_cast<double>(run.samples[s].t) / 1e3;
      if (s >= kSmooth)
        us.points.emplace_back(t,
                               port_util(run, s, kSmooth, r.line_rate_bps) * r.line_rate_bps / 1e9);
      qs.points.emplace_back(t, static_cast<double>(run.samples[s].queue_bytes[0]) / 1024);
    }
    tput.series.push_back(std::move(us));
    queue.series.push_back(std::move(qs));
    const double kmin = std::strtod(param(r, "kmin_bytes").c_str(), nullptr) / 1024;
    const double kmax = std::strtod(param(r, "kmax_bytes").c_str(), nullptr) / 1024;
    const double tend = run.samples.empty() ? 1 : static_cast<double>(run.samples.back().t) / 1e3;
    queue.series.push_back({"ECN Kmin", {{0, kmin}, {tend, kmin}}, true});
    queue.series.push_back({"ECN Kmax", {{0, kmax}, {tend, kmax}}, true});
  }
  return write_file(dir + "/" + stem + "-rate.svg", render_svg(rate)) &&
         write_file(dir + "/" + stem + "-throughput.svg", render_svg(tput)) &&
         (nq == 0 || write_file(dir + "/" + stem + "-queue.svg", render_svg(queue)));
}

}  // namespace uroce::simlab
