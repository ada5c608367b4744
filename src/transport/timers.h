#pragma once
// The two timer scales of the RC transport, as pure functions.
#include <array>
#include <cstdint>

#include "common/types.h"

namespace uroce::transport {

// Local ACK timeout (IBA 9.7.6.1.3): 4.096 us * 2^timeout; 0 means the timer is off.
constexpr Nanos ack_timeout_ns(uint8_t timeout) {
  if (timeout == 0) return kNever;
  return Nanos{4096} << (timeout > 31 ? 31 : timeout);
}

// RNR NAK timer field -> minimum wait before retrying (IBA 9.7.5.2.8, table 45), in ns.
inline constexpr std::array<Nanos, 32> kRnrTimerNs = {
    655'360'000, 10'000,      20'000,      30'000,      40'000,     60'000,     80'000,
    120'000,     160'000,     240'000,     320'000,     480'000,    640'000,    960'000,
    1'280'000,   1'920'000,   2'560'000,   3'840'000,   5'120'000,  7'680'000,  10'240'000,
    15'360'000,  20'480'000,  30'720'000,  40'960'000,  61'440'000, 81'920'000, 122'880'000,
    163'840'000, 245'760'000, 327'680'000, 491'520'000,
};
constexpr Nanos rnr_timer_ns(uint8_t code) {
  return kRnrTimerNs[code & 0x1f];
}

constexpr Nanos add_saturating(Nanos a, Nanos b) {
  return a > kNever - b ? kNever : a + b;
}

}  // namespace uroce::transport
