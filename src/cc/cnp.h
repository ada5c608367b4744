#pragma once
// DCQCN notification point (NP): the receiver side. When CE-marked packets arrive for a QP, the NP
// answers with a CNP, at most one per interval per QP (DCQCN paper section 3.1, N = 50 us; mlx5
// min_time_between_cnps = 4 us). The transport owns one CnpPacer per QP and calls it from its
// receive path; it builds the CNP with write_cnp_headers and sends it on the CNP's own traffic
// class.
#include <cstdint>
#include <span>

#include "common/types.h"
#include "wire/headers.h"

namespace uroce::cc {

inline constexpr Nanos kCnpIntervalPaperNs = 50'000;
inline constexpr Nanos kCnpIntervalMlx5Ns = 4'000;
// Where switches expect CNPs (mlx5 cnp_dscp / cnp_802p_prio; served strict-priority in the fabric).
inline constexpr uint8_t kCnpDscp = 48;
inline constexpr uint8_t kCnpPcp = 6;

struct CnpCounters {
  uint64_t ce_packets = 0, cnps = 0, suppressed = 0;
};

// Per-QP rate limiter for CNPs. Pure: `now` is passed in.
class CnpPacer {
 public:
  explicit CnpPacer(Nanos interval_ns = kCnpIntervalPaperNs) : interval_ns_(interval_ns) {}

  // A CE-marked packet for this QP arrived at `now`. True: send a CNP now. The first CE always
  // answers at once; then none until `interval_ns` has passed since the last CNP.
  bool on_ce(Nanos now);

  Nanos interval_ns() const { return interval_ns_; }
  const CnpCounters& counters() const { return counters_; }

 private:
  Nanos interval_ns_;
  Nanos last_cnp_ = 0;
  bool sent_any_ = false;
  CnpCounters counters_;
};

// The transport headers of a CNP to `dest_qp` (the QP that sent the CE-marked packets): BTH with
// opcode 0x81, BECN set, P_Key 0xffff, PSN 0, then 16 reserved zero bytes (IBA annex A17.9.2).
wire::TransportHeaders cnp_headers(uint32_t dest_qp);
// Writes them into `out` (at least wire::kMaxTransportHeaderBytes); returns the bytes written (28).
uint32_t write_cnp_headers(uint32_t dest_qp, std::span<uint8_t> out);

}  // namespace uroce::cc
