#pragma once
// Shared by the fabric_switch_* tests: a receiver that records what arrives.
#include <array>
#include <cstdint>
#include <vector>

#include "fabric/switch_fabric.h"

namespace uroce::fabric::test {

struct Recorder : HostReceiver {
  struct Arrival {
    HostId src;
    uint8_t priority;
    bool ce;
    uint64_t tag;
    Nanos sent_at, at;
  };
  std::vector<Arrival> arrivals;
  std::array<uint64_t, kPriorities> bytes_by_priority{};
  uint64_t ce = 0;
  void on_receive(const Delivered& d, Nanos now) override {
    arrivals.push_back({d.src, d.priority, d.ce, d.tag, d.sent_at, now});
    bytes_by_priority[d.priority] += d.ip_bytes;
    ce += d.ce;
  }
  size_t count_priority(uint8_t p) const {
    size_t n = 0;
    for (const auto& a : arrivals) n += a.priority == p;
    return n;
  }
};

// DSCP values whose default class (DSCP >> 3) is the priority.
constexpr uint8_t dscp_for(uint8_t priority) {
  return static_cast<uint8_t>(priority << 3);
}

inline PacketMeta meta(HostId dst, uint32_t bytes, uint8_t priority, uint64_t tag = 0,
                       uint16_t udp_src_port = 0xc000) {
  PacketMeta m;
  m.dst = dst;
  m.ip_bytes = bytes;
  m.dscp = dscp_for(priority);
  m.pcp = priority;
  m.tag = tag;
  m.udp_src_port = udp_src_port;
  return m;
}

}  // namespace uroce::fabric::test
