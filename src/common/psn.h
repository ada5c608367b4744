#pragma once
// 24-bit packet sequence numbers (IBA 9.7.1). Every PSN in uroce is a Psn, so wraparound is handled
// once, here, instead of by masks scattered through the transport.
#include <compare>
#include <cstdint>

namespace uroce {

class Psn {
 public:
  static constexpr uint32_t kBits = 24;
  static constexpr uint32_t kMask = (1u << kBits) - 1;
  static constexpr uint32_t kHalf = 1u << (kBits - 1);

  constexpr Psn() = default;
  constexpr explicit Psn(uint32_t value) : value_(value & kMask) {}

  constexpr uint32_t value() const { return value_; }

  constexpr Psn operator+(int32_t n) const { return Psn(value_ + static_cast<uint32_t>(n)); }
  constexpr Psn operator-(int32_t n) const { return Psn(value_ - static_cast<uint32_t>(n)); }
  constexpr Psn& operator+=(int32_t n) { return *this = *this + n; }
  constexpr Psn& operator++() { return *this += 1; }

  // Signed distance from `from` to this PSN, in (-2^23, 2^23]: positive when this PSN is later.
  constexpr int32_t distance_from(Psn from) const {
    uint32_t d = (value_ - from.value_) & kMask;
    return d > kHalf ? static_cast<int32_t>(d) - static_cast<int32_t>(1u << kBits)
                     : static_cast<int32_t>(d);
  }
  constexpr bool before(Psn other) const { return other.distance_from(*this) > 0; }
  constexpr bool after(Psn other) const { return distance_from(other) > 0; }

  constexpr bool operator==(const Psn&) const = default;

 private:
  uint32_t value_ = 0;
};

}  // namespace uroce
