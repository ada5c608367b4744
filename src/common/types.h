#pragma once
#include <array>
#include <cstdint>

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
  for (int i = 0; i < 10; ++i)
    if (g[i] != 0) return false;
  return g[10] == 0xff && g[11] == 0xff;
}

}  // namespace uroce
