#pragma once
#include <array>
#include <cstdint>
#include <cstring>

namespace uroce {

// Time in nanoseconds: real (CLOCK_MONOTONIC) on a UDP link, virtual in the simulator. Nothing
// below the progress engine reads a clock; time is always passed in.
using Nanos = uint64_t;
inline constexpr Nanos kNever = ~Nanos{0};

// A RoCEv2 GID is the port's IPv6 address, or an IPv4-mapped one (::ffff:a.b.c.d).
using Gid = std::array<uint8_t, 16>;
inline Gid gid_from_ipv4(std::array<uint8_t, 4> a) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3]};
}
inline bool gid_is_ipv4(const Gid& g) {
  // memcmp of a constant 12 bytes compiles to two loads and compares (checked per packet sent).
  static constexpr uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.data(), kMappedPrefix, sizeof kMappedPrefix) == 0;
}
// An IPv4 multicast group (224.0.0.0/4) as a GID, in either form rdma_cm uses for RoCE: the
// IPv4-mapped one (::ffff:239.x.y.z, RoCEv2) or ff0e::ffff:239.x.y.z (RoCE v1). Returns the
// RoCEv2 form, which is what a received packet's destination maps to, or all zeros if `g` is
// neither.
inline Gid ipv4_multicast_group(const Gid& g) {
  bool v1_form = g[0] == 0xff && g[1] == 0x0e && g[10] == 0xff && g[11] == 0xff;
  for (int i = 2; i < 10 && v1_form; ++i) v1_form = g[i] == 0;
  if (!(gid_is_ipv4(g) || v1_form) || (g[12] & 0xf0) != 0xe0) return Gid{};
  return gid_from_ipv4({g[12], g[13], g[14], g[15]});
}
// The destination QPN of a multicast packet (IBA 9.6.1.1: QP 0xFFFFFF with a multicast DGID).
inline constexpr uint32_t kMulticastQpn = 0xffffff;

}  // namespace uroce
