#pragma once
// Congestion control of one RC/UC QP: the DCQCN notification point (a CE-marked packet in -> a CNP
// out, at most one per interval) and reaction point (a CNP in -> a rate cut; bytes and timers ->
// increases), with the rate enforced through the QP's cc::Pacer. See docs/cc.md, "Wiring DCQCN
// into a QP". Sans-I/O like the rest of the transport: `now` is passed in.
#include <cstdint>
#include <optional>

#include "cc/cnp.h"
#include "cc/dcqcn.h"
#include "cc/pacer.h"
#include "common/types.h"
#include "wire/packet_io.h"

namespace uroce::transport {

struct QpCounters;

// Which DCQCN parameter set a QP runs (docs/cc.md, "Parameter sets"). kOff: no CNPs are sent, a
// received CNP is only counted, and the pacer is left alone (the transport's behaviour before
// congestion control existed).
// Extension point: a new congestion-control algorithm is a value here and its reaction point in
// src/cc (docs/architecture.md).
enum class CcAlgorithm : uint8_t { kOff, kDcqcnPaper, kDcqcnMlx5, kDcqcnHpcc };

struct CongestionConfig {
  CcAlgorithm algorithm = CcAlgorithm::kOff;
  double line_rate_bps = 100e9;  // where the rate starts and what it recovers to
  // Minimum time between two CNPs this QP sends; 0 = the parameter set's (paper 50 us, mlx5 4 us,
  // hpcc 1 ns: HPCC's ns-3 receiver flags every ACK of a marked packet).
  Nanos cnp_interval_ns = 0;
  // Bytes each packet takes on the link below the transport's headers: IPv4 20 + UDP 8 + Ethernet
  // header 14 + FCS 4 + preamble 8 + inter-frame gap 12. The rate DCQCN sets is a share of the
  // link, so the pacer is charged every byte the link carries, not the payload alone (charged
  // payload only, two flows at half the line each overran it by header share: 9.6% at MTU 1024;
  // docs/experiments.md, "uroce beside HPCC's ns-3 simulator").
  uint32_t wire_overhead_bytes = 66;

  bool operator==(const CongestionConfig&) const = default;
};

class Congestion {
 public:
  // (Re)starts congestion control when the configuration changes; an unchanged configuration (the
  // verbs layer passes the whole attribute set at every transition) keeps the current state.
  // `counters` (the QP's, which outlive this object) get the rate cuts and the rate gauges.
  void configure(const CongestionConfig& config, cc::Pacer& pacer, QpCounters& counters);
  bool enabled() const { return rp_.has_value(); }

  // NP: a packet carrying CE arrived for this (RC/UC) QP. Makes a CNP pending if the interval
  // allows (DCQCN paper section 3.1; IBA annex A17.9.2).
  void on_ce(Nanos now);
  // Builds the pending CNP, if any, to `dest_qpn` along `path` (DSCP 48, not ECN-capable). The
  // packet points into this object; it is valid until the next call.
  bool take_cnp(uint32_t dest_qpn, const wire::AddressVector& path, wire::TxPacket& out,
                QpCounters& counters);
  bool cnp_pending() const { return cnp_pending_; }

  // RP: a CNP for this QP arrived.
  void on_cnp(Nanos now, cc::Pacer& pacer);
  // RP: the QP put a data packet of `bytes` bytes on the wire (the byte counter B).
  void on_sent(Nanos now, uint64_t bytes, cc::Pacer& pacer);
  // The pacer was charged a packet's payload when it was built; charge the rest of what it takes
  // on the link (transport headers, pad, ICRC and wire_overhead_bytes). Nothing while off.
  void charge_framing(Nanos now, const wire::TxPacket& pkt, cc::Pacer& pacer) const;
  // RP: fires the due DCQCN timers (call when now >= deadline()).
  void on_timer(Nanos now, cc::Pacer& pacer);
  // When on_timer must run, or `now` with a CNP waiting to go; kNever when there is nothing.
  Nanos deadline(Nanos now) const;

  const cc::Dcqcn* dcqcn() const { return rp_ ? &*rp_ : nullptr; }
  const cc::CnpPacer& notification_point() const { return np_; }

 private:
  void apply_rate(Nanos now, cc::Pacer& pacer);

  CongestionConfig config_;
  QpCounters* counters_ = nullptr;
  uint64_t cuts_seen_ = 0;  // rp_->counters().cuts already added to counters_->rate_cuts
  std::optional<cc::Dcqcn> rp_;
  cc::CnpPacer np_;
  bool cnp_pending_ = false;
  wire::AddressVector cnp_path_;
};

}  // namespace uroce::transport
