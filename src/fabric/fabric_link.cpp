#include "fabric/fabric_link.h"

#include <algorithm>
#include <cstring>

#include "common/bytes.h"
#include "link/ip_packet_io.h"
#include "wire/packet.h"

namespace uroce::fabric {

Result<std::unique_ptr<FabricLink>> FabricLink::create(SwitchFabric& fabric, HostId host,
                                                       const Gid& local, size_t inbox_packets) {
  if (host >= fabric.hosts() || inbox_packets == 0) return Err(EINVAL);
  std::unique_ptr<FabricLink> link(new FabricLink(fabric, host, local, inbox_packets));
  fabric.set_receiver(host, link.get());
  return link;
}

FabricLink::~FabricLink() {
  fabric_.set_receiver(host_, nullptr);
}

namespace {
constexpr uint32_t kDescriptorBytes = 12;  // I/O address (8) and length (4), host order
}  // namespace

void FabricLink::transmit(const wire::TxPacket& packet) {
  const bool v1 = packet.dest != nullptr && packet.dest->roce_v1;
  uint64_t iova = 0;
  if (reference_ != nullptr && trusted_wire_ && !v1 && packet.payload_parts == 1 &&
      packet.payload_len > 0 && packet.payload[0].size() == packet.payload_len &&
      reference_->describe(packet.payload[0].data(), packet.payload_len, &iova)) {
    const uint32_t at = link::build_ip_packet(packet, local_, buf_, false, true);
    const uint32_t total = at + packet.payload_len + packet.pad + wire::kIcrcBytes;
    if (at != 0) {
      std::memcpy(buf_.data() + at, &iova, 8);
      std::memcpy(buf_.data() + at + 8, &packet.payload_len, 4);
      if (!fabric_.host_send_ip(host_, std::span<const uint8_t>(buf_.data(), at + kDescriptorBytes),
                                total)) {
        ++counters_.tx_errors;
        return;
      }
      ++counters_.tx_packets;
      counters_.tx_bytes += total;
      ++tx_by_reference_;
      return;
    }
  }
  if (reference_ != nullptr) {
    for (uint32_t i = 0; i < packet.payload_parts; ++i)
      reference_->prepare_copy(packet.payload[i].data(), packet.payload[i].size());
  }
  const uint32_t n = v1 ? link::build_v1_packet(packet, local_, buf_)
                        : link::build_ip_packet(packet, local_, buf_, !trusted_wire_);
  if (n == 0 || !fabric_.host_send_ip(host_, std::span<const uint8_t>(buf_.data(), n))) {
    ++counters_.tx_errors;
    return;
  }
  ++counters_.tx_packets;
  counters_.tx_bytes += n;
}

bool FabricLink::reaches_roce_v1(const Gid& dgid) const {
  return fabric_.same_segment(host_, fabric_.host_by_address(dgid));  // false for an unknown GID
}

void FabricLink::on_receive(const Delivered& packet, Nanos now) {
  if (inbox_count_ == inbox_capacity_) {
    ++rx_drop_inbox_full_;
    return;
  }
  if (packet.ip_packet.empty()) {
    ++counters_.rx_drop_not_roce;  // a descriptor-only packet from a synthetic host
    return;
  }
  if (inbox_count_ == inbox_.size()) {
    // Every slot made so far is in use: one more, at the ring's tail (unwrapped first).
    std::rotate(inbox_.begin(), inbox_.begin() + static_cast<std::ptrdiff_t>(inbox_head_),
                inbox_.end());
    inbox_head_ = 0;
    inbox_.emplace_back();
  }
  Slot& slot = inbox_[(inbox_head_ + inbox_count_) % inbox_.size()];
  slot.bytes = fabric_.exchange_payload(packet, std::move(slot.bytes));
  slot.len = static_cast<uint32_t>(packet.ip_packet.size());
  slot.wire_len = packet.ip_bytes;
  ++inbox_count_;
  // The device's pass reads these bytes later in this instant; they were written at the sender
  // microseconds ago and have left the cache since.
  __builtin_prefetch(slot.bytes.get());
  __builtin_prefetch(slot.bytes.get() + slot.len - 1);
  if (notify_) notify_->on_event(notify_kind_, host_, now);
}

std::span<const uint8_t> FabricLink::rebuild(const Slot& slot) {
  if (reference_ == nullptr || slot.len < kDescriptorBytes) return {};
  const std::span<uint8_t> out = reference_->rebuild_buffer();
  if (slot.wire_len > out.size()) return {};
  const uint32_t at = slot.len - kDescriptorBytes;
  uint64_t iova = 0;
  uint32_t len = 0;
  std::memcpy(&iova, slot.bytes.get() + at, 8);
  std::memcpy(&len, slot.bytes.get() + at + 8, 4);
  if (size_t{at} + len + wire::kIcrcBytes > slot.wire_len ||
      slot.wire_len - at - len - wire::kIcrcBytes > 3)
    return {};
  std::memcpy(out.data(), slot.bytes.get(), at);
  reference_->materialize(iova, out.subspan(at, len));
  std::memset(out.data() + at + len, 0, slot.wire_len - at - len);  // pad and ICRC
  return out.first(slot.wire_len);
}

size_t FabricLink::poll(const link::RxHandler& handler, size_t budget) {
  size_t taken = 0;
  while (taken < budget && inbox_count_ > 0) {
    const Slot& slot = inbox_[inbox_head_];
    std::span<const uint8_t> bytes{slot.bytes.get(), slot.len};
    if (slot.len < slot.wire_len) bytes = rebuild(slot);
    if (bytes.empty()) {
      ++counters_.rx_drop_malformed;
    } else if (link::is_v1_packet(bytes)) {
      link::receive_v1_packet(bytes, local_, counters_, handler);
    } else {
      link::receive_ip_packet(bytes, local_, counters_, handler, !trusted_wire_);
    }
    inbox_head_ = (inbox_head_ + 1) % inbox_.size();
    --inbox_count_;
    ++taken;
  }
  // Back to the first slot when empty: each slot holds a buffer, so a ring that went round would
  // hold one in every slot; this way only as many as were ever queued at once.
  if (inbox_count_ == 0) inbox_head_ = 0;
  return taken;
}

}  // namespace uroce::fabric
