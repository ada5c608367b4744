#pragma once
// Rings indexed by absolute positions (a head and a tail that count up and never wrap) map a
// position to its slot from the head's slot, which they keep: an add and a compare where
// `pos % size` is a 64-bit division (the size is known only at run time). A small message's path
// made several such divisions per side (send queue, receive queue, response ring), each some
// tens of cycles.
#include <cstdint>

namespace uroce {

// The slot of `pos`, for a position at most one ring length past the head (every position a
// ring holds, and its tail).
inline uint32_t ring_slot(uint64_t pos, uint64_t head, uint32_t head_slot, uint32_t size) {
  const uint64_t slot = head_slot + (pos - head);
  return static_cast<uint32_t>(slot >= size ? slot - size : slot);
}

// The slot after `slot`.
inline uint32_t next_ring_slot(uint32_t slot, uint32_t size) {
  return slot + 1 == size ? 0 : slot + 1;
}

}  // namespace uroce
