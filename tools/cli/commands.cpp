#include "cli/commands.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "api/nic.h"
#include "cli/node.h"
#include "core/report.h"

namespace uroce::tools {

void add_devices(CLI::App& app, DevicesCli& d) {
  auto* c = app.add_subcommand(
      "devices", "list the local addresses a uroce device can use (one device per address)");
  c->add_flag("--all", d.all, "also list interfaces that are down and IPv6 link-local addresses");
}

namespace {

// Whether UDP port 4791 on `sa` is free: a device needs it (IBA annex A17.2), and only one
// process can hold it per address.
const char* port_state(const sockaddr* sa) {
  int fd = ::socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "?";
  sockaddr_storage s{};
  socklen_t len = sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  std::memcpy(&s, sa, len);
  if (sa->sa_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&s)->sin_port = htons(api::kRoceV2Port);
  else
    reinterpret_cast<sockaddr_in6*>(&s)->sin6_port = htons(api::kRoceV2Port);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&s), len);
  int err = errno;
  ::close(fd);
  return rc == 0 ? "free" : err == EADDRINUSE ? "in use" : "unusable";
}

}  // namespace

int run_devices(const DevicesCli& d) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    std::fprintf(stderr, "uroce devices: getifaddrs: %s\n", std::strerror(errno));
    return 1;
  }
  fmt::print("{:<12} {:<28} {:<40} {:<6} {}\n", "interface", "address", "GID", "state", "udp/4791");
  int shown = 0;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    int fam = a->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    bool up = (a->ifa_flags & IFF_UP) && (a->ifa_flags & IFF_RUNNING);
    Gid gid{};
    char text[INET6_ADDRSTRLEN] = {};
    if (fam == AF_INET) {
      auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      std::array<uint8_t, 4> v4;
      std::memcpy(v4.data(), &in->sin_addr, 4);
      gid = gid_from_ipv4(v4);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    } else {
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) && !d.all) continue;
      std::memcpy(gid.data(), &in6->sin6_addr, 16);
      ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    }
    if (!up && !d.all) continue;
    fmt::print("{:<12} {:<28} {:<40} {:<6} {}\n", a->ifa_name, text, gid_to_string(gid),
               up ? "up" : "down", port_state(a->ifa_addr));
    ++shown;
  }
  ::freeifaddrs(list);
  if (shown == 0) fmt::print("(no usable addresses)\n");
  fmt::print(
      "\nAny 127.0.0.0/8 address works on loopback even if not listed: "
      "`uroce bench --addr 127.0.0.2 ...`.\n");
  return 0;
}

void add_stat(CLI::App& app, StatCli& s) {
  auto* c = app.add_subcommand(
      "stat", "print the counters a bench run (--stats-file) or UROCE_STATS wrote");
  c->add_option("file", s.path, "the --stats-file of a bench run, or a UROCE_STATS file")
      ->required();
  c->add_flag("--all", s.all, "also print counters that are zero");
  c->add_flag("--json", s.json, "print JSON");
}

int run_stat(const StatCli& s) {
  std::ifstream f(s.path);
  if (!f) {
    std::fprintf(stderr, "uroce stat: cannot read %s\n", s.path.c_str());
    return 1;
  }
  // "side.name value" lines (counter names hold no '.', sides may); the order of first appearance
  // is kept for both. A bench run's sides are "local" and "remote"; UROCE_STATS writes one side
  // per device and process ("uroce0/1234").
  std::vector<std::string> names, sides;
  std::map<std::string, std::map<std::string, uint64_t>> by_side;
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    std::istringstream in(line);
    std::string key;
    uint64_t value = 0;
    size_t dot = std::string::npos;
    if (in >> key >> value) dot = key.rfind('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == key.size()) {
      std::fprintf(stderr, "uroce stat: %s:%d: not a counter line\n", s.path.c_str(), lineno);
      return 1;
    }
    std::string side = key.substr(0, dot), name = key.substr(dot + 1);
    if (!by_side.count(side)) sides.push_back(side);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    by_side[side][name] = value;
  }
  if (s.json) {
    Json j;
    j.begin_object();
    for (const auto& side : sides) {
      j.begin_object(side);
      for (const auto& n : names)
        if (by_side[side].count(n)) j.field(n, by_side[side].at(n));
      j.end_object();
    }
    j.end_object();
    fmt::print("{}\n", j.str());
    return 0;
  }
  fmt::print(" {:<28}", "counter");
  for (const auto& side : sides) fmt::print(" {:>16}", side);
  fmt::print("\n");
  for (const auto& n : names) {
    bool any = false;
    for (const auto& side : sides) any = any || by_side[side][n] != 0;
    if (!any && !s.all) continue;
    fmt::print(" {:<28}", n);
    for (const auto& side : sides) fmt::print(" {:>16}", by_side[side][n]);
    fmt::print("\n");
  }
  return 0;
}

}  // namespace uroce::tools
