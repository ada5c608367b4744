#pragma once
// The requester's round-trip estimate (RFC 6298), which selective repeat's fast retransmission
// (IRN's RTO_low, Mittal et al. SIGCOMM 2018, section 3.1) is timed from.
#include "common/psn.h"
#include "common/types.h"

namespace uroce::transport {

class RttEstimator {
 public:
  // The fast timer's floor: below it a timer would fire within the scheduling noise of one pass.
  static constexpr Nanos kMinRto = 2'000;

  // No estimate and no sample; `max_psn` is one past the highest PSN sent so far.
  void reset(Psn max_psn);
  // A request packet went out at `now` and `max_psn` is one past the highest PSN sent: a new
  // packet (max_psn moved) starts a sample if none is running. One sample at a time.
  void on_sent(Psn max_psn, Nanos now);
  // Karn: a round trip that spans a retransmission says nothing, so the running sample ends.
  void forget_sample() { sampling_ = false; }
  // una moved at `now`: a sample whose packet is now acknowledged becomes an estimate.
  void on_acknowledged(Psn una, Nanos now);
  bool has_estimate() const { return srtt_ != 0; }
  // How long una may stand still with packets out before the fast timer resends the packet there:
  // the longer of three round trips and srtt + 4 rttvar (the samples include queueing and, on a
  // real host, scheduling: they vary), at least kMinRto, at most `ceiling` (the ACK timeout it
  // stands in front of).
  Nanos rto(Nanos ceiling) const;

 private:
  Nanos srtt_ = 0;  // 0: no sample yet
  Nanos rttvar_ = 0;
  bool sampling_ = false;
  Psn sample_psn_;  // the sample ends once una passes it
  Nanos sample_sent_at_ = 0;
  Psn last_max_psn_;
};

}  // namespace uroce::transport
