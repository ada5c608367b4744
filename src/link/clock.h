#pragma once
// The real-time clock of everything that runs on a real network: CLOCK_MONOTONIC in nanoseconds.
// The progress engine passes it to Device::progress(), a capture stamps records with it. The
// transport never reads a clock (time comes in as an argument); the simulator has its own.
#include "common/types.h"

namespace uroce::link {

Nanos monotonic_ns();

}  // namespace uroce::link
