// uroce: the command line of the user-space RoCEv2 NIC.
//   uroce devices            the devices uroce can open (one per local IP address)
//   uroce bench ...          perftest-style benchmarks over RC (see `uroce bench --help`)
//   uroce stat FILE          counters a bench run wrote with --stats-file
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"uroce: RDMA over Converged Ethernet (RoCEv2) in user space"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
