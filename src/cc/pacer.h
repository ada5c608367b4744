#pragma once
// The per-QP pacing hook every data packet passes through: a rate (token bucket; unlimited by
// default) and a window of packets in flight. Congestion control (DCQCN) sets the rate; loss
// recovery (selective repeat) sets the window. Pure: time is passed in.
#include <cstdint>

#include "common/types.h"

namespace uroce::cc {

class Pacer {
 public:
  static constexpr uint64_t kUnlimited = 0;

  // Rate in bits per second (kUnlimited = no pacing); burst in bytes.
  void set_rate(uint64_t rate_bps, uint32_t burst_bytes = 64 * 1024);
  uint64_t rate_bps() const { return rate_bps_; }
  // Packets allowed in flight (unacknowledged); 0 = no limit beyond the transport's own.
  void set_window(uint32_t packets) { window_packets_ = packets; }
  uint32_t window() const { return window_packets_; }

  // May a packet of `bytes` go now, with `in_flight` packets unacknowledged?
  bool may_send(Nanos now, uint32_t bytes, uint32_t in_flight) const;
  // The earliest time a packet of `bytes` may go (ignoring the window).
  Nanos next_send_time(Nanos now, uint32_t bytes) const;
  void on_sent(Nanos now, uint32_t bytes);

 private:
  double tokens_at(Nanos now) const;
  uint64_t rate_bps_ = kUnlimited;
  uint32_t burst_bytes_ = 64 * 1024;
  uint32_t window_packets_ = 0;
  double tokens_bytes_ = 0;
  Nanos last_update_ = 0;
};

}  // namespace uroce::cc
