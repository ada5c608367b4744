// uroce: the command line of the user-space RoCEv2 NIC.
//   uroce devices           the addresses uroce can run a device on, with their GIDs
//   uroce bench ...         perftest's RC tests over uroce (see `uroce bench --help`)
//   uroce stat FILE         the counters a bench run wrote with --stats-file
//   uroce setup [--remove]  (root, once per boot) the /dev/infiniband node UCX looks for
//   uroce sim ...           the fabric experiments in virtual time (docs/experiments.md)
#include <arpa/inet.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "api/nic.h"
#include "api/uroce.h"
#include "cli/bench.h"
#include "cli/commands.h"
#include "cli/setup.h"
#include "core/sizes.h"
#include "sim/sim_cli.h"

namespace uroce::tools {
namespace {

struct BenchCli {
  BenchOptions o;
  std::string test = "write";
  bool server = false, client = false, demo = false, lat = false, all = false, no_verify = false;
  std::vector<std::string> sizes;
  std::string min_size = "2", max_size = "8M";
  uint64_t iterations = 0;
  double duration_s = 0;
  // 0: the port's active MTU, as perftest defaults: 4096 on loopback (4x fewer packets than
  // 1024), 1024 on 1500-byte Ethernet, where 4096-byte datagrams with DF set could not pass.
  uint32_t mtu = 0, depth = 128;
  unsigned timeout = 14, retry_cnt = 7, rnr_retry = 7;
  std::string cc = "off", recovery = "gbn", write_segments = "packet";
  double line_rate_gbps = kDefaultCcLineRateBps / 1e9;
  double cnp_interval_us = 0;
};

void add_bench(CLI::App& app, BenchCli& b) {
  auto* c = app.add_subcommand("bench", "perftest-style RC benchmark: write, read, send, atomic");
  c->add_option("test", b.test, "write | read | send | atomic")
      ->check(CLI::IsMember({"write", "read", "send", "atomic"}));
  auto* srv = c->add_flag("--server", b.server, "wait for a client and serve it");
  auto* cli = c->add_flag("--client", b.client, "connect to --peer and run the test");
  auto* demo = c->add_flag("--demo", b.demo,
                           "run both sides on loopback (server 127.0.0.1, client 127.0.0.2)");
  srv->excludes(cli)->excludes(demo);
  cli->excludes(demo);
  c->add_option("--addr", b.o.address, "local IP address (the device's GID and the TCP end)");
  c->add_option("--peer", b.o.peer, "the server's IP address (client)");
  c->add_option("-p,--port", b.o.port, "TCP port of the out-of-band exchange")
      ->default_val(kDefaultOobPort);
  c->add_flag("--lat", b.lat, "latency test (default: bandwidth)");
  c->add_option("-s,--size", b.sizes, "message size(s), e.g. 64K or 2,4096,1M")->delimiter(',');
  c->add_flag("-a,--all", b.all, "sweep powers of two from --min-size to --max-size");
  c->add_option("--min-size", b.min_size, "smallest size of the sweep (default 2)");
  c->add_option("--max-size", b.max_size, "largest size of the sweep (default 8M)");
  c->add_option("-n,--iters", b.iterations, "iterations per size (default 1000)");
  c->add_option("-D,--duration", b.duration_s, "seconds per size instead of --iters");
  c->add_option("-m,--mtu", b.mtu, "path MTU (default: what the local address's interface carries)")
      ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}));
  c->add_option("-t,--depth", b.depth, "send queue depth (outstanding requests)")
      ->check(CLI::Range(1, 4096));
  c->add_option("--timeout", b.timeout, "local ACK timeout exponent: 4.096 us * 2^N")
      ->check(CLI::Range(0, 31));
  c->add_option("--retry-cnt", b.retry_cnt, "transport retries")->check(CLI::Range(0, 7));
  c->add_option("--rnr-retry", b.rnr_retry, "RNR retries (7 = infinite)")->check(CLI::Range(0, 7));
  c->add_flag("--no-verify", b.no_verify, "do not check the data (pure speed)");
  c->add_option("--seed", b.o.params.seed, "verification pattern seed");
  c->add_option("--json", b.o.json_path, "write results as JSON to FILE ('-': stdout, no table)");
  c->add_option("--link", b.o.link,
                "udp (kernel UDP sockets) | raw (Ethernet frames, root) | xdp (AF_XDP, root)")
      ->check(CLI::IsMember({"udp", "raw", "xdp"}));
  c->add_flag("--roce-v1", b.o.roce_v1, "raw/xdp link: send RoCE v1 (EtherType 0x8915) frames");
  c->add_option("--vlan", b.o.vlan_id, "raw/xdp link: tag frames with this 802.1Q VLAN ID")
      ->check(CLI::Range(0, 4095));
  c->add_flag("--raw-unbatched", b.o.raw_unbatched,
              "raw link: a send() / recv() per frame instead of sendmmsg / recvmmsg batches");
  c->add_flag(
      "--xdp-zero-copy", b.o.xdp_zero_copy,
      "xdp link: bind the AF_XDP socket with XDP_ZEROCOPY (fails where the driver lacks it)");
  c->add_flag("--xdp-generic", b.o.xdp_generic,
              "xdp link: attach the XDP program in generic (skb) mode instead of the driver's");
  c->add_option("--pcap", b.o.pcap_path, "capture every frame sent and received to FILE");
  c->add_flag("--stats", b.o.print_counters, "print both sides' counters at the end");
  c->add_option("--stats-file", b.o.stats_path, "write both sides' counters to FILE (uroce stat)");
  c->add_option("--cc", b.cc,
                "congestion control of this side's QP: off | dcqcn (= dcqcn-mlx5) | dcqcn-paper | "
                "dcqcn-hpcc")
      ->check(CLI::IsMember({"off", "dcqcn", "dcqcn-mlx5", "dcqcn-paper", "dcqcn-hpcc"}));
  c->add_option("--line-rate", b.line_rate_gbps,
                "DCQCN's line rate in Gb/s: where the rate starts and recovers to (default 10)")
      ->check(CLI::Range(0.001, 1000.0));
  c->add_option("--cnp-interval", b.cnp_interval_us,
                "microseconds between two CNPs this side sends (default: the parameter set's)")
      ->check(CLI::Range(0.0, 1e6));
  c->add_option("--recovery", b.recovery,
                "loss recovery: gbn (go-back-N) | sr (selective repeat; pass it to both sides)")
      ->check(CLI::IsMember({"gbn", "sr"}));
  c->add_option("--write-segments", b.write_segments,
                "RDMA WRITEs over one MTU: packet (each MTU a WRITE ONLY with its own RETH) | "
                "message (FIRST/MIDDLE/LAST)")
      ->check(CLI::IsMember({"packet", "message"}));
  c->add_option("--window", b.o.max_psn_window,
                "packets this side may have unacknowledged (about one bandwidth-delay product "
                "for --recovery sr; default: the transport's)")
      ->check(CLI::Range(1, 4096));
  c->add_option("--interval", b.o.interval_s,
                "client, bandwidth: print Gb/s and the DCQCN rate every N seconds (e.g. 0.1)")
      ->check(CLI::Range(0.001, 3600.0));
  c->add_option("-Q,--cq-mod", b.o.cq_mod,
                "client, bandwidth: a completion every N requests, as perftest's --cq-mod "
                "(default 1: every request; at most --depth)")
      ->check(CLI::Range(1, 4096));
  c->add_option("--accept-timeout", b.o.accept_timeout_s, "seconds to wait for the peer")
      ->default_val(60);
  c->add_option("--stall-timeout", b.o.stall_timeout_s,
                "seconds without a completion before giving up")
      ->default_val(30);
}

uint32_t active_mtu(const std::string& address) {
  Gid gid{};
  in_addr v4;
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    std::array<uint8_t, 4> a;
    std::memcpy(a.data(), &v4, 4);
    gid = gid_from_ipv4(a);
  } else if (inet_pton(AF_INET6, address.c_str(), gid.data()) != 1) {
    return api::kDefaultRoceMtu;  // the bench reports the bad address itself
  }
  return api::roce_mtu_for(gid);
}

int run_bench(BenchCli& b) {
  BenchParams& p = b.o.params;
  p.test = b.test == "read"     ? BenchTest::kRead
           : b.test == "send"   ? BenchTest::kSend
           : b.test == "atomic" ? BenchTest::kAtomic
                                : BenchTest::kWrite;
  p.mode = b.lat ? BenchMode::kLatency : BenchMode::kBandwidth;
  p.verify = !b.no_verify;
  if (b.demo) {  // before the MTU, which follows the interface of the local address
    if (b.o.address.empty()) b.o.address = "127.0.0.2";
    if (b.o.peer.empty()) b.o.peer = "127.0.0.1";
  }
  p.mtu = b.mtu ? b.mtu : active_mtu(b.o.address);
  p.depth = b.depth;
  p.iterations = b.iterations ? b.iterations : 1000;
  p.duration_ms = static_cast<uint32_t>(b.duration_s * 1000);
  b.o.timeout = static_cast<uint8_t>(b.timeout);
  b.o.retry_cnt = static_cast<uint8_t>(b.retry_cnt);
  b.o.rnr_retry = static_cast<uint8_t>(b.rnr_retry);
  b.o.congestion.algorithm = parse_cc_algorithm(b.cc).value_or(CcAlgorithm::kOff);
  b.o.congestion.line_rate_bps = b.line_rate_gbps * 1e9;
  b.o.congestion.cnp_interval_ns = static_cast<Nanos>(b.cnp_interval_us * 1000);
  b.o.loss_recovery = parse_loss_recovery(b.recovery).value_or(LossRecovery::kGoBackN);
  b.o.write_segments = parse_write_segments(b.write_segments).value_or(WriteSegments::kPerPacket);
  for (const auto& s : b.sizes) {
    auto v = parse_size(s);
    if (!v) {
      std::fprintf(stderr, "uroce bench: bad size '%s'\n", s.c_str());
      return 1;
    }
    p.sizes.push_back(*v);
  }
  if (b.all || (p.sizes.empty() && b.demo)) {
    auto lo = parse_size(b.min_size), hi = parse_size(b.max_size);
    if (!lo || !hi) {
      std::fprintf(stderr, "uroce bench: bad --min-size or --max-size\n");
      return 1;
    }
    p.sizes = size_sweep(*lo, *hi);
  }
  if (p.sizes.empty()) p.sizes.push_back(p.test == BenchTest::kAtomic ? 8 : 65536);
  if (p.test == BenchTest::kAtomic) p.sizes = {8};  // an atomic moves 8 bytes (IBA 9.4.5)
  if (p.sizes.size() > kMaxSizesPerRun) {
    std::fprintf(stderr, "uroce bench: at most %u sizes per run\n", kMaxSizesPerRun);
    return 1;
  }
  if (validate(p) != 0) {
    std::fprintf(stderr,
                 "uroce bench: sizes must be at most 1 GiB, --iters at most %llu, 1..%u sizes\n",
                 static_cast<unsigned long long>(kMaxBenchIterations), kMaxSizesPerRun);
    return 1;
  }
  p.buffer_bytes = bench_buffer_bytes(p);
  if (b.demo) return run_bench_demo(b.o);
  if (b.o.address.empty()) {
    std::fprintf(stderr, "uroce bench: --addr is required (see `uroce devices`)\n");
    return 1;
  }
  if (b.server) return run_bench_server(b.o);
  if (b.client) {
    if (b.o.peer.empty()) {
      std::fprintf(stderr, "uroce bench: --client needs --peer\n");
      return 1;
    }
    return run_bench_client(b.o);
  }
  std::fprintf(stderr, "uroce bench: choose --server, --client or --demo\n");
  return 1;
}

}  // namespace
}  // namespace uroce::tools

int main(int argc, char** argv) {
  using namespace uroce::tools;
  // `uroce sim` keeps its own option syntax (sim/sim_cli.h), shared with `uroce-sim`.
  if (argc >= 2 && std::strcmp(argv[1], "sim") == 0)
    return uroce::simlab::run_sim_cli(argc - 1, argv + 1, "uroce sim");
  CLI::App app{"uroce: RDMA over Converged Ethernet (RoCEv2) in user space"};
  app.require_subcommand(1);
  BenchCli bench;
  add_bench(app, bench);
  DevicesCli devices;
  add_devices(app, devices);
  StatCli stat;
  add_stat(app, stat);
  SetupCli setup;
  add_setup(app, setup);
  // Listed for --help only: main() hands `uroce sim` to the simulator before CLI11 parses.
  app.add_subcommand("sim",
                     "fabric experiments in virtual time: incast, victim, parking-lot, "
                     "convergence, loss (`uroce sim --help`)")
      ->allow_extras();
  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand("bench")) return run_bench(bench);
  if (app.got_subcommand("devices")) return run_devices(devices);
  if (app.got_subcommand("stat")) return run_stat(stat);
  if (app.got_subcommand("setup")) return run_setup(setup);
  return 1;
}
