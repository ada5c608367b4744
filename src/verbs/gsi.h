#pragma once
// The GSI QP (QPN 1, IBA 10.2.4) of a device's one port: management datagrams carried as RoCEv2
// UD SEND ONLY packets with Q_Key 0x80010000 and source QP 1. The device itself is the endpoint
// (there is no verbs QP behind QPN 1: nothing posts to it), and hands each MAD to the management
// agent attached to it, which is the connection manager (api/cm/cm_port.h). The agent's outgoing
// MADs and its timers are run inside Device::progress(), so whatever drives the device (the
// progress engine, the simulator) drives the CM too.
#include <cstdint>
#include <functional>
#include <span>

#include "common/types.h"

namespace uroce::verbs {

class ManagementAgent {
 public:
  using SendMad = std::function<void(const Gid& peer, std::span<const uint8_t> mad)>;
  virtual ~ManagementAgent() = default;
  // A MAD (the whole UD payload) that arrived on QPN 1 from `peer` (the IP source address).
  virtual void receive(const Gid& peer, std::span<const uint8_t> mad, Nanos now) = 0;
  // Fires the timers due at `now` and sends every queued MAD with `send` (to QPN 1 at `peer`;
  // on the wire when `send` returns). Returns the agent's next deadline (kNever when none).
  virtual Nanos transmit(Nanos now, const SendMad& send) = 0;
};

struct GsiCounters {
  uint64_t rx_mads = 0;   // handed to the agent
  uint64_t rx_drops = 0;  // not a UD SEND ONLY, wrong Q_Key, or no agent attached
  uint64_t tx_mads = 0;
};

}  // namespace uroce::verbs
