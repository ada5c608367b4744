#pragma once
// The NIC's transmit FIFO in front of a QP on the switched fabric: the QP may hand packets to its
// host's NIC queue only while that queue holds less than `fifo_bytes`, so a PFC pause on the host
// link backs up into the QPs (as on a real NIC) instead of overflowing the fabric's host queue.
// The one transport decorator the simulator keeps: everything else a world sets on its QPs
// (congestion control, loss recovery, PSN window) is a verbs::QpInitAttr field.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "fabric/fabric_link.h"
#include "transport/qp.h"

namespace uroce::sim {

class NicFifoGate final : public transport::TransportQp {
 public:
  NicFifoGate(std::unique_ptr<TransportQp> inner, fabric::FabricLink& link, uint64_t fifo_bytes,
              double line_rate_bps)
      : inner_(std::move(inner)),
        link_(link),
        fifo_bytes_(fifo_bytes),
        line_rate_bps_(line_rate_bps) {}

  int post_send(const transport::SendWr& wr) override { return inner_->post_send(wr); }
  int post_send_all(std::span<const transport::SendWr> wrs) override {
    return inner_->post_send_all(wrs);
  }
  int post_recv(const transport::RecvWr& wr) override { return inner_->post_recv(wr); }
  void configure(const transport::QpConfig& config) override { inner_->configure(config); }
  void set_state(transport::QpState s) override { inner_->set_state(s); }
  transport::QpState state() const override { return inner_->state(); }
  void receive(const wire::RxPacket& p, Nanos now) override { inner_->receive(p, now); }
  size_t transmit(Nanos now, wire::PacketSink& sink, size_t budget) override {
    if (full()) return 0;
    return inner_->transmit(now, sink, budget);
  }
  Nanos next_deadline(Nanos now) const override {
    const Nanos t = inner_->next_deadline(now);
    if (t > now || !full()) return t;
    // Ready but held back: sleep until the link says the queue has drained below the mark (its
    // driver then has the device visit every QP). That is the instant a packet leaves, however
    // long a pause holds the queue, where a guess at the drain time wakes the device many times
    // per packet (the queue shrinks a packet at a time, and not at all while paused).
    if (link_.request_tx_room(fifo_bytes_)) return kNever;
    // A link nobody listens to: look again when the excess has drained at line rate.
    const uint64_t excess = link_.tx_queue_bytes() - fifo_bytes_ + 1;
    return now + std::max<Nanos>(1, static_cast<Nanos>(excess * 8e9 / line_rate_bps_));
  }
  uint32_t qpn() const override { return inner_->qpn(); }
  uint32_t packets_in_flight() const override { return inner_->packets_in_flight(); }
  const transport::QpCounters& counters() const override { return inner_->counters(); }
  cc::Pacer& pacer() override { return inner_->pacer(); }

 private:
  bool full() const { return link_.tx_queue_bytes() >= fifo_bytes_; }
  std::unique_ptr<TransportQp> inner_;
  fabric::FabricLink& link_;
  uint64_t fifo_bytes_;
  double line_rate_bps_;
};

}  // namespace uroce::sim
