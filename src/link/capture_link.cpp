#include "link/capture_link.h"

namespace uroce::link {

CaptureLink::CaptureLink(std::unique_ptr<Link> inner, std::shared_ptr<wire::PcapWriter> pcap,
                         CaptureClock clock)
    : inner_(std::move(inner)), pcap_(std::move(pcap)), clock_(std::move(clock)) {}

void CaptureLink::transmit(const wire::TxPacket& p) {
  if (p.dest != nullptr) {
    // Contiguous BTH .. pad, so the codec can parse what the transport built.
    scratch_.assign(p.header.begin(), p.header.begin() + p.header_len);
    for (uint32_t i = 0; i < p.payload_parts; ++i)
      scratch_.insert(scratch_.end(), p.payload[i].begin(), p.payload[i].end());
    scratch_.insert(scratch_.end(), p.pad, 0);
    auto t = wire::parse_transport(scratch_);
    if (t) {
      // Every packet leaves a RoCEv2 link from port 4791 (see udp_link.h), with the address
      // vector's DSCP and hop limit (0: the default, 64 on Linux) and ECT(0) unless not ECN
      // capable.
      auto ep = wire::endpoints_from_gids(local_gid(), p.dest->dgid, wire::kRoceV2Port);
      ep.dscp = static_cast<uint8_t>(p.dest->traffic_class >> 2);
      ep.ecn = p.ect ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
      if (p.dest->hop_limit != 0) ep.hop_limit = p.dest->hop_limit;
      write(ep, t->hdr, t->payload);
    }
  }
  inner_->transmit(p);
}

size_t CaptureLink::poll(const RxHandler& handler, size_t budget) {
  return inner_->poll(
      [&](const wire::RxPacket& rx) {
        if (rx.hdr != nullptr) {
          // As received: a switch's CE mark shows in the capture.
          auto ep = wire::endpoints_from_gids(rx.sgid, rx.dgid, rx.udp_src_port);
          wire::set_traffic_class(ep, rx.traffic_class);
          ep.hop_limit = rx.hop_limit;
          write(ep, *rx.hdr, rx.payload);
        }
        handler(rx);
      },
      budget);
}

void CaptureLink::write(const wire::IpEndpoints& ep, const wire::TransportHeaders& hdr,
                        std::span<const uint8_t> payload) {
  frame_.resize(payload.size() + 256);
  uint32_t n = wire::build_ip_packet(ep, hdr, payload, frame_);
  if (n > 0) pcap_->write_ip_packet({frame_.data(), n}, clock_());
}

}  // namespace uroce::link
