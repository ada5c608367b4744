// ReorderBuffer: request packets held by PSN until they are expected.
#include "transport/reorder_buffer.h"

#include <algorithm>
#include <utility>

namespace uroce::transport {

ReorderBuffer::Hold ReorderBuffer::hold(const wire::TransportHeaders& h,
                                        std::span<const uint8_t> payload, int32_t ahead,
                                        uint32_t mtu, DeviceTotals* totals) {
  if (static_cast<uint32_t>(ahead) >= kReorderSlots || payload.size() > mtu ||
      bytes_ + payload.size() > kReorderBytes)
    return Hold::kNoRoom;
  if (slots_.empty()) {
    static_assert(kTableBytes >= kReorderSlots * sizeof(Slot), "the charge covers the table");
    if (totals && !totals->take_reorder_bytes(kTableBytes)) return Hold::kNoRoom;
    totals_ = totals;
    slots_.resize(kReorderSlots);
  }
  Slot& s = slot(h.bth.psn);
  // ahead < kReorderSlots, so a used slot holds this very PSN.
  if (s.used) return Hold::kDuplicate;
  if (totals_ && !payload.empty() && !totals_->take_reorder_bytes(payload.size()))
    return Hold::kNoRoom;
  s.used = true;
  s.psn = h.bth.psn;
  s.packet.hdr = h;
  s.packet.payload.assign(payload.begin(), payload.end());
  ++count_;
  bytes_ += payload.size();
  return Hold::kHeld;
}

void ReorderBuffer::free(Slot& s) {
  s.used = false;
  --count_;
  bytes_ -= s.packet.payload.size();
  if (totals_) totals_->give_reorder_bytes(s.packet.payload.size());
  std::vector<uint8_t>().swap(s.packet.payload);
}

bool ReorderBuffer::take(Psn psn, Packet& out) {
  if (count_ == 0) return false;
  Slot& s = slot(psn);
  if (!s.used || s.psn != psn) return false;
  s.used = false;
  --count_;
  bytes_ -= s.packet.payload.size();
  if (totals_) totals_->give_reorder_bytes(s.packet.payload.size());
  out.hdr = s.packet.hdr;
  out.payload = std::move(s.packet.payload);
  std::vector<uint8_t>().swap(s.packet.payload);
  return true;
}

uint32_t ReorderBuffer::release(Psn from, Psn to) {
  if (count_ == 0) return 0;
  uint32_t released = 0;
  // Only PSNs within kReorderSlots of the old expected PSN can be held: bounded by the buffer.
  const int32_t n = std::min<int32_t>(to.distance_from(from), kReorderSlots);
  for (int32_t i = 0; i < n; ++i) {
    Slot& s = slot(from + i);
    if (s.used && s.psn == from + i) {
      free(s);
      ++released;
    }
  }
  return released;
}

void ReorderBuffer::clear() {
  if (count_ == 0) return;
  for (Slot& s : slots_) {
    s.used = false;
    std::vector<uint8_t>().swap(s.packet.payload);
  }
  count_ = 0;
  if (totals_) totals_->give_reorder_bytes(bytes_);
  bytes_ = 0;
}

void ReorderBuffer::release_storage() {
  clear();
  if (slots_.empty()) return;
  std::vector<Slot>().swap(slots_);
  if (totals_) totals_->give_reorder_bytes(kTableBytes);
  totals_ = nullptr;
}

}  // namespace uroce::transport
