#include "api/ibverbs/config.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace uroce::abi {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxDeviceNameLen) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// The RoCEv2 GID of an IP address (IBA A17.4.5.1: IPv4 addresses are IPv4-mapped IPv6).
bool parse_address(const std::string& text, Gid* gid, bool* ipv4) {
  in_addr a4{};
  if (inet_pton(AF_INET, text.c_str(), &a4) == 1) {
    std::array<uint8_t, 4> b{};
    std::memcpy(b.data(), &a4, 4);
    *gid = gid_from_ipv4(b);
    *ipv4 = true;
    return true;
  }
  in6_addr a6{};
  if (inet_pton(AF_INET6, text.c_str(), &a6) == 1) {
    std::memcpy(gid->data(), &a6, 16);
    *ipv4 = gid_is_ipv4(*gid);
    return true;
  }
  return false;
}

void add_entry(ConfigResult& r, std::string_view name, std::string_view address) {
  name = trim(name);
  address = trim(address);
  std::string where = std::string(name) + "=" + std::string(address);
  if (!valid_name(name)) {
    r.errors.push_back("bad device name in '" + where + "'");
    return;
  }
  DeviceConfig d;
  d.name = std::string(name);
  d.address = std::string(address);
  if (!parse_address(d.address, &d.gid, &d.ipv4)) {
    r.errors.push_back("bad address in '" + where + "'");
    return;
  }
  for (const DeviceConfig& other : r.devices) {
    if (other.name == d.name || other.gid == d.gid) {
      r.errors.push_back("duplicate name or address in '" + where + "'");
      return;
    }
  }
  if (r.devices.size() >= kMaxDevices) {
    r.errors.push_back("more than " + std::to_string(kMaxDevices) + " devices; ignoring '" + where +
                       "'");
    return;
  }
  r.devices.push_back(std::move(d));
}

}  // namespace

ConfigResult parse_device_list(std::string_view text) {
  ConfigResult r;
  r.source = "UROCE_DEVICES";
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      r.errors.push_back("expected name=address, got '" + std::string(item) + "'");
      continue;
    }
    add_entry(r, item.substr(0, eq), item.substr(eq + 1));
  }
  return r;
}

ConfigResult parse_config_file(std::string_view text) {
  ConfigResult r;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    size_t sep = line.find_first_of("= \t");
    if (sep == std::string_view::npos) {
      r.errors.push_back("line " + std::to_string(line_no) + ": expected 'name address'");
      continue;
    }
    add_entry(r, line.substr(0, sep), line.substr(sep + 1));
  }
  return r;
}

ConfigResult load_device_config() {
  if (const char* env = std::getenv("UROCE_DEVICES"); env && *env) {
    return parse_device_list(env);
  }
  const char* path = std::getenv("UROCE_CONFIG");
  bool explicit_path = path && *path;
  if (!explicit_path) path = kDefaultConfigPath;
  std::ifstream in(path);
  if (in) {
    std::stringstream ss;
    ss << in.rdbuf();
    ConfigResult r = parse_config_file(ss.str());
    r.source = path;
    return r;
  }
  ConfigResult r;
  if (explicit_path) {
    r.source = path;
    r.errors.push_back(std::string("cannot read ") + path);
    return r;
  }
  r = parse_device_list("uroce0=127.0.0.1");
  r.source = "default";
  return r;
}

const QpTransportOptions& qp_transport_options() {
  // A function-local static: initialised once, thread-safely, at the first QP.
  static const QpTransportOptions options = [] {
    std::vector<std::string> errors;
    QpTransportOptions o = qp_transport_options_from_env(&errors);
    for (const std::string& e : errors) std::fprintf(stderr, "uroce: %s\n", e.c_str());
    return o;
  }();
  return options;
}

}  // namespace uroce::abi
