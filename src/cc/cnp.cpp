#include "cc/cnp.h"

#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::cc {

bool CnpPacer::on_ce(Nanos now) {
  ++counters_.ce_packets;
  // A clock that steps back (real time across hosts never reaches here) must not stall CNPs for
  // good: treat it as the interval having passed.
  if (sent_any_ && now >= last_cnp_ && now - last_cnp_ < interval_ns_) {
    ++counters_.suppressed;
    return false;
  }
  sent_any_ = true;
  last_cnp_ = now;
  ++counters_.cnps;
  return true;
}

wire::TransportHeaders cnp_headers(uint32_t dest_qp) {
  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kCnp;
  h.bth.solicited = false;
  h.bth.mig_req = false;  // the annex's example CNP has the flags byte 0x00
  h.bth.pad_count = 0;
  h.bth.tver = 0;
  h.bth.pkey = 0xffff;
  h.bth.fecn = false;
  h.bth.becn = true;
  h.bth.dest_qp = dest_qp & 0xffffff;
  h.bth.ack_req = false;
  h.bth.psn = Psn(0);
  return h;
}

uint32_t write_cnp_headers(uint32_t dest_qp, std::span<uint8_t> out) {
  return wire::write_transport_headers(cnp_headers(dest_qp), out);
}

}  // namespace uroce::cc
