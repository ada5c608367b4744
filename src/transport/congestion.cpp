#include "transport/congestion.h"

#include <algorithm>

#include "transport/qp.h"
#include "wire/opcode.h"

namespace uroce::transport {

void Congestion::configure(const CongestionConfig& config, cc::Pacer& pacer, QpCounters& counters) {
  counters_ = &counters;
  if (config == config_ && rp_.has_value() == (config.algorithm != CcAlgorithm::kOff)) return;
  config_ = config;
  cnp_pending_ = false;
  cuts_seen_ = 0;
  switch (config.algorithm) {
    case CcAlgorithm::kOff:
      rp_.reset();
      np_ = cc::CnpPacer();
      counters.dcqcn_rate_mbps = counters.dcqcn_min_rate_mbps = 0;
      return;
    case CcAlgorithm::kDcqcnPaper:
      rp_.emplace(cc::DcqcnParams::paper(config.line_rate_bps));
      np_ = cc::CnpPacer(config.cnp_interval_ns ? config.cnp_interval_ns : cc::kCnpIntervalPaperNs);
      break;
    case CcAlgorithm::kDcqcnMlx5:
      rp_.emplace(cc::DcqcnParams::mlx5(config.line_rate_bps));
      np_ = cc::CnpPacer(config.cnp_interval_ns ? config.cnp_interval_ns : cc::kCnpIntervalMlx5Ns);
      break;
    case CcAlgorithm::kDcqcnHpcc:
      rp_.emplace(cc::DcqcnParams::hpcc(config.line_rate_bps));
      np_ = cc::CnpPacer(config.cnp_interval_ns ? config.cnp_interval_ns : 1);
      break;
  }
  // A flow starts at line rate (DCQCN has no slow start); the pacer holds it there until a CNP.
  pacer.set_rate(rp_->rate_bps(), pacer.burst_bytes());
  counters.dcqcn_rate_mbps = counters.dcqcn_min_rate_mbps = rp_->rate_bps() / 1'000'000;
}

void Congestion::on_ce(Nanos now) {
  if (!rp_) return;
  // Several CE packets within one interval earn one CNP; a CNP already waiting absorbs them.
  if (np_.on_ce(now)) cnp_pending_ = true;
}

bool Congestion::take_cnp(uint32_t dest_qpn, const wire::AddressVector& path, wire::TxPacket& out,
                          QpCounters& counters) {
  if (!cnp_pending_) return false;
  cnp_pending_ = false;
  out = wire::TxPacket{};
  out.header_len = cc::write_cnp_headers(dest_qpn, out.header);
  out.ect = false;  // a CNP is not ECN-capable: marking it would only feed back on itself
  cnp_path_ = path;
  // DSCP 48 is the class switches serve strictly first, so CNPs overtake the congested data.
  cnp_path_.traffic_class = static_cast<uint8_t>(cc::kCnpDscp << 2);
  out.dest = &cnp_path_;
  ++counters.cnps_sent;
  return true;
}

void Congestion::apply_rate(Nanos now, cc::Pacer& pacer) {
  const uint64_t rate = rp_->rate_bps();
  if (pacer.rate_bps() != rate) pacer.set_rate_at(now, rate);
  // Every rate change passes here, so the counters follow the reaction point exactly; a cut due
  // later (mlx5's once-per-period cut) is counted when the timer carries it out.
  const uint64_t cuts = rp_->counters().cuts;
  counters_->rate_cuts += cuts - cuts_seen_;
  cuts_seen_ = cuts;
  counters_->dcqcn_rate_mbps = rate / 1'000'000;
  counters_->dcqcn_min_rate_mbps = std::min(counters_->dcqcn_min_rate_mbps, rate / 1'000'000);
}

void Congestion::on_cnp(Nanos now, cc::Pacer& pacer) {
  if (!rp_) return;
  rp_->on_cnp(now);
  apply_rate(now, pacer);
}

void Congestion::on_sent(Nanos now, uint64_t bytes, cc::Pacer& pacer) {
  if (!rp_) return;
  rp_->on_bytes_sent(now, bytes);
  apply_rate(now, pacer);
}

void Congestion::charge_framing(Nanos now, const wire::TxPacket& pkt, cc::Pacer& pacer) const {
  if (!rp_) return;
  pacer.on_sent(now, pkt.header_len + pkt.pad + wire::kIcrcBytes + config_.wire_overhead_bytes);
}

void Congestion::on_timer(Nanos now, cc::Pacer& pacer) {
  if (!rp_ || now < rp_->next_deadline()) return;
  rp_->on_timer(now);
  apply_rate(now, pacer);
}

Nanos Congestion::deadline(Nanos now) const {
  if (cnp_pending_) return now;
  return rp_ ? rp_->next_deadline() : kNever;
}

}  // namespace uroce::transport
