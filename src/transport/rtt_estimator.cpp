// RttEstimator: Jacobson/Karels smoothing of round-trip samples taken on new packets.
#include "transport/rtt_estimator.h"

#include <algorithm>

namespace uroce::transport {

void RttEstimator::reset(Psn max_psn) {
  srtt_ = rttvar_ = 0;
  sampling_ = false;
  last_max_psn_ = max_psn;
}

void RttEstimator::on_sent(Psn max_psn, Nanos now) {
  if (max_psn != last_max_psn_ && !sampling_) {
    sampling_ = true;
    sample_psn_ = max_psn - 1;
    sample_sent_at_ = now;
  }
  last_max_psn_ = max_psn;
}

void RttEstimator::on_acknowledged(Psn una, Nanos now) {
  if (!sampling_ || !una.after(sample_psn_)) return;
  sampling_ = false;
  // A sample of 0 is an answer that came back within the caller's pass (one `now` for a whole
  // send-and-receive pass): it only says the round trip was shorter than the pass. Dropped.
  if (now == sample_sent_at_) return;
  // RFC 6298 2.2-2.3: srtt += (r - srtt) / 8, rttvar += (|srtt - r| - rttvar) / 4.
  const Nanos sample = std::max<Nanos>(now - sample_sent_at_, 1);
  if (srtt_ == 0) {
    srtt_ = sample;
    rttvar_ = sample / 2;
    return;
  }
  const Nanos err = sample > srtt_ ? sample - srtt_ : srtt_ - sample;
  rttvar_ = (3 * rttvar_ + err) / 4;
  srtt_ = std::max<Nanos>((7 * srtt_ + sample) / 8, 1);
}

Nanos RttEstimator::rto(Nanos ceiling) const {
  return std::min(std::max({3 * srtt_, srtt_ + 4 * rttvar_, kMinRto}), ceiling);
}

}  // namespace uroce::transport
