#pragma once
// `uroce setup`: the one root command that makes uroce devices visible to middleware that checks
// for a kernel device node before it uses a verbs device (UCX). See api/char_device.h.
#include <string>

namespace CLI {
class App;
}

namespace uroce::tools {

struct SetupCli {
  bool remove = false;
  // Where "/" is: tests run the command on a scratch directory. Not shown in --help.
  std::string root = "/";
};
void add_setup(CLI::App& app, SetupCli& s);
int run_setup(const SetupCli& s);

}  // namespace uroce::tools
