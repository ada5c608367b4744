#include "cli/setup.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <string>

#include "api/char_device.h"

namespace uroce::tools {

void add_setup(CLI::App& app, SetupCli& s) {
  auto* c = app.add_subcommand(
      "setup", fmt::format("create {} (as root, once per boot) so that UCX lists uroce devices",
                           api::kCharDevicePath));
  c->add_flag("--remove", s.remove, "remove what `uroce setup` created");
  c->add_option("--root", s.root, "")->group("");  // hidden: tests point it at a scratch dir
}

namespace {

std::string under(const std::string& root, const char* path) {
  if (root.empty() || root == "/") return path;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + path;
}

// The node is ours if it is a symlink to /dev/null: nothing else is ever put there by uroce, and
// anything else (a real uverbs node, a file someone made) is left alone.
bool is_ours(const std::string& node) {
  char target[256] = {};
  ssize_t n = ::readlink(node.c_str(), target, sizeof target - 1);
  return n > 0 && std::strcmp(target, api::kCharDeviceTarget) == 0;
}

int need_root(const char* what) {
  std::fprintf(stderr,
               "uroce setup: %s needs root (it writes under %s); run `sudo uroce setup%s`\n", what,
               api::kCharDeviceDir, std::strcmp(what, "removing") == 0 ? " --remove" : "");
  return 1;
}

int remove_node(const std::string& dir, const std::string& node) {
  struct stat st {};
  if (::lstat(node.c_str(), &st) != 0) {
    fmt::print("uroce setup: {} does not exist; nothing to remove\n", node);
    return 0;
  }
  if (!is_ours(node)) {
    std::fprintf(stderr, "uroce setup: %s is not a link to %s; not uroce's, left alone\n",
                 node.c_str(), api::kCharDeviceTarget);
    return 1;
  }
  if (::unlink(node.c_str()) != 0) {
    if (errno == EACCES || errno == EPERM) return need_root("removing");
    std::fprintf(stderr, "uroce setup: cannot remove %s: %s\n", node.c_str(), std::strerror(errno));
    return 1;
  }
  // The directory goes too if uroce's node was all it held (no kernel RDMA device here).
  ::rmdir(dir.c_str());
  fmt::print("uroce setup: removed {}\n", node);
  return 0;
}

}  // namespace

int run_setup(const SetupCli& s) {
  const std::string dir = under(s.root, api::kCharDeviceDir);
  const std::string node = under(s.root, api::kCharDevicePath);
  if (s.remove) return remove_node(dir, node);

  struct stat st {};
  if (::lstat(node.c_str(), &st) == 0) {
    if (!is_ours(node)) {
      std::fprintf(stderr,
                   "uroce setup: %s exists and is not a link to %s; remove it first if it is not "
                   "a real device\n",
                   node.c_str(), api::kCharDeviceTarget);
      return 1;
    }
    fmt::print("uroce setup: {} -> {} already exists; nothing to do\n", node,
               api::kCharDeviceTarget);
    return 0;
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    if (errno == EACCES || errno == EPERM) return need_root("creating the node");
    std::fprintf(stderr, "uroce setup: cannot create %s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  if (::symlink(api::kCharDeviceTarget, node.c_str()) != 0) {
    if (errno == EACCES || errno == EPERM) return need_root("creating the node");
    std::fprintf(stderr, "uroce setup: cannot create %s: %s\n", node.c_str(), std::strerror(errno));
    return 1;
  }
  // What UCX checks: a character device this process may read and write.
  if (::stat(node.c_str(), &st) != 0 || !S_ISCHR(st.st_mode) ||
      ::access(node.c_str(), R_OK | W_OK) != 0) {
    std::fprintf(stderr, "uroce setup: %s does not resolve to a usable character device\n",
                 node.c_str());
    return 1;
  }
  fmt::print(
      "uroce setup: created {} -> {} (UCX lists a verbs device only if /dev/infiniband/<dev_name> "
      "is a read/write character device; uroce's devices all use this one; /dev is rebuilt at "
      "boot, so run this once per boot)\n",
      node, api::kCharDeviceTarget);
  return 0;
}

}  // namespace uroce::tools
