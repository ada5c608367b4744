// The fabric experiments of docs/experiments.md as a command: `uroce sim ...` and `uroce-sim ...`.
#include "sim/sim_cli.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/experiments.h"
#include "sim/world.h"

namespace uroce::simlab {

namespace {

int print_usage(std::FILE* f, const char* prog) {
  std::fprintf(f,
               "usage: %s incast|victim|parking-lot|convergence|loss [--mode "
               "pfc|pfc+dcqcn|dcqcn-nopfc] [--dcqcn paper|mlx5|hpcc] [--seed N] [--senders N] "
               "[--flows N] [--bytes B] [--loss P] [--stagger-us T] [--mtu B] [--kmin-kb K] "
               "[--kmax-kb K] [--pmax P] [--xoff-kb K] [--mark enqueue|dequeue] [--rate-gbps G] "
               "[--out DIR]\n"
               "       %s topology 'TEXT' | '{JSON}' | @FILE\n",
               prog, prog);
  return 2;
}

// `topology SPEC`: parses a topology (the text form, JSON, or @FILE holding either), builds it on
// a fabric and describes it, so a description can be checked before an experiment uses it.
int describe_topology(const char* arg) {
  std::string text = arg;
  if (!text.empty() && text[0] == '@') {
    std::ifstream f(text.substr(1));
    if (!f) {
      std::fprintf(stderr, "cannot read %s\n", text.c_str() + 1);
      return 1;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  auto spec = fabric::parse_topology(text);
  if (!spec.ok()) {
    std::fprintf(stderr, "bad topology: %s\n", spec.error().c_str());
    return 2;
  }
  fabric::EventLoop loop(1);
  fabric::SwitchFabric f(loop);
  auto t = fabric::build_topology(f, *spec);
  if (!t.ok()) {
    std::fprintf(stderr, "cannot build the topology: %s\n", t.error().c_str());
    return 1;
  }
  static constexpr const char* kShapes[] = {"star", "dumbbell", "fattree"};
  std::printf("shape=%s\nhosts=%zu\nswitches=%zu\nrate_bps=%llu\ndelay_ns=%llu\n",
              kShapes[static_cast<int>(spec->shape)], t->hosts.size(), t->switches.size(),
              static_cast<unsigned long long>(spec->link.rate_bps),
              static_cast<unsigned long long>(spec->link.delay_ns));
  std::printf("buffer_bytes=%llu\necn=%d\nkmin_bytes=%llu\nkmax_bytes=%llu\npmax=%g\n",
              static_cast<unsigned long long>(spec->sw.buffer_bytes), spec->sw.ecn.enabled ? 1 : 0,
              static_cast<unsigned long long>(spec->sw.ecn.kmin_bytes),
              static_cast<unsigned long long>(spec->sw.ecn.kmax_bytes), spec->sw.ecn.pmax);
  return 0;
}

}  // namespace

int run_sim_cli(int argc, char** argv, const char* prog) {
  auto usage = [prog] { return print_usage(stderr, prog); };
  if (argc < 2) return usage();
  if (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    print_usage(stdout, prog);
    return 0;
  }
  const std::string what = argv[1];
  if (what == "topology") return argc == 3 ? describe_topology(argv[2]) : usage();
  ExperimentParams p;
  // Defaults that make each experiment show its effect at 100 Gb/s in well under a second.
  if (what == "convergence") {
    p.flow_bytes = 4 << 20;
    p.stagger_ns = 100'000;
  } else if (what == "loss") {
    p.flow_bytes = 4 << 20;
  }
  std::string out = ".";
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) return usage();
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--mode") {
      if (!parse_mode(v, &p.mode)) return usage();
    } else if (k == "--dcqcn") {
      if (v == "paper")
        p.dcqcn = uroce::transport::CcAlgorithm::kDcqcnPaper;
      else if (v == "mlx5")
        p.dcqcn = uroce::transport::CcAlgorithm::kDcqcnMlx5;
      else if (v == "hpcc")
        p.dcqcn = uroce::transport::CcAlgorithm::kDcqcnHpcc;
      else
        return usage();
    } else if (k == "--seed") {
      p.seed = std::strtoull(v.c_str(), nullptr, 0);
    } else if (k == "--senders") {
      p.senders = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 0));
    } else if (k == "--flows") {
      p.flows = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 0));
    } else if (k == "--bytes") {
      p.flow_bytes = std::strtoull(v.c_str(), nullptr, 0);
    } else if (k == "--loss") {
      p.loss = std::strtod(v.c_str(), nullptr);
    } else if (k == "--stagger-us") {
      p.stagger_ns = static_cast<uroce::Nanos>(std::strtod(v.c_str(), nullptr) * 1e3);
    } else if (k == "--kmin-kb") {
      p.kmin_bytes = std::strtoull(v.c_str(), nullptr, 0) * 1024;
    } else if (k == "--kmax-kb") {
      p.kmax_bytes = std::strtoull(v.c_str(), nullptr, 0) * 1024;
    } else if (k == "--mark") {
      if (v != "enqueue" && v != "dequeue") return usage();
      p.mark_at_dequeue = v == "dequeue";
    } else if (k == "--xoff-kb") {
      p.xoff_bytes = std::strtoull(v.c_str(), nullptr, 0) * 1024;
    } else if (k == "--pmax") {
      p.pmax = std::strtod(v.c_str(), nullptr);
    } else if (k == "--rate-gbps") {
      p.rate_bps = static_cast<uint64_t>(std::strtod(v.c_str(), nullptr) * 1e9);
    } else if (k == "--mtu") {
      p.path_mtu = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 0));
    } else if (k == "--out") {
      out = v;
    } else {
      return usage();
    }
  }
  if (p.senders < 1 || p.senders > 256 || p.flows < 1 || p.flows > 64 || p.flow_bytes == 0 ||
      p.flow_bytes > (1ull << 30) || p.loss < 0 || p.loss >= 1 || p.kmin_bytes > p.kmax_bytes ||
      p.kmax_bytes == 0 || !(p.pmax > 0 && p.pmax <= 1) || p.xoff_bytes == 0 ||
      p.xoff_bytes > p.buffer_bytes || p.rate_bps < 1'000'000'000 || p.rate_bps > 800'000'000'000)
    return usage();
  ExperimentResult r;
  if (what == "incast")
    r = run_incast(p);
  else if (what == "victim")
    r = run_victim(p);
  else if (what == "parking-lot")
    r = run_parking_lot(p);
  else if (what == "convergence")
    r = run_convergence(p);
  else if (what == "loss")
    r = run_loss(p);
  else
    return usage();
  for (const auto& [k, v] : r.params) std::printf("%s=%s\n", k.c_str(), v.c_str());
  for (const auto& [k, v] : r.summary) std::printf("result %s=%s\n", k.c_str(), v.c_str());
  std::string stem = what + "-" + to_string(p.mode);
  for (char& c : stem)
    if (c == '+') c = '_';
  if (what == "loss") stem = what + "-" + std::to_string(p.loss);
  if (!write_outputs(r, out, stem)) {
    std::fprintf(stderr, "cannot write %s/%s.csv and its figures\n", out.c_str(), stem.c_str());
    return 1;
  }
  std::printf("wrote %s/%s.csv and %s-{rate,throughput,queue}.svg\n", out.c_str(), stem.c_str(),
              stem.c_str());
  if (!r.ok) {
    std::fprintf(stderr, "FAILED: %s\n", r.failure.c_str());
    return 1;
  }
  return 0;
}

}  // namespace uroce::simlab
