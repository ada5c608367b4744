#pragma once
// Selective repeat's reorder buffer (responder side): RC request packets that arrived ahead of the
// expected PSN, kept with their standard headers until the hole before them fills. Bounded by
// kReorderSlots PSNs and kReorderBytes of payload (qp_context.h); the slot table is allocated on
// the first packet held, each payload while it is held.
#include <cstdint>
#include <span>
#include <vector>

#include "transport/device_totals.h"
#include "transport/qp_context.h"

namespace uroce::transport {

class ReorderBuffer {
 public:
  struct Packet {
    wire::TransportHeaders hdr;
    std::vector<uint8_t> payload;
  };
  enum class Hold : uint8_t {
    kHeld,
    kDuplicate,  // a copy of a packet already held
    kNoRoom,     // beyond the slots, longer than `mtu`, or over the byte budget
  };

  ReorderBuffer() = default;
  ReorderBuffer(const ReorderBuffer&) = delete;
  ReorderBuffer& operator=(const ReorderBuffer&) = delete;
  ~ReorderBuffer() { release_storage(); }
  // Keeps the packet `ahead` PSNs (> 0) past the expected one. With `totals`, the slot table (on
  // the first packet) and each payload are charged to the device: kNoRoom at its cap.
  Hold hold(const wire::TransportHeaders& h, std::span<const uint8_t> payload, int32_t ahead,
            uint32_t mtu, DeviceTotals* totals = nullptr);
  bool empty() const { return count_ == 0; }
  // Moves the packet with `psn` into `out` and frees its slot; false if it is not held. The
  // payload's storage goes with it, so what stays allocated is bounded by what is held.
  bool take(Psn psn, Packet& out);
  // Frees the slots of PSNs in [from, to) (at most kReorderSlots of them); returns how many held
  // a packet.
  uint32_t release(Psn from, Psn to);
  // Forgets every packet.
  void clear();
  // Forgets every packet and frees the slot table too, giving the device back all it was charged
  // (a QP's reset or destruction; otherwise the table stays for the next hole).
  void release_storage();
  // What this buffer has charged to its device's totals.
  static constexpr uint64_t kTableBytes = uint64_t{kReorderSlots} * 160;

 private:
  struct Slot {
    bool used = false;
    Psn psn;
    Packet packet;
  };
  // Slots map PSN modulo kReorderSlots, a power of two, so the mapping survives the 2^24 wrap.
  Slot& slot(Psn psn) { return slots_[psn.value() % kReorderSlots]; }
  void free(Slot& s);

  std::vector<Slot> slots_;  // kReorderSlots once the first packet is held
  uint32_t count_ = 0;
  uint64_t bytes_ = 0;
  DeviceTotals* totals_ = nullptr;  // where the table and payloads are charged, if anywhere
};

}  // namespace uroce::transport
