#pragma once
// The RoCE path MTU a local address can carry: the largest IB MTU (256 .. 4096) whose RoCEv2
// packet (IP + UDP + BTH + RETH + payload + ICRC) fits the MTU of the interface that serves the
// address. This is what a RoCE NIC reports as its port's active MTU, and what perftest and
// `uroce bench` use by default. Both the libibverbs ABI and the command line ask here.
#include <cstdint>

#include "common/types.h"

namespace uroce::link {

inline constexpr uint32_t kDefaultRoceMtu = 1024;  // the usual answer on 1500-byte Ethernet

// Returns kDefaultRoceMtu when no interface serves `gid` (or it cannot be asked).
uint32_t roce_mtu_for(const Gid& gid);

}  // namespace uroce::link
