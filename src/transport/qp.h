#pragma once
// The transport half of a queue pair: requester, responder and completer (IBA chapter 9) for one
// QP, sans-I/O. It takes work requests, packets and the current time; it gives packets (through a
// PacketSink), completions (through CompletionSinks) and its next timer deadline. It never reads a
// clock, opens a socket or starts a thread, so the same object runs on a UDP link and in the
// virtual-time simulator.
//
// Threading: not thread-safe. The verbs layer serialises calls (one lock per QP or one progress
// thread per device).
#include <cstdint>
#include <memory>
#include <span>

#include "cc/pacer.h"
#include "common/psn.h"
#include "transport/congestion.h"
#include "transport/device_totals.h"
#include "transport/recv_queue.h"
#include "transport/types.h"

namespace uroce::transport {

// == ibv_qp_type. XRC (IBA annex A14) is RC split in two: an initiator (kXrcSend) sends requests,
// each naming the XRC SRQ it is for; a target (kXrcRecv) answers them, taking receive WQEs from
// that SRQ and memory keys from its PD.
enum class QpType : uint8_t { kRc = 2, kUc = 3, kUd = 4, kXrcSend = 9, kXrcRecv = 10 };
enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kSqd, kSqe, kErr };  // == ibv_qp_state

// Fixed at creation; every queue is bounded by these.
struct QpCapabilities {
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t max_send_sge = 4;
  uint32_t max_recv_sge = 4;
  uint32_t max_inline_data = 256;
};

// How an RC requester and responder recover lost packets. Go-back-N is IBA 9.7.5.1 and talks to
// any RoCE peer; selective repeat (in the spirit of IRN, SIGCOMM 2018) needs it on both ends: the
// responder keeps out-of-order packets and names the PSN it misses, the requester resends only
// that.
enum class LossRecovery : uint8_t { kGoBackN, kSelectiveRepeat };

// How an RC RDMA WRITE (without immediate) longer than the path MTU goes on the wire: kPerPacket,
// one self-describing WRITE ONLY per PMTU (the default); kPerMessage, FIRST/MIDDLE/LAST as a
// hardware NIC sends it. Why the default, and what either end sees: src/transport/README.md,
// "WRITE segments" under "Choices integrators should know" (the one place that explains it).
enum class WriteSegments : uint8_t { kPerPacket, kPerMessage };

// retry_cnt and rnr_retry are 3-bit fields (IBA 9.7.6.1.3, 9.7.5.2.8).
inline constexpr uint8_t kMaxRetryCnt = 7;
// An rnr_retry of 7 never runs out: the requester retries after RNR NAKs forever (IBA 9.7.5.2.8).
inline constexpr uint8_t kRnrRetryForever = 7;

// Attributes the transport acts on (a subset of ibv_qp_attr; the verbs layer validates masks and
// state transitions before it calls configure()).
struct QpConfig {
  uint32_t dest_qpn = 0;
  Psn sq_psn;                      // first PSN the requester sends
  Psn rq_psn;                      // first PSN the responder expects
  uint32_t path_mtu_bytes = 1024;  // 256 .. 4096
  uint8_t timeout = 14;  // local ACK timeout 4.096 us * 2^timeout; 0 = infinite (IBA 9.7.6.1.3)
  uint8_t retry_cnt = kMaxRetryCnt;
  uint8_t rnr_retry = kRnrRetryForever;  // 0..6, or kRnrRetryForever
  uint8_t min_rnr_timer = 12;            // RNR NAK timer code we send (IBA table 45)
  uint8_t max_rd_atomic = 1;             // outstanding READ/atomic we initiate
  uint8_t max_dest_rd_atomic = 1;        // READ/atomic we answer (responder resources)
  uint32_t qp_access_flags = 0;          // kAccessRemoteWrite / Read / Atomic allowed on this QP
  uint32_t qkey = 0;                     // UD
  uint16_t pkey = 0xffff;
  AddressVector path;  // RC/UC primary path
  bool sq_sig_all = false;
  // Cap on the requester's unacknowledged PSNs (RC); always kept below 2^23 (IBA 9.7.1). With
  // selective repeat it is the BDP cap (set it to about one bandwidth-delay product in packets)
  // and is further limited to the peer's reorder buffer (transport/README.md).
  uint32_t max_psn_window = 4096;
  LossRecovery loss_recovery = LossRecovery::kGoBackN;
  WriteSegments write_segments = WriteSegments::kPerPacket;
  // DCQCN notification and reaction point for RC/UC (transport/congestion.h); off by default.
  CongestionConfig congestion;
  // The device's totals this QP's reorder buffer and queued READ/atomic responses count against
  // (transport/device_totals.h); null: none. Set before the first packet and never changed.
  DeviceTotals* totals = nullptr;
};

struct QpCounters {
  uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
  uint64_t retransmitted_packets = 0, local_ack_timeouts = 0;
  uint64_t rnr_naks_sent = 0, rnr_naks_received = 0;
  uint64_t seq_naks_sent = 0, seq_naks_received = 0;
  uint64_t naks_sent = 0, naks_received = 0;  // all kinds
  uint64_t duplicate_requests = 0, out_of_sequence = 0;
  uint64_t rx_dropped = 0;  // packets the QP discarded (wrong state, bad header, ...)
  uint64_t ce_marked = 0, cnps_sent = 0, cnps_received = 0;
  uint64_t responses_dropped = 0;  // responder responses lost to a full queue or a failed key
  // DCQCN reaction point (transport/congestion.h): rate cuts the CNPs caused, and two gauges in
  // Mb/s, the current rate and the lowest since congestion control was (re)configured. All 0
  // while DCQCN is off.
  uint64_t rate_cuts = 0;
  uint64_t dcqcn_rate_mbps = 0, dcqcn_min_rate_mbps = 0;
  // Selective repeat (LossRecovery::kSelectiveRepeat). Responder: request packets kept in the
  // reorder buffer, dropped because it was full (or the PSN lay beyond it), and copies of packets
  // already buffered. Requester: payload bytes of every retransmitted packet (both modes).
  uint64_t ooo_buffered = 0, ooo_dropped = 0, ooo_duplicates = 0;
  uint64_t retransmitted_bytes = 0;
  // Selective repeat: times the requester went back N because holes came denser than it can
  // repair one per round trip (transport/README.md).
  uint64_t sr_go_backs = 0;
  // XRC target: requests whose XRCETH named no XRC SRQ of the QP's XRC domain (NAKed).
  uint64_t xrc_bad_srqn = 0;
};

// An XRC SRQ as an XRC target QP reaches it through an XRCETH: its receive WQEs, the CQ its
// receive completions go to, and the memory of its PD (annex A14: the SRQ, not the QP, has the
// PD). Implemented by the verbs layer, which serialises pop() with the SRQ's posts.
class XrcSrq {
 public:
  virtual ~XrcSrq() = default;
  virtual std::optional<RecvWqe> pop() = 0;
  virtual CompletionSink& cq() = 0;
  virtual MemoryAccess& memory() = 0;
};
// The XRC SRQs of the XRC domain a target QP belongs to. find() returns null for a number that
// names no SRQ of that domain (no SRQ at all, or one of another domain).
class XrcSrqDirectory {
 public:
  virtual ~XrcSrqDirectory() = default;
  virtual XrcSrq* find(uint32_t srqn) = 0;
};

class TransportQp {
 public:
  // `srq` is null for a QP with its own receive queue. The sinks and memory outlive the QP.
  static std::unique_ptr<TransportQp> create(QpType type, uint32_t qpn, const QpCapabilities& caps,
                                             MemoryAccess& memory, CompletionSink& send_cq,
                                             CompletionSink& recv_cq, RecvQueue* srq);
  virtual ~TransportQp() = default;

  // 0, or ENOMEM when the queue is full, EINVAL for a malformed request (too many SGEs, inline
  // too long, opcode not valid for the QP type), matching ibv_post_send/ibv_post_recv.
  virtual int post_send(const SendWr& wr) = 0;
  // All or nothing (the ibv_wr_* API's ibv_wr_complete): the first error post_send would give
  // for any of `wrs`, ENOMEM if they do not all fit, and then nothing is queued.
  virtual int post_send_all(std::span<const SendWr> wrs) = 0;
  virtual int post_recv(const RecvWr& wr) = 0;

  virtual void configure(const QpConfig& config) = 0;
  // Moving to kErr flushes every outstanding work request with kWrFlushErr, in order.
  virtual void set_state(QpState state) = 0;
  virtual QpState state() const = 0;

  virtual void receive(const RxPacket& packet, Nanos now) = 0;
  // Sends what the windows, the pacer and `budget` allow; fires expired timers. Returns the number
  // of packets handed to `sink`.
  virtual size_t transmit(Nanos now, PacketSink& sink, size_t budget) = 0;
  // The earliest time transmit() has work that is not ready now (timer or pacing); kNever if none.
  // A QP with packets ready now returns `now`.
  virtual Nanos next_deadline(Nanos now) const = 0;

  virtual uint32_t qpn() const = 0;
  // Request packets (PSNs) sent and not yet acknowledged: how full the QP's pipe is.
  virtual uint32_t packets_in_flight() const = 0;
  virtual const QpCounters& counters() const = 0;
  virtual cc::Pacer& pacer() = 0;
  // XRC target QPs: where XRCETH SRQ numbers are looked up; set once, before the QP receives.
  // Without one every XRC request is answered with NAK Remote Access Error.
  virtual void set_xrc_srqs(XrcSrqDirectory* srqs) { (void)srqs; }
};

}  // namespace uroce::transport
