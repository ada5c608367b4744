#pragma once
// Queue pairs (RC, UC, UD), address handles and shared receive queues: the verbs half of a QP
// (state machine, attribute validation, locking) around the transport half (transport/qp.h).
//
// modify() implements the QP state table of IBA 10.3.1 (table 91, as rdma-core and Linux encode it
// in qp_state_table): for each (current state, next state, QP type) a set of attributes that must
// be in the mask and a set that may be. A missing required bit, a bit outside both sets, or an
// attribute value out of range is EINVAL and leaves the QP unchanged. Masks without kQpState
// modify attributes in the current state (a transition to itself).
//
// Threading: every member is safe from any thread; post_send/post_recv/modify and the progress
// engine are serialised by the QP's lock (see device.h for the lock order).
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "transport/qp.h"
#include "transport/recv_queue.h"
#include "verbs/attrs.h"
#include "verbs/device_mutex.h"

namespace uroce::verbs {

class CompletionQueue;
class Device;
class ProtectionDomain;
class SharedReceiveQueue;

// The masks the state table requires and accepts for one transition (kQpState not included).
struct TransitionMasks {
  bool valid = false;
  uint32_t required = 0;
  uint32_t optional = 0;
};
TransitionMasks transition_masks(QpState from, QpState to, QpType type);

class QueuePair {
 public:
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  uint32_t qp_num() const { return qpn_; }
  QpType type() const { return type_; }
  QpState state() const;
  // An XRC target's is its domain's hidden PD (verbs/xrc.h).
  ProtectionDomain& pd() { return pd_; }
  const QpInitAttr& init_attr() const { return init_; }

  // ibv_modify_qp. 0 or EINVAL (see above).
  int modify(const QpAttr& attr, uint32_t mask);
  // ibv_query_qp: every attribute, whatever the mask.
  QpAttr query() const;

  // ibv_post_send for one work request: EINVAL in RESET/INIT/RTR or for a malformed request,
  // ENOMEM when the send queue is full. In ERR the request completes with WR_FLUSH_ERR.
  int post_send(const transport::SendWr& wr);
  // A list: stops at the first failure and reports its index in *bad (as ibv's bad_wr).
  int post_send(std::span<const transport::SendWr> wrs, size_t* bad = nullptr);
  // All or nothing, under one hold of the lock (ibv_wr_complete): the error post_send would give
  // the first bad request, or ENOMEM if they do not all fit, and then none is queued.
  int post_send_all(std::span<const transport::SendWr> wrs);
  // Request packets the QP had sent and not yet seen acknowledged when it last accepted a send
  // (how full its pipe was): the drop-in's progress engine leaves the transmission of a post
  // made into a full pipe to the program's next poll (api::ProgressEngine::posted).
  uint32_t packets_in_flight_at_post() const {
    return in_flight_at_post_.load(std::memory_order_relaxed);
  }
  // ibv_post_recv: EINVAL in RESET or on a QP with an SRQ, ENOMEM when full.
  int post_recv(const transport::RecvWr& wr);
  int post_recv(std::span<const transport::RecvWr> wrs, size_t* bad = nullptr);

  // ibv_attach_mcast / ibv_detach_mcast: receive (or stop receiving) the datagrams sent to an
  // IPv4 multicast group, given as ::ffff:224-239.x.y.z or ff0e::ffff:224-239.x.y.z (the same
  // group). EINVAL for a QP that is not UD or a GID that is no multicast group, EOPNOTSUPP for
  // an IPv6 group or a link that cannot join one, ENOMEM past the device's max_mcast_grp,
  // max_mcast_qp_attach or max_total_mcast_qp_attach. Attaching twice is one attachment (0);
  // detaching what is not attached is EINVAL. Destroying the QP detaches it everywhere.
  int attach_mcast(const Gid& gid);
  int detach_mcast(const Gid& gid);

  // Per-QP counters, rdma-core hw_counters names where one exists.
  std::vector<Counter> counters() const;

 private:
  friend class ProtectionDomain;
  friend class Device;
  class CountingSink;
  QueuePair(ProtectionDomain& pd, const QpInitAttr& init);
  // The progress engine's calls (Device::progress), each under the QP's locks. receive() says
  // whether the QP took the packet: RESET and INIT silently drop packets (IBA 10.3.1), and a
  // connected QP drops what did not come along its path (see on_path()).
  // kCompletedReceive: taken, and it completed a receive WQE (a CQE on the receive CQ).
  enum class Delivery : uint8_t { kTaken, kCompletedReceive, kWrongState, kWrongPath };
  Delivery receive(const wire::RxPacket& packet, Nanos now);
  // RC, UC and both XRC halves (connected: an initiator talks to one target QP and back) take
  // requests and responses only from their path: the IP source must be the remote GID of the
  // address vector set at RTR, the IP destination the GID the path uses here (the device's one
  // GID). The UDP source port may be anything: RoCEv2 senders vary it for ECMP
  // entropy (IBA annex A17.3.2). UD has no path; its Q_Key and P_Key checks stay in the transport.
  bool on_path(const wire::RxPacket& packet) const;
  size_t transmit(Nanos now, wire::PacketSink& sink, size_t budget);
  Nanos next_deadline(Nanos now) const;
  int validate(const QpAttr& attr, uint32_t mask, QpState cur, QpState next) const;
  void apply(const QpAttr& attr, uint32_t mask);
  transport::QpConfig config() const;
  // Called with mu_ held after every transport call: a CQ this QP pushed into overran, so the QP
  // moves to ERR with IBV_EVENT_QP_FATAL (IBA 11.6.3.1).
  void check_fatal_locked();
  // Removes this QP's completions from its CQs (RESET and destroy, as mlx5 does).
  void purge_completions();
  // Both locks a transport call needs: the QP's and its SRQ's (if any), in that order.
  struct Guard;

  ProtectionDomain& pd_;
  Device& dev_;
  const QpType type_;
  QpInitAttr init_;
  uint32_t qpn_ = 0;
  mutable DeviceMutex mu_;
  QpAttr attr_;  // what query() reports; guarded by mu_
  std::unique_ptr<CountingSink> send_sink_, recv_sink_;
  std::unique_ptr<transport::TransportQp> tqp_;
  bool fatal_reported_ = false;
  uint32_t recv_wqes_charged_ = 0;  // against the device's total (DeviceTotals::take_recv_wqes)
  // The device's scheduler (Device::mark_ready/set_idle): this QP's slot, and the sequence
  // number of its current timer entry (guarded by the device's sched_mu_).
  uint32_t slot_ = 0;
  uint64_t timer_seq_ = 0;
  // True from a mark_ready that found this QP in the ready set or put it there until the next
  // set_idle (guarded by mu_: both are called under it, and only set_idle takes a QP out while
  // it exists), so a mark_ready per received packet or post skips the device's lock once the QP
  // is ready. False may be stale (a timer can make it ready without this lock): that only costs
  // the lock.
  bool known_ready_ = false;
  // Completion statuses seen, for the counters the transport does not keep.
  // Packets dropped by on_path(), before the transport saw them.
  std::atomic<uint64_t> rx_path_drops_{0};
  std::atomic<uint32_t> in_flight_at_post_{0};  // packets_in_flight_at_post()
  std::atomic<uint64_t> req_cqe_error_{0}, resp_cqe_error_{0}, rnr_nak_retry_err_{0},
      req_cqe_flush_error_{0}, resp_cqe_flush_error_{0}, local_ack_timeout_err_{0};
};

// An address handle (ibv_ah): where a UD send goes.
class AddressHandle {
 public:
  ~AddressHandle();
  AddressHandle(const AddressHandle&) = delete;
  AddressHandle& operator=(const AddressHandle&) = delete;
  const AhAttr& attr() const { return attr_; }
  // The transport's form, valid as long as the handle.
  const transport::AddressVector& av() const { return av_; }

 private:
  friend class ProtectionDomain;
  AddressHandle(ProtectionDomain& pd, const AhAttr& attr, const transport::AddressVector& av);
  ProtectionDomain& pd_;
  AhAttr attr_;
  transport::AddressVector av_;
};

// Validates an ibv_ah_attr for RoCE and converts it: EINVAL unless is_global, port 1, sgid_index
// in the GID table, a non-zero dgid. The v1 entry (kGidIndexRoceV1) sets AddressVector::roce_v1,
// EINVAL on a link that cannot carry v1 (the UDP link), EHOSTUNREACH for a v1 peer off the link's
// Ethernet segment (Link::reaches_roce_v1). `src_qpn`/`dst_qpn` seed the UDP source port (ECMP
// entropy).
Result<transport::AddressVector> make_address_vector(const AhAttr& ah, const Device& dev,
                                                     uint32_t src_qpn, uint32_t dst_qpn);

// A shared receive queue (ibv_srq) around transport::RecvQueue, with its own lock (the transport
// pops from it under the QP's lock, and the device takes this lock after the QP's).
class SharedReceiveQueue {
 public:
  virtual ~SharedReceiveQueue();
  SharedReceiveQueue(const SharedReceiveQueue&) = delete;
  SharedReceiveQueue& operator=(const SharedReceiveQueue&) = delete;

  // ibv_post_srq_recv: 0, ENOMEM when full, EINVAL for too many SGEs.
  int post_recv(const transport::RecvWr& wr);
  // ibv_modify_srq: kSrqLimit arms the limit event (IBV_EVENT_SRQ_LIMIT_REACHED once the queue
  // falls below it; EINVAL unless limit <= max_wr); kSrqMaxWr is EINVAL, since queues are fixed
  // at creation (as on devices without IBV_DEVICE_SRQ_RESIZE).
  int modify(const SrqAttr& attr, uint32_t mask);
  SrqAttr query() const;
  ProtectionDomain& pd() { return pd_; }
  uint32_t users() const { return users_.load(); }

 protected:
  // XrcSharedReceiveQueue (verbs/xrc.h) builds on this; the creator has acquired the device's
  // kSrq and counted itself in the PD, which the destructor gives back.
  SharedReceiveQueue(ProtectionDomain& pd, const SrqAttr& attr);
  ProtectionDomain& pd_;
  mutable DeviceMutex mu_;
  transport::RecvQueue rq_;

 private:
  friend class ProtectionDomain;
  friend class QueuePair;
  friend class XrcDomain;
  std::atomic<uint32_t> users_{0};
  uint32_t recv_wqes_charged_ = 0;  // against the device's total
};

}  // namespace uroce::verbs
