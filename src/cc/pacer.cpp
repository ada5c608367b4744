#include "cc/pacer.h"

#include <algorithm>

namespace uroce::cc {

void Pacer::set_rate(uint64_t rate_bps, uint32_t burst_bytes) {
  rate_bps_ = rate_bps;
  burst_bytes_ = burst_bytes;
  credit_ = std::min<__int128>(credit_, __int128{burst_bytes_} * kUnitsPerByte);
}

void Pacer::set_rate_at(Nanos now, uint64_t rate_bps) {
  const bool cut = rate_bps_ != kUnlimited && rate_bps != kUnlimited && rate_bps < rate_bps_;
  if (rate_bps_ != kUnlimited && (!fresh_ || cut)) {
    credit_ = credit_at(now);
    last_update_ = std::max(last_update_, now);
  }
  // Credit saved at the old rate is a licence to send at the old rate; a cut revokes it. Kept, a
  // full bucket let a flow cut from line rate go on at line rate for burst/(line - new rate)
  // (10 us for 64 KiB at 100 -> 50 Gb/s), longer than a fabric round trip, so the queue kept
  // growing, kept being marked and drew cut after cut (docs/experiments.md, "Parking lot").
  if (cut) {
    credit_ = std::min<__int128>(credit_, 0);
    fresh_ = false;
  }
  set_rate(rate_bps, burst_bytes_);
}

__int128 Pacer::credit_at(Nanos now) const {
  const __int128 full = __int128{burst_bytes_} * kUnitsPerByte;
  if (rate_bps_ == kUnlimited || fresh_) return full;
  // Time never runs backwards here: a `now` before the last send earns nothing.
  const Nanos elapsed = now > last_update_ ? now - last_update_ : 0;
  // elapsed < 2^64 and rate < 2^64, so the product fits in 128 bits.
  return std::min(full, credit_ + __int128{elapsed} * rate_bps_);
}

double Pacer::credit_bytes(Nanos now) const {
  return static_cast<double>(credit_at(now)) / static_cast<double>(kUnitsPerByte);
}

bool Pacer::may_send(Nanos now, uint32_t bytes, uint32_t in_flight) const {
  (void)bytes;  // debt, not the packet size, gates sending (see the header)
  if (window_packets_ != 0 && in_flight >= window_packets_) return false;
  return credit_at(now) >= 0;
}

Nanos Pacer::next_send_time(Nanos now, uint32_t bytes) const {
  (void)bytes;
  const __int128 credit = credit_at(now);
  if (credit >= 0) return now;
  // Debt is at most one packet, so the wait fits easily in 64 bits of nanoseconds.
  const __int128 wait = (-credit + rate_bps_ - 1) / rate_bps_;
  return now + static_cast<Nanos>(wait);
}

void Pacer::on_sent(Nanos now, uint32_t bytes) {
  if (rate_bps_ == kUnlimited) return;
  credit_ = credit_at(now) - __int128{bytes} * kUnitsPerByte;
  last_update_ = std::max(last_update_, now);
  fresh_ = false;
}

}  // namespace uroce::cc
