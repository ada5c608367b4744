#pragma once
// A link that copies every frame it sends and receives into a pcap file, as full IP packets
// (wire::build_ip_packet recomputes the ICRC, which equals the one on the wire), then hands it on
// to the link it wraps. Wrapping rather than changing the inner link keeps capture free when it is
// off. open_link() (link/factory.h) puts one around any link kind when a capture path is set.
//
// Threading: the inner link's (one thread at a time); the writer may be shared between links.
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/types.h"
#include "link/clock.h"
#include "link/link.h"
#include "wire/packet.h"
#include "wire/pcap.h"

namespace uroce::link {

// The time stamped on each record.
using CaptureClock = std::function<Nanos()>;

class CaptureLink final : public Link {
 public:
  CaptureLink(std::unique_ptr<Link> inner, std::shared_ptr<wire::PcapWriter> pcap,
              CaptureClock clock = &monotonic_ns);

  Gid local_gid() const override { return inner_->local_gid(); }
  void flush() override { inner_->flush(); }
  int wait_fd() const override { return inner_->wait_fd(); }
  const LinkCounters& counters() const override { return inner_->counters(); }
  bool carries_roce_v1() const override { return inner_->carries_roce_v1(); }
  bool reaches_roce_v1(const Gid& dgid) const override { return inner_->reaches_roce_v1(dgid); }
  int join_group(const Gid& g) override { return inner_->join_group(g); }
  int leave_group(const Gid& g) override { return inner_->leave_group(g); }
  std::optional<uint32_t> shared_slot() const override { return inner_->shared_slot(); }
  int claim_service(uint64_t id) override { return inner_->claim_service(id); }
  void release_service(uint64_t id) override { inner_->release_service(id); }
  void transmit(const wire::TxPacket& p) override;
  size_t poll(const RxHandler& handler, size_t budget) override;

  Link& inner() { return *inner_; }
  const wire::PcapWriter& pcap() const { return *pcap_; }

 private:
  void write(const wire::IpEndpoints& ep, const wire::TransportHeaders& hdr,
             std::span<const uint8_t> payload);

  std::unique_ptr<Link> inner_;
  std::shared_ptr<wire::PcapWriter> pcap_;
  CaptureClock clock_;
  std::vector<uint8_t> scratch_, frame_;
};

}  // namespace uroce::link
