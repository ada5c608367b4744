#pragma once
// A link::Link over the simulated LossyNetwork, in virtual time: the same job as the UDP link (IP,
// UDP and ICRC out; parse, check and count in) with the network standing in for the sockets. A
// device on a SimLink can't tell it from a wire, except that time is the EventLoop's.
#include <array>
#include <cstdint>
#include <memory>

#include "common/result.h"
#include "fabric/lossy_network.h"
#include "link/ip_packet_io.h"
#include "link/link.h"

namespace uroce::fabric {

class SimLink final : public link::Link {
 public:
  // Attaches to `network` at `local` (IPv4-mapped GID for IPv4, else IPv6). Fails with the
  // network's errno (EEXIST, ENOSPC).
  static Result<std::unique_ptr<SimLink>> create(LossyNetwork& network, const Gid& local);

  Gid local_gid() const override { return local_; }
  EndpointId endpoint() const { return endpoint_; }

  // Builds the IP packet now and sends it at the network's current virtual time. A packet that
  // can't be built (no destination, IPv4/IPv6 mismatch, too big, gather list inconsistent) or
  // that the network refuses counts as a tx error.
  void transmit(const wire::TxPacket& packet) override;
  void flush() override {}
  size_t poll(const link::RxHandler& handler, size_t budget) override;
  const link::LinkCounters& counters() const override { return counters_; }
  // Packets that failed the IPv4 header checksum (also counted in rx_drop_malformed).
  uint64_t rx_drop_bad_ip_checksum() const { return rx_drop_bad_ip_checksum_; }

 private:
  SimLink(LossyNetwork& network, const Gid& local, EndpointId ep)
      : network_(network), local_(local), endpoint_(ep) {}

  LossyNetwork& network_;
  Gid local_;
  EndpointId endpoint_;
  link::LinkCounters counters_;
  uint64_t rx_drop_bad_ip_checksum_ = 0;
  std::array<uint8_t, link::kMaxIpPacketBytes> buf_{};
};

}  // namespace uroce::fabric
