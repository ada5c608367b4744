#include "core/report.h"

#include <fmt/format.h>

#include <cmath>

namespace uroce::tools {

std::string banner_title(const RunInfo& info) {
  std::string op = info.test == "write"    ? "RDMA_Write"
                   : info.test == "read"   ? "RDMA_Read"
                   : info.test == "send"   ? "Send"
                   : info.test == "atomic" ? "Atomic FETCH_AND_ADD"
                                           : info.test;
  return op + (info.mode == "lat" ? " Latency Test" : " BW Test");
}

std::string format_rule() {
  return std::string(95, '-') + "\n";
}

std::string format_header(const RunInfo& info) {
  std::string s = format_rule();
  std::string title = banner_title(info);
  s += fmt::format("{:>{}}\n", title, 47 + title.size() / 2);
  s += fmt::format(" Device         : {:<16} Transport type : RoCEv2 (UDP 4791)\n", info.device);
  s += fmt::format(" Connection type: RC               Mtu            : {}[B]\n", info.mtu);
  s += fmt::format(" TX depth       : {:<16} Data verified  : {}\n", info.depth,
                   info.verify ? "ON" : "OFF");
  if (info.cq_mod > 1) s += fmt::format(" CQ Moderation  : {}\n", info.cq_mod);
  s += format_rule();
  auto side = [](const char* who, const RunInfo::Side& x) {
    return fmt::format(
        " {} address: QPN {:#08x} PSN {:#08x} RKey {:#010x} VAddr {:#016x}\n"
        " GID: {}\n",
        who, x.qpn, x.psn, x.rkey, x.addr, x.gid);
  };
  s += side("local ", info.local);
  s += side("remote", info.remote);
  s += format_rule();
  return s;
}

std::string format_bw_columns() {
  return fmt::format(" {:<10} {:<13} {:>16} {:>19} {:>19} {:>14}\n", "#bytes", "#iterations",
                     "BW peak[Gb/sec]", "BW average[Gb/sec]", "BW average[MB/sec]",
                     "MsgRate[Mpps]");
}

std::string format_bw_row(const BandwidthSummary& b) {
  return fmt::format(" {:<10} {:<13} {:>16.2f} {:>19.2f} {:>19.2f} {:>14.6f}\n", b.bytes_per_msg,
                     b.iterations, b.peak_gbps, b.avg_gbps, b.avg_mbytes_per_s, b.msg_rate_mpps);
}

std::string format_lat_columns() {
  return fmt::format(" {:<8} {:<12} {:>11} {:>14} {:>11} {:>15} {:>17} {:>11} {:>13}\n", "#bytes",
                     "#iterations", "t_min[usec]", "t_median[usec]", "t_avg[usec]", "99% pct[usec]",
                     "99.9% pct[usec]", "t_max[usec]", "t_stdev[usec]");
}

std::string format_lat_row(uint64_t bytes, const LatencySummary& l) {
  return fmt::format(
      " {:<8} {:<12} {:>11.2f} {:>14.2f} {:>11.2f} {:>15.2f} {:>17.2f} {:>11.2f} {:>13.2f}\n",
      bytes, l.samples, l.min_us, l.median_us, l.avg_us, l.p99_us, l.p999_us, l.max_us, l.stdev_us);
}

std::string Json::escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20) {
          out += fmt::format("\\u{:04x}", u);
        } else {
          out += c;
        }
    }
  }
  return out;
}

void Json::key(std::string_view k) {
  if (!first_.back()) out_ += ',';
  first_.back() = false;
  if (!k.empty()) out_ += fmt::format("\"{}\":", escape(k));
}

Json& Json::begin_object(std::string_view k) {
  key(k);
  out_ += '{';
  first_.push_back(true);
  return *this;
}
Json& Json::end_object() {
  first_.pop_back();
  out_ += '}';
  return *this;
}
Json& Json::begin_array(std::string_view k) {
  key(k);
  out_ += '[';
  first_.push_back(true);
  return *this;
}
Json& Json::end_array() {
  first_.pop_back();
  out_ += ']';
  return *this;
}
Json& Json::field(std::string_view k, std::string_view value) {
  key(k);
  out_ += fmt::format("\"{}\"", escape(value));
  return *this;
}
Json& Json::field(std::string_view k, double value) {
  key(k);
  // JSON has no NaN or infinity.
  out_ += std::isfinite(value) ? fmt::format("{}", value) : "null";
  return *this;
}
Json& Json::field(std::string_view k, uint64_t value) {
  key(k);
  out_ += fmt::format("{}", value);
  return *this;
}
Json& Json::field(std::string_view k, bool value) {
  key(k);
  out_ += value ? "true" : "false";
  return *this;
}

void json_bw(Json& j, const BandwidthSummary& b) {
  j.begin_object()
      .field("bytes", b.bytes_per_msg)
      .field("iterations", b.iterations)
      .field("bw_peak_gbps", b.peak_gbps)
      .field("bw_avg_gbps", b.avg_gbps)
      .field("bw_avg_mbytes_per_s", b.avg_mbytes_per_s)
      .field("msg_rate_mpps", b.msg_rate_mpps)
      .field("elapsed_s", b.elapsed_s)
      .end_object();
}

void json_lat(Json& j, uint64_t bytes, const LatencySummary& l) {
  j.begin_object()
      .field("bytes", bytes)
      .field("iterations", l.samples)
      .field("t_min_us", l.min_us)
      .field("t_median_us", l.median_us)
      .field("t_avg_us", l.avg_us)
      .field("t_p99_us", l.p99_us)
      .field("t_p999_us", l.p999_us)
      .field("t_max_us", l.max_us)
      .field("t_stdev_us", l.stdev_us)
      .end_object();
}

void json_run_info(Json& j, const RunInfo& info) {
  j.field("test", info.test)
      .field("mode", info.mode)
      .field("device", info.device)
      .field("mtu", uint64_t{info.mtu})
      .field("depth", uint64_t{info.depth})
      .field("cq_mod", uint64_t{info.cq_mod})
      .field("verify", info.verify);
  auto side = [&](const char* k, const RunInfo::Side& s) {
    j.begin_object(k)
        .field("qpn", uint64_t{s.qpn})
        .field("psn", uint64_t{s.psn})
        .field("rkey", uint64_t{s.rkey})
        .field("addr", s.addr)
        .field("gid", s.gid)
        .end_object();
  };
  side("local", info.local);
  side("remote", info.remote);
}

}  // namespace uroce::tools
