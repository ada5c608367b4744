#pragma once
// `uroce devices` and `uroce stat`.
#include <string>

namespace CLI {
class App;
}

namespace uroce::tools {

struct DevicesCli {
  bool all = false;  // include addresses that are down or link-local
};
void add_devices(CLI::App& app, DevicesCli& d);
int run_devices(const DevicesCli& d);

struct StatCli {
  std::string path;
  bool all = false;  // include counters that are zero
  bool json = false;
};
void add_stat(CLI::App& app, StatCli& s);
int run_stat(const StatCli& s);

}  // namespace uroce::tools
