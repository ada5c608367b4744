#pragma once
// The per-QP pacing hook every data packet passes through: a rate (token bucket; unlimited by
// default) and a window of packets in flight. Congestion control (DCQCN) sets the rate; loss
// recovery (selective repeat) sets the window. Pure: time is passed in.
//
// The bucket holds up to `burst` bytes of credit and may go into debt by one packet: a packet goes
// whenever the credit is not negative, and its bytes are then taken. So a paced flow never waits
// for a whole packet's worth of credit (which would round slow rates down), and its long-run rate
// is exactly the set rate. Credit is kept in integer bit-nanoseconds, so next_send_time() is exact:
// at that time may_send() is true, never one rounding short.
#include <cstdint>

#include "common/types.h"

namespace uroce::cc {

class Pacer {
 public:
  static constexpr uint64_t kUnlimited = 0;

  // Rate in bits per second (kUnlimited = no pacing); burst in bytes. Credit earned so far is
  // counted at the new rate; use set_rate_at() to settle it at the old rate first.
  void set_rate(uint64_t rate_bps, uint32_t burst_bytes = 64 * 1024);
  // The same, with the credit up to `now` earned at the old rate (what a DCQCN rate change wants).
  // A lower rate also drops any saved credit, so a cut holds from the next packet on.
  void set_rate_at(Nanos now, uint64_t rate_bps);
  uint64_t rate_bps() const { return rate_bps_; }
  uint32_t burst_bytes() const { return burst_bytes_; }
  // Packets allowed in flight (unacknowledged); 0 = no limit beyond the transport's own.
  void set_window(uint32_t packets) { window_packets_ = packets; }
  uint32_t window() const { return window_packets_; }

  // May a packet of `bytes` go now, with `in_flight` packets unacknowledged?
  bool may_send(Nanos now, uint32_t bytes, uint32_t in_flight) const;
  // The earliest time a packet of `bytes` may go (ignoring the window).
  Nanos next_send_time(Nanos now, uint32_t bytes) const;
  void on_sent(Nanos now, uint32_t bytes);
  // Credit in bytes at `now` (negative: debt), for tests and statistics.
  double credit_bytes(Nanos now) const;

 private:
  // One byte of credit in bit-nanoseconds: 8 bits x 1e9 ns/s, so credit accrues at rate_bps per ns.
  static constexpr __int128 kUnitsPerByte = 8'000'000'000;
  __int128 credit_at(Nanos now) const;
  uint64_t rate_bps_ = kUnlimited;
  uint32_t burst_bytes_ = 64 * 1024;
  uint32_t window_packets_ = 0;
  __int128 credit_ = 0;  // bit-nanoseconds, at last_update_
  Nanos last_update_ = 0;
  bool fresh_ = true;  // nothing sent since the rate was set: the bucket starts full
};

}  // namespace uroce::cc
