#include "fabric/topology.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "common/check.h"

namespace uroce::fabric {

Gid host_gid(uint32_t index) {
  return gid_from_ipv4({10, 0, static_cast<uint8_t>(index >> 8), static_cast<uint8_t>(index)});
}

namespace {

// "100G" -> 1e11; "12MB" -> 12 * 2^20 when binary; "1us" -> 1000 (ns).
bool parse_number(std::string_view v, double& out, std::string_view& suffix) {
  const std::string s(v);
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(out) || out < 0) return false;
  suffix = v.substr(static_cast<size_t>(end - s.c_str()));
  return true;
}

bool parse_rate(std::string_view v, uint64_t& out) {
  double x;
  std::string_view sfx;
  if (!parse_number(v, x, sfx)) return false;
  if (sfx == "G" || sfx == "Gbps")
    x *= 1e9;
  else if (sfx == "M" || sfx == "Mbps")
    x *= 1e6;
  else if (sfx == "K" || sfx == "Kbps")
    x *= 1e3;
  else if (!sfx.empty() && sfx != "bps")
    return false;
  out = static_cast<uint64_t>(x);
  return out > 0;
}

bool parse_bytes(std::string_view v, uint64_t& out) {
  double x;
  std::string_view sfx;
  if (!parse_number(v, x, sfx)) return false;
  if (sfx == "KB" || sfx == "K")
    x *= 1024;
  else if (sfx == "MB" || sfx == "M")
    x *= 1024 * 1024;
  else if (sfx == "GB" || sfx == "G")
    x *= 1024.0 * 1024 * 1024;
  else if (!sfx.empty() && sfx != "B")
    return false;
  out = static_cast<uint64_t>(x);
  return true;
}

bool parse_time(std::string_view v, Nanos& out) {
  double x;
  std::string_view sfx;
  if (!parse_number(v, x, sfx)) return false;
  if (sfx == "us")
    x *= 1e3;
  else if (sfx == "ms")
    x *= 1e6;
  else if (sfx == "s")
    x *= 1e9;
  else if (!sfx.empty() && sfx != "ns")
    return false;
  out = static_cast<Nanos>(x);
  return true;
}

bool parse_count(std::string_view v, uint32_t& out) {
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size();
}

// One key=value of either form onto `spec`; false if the key is unknown or the value bad.
bool apply_key(TopologySpec& spec, std::string_view key, std::string_view val) {
  bool ok = true;
  double d;
  std::string_view sfx;
  if (key == "hosts")
    ok = parse_count(val, spec.hosts);
  else if (key == "left")
    ok = parse_count(val, spec.left);
  else if (key == "right")
    ok = parse_count(val, spec.right);
  else if (key == "k")
    ok = parse_count(val, spec.k);
  else if (key == "rate")
    ok = parse_rate(val, spec.link.rate_bps);
  else if (key == "bottleneck")
    ok = parse_rate(val, spec.bottleneck_bps);
  else if (key == "delay")
    ok = parse_time(val, spec.link.delay_ns);
  else if (key == "ber")
    ok = parse_number(val, spec.link.bit_error_rate, sfx) && sfx.empty() &&
         spec.link.bit_error_rate < 1;
  else if (key == "buffer")
    ok = parse_bytes(val, spec.sw.buffer_bytes);
  else if (key == "kmin")
    ok = parse_bytes(val, spec.sw.ecn.kmin_bytes);
  else if (key == "kmax")
    ok = parse_bytes(val, spec.sw.ecn.kmax_bytes);
  else if (key == "pmax")
    ok = parse_number(val, spec.sw.ecn.pmax, sfx) && sfx.empty() && spec.sw.ecn.pmax <= 1;
  else if (key == "xoff")
    ok = parse_bytes(val, spec.sw.xoff_bytes);
  else if (key == "xon")
    ok = parse_bytes(val, spec.sw.xon_bytes);
  else if (key == "ecn")
    ok = parse_number(val, d, sfx) && sfx.empty() && (spec.sw.ecn.enabled = d != 0, true);
  else if (key == "lossless") {
    uint32_t mask;
    ok = parse_count(val, mask) && mask < 256;
    if (ok) spec.sw.lossless_mask = static_cast<uint8_t>(mask);
  } else
    ok = false;
  return ok;
}

bool parse_shape(std::string_view name, TopologySpec::Shape& shape) {
  if (name == "star")
    shape = TopologySpec::Shape::kStar;
  else if (name == "dumbbell")
    shape = TopologySpec::Shape::kDumbbell;
  else if (name == "fattree")
    shape = TopologySpec::Shape::kFatTree;
  else
    return false;
  return true;
}

}  // namespace

Result<TopologySpec, std::string> parse_topology_json(std::string_view text) {
  using R = Result<TopologySpec, std::string>;
  // No exceptions: a document that does not parse comes back discarded.
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return R::failure("not valid JSON");
  if (!j.is_object()) return R::failure("a topology is a JSON object");
  TopologySpec spec;
  const auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_string() ||
      !parse_shape(shape->get_ref<const std::string&>(), spec.shape))
    return R::failure("\"shape\" must be \"star\", \"dumbbell\" or \"fattree\"");
  for (const auto& [key, value] : j.items()) {
    if (key == "shape") continue;
    // Each value means what the text form's does: a string takes the same suffixes ("100G",
    // "1us", "12MB"), a number is in base units (b/s, ns, bytes), a boolean is 1 or 0.
    std::string v;
    if (value.is_string())
      v = value.get<std::string>();
    else if (value.is_boolean())
      v = value.get<bool>() ? "1" : "0";
    else if (value.is_number_unsigned())
      v = std::to_string(value.get<uint64_t>());
    else if (value.is_number_float())
      v = value.dump();  // round-trips; "1e-12" stays parseable
    else
      return R::failure("bad value for \"" + key + "\": " + value.dump());
    if (!apply_key(spec, key, v)) return R::failure("bad key or value \"" + key + "\": " + v);
  }
  return spec;
}

Result<TopologySpec, std::string> parse_topology(std::string_view text) {
  if (const size_t first = text.find_first_not_of(" \t\r\n");
      first != std::string_view::npos && text[first] == '{')
    return parse_topology_json(text);
  TopologySpec spec;
  if (const size_t hash = text.find('#'); hash != std::string_view::npos)
    text = text.substr(0, hash);
  bool have_shape = false;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = text.find_first_not_of(" \t\r\n", pos);
    if (start == std::string_view::npos) break;
    size_t end = text.find_first_of(" \t\r\n", start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view tok = text.substr(start, end - start);
    pos = end;
    const size_t eq = tok.find('=');
    if (!have_shape) {
      if (!parse_shape(tok, spec.shape))
        return Result<TopologySpec, std::string>::failure("unknown shape '" + std::string(tok) +
                                                          "'");
      have_shape = true;
      continue;
    }
    if (eq == std::string_view::npos || !apply_key(spec, tok.substr(0, eq), tok.substr(eq + 1)))
      return Result<TopologySpec, std::string>::failure("bad token '" + std::string(tok) + "'");
  }
  if (!have_shape) return Result<TopologySpec, std::string>::failure("empty description");
  return spec;
}

Topology build_star(SwitchFabric& f, uint32_t hosts, const LinkParams& link,
                    const SwitchParams& sw) {
  Topology t;
  t.switches.push_back(f.add_switch(sw));
  for (uint32_t i = 0; i < hosts; ++i) {
    t.hosts.push_back(f.add_host(host_gid(i)));
    f.connect(f.host_node(t.hosts.back()), t.switches[0], link);
  }
  return t;
}

Topology build_dumbbell(SwitchFabric& f, uint32_t left, uint32_t right, const LinkParams& link,
                        const LinkParams& bottleneck, const SwitchParams& sw) {
  Topology t;
  t.switches = {f.add_switch(sw), f.add_switch(sw)};
  f.connect(t.switches[0], t.switches[1], bottleneck);
  for (uint32_t i = 0; i < left + right; ++i) {
    t.hosts.push_back(f.add_host(host_gid(i)));
    f.connect(f.host_node(t.hosts.back()), t.switches[i < left ? 0 : 1], link);
  }
  return t;
}

Topology build_fat_tree(SwitchFabric& f, uint32_t k, const LinkParams& link,
                        const SwitchParams& sw) {
  UROCE_CHECK(k >= 2 && k % 2 == 0 && k <= 64);
  const uint32_t half = k / 2;
  Topology t;
  std::vector<NodeId> edge, agg, core;
  for (uint32_t i = 0; i < k * half; ++i) edge.push_back(f.add_switch(sw));
  for (uint32_t i = 0; i < k * half; ++i) agg.push_back(f.add_switch(sw));
  for (uint32_t i = 0; i < half * half; ++i) core.push_back(f.add_switch(sw));
  uint32_t host = 0;
  for (uint32_t pod = 0; pod < k; ++pod) {
    for (uint32_t e = 0; e < half; ++e) {
      const NodeId es = edge[pod * half + e];
      for (uint32_t h = 0; h < half; ++h) {
        t.hosts.push_back(f.add_host(host_gid(host++)));
        f.connect(f.host_node(t.hosts.back()), es, link);
      }
      for (uint32_t a = 0; a < half; ++a) f.connect(es, agg[pod * half + a], link);
    }
    // Aggregation switch a of every pod connects to core switches a*half .. a*half + half-1.
    for (uint32_t a = 0; a < half; ++a)
      for (uint32_t c = 0; c < half; ++c) f.connect(agg[pod * half + a], core[a * half + c], link);
  }
  t.switches = edge;
  t.switches.insert(t.switches.end(), agg.begin(), agg.end());
  t.switches.insert(t.switches.end(), core.begin(), core.end());
  return t;
}

Result<Topology, std::string> build_topology(SwitchFabric& f, const TopologySpec& spec) {
  using R = Result<Topology, std::string>;
  Topology t;
  switch (spec.shape) {
    case TopologySpec::Shape::kStar:
      if (spec.hosts < 2 || spec.hosts > 4096) return R::failure("star needs 2..4096 hosts");
      t = build_star(f, spec.hosts, spec.link, spec.sw);
      break;
    case TopologySpec::Shape::kDumbbell: {
      if (spec.left < 1 || spec.right < 1 || spec.left + spec.right > 4096)
        return R::failure("dumbbell needs 1..4096 hosts a side");
      LinkParams b = spec.link;
      if (spec.bottleneck_bps) b.rate_bps = spec.bottleneck_bps;
      t = build_dumbbell(f, spec.left, spec.right, spec.link, b, spec.sw);
      break;
    }
    case TopologySpec::Shape::kFatTree:
      if (spec.k < 2 || spec.k % 2 || spec.k > 64)
        return R::failure("fat tree needs even k, 2..64");
      t = build_fat_tree(f, spec.k, spec.link, spec.sw);
      break;
  }
  if (f.finalize() != 0) return R::failure("switch buffer too small for PFC headroom");
  return t;
}

}  // namespace uroce::fabric
