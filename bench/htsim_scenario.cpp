// htsim_scenario: the fabric simulator on htsim's own RoCE scenario (issue 16, docs/performance.md
// "The simulator against htsim"): a k-ary fat tree (k=8: 128 hosts) of 100 Gb/s links with 1 us of
// delay, MTU 4096, PFC, no congestion control; a 64:1 incast of 1 MB flows into one host plus one
// 20 MB background flow from each host the incast leaves out to another of them (a random
// derangement), all starting at 0; a fixed span of virtual time. Real uroce devices and transport,
// the data checked where it lands (synthetic memory, sim/synthetic_memory.h, unless --real).
// Prints virtual time per wall second, peak RSS, the flows done by the end and their completion
// times. --tm FILE also writes the flows as an htsim connection matrix (bench/htsim_compare.sh).
// A benchmark, not a test.
//
//   htsim_scenario [--k 8] [--end-us 5000] [--seed 1] [--incast 64] [--real] [--tm FILE]
//                  [--outstanding 64] (64 KiB WRITEs in flight per flow) [--fct] (a line per flow)
//                  [--icrc] (links compute and check the ICRC: WorldConfig::trusted_wire off)
//                  [--write-segments packet|message] (WRITE ONLY per MTU, the default, or
//                  FIRST/MIDDLE/LAST as before 97d79b2)
//                  [--trace] (the events run and the loop's trace hash: equal for two builds
//                  that run the same events in the same order)
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "sim/world.h"

namespace {

using namespace uroce;

uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t k = 8, incast = 64;
  uint64_t end_us = 5000, seed = 1;
  uint64_t incast_bytes = 1'000'000, background_bytes = 20'000'000;
  bool real = false, per_flow = false, icrc = false, per_message = false, trace = false;
  uint32_t outstanding = 64;  // 4 MiB in flight: htsim's RoCE source has no window
  std::string tm_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--k")
      k = static_cast<uint32_t>(std::strtoul(next(), nullptr, 0));
    else if (a == "--end-us")
      end_us = std::strtoull(next(), nullptr, 0);
    else if (a == "--seed")
      seed = std::strtoull(next(), nullptr, 0);
    else if (a == "--incast")
      incast = static_cast<uint32_t>(std::strtoul(next(), nullptr, 0));
    else if (a == "--incast-bytes")
      incast_bytes = std::strtoull(next(), nullptr, 0);
    else if (a == "--background-bytes")
      background_bytes = std::strtoull(next(), nullptr, 0);
    else if (a == "--outstanding")
      outstanding = static_cast<uint32_t>(std::strtoul(next(), nullptr, 0));
    else if (a == "--real")
      real = true;
    else if (a == "--tm")
      tm_file = next();
    else if (a == "--fct")
      per_flow = true;
    else if (a == "--icrc")
      icrc = true;
    else if (a == "--trace")
      trace = true;
    else if (a == "--write-segments") {
      const std::string v = next();
      if (v != "packet" && v != "message") {
        std::fprintf(stderr, "--write-segments packet|message\n");
        return 2;
      }
      per_message = v == "message";
    } else {
      std::fprintf(
          stderr,
          "usage: htsim_scenario [--k 8] [--end-us 5000] [--seed 1] [--incast 64] "
          "[--incast-bytes N] [--background-bytes N] [--outstanding WRITES] [--real] [--tm FILE] "
          "[--fct] [--icrc] [--write-segments packet|message] [--trace]\n");
      return 2;
    }
  }
  const uint32_t hosts = k * k * k / 4;
  if (k < 4 || k % 2 != 0 || incast + 2 > hosts) {
    std::fprintf(stderr, "bad k or incast\n");
    return 2;
  }

  // The flows: host 0 receives the incast from `incast` hosts drawn at random; every other host
  // sends one background flow to another of them (a derangement by Sattolo's shuffle: one cycle,
  // so nobody sends to itself).
  std::vector<uint32_t> others;
  for (uint32_t h = 1; h < hosts; ++h) others.push_back(h);
  uint64_t rng = seed;
  for (size_t i = others.size(); i > 1; --i) std::swap(others[i - 1], others[next_random(rng) % i]);
  std::vector<uint32_t> senders(others.begin(), others.begin() + incast);
  std::vector<uint32_t> bg(others.begin() + incast, others.end());
  std::vector<uint32_t> bg_dst = bg;
  for (size_t i = bg_dst.size(); i > 1; --i)
    std::swap(bg_dst[i - 1], bg_dst[next_random(rng) % (i - 1)]);
  struct Planned {
    uint32_t src, dst;
    uint64_t bytes;
    bool incast;
  };
  std::vector<Planned> plan;
  for (uint32_t s : senders) plan.push_back({s, 0, incast_bytes, true});
  for (size_t i = 0; i < bg.size(); ++i)
    plan.push_back({bg[i], bg_dst[i], background_bytes, false});

  if (!tm_file.empty()) {
    std::ofstream tm(tm_file);
    tm << "Nodes " << hosts << "\nConnections " << plan.size() << "\n";
    for (size_t i = 0; i < plan.size(); ++i)
      tm << plan[i].src << "->" << plan[i].dst << " id " << i + 1 << " start 0 size "
         << plan[i].bytes << "\n";
    if (!tm) {
      std::fprintf(stderr, "cannot write %s\n", tm_file.c_str());
      return 1;
    }
  }

  simlab::WorldConfig cfg;
  cfg.seed = seed;
  cfg.path_mtu = 4096;
  cfg.synthetic_memory = !real;
  cfg.trusted_wire = !icrc;  // htsim moves descriptors; the payload is checked where it lands
  cfg.max_outstanding = outstanding;
  cfg.write_segments =
      per_message ? transport::WriteSegments::kPerMessage : transport::WriteSegments::kPerPacket;
  cfg.time_limit_ns = static_cast<Nanos>(end_us) * 1000;
  cfg.sample_ns = cfg.time_limit_ns;  // the sampler is not what this measures
  cfg.step_limit = ~uint64_t{0};
  // Sized for this scenario: a host has at most 64 flows (the incast's receiver) and sends one or
  // two; the pools grow as needed up to these bounds.
  cfg.cq_entries = 1024;
  cfg.max_mr = 256;
  cfg.max_mw = 1;
  // htsim's lossless_input queues with -pfc_thresholds 12 15: pause above 15 packets of 4096 B
  // per ingress port, resume below 12.
  const std::string topo = "fattree k=" + std::to_string(k) +
                           " rate=100G delay=1us buffer=12MB xoff=61440 xon=49152 ecn=0";
  auto spec = fabric::parse_topology(topo);
  if (!spec) {
    std::fprintf(stderr, "%s\n", spec.error().c_str());
    return 1;
  }
  const double rss_before = peak_rss_mib();
  const auto t_build = std::chrono::steady_clock::now();
  auto w = simlab::World::create(cfg, *spec);
  if (!w) {
    std::fprintf(stderr, "%s\n", w.error().c_str());
    return 1;
  }
  simlab::World& world = **w;
  for (const Planned& p : plan) {
    if (world.add_flow({p.src, p.dst, p.bytes, 0}) < 0) {
      std::fprintf(stderr, "cannot add flow %u->%u\n", p.src, p.dst);
      return 1;
    }
  }
  const double rss_built = peak_rss_mib();
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  const simlab::RunResult r = world.run();
  const double cpu = cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double build = std::chrono::duration<double>(t0 - t_build).count();

  const double sim_ms = static_cast<double>(r.end_ns) / 1e6;
  size_t done[2] = {0, 0}, verified[2] = {0, 0}, total[2] = {0, 0};
  std::vector<double> fct[2];
  for (size_t i = 0; i < r.flows.size(); ++i) {
    const int c = plan[i].incast ? 0 : 1;
    ++total[c];
    if (r.flows[i].done_ns != kNever) {
      ++done[c];
      fct[c].push_back(static_cast<double>(r.flows[i].done_ns) / 1e3);
    }
    verified[c] += r.flows[i].verified;
  }
  std::printf(
      "scenario: fat tree k=%u (%u hosts), 100 Gb/s, 1 us links, MTU 4096, PFC, no CC; "
      "%u:1 incast of %llu B into host 0 + %zu background flows of %llu B; seed %llu; "
      "%s memory, %s\n",
      k, hosts, incast, static_cast<unsigned long long>(incast_bytes), bg.size(),
      static_cast<unsigned long long>(background_bytes), static_cast<unsigned long long>(seed),
      real ? "real" : "synthetic", icrc ? "ICRC" : "trusted wire (no ICRC)");
  std::printf(
      "simulated=%.3f ms wall=%.3f s cpu=%.3f s (build %.3f s) -> %.3f ms simulated per "
      "wall second (%.3f per cpu second)\n",
      sim_ms, wall, cpu, build, sim_ms / wall, sim_ms / cpu);
  std::printf("peak_rss=%.1f MiB (%.1f before the world, %.1f once built)\n", peak_rss_mib(),
              rss_before, rss_built);
  std::printf("incast done=%zu/%zu verified=%zu; background done=%zu/%zu verified=%zu\n", done[0],
              total[0], verified[0], done[1], total[1], verified[1]);
  const char* names[2] = {"incast", "background"};
  for (int c = 0; c < 2; ++c) {
    if (fct[c].empty()) continue;
    std::printf("%s fct us: min=%.1f p50=%.1f p90=%.1f max=%.1f\n", names[c], percentile(fct[c], 0),
                percentile(fct[c], 0.5), percentile(fct[c], 0.9), percentile(fct[c], 1.0));
  }
  std::printf(
      "fabric: delivered=%llu packets (%.0f per wall second) pauses=%llu drops=%llu; "
      "synthetic bytes checked=%llu mismatched=%llu refused=%llu; link tx_errors=%llu "
      "rx_drops=%llu by_reference=%llu\n",
      static_cast<unsigned long long>(r.fabric.delivered),
      static_cast<double>(r.fabric.delivered) / wall,
      static_cast<unsigned long long>(r.fabric.pause_frames),
      static_cast<unsigned long long>(r.fabric.drops_buffer + r.fabric.drops_event_queue),
      static_cast<unsigned long long>(r.synthetic_checked_bytes),
      static_cast<unsigned long long>(r.synthetic_mismatched_bytes),
      static_cast<unsigned long long>(r.synthetic_refused),
      static_cast<unsigned long long>(r.link_tx_errors),
      static_cast<unsigned long long>(r.link_rx_drops),
      static_cast<unsigned long long>(r.link_tx_by_reference));
  std::printf("device passes=%llu (%.2f per delivered packet)\n",
              static_cast<unsigned long long>(r.device_passes),
              static_cast<double>(r.device_passes) /
                  static_cast<double>(std::max<uint64_t>(r.fabric.delivered, 1)));
  std::printf("pools: events max_pending=%zu, packet descriptors=%zu, payload buffers=%zu\n",
              world.loop().counters().max_pending, world.fabric().packet_descriptors_made(),
              world.fabric().payload_buffers_made());
  if (trace)
    std::printf("trace: events executed=%llu hash=%016llx\n",
                static_cast<unsigned long long>(world.loop().counters().executed),
                static_cast<unsigned long long>(world.loop().trace_hash()));
  if (per_flow) {
    for (size_t i = 0; i < r.flows.size(); ++i) {
      const auto& f = r.flows[i];
      std::printf("flow %zu %u->%u %s bytes=%llu done_us=%s%.1f rx_bytes=%llu verified=%d\n", i + 1,
                  plan[i].src, plan[i].dst, names[plan[i].incast ? 0 : 1],
                  static_cast<unsigned long long>(plan[i].bytes), f.done_ns == kNever ? ">" : "",
                  static_cast<double>(f.done_ns == kNever ? r.end_ns : f.done_ns) / 1e3,
                  static_cast<unsigned long long>(f.receiver.rx_bytes), f.verified);
    }
  }
  // Reaching the end of the span with flows left is this scenario's normal ending; a mismatch or
  // a failure other than the time limit is not.
  const bool ok = r.synthetic_mismatched_bytes == 0 && r.synthetic_refused == 0 &&
                  (r.ok || r.failure == "virtual time limit");
  if (!ok) std::printf("FAILED: %s\n", r.failure.c_str());
  return ok ? 0 : 1;
}
