#pragma once
// Output in perftest's layout (a banner, the connection lines, then one row per message size) and
// a machine-readable JSON document with the same numbers.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/stats.h"

namespace uroce::tools {

struct RunInfo {
  std::string test;  // "write", "read", "send", "atomic"
  std::string mode;  // "bw" or "lat"
  std::string device;
  uint32_t mtu = 0;
  uint32_t depth = 0;
  uint32_t cq_mod = 1;  // bandwidth: a completion every cq_mod requests
  bool verify = true;
  struct Side {
    uint32_t qpn = 0;
    uint32_t psn = 0;
    uint32_t rkey = 0;
    uint64_t addr = 0;
    std::string gid;
  } local, remote;
};

// perftest's test names ("RDMA_Write BW Test").
std::string banner_title(const RunInfo& info);

std::string format_header(const RunInfo& info);
std::string format_bw_columns();
std::string format_bw_row(const BandwidthSummary& b);
std::string format_lat_columns();
std::string format_lat_row(uint64_t bytes, const LatencySummary& l);
std::string format_rule();

// A small JSON writer: objects, arrays, numbers, strings with RFC 8259 escaping. It checks
// nothing about nesting beyond what it needs to place commas; the bench builds fixed shapes.
class Json {
 public:
  Json& begin_object(std::string_view key = {});
  Json& end_object();
  Json& begin_array(std::string_view key = {});
  Json& end_array();
  Json& field(std::string_view key, std::string_view value);
  Json& field(std::string_view key, const char* value) {
    return field(key, std::string_view(value));
  }
  Json& field(std::string_view key, double value);
  Json& field(std::string_view key, uint64_t value);
  Json& field(std::string_view key, bool value);
  const std::string& str() const { return out_; }

  static std::string escape(std::string_view s);

 private:
  void key(std::string_view k);
  std::string out_;
  std::vector<bool> first_{true};  // per nesting level: no comma before the first member
};

void json_bw(Json& j, const BandwidthSummary& b);
void json_lat(Json& j, uint64_t bytes, const LatencySummary& l);
void json_run_info(Json& j, const RunInfo& info);

}  // namespace uroce::tools
