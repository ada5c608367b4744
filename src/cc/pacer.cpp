#include "cc/pacer.h"

#include <algorithm>
#include <cmath>

namespace uroce::cc {

void Pacer::set_rate(uint64_t rate_bps, uint32_t burst_bytes) {
  rate_bps_ = rate_bps;
  burst_bytes_ = burst_bytes;
  tokens_bytes_ = std::min<double>(tokens_bytes_, burst_bytes_);
}

double Pacer::tokens_at(Nanos now) const {
  if (rate_bps_ == kUnlimited) return burst_bytes_;
  const double elapsed_s = now > last_update_ ? static_cast<double>(now - last_update_) * 1e-9 : 0;
  return std::min<double>(burst_bytes_, tokens_bytes_ + elapsed_s * static_cast<double>(rate_bps_) / 8);
}

bool Pacer::may_send(Nanos now, uint32_t bytes, uint32_t in_flight) const {
  if (window_packets_ != 0 && in_flight >= window_packets_) return false;
  if (rate_bps_ == kUnlimited) return true;
  // A packet may go once the bucket is non-negative: it then goes into debt, which bounds the
  // burst without rounding small rates down to zero.
  (void)bytes;
  return tokens_at(now) >= 0;
}

Nanos Pacer::next_send_time(Nanos now, uint32_t bytes) const {
  (void)bytes;
  if (rate_bps_ == kUnlimited) return now;
  const double tokens = tokens_at(now);
  if (tokens >= 0) return now;
  const double wait_s = -tokens * 8 / static_cast<double>(rate_bps_);
  return now + static_cast<Nanos>(std::ceil(wait_s * 1e9));
}

void Pacer::on_sent(Nanos now, uint32_t bytes) {
  if (rate_bps_ == kUnlimited) return;
  tokens_bytes_ = tokens_at(now) - bytes;
  last_update_ = std::max(last_update_, now);
}

}  // namespace uroce::cc
