#pragma once
// Responder (IBA 9.7.5.1, 9.7.7 for RC; 9.8.4 for UC; 9.9 and 10.2.5 for UD): request packets ->
// memory, receive completions, and the responses (ACK, NAK, READ responses, atomic ACKs) it
// queues for transmit().
#include <cstdint>
#include <optional>
#include <vector>

#include "transport/qp_context.h"
#include "transport/reorder_buffer.h"
#include "transport/responder_resources.h"
#include "transport/response_ring.h"

namespace uroce::transport {

class Responder {
 public:
  explicit Responder(QpContext& ctx);
  ~Responder();
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;

  // Back to the state of a fresh QP (RESET); the next configure() sets the expected PSN.
  void reset();
  // Applies the parts of a new configuration that are safe to take now.
  void configure();
  void receive(const RxPacket& pkt, Nanos now);
  // `now` if a response may go now, the pacer's time if it is paced, kNever if none is queued.
  Nanos ready_at(Nanos now) const;
  bool build(Nanos now, TxPacket& out);
  // Completes the receive WQE a message was being placed into, if any, with WR_FLUSH_ERR, on the
  // CQ it belongs to (the QP's, or an XRC SRQ's). The QP's move to ERR flushes it first.
  void flush_current_recv();

  Psn expected_psn() const { return epsn_; }
  uint32_t msn() const { return msn_; }

 private:
  // What a request handler decided; finish() turns it into PSN/MSN updates and a response.
  enum class Verdict : uint8_t {
    kAccepted,     // executed; epsn moves past the packet
    kResponded,    // READ/atomic: executed, its response queued (it is the acknowledgement)
    kRnr,          // no receive WQE: RNR NAK (IBA 9.7.5.2.8)
    kInvalid,      // NAK Invalid Request (IBA 9.7.5.2.4)
    kAccess,       // NAK Remote Access Error (IBA 9.7.5.2.5)
    kOperational,  // NAK Remote Operational Error (IBA 9.7.5.2.6)
    kDropped,      // the device's total of queued responses is reached: silently dropped, not
                   // executed; the requester's retry recovers it (device_totals.h)
  };
  enum class InMessage : uint8_t { kNone, kSend, kWrite };

  using Resource = ResponderResources::Resource;
  using Response = ResponseRing::Response;

  void receive_rc(const RxPacket& pkt, Nanos now);
  // Runs the IBA 9.7.5.1 checks and executes an in-order packet; true if epsn moved past it.
  bool apply(const wire::TransportHeaders& h, std::span<const uint8_t> payload);
  // Selective repeat: keeps a packet `d` PSNs ahead of epsn, or counts why not.
  void hold(const wire::TransportHeaders& h, std::span<const uint8_t> payload, int32_t d);
  // Applies held packets while the next expected one is there; names the next hole if any.
  void drain();
  // Frees the slots of PSNs in [from, epsn) that never became packets of their own (a READ's
  // response PSNs).
  void release_held(Psn from);
  // PSN Sequence Error NAK naming epsn, the first missing PSN.
  void queue_seq_nak();
  void receive_uc(const RxPacket& pkt);
  void receive_ud(const RxPacket& pkt);
  void on_duplicate(const wire::TransportHeaders& h);
  // Queues `r`'s response; the caller has charged it (charge_response()).
  void queue_resource_response(Resource& r, Psn psn);
  // A queued READ/atomic response counts against the device's total from when it is queued until
  // it is sent, abandoned or overtaken: charge_response() is false at the cap.
  bool charge_response();
  void uncharge_responses(uint32_t n);
  // take() from the resources, uncharging a queued replay it takes over.
  Resource* take_resource();
  bool stale(const Response& r) const;
  Verdict check_op_sequence(const wire::OpcodeInfo& info) const;
  Verdict check_length(const wire::OpcodeInfo& info, size_t payload) const;
  Verdict resolve_xrc_srq(const wire::TransportHeaders& h, const wire::OpcodeInfo& info);
  Verdict execute(const wire::TransportHeaders& h, const wire::OpcodeInfo& info,
                  std::span<const uint8_t> payload);
  Verdict on_send(const wire::TransportHeaders& h, const wire::OpcodeInfo& info,
                  std::span<const uint8_t> payload);
  Verdict on_write(const wire::TransportHeaders& h, const wire::OpcodeInfo& info,
                   std::span<const uint8_t> payload);
  Verdict on_read(const wire::TransportHeaders& h);
  Verdict on_atomic(const wire::TransportHeaders& h, const wire::OpcodeInfo& info);
  void finish(Verdict v, const wire::TransportHeaders& h, const wire::OpcodeInfo& info);
  // Completes the current receive WQE (success or error) and forgets it.
  void complete_recv(WcStatus status, WcOpcode opcode, uint32_t byte_len, uint32_t flags,
                     uint32_t imm_or_rkey, uint32_t src_qp = 0, bool roce_v1 = false);
  void queue_response(const Response& r);
  void queue_ack(Psn psn);
  void queue_nak(Psn psn, wire::Aeth aeth);
  bool remote_ok(uint32_t qp_access) const { return (ctx_.config.qp_access_flags & qp_access); }
  // XRC target: the SRQ an XRCETH names in this QP's XRC domain, or null.
  XrcSrq* find_xrc_srq(uint32_t srqn) const {
    return ctx_.xrc_srqs ? ctx_.xrc_srqs->find(srqn) : nullptr;
  }
  // Memory and receive WQEs of the packet being applied: an XRC target's come from the SRQ its
  // XRCETH names (cur_srq_), everything else's from the QP.
  MemoryAccess& mem() const { return cur_srq_ ? cur_srq_->memory() : ctx_.memory; }
  std::optional<RecvWqe> pop_recv() { return cur_srq_ ? cur_srq_->pop() : ctx_.rq().pop(); }

  QpContext& ctx_;
  bool started_ = false;  // a request was received since reset: keep epsn on configure()
  Psn epsn_;
  uint32_t msn_ = 0;
  bool nak_outstanding_ = false;  // a sequence or RNR NAK was sent; drop until epsn arrives
  uint32_t unacked_ = 0;
  InMessage in_msg_ = InMessage::kNone;
  std::optional<RecvWqe> recv_;  // WQE the current SEND is placed into
  uint64_t recv_offset_ = 0;
  uint64_t write_va_ = 0;
  uint32_t write_rkey_ = 0;
  uint64_t write_left_ = 0;  // bytes the current WRITE may still place
  uint64_t write_total_ = 0;
  bool uc_dropping_ = false;   // UC: the rest of a broken message is discarded (IBA 9.8.4)
  XrcSrq* cur_srq_ = nullptr;  // XRC target: the SRQ of the packet being applied
  uint32_t msg_srqn_ = 0;      // XRC target: the SRQ the message in progress belongs to

  uint32_t responses_charged_ = 0;  // queued READ/atomic responses charged to the device
  ResponderResources resources_;
  ReorderBuffer reorder_;  // selective repeat only
  ResponseRing responses_;
};

}  // namespace uroce::transport
