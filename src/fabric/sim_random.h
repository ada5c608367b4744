#pragma once
// The simulation's one source of randomness: xoshiro256** (Blackman and Vigna, 2018), seeded by
// splitmix64. Chosen over std::mt19937_64 for a 32-byte state (cheap to create per seed, so a test
// can run thousands of worlds) and speed; chosen over std::*_distribution because their output is
// implementation-defined, while a replayed seed must give the same world with any standard
// library. Nothing in uroce uses std::random_device: every run is a function of its seed.
#include <array>
#include <cstdint>

namespace uroce::fabric {

// splitmix64 step: also used on its own to derive independent sub-seeds from one seed.
constexpr uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  using result_type = uint64_t;  // UniformRandomBitGenerator, for std::shuffle and friends
  explicit constexpr Rng(uint64_t seed) {
    uint64_t sm = seed;
    // splitmix64 never yields four zero words, so the all-zero state (a fixed point) can't occur.
    for (auto& word : s_) word = splitmix64(sm);
  }

  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return ~uint64_t{0}; }

  constexpr uint64_t operator()() { return next(); }
  constexpr uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, bound); 0 when bound is 0. Lemire's multiply-shift with rejection, so there is
  // no modulo bias.
  uint64_t below(uint64_t bound) {
    if (bound == 0) return 0;
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    auto low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Uniform in [lo, hi] (inclusive); lo when hi < lo.
  uint64_t between(uint64_t lo, uint64_t hi) {
    if (hi <= lo) return lo;
    if (hi - lo == max()) return next();
    return lo + below(hi - lo + 1);
  }
  // Uniform in [0, 1) with 53 random bits.
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // True with probability p (p <= 0 never, p >= 1 always; no draw is spent on those, so turning a
  // probability on or off elsewhere doesn't shift this stream).
  bool chance(double p) {
    if (p <= 0) return false;
    if (p >= 1) return true;
    return unit() < p;
  }

  const std::array<uint64_t, 4>& state() const { return s_; }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_{};
};

}  // namespace uroce::fabric
