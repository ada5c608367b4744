#include "link/clock.h"

#include <ctime>

namespace uroce::link {

Nanos monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000u + static_cast<Nanos>(ts.tv_nsec);
}

}  // namespace uroce::link
