#include "fabric/sim_link.h"

#include <algorithm>
#include <cstring>

#include "common/bytes.h"
#include "link/ip_packet_io.h"

namespace uroce::fabric {

Result<std::unique_ptr<SimLink>> SimLink::create(LossyNetwork& network, const Gid& local) {
  auto ep = network.attach(local);
  if (!ep) return Err(ep.error());
  return std::unique_ptr<SimLink>(new SimLink(network, local, *ep));
}

void SimLink::transmit(const wire::TxPacket& packet) {
  const uint32_t n = link::build_ip_packet(packet, local_, buf_);
  if (n == 0 || !network_.send(endpoint_, std::span<const uint8_t>(buf_.data(), n))) {
    ++counters_.tx_errors;
    return;
  }
  ++counters_.tx_packets;
  counters_.tx_bytes += n;
}

size_t SimLink::poll(const link::RxHandler& handler, size_t budget) {
  size_t taken = 0;
  while (taken < budget) {
    const std::span<const uint8_t> bytes = network_.front(endpoint_);
    if (bytes.empty()) break;
    if (link::receive_ip_packet(bytes, local_, counters_, handler) ==
        link::RxVerdict::kBadIpChecksum)
      ++rx_drop_bad_ip_checksum_;
    network_.pop(endpoint_);
    ++taken;
  }
  return taken;
}

}  // namespace uroce::fabric
