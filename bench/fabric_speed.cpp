// fabric_speed: how fast the emulated fabric runs real uroce devices. A k = 8 fat tree (128 hosts,
// 80 switches, 100 Gb/s, 1 us links) with a 64:1 incast of verified RDMA WRITEs; prints simulated
// time per wall-clock second and events per second. A benchmark, not a test.
//
//   fabric_speed [bytes-per-sender (default 262144)] [pfc|pfc+dcqcn (default pfc+dcqcn)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim/experiments.h"
#include "sim/world.h"

int main(int argc, char** argv) {
  using namespace uroce;
  const uint64_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : 256 * 1024;
  const std::string mode = argc > 2 ? argv[2] : "pfc+dcqcn";
  simlab::WorldConfig cfg;
  cfg.seed = 1;
  cfg.sample_ns = 10'000;
  if (mode == "pfc+dcqcn") cfg.cc.algorithm = transport::CcAlgorithm::kDcqcnMlx5;
  auto spec = fabric::parse_topology(
      "fattree k=8 rate=100G delay=1us buffer=12MB kmin=20KB kmax=200KB pmax=0.2");
  if (!spec) {
    std::fprintf(stderr, "%s\n", spec.error().c_str());
    return 1;
  }
  auto w = simlab::World::create(cfg, *spec);
  if (!w) {
    std::fprintf(stderr, "%s\n", w.error().c_str());
    return 1;
  }
  simlab::World& world = **w;
  // Receiver: host 0; senders: the 64 hosts of pods 4..7, so every flow crosses the core.
  const fabric::HostId rx = 0;
  world.watch_port(world.port_to_host(rx));
  for (fabric::HostId h = 64; h < 128; ++h) world.add_flow({h, rx, bytes, 0});
  const auto t0 = std::chrono::steady_clock::now();
  const simlab::RunResult r = world.run();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t verified = 0;
  for (const auto& f : r.flows) verified += f.verified;
  const double sim_ms = static_cast<double>(r.end_ns) / 1e6;
  std::printf("fat tree k=8 (128 hosts, 80 switches), 100 Gb/s, 64:1 incast of %llu B, %s\n",
              static_cast<unsigned long long>(bytes), mode.c_str());
  std::printf("ok=%d flows verified=%llu/64 simulated=%.3f ms wall=%.3f s steps=%llu\n", r.ok,
              static_cast<unsigned long long>(verified), sim_ms, wall,
              static_cast<unsigned long long>(r.steps));
  std::printf("pauses=%llu ecn_marked=%llu delivered=%llu packets\n",
              static_cast<unsigned long long>(r.fabric.pause_frames),
              static_cast<unsigned long long>(r.fabric.ecn_marked),
              static_cast<unsigned long long>(r.fabric.delivered));
  std::printf("simulated time per wall second: %.3f ms/s; fabric packets per wall second: %.0f\n",
              sim_ms / wall, static_cast<double>(r.fabric.delivered) / wall);
  return r.ok ? 0 : 1;
}
