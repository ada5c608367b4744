#pragma once
// The device (one software RoCE NIC with one port, attached to a link::Link) and the context (an
// opened device: the parent of PDs, CQs and completion channels, and the owner of an async event
// queue). Together with the objects in cq.h, mr.h, qp.h and srq.h they are the verbs layer.
//
// Ownership: every create/alloc/open returns a std::unique_ptr; destroying it is the verb's
// destroy/dealloc/dereg/close. Children must be destroyed before their parents (MR, QP, AH, SRQ
// before their PD; PD, CQ, channel before their context; contexts before the device): a parent
// destroyed with live children is a bug in the caller and aborts. users() tells how many children
// are alive so the ABI layer can answer EBUSY instead (ibv_dealloc_pd, ibv_destroy_cq, ...).
//
// Errors: every verb returns an errno value (0 for success) or Result<T, int> with an errno, as
// the corresponding ibv_* call does, so the ABI layer passes them through unchanged.
//
// Threading:
//   - progress() is called by one thread at a time (the progress engine's thread, or the
//     simulator's loop). It may run concurrently with every other call.
//   - Application threads may concurrently post (QueuePair::post_send/post_recv,
//     SharedReceiveQueue::post_recv), poll and arm CQs, modify/query QPs, and create/destroy
//     objects. Destroying an object concurrently with a call on the same object is the caller's bug
//     (as in libibverbs).
//   - Lock order: Device::quiesce (shared for progress passes, posts and modify; exclusive for
//     destroy/dereg, which thereby wait out any pass in flight) -> QueuePair -> XrcDomain's SRQ
//     directory -> SharedReceiveQueue -> CompletionQueue -> event queues; the device's
//     scheduling lock (sched_mu_) is taken last, alone or after a QP's. No lock is held while
//     calling anything outside uroce.
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/types.h"
#include "link/link.h"
#include "transport/qp.h"
#include "verbs/attrs.h"
#include "verbs/device_mutex.h"
#include "verbs/event.h"
#include "verbs/gsi.h"
#include "verbs/mr.h"
#include "verbs/qp_scheduler.h"

namespace uroce::verbs {

class CompletionQueue;
class QueuePair;
class XrcDomain;

// Builds the transport half of a QP. The default is transport::TransportQp::create; tests inject
// their own to exercise the verbs rules in isolation.
using TransportFactory = std::function<std::unique_ptr<transport::TransportQp>(
    QpType type, uint32_t qpn, const QpCapabilities& caps, transport::MemoryAccess& memory,
    transport::CompletionSink& send_cq, transport::CompletionSink& recv_cq,
    transport::RecvQueue* srq)>;

// transport::TransportQp::create.
TransportFactory default_transport_factory();

struct DeviceConfig {
  std::string name = "uroce0";
  DeviceAttr attr;  // limits; node_guid 0 means "derive from the GID"
  PortAttr port;    // active_mtu is the largest path MTU a QP may use
  // Mixed into memory keys so that two devices do not hand out the same keys; 0 = derive from
  // the GID.
  uint32_t key_salt = 0;
  // Packets one QP may send per round-robin turn in progress(); bounds unfairness between QPs.
  size_t tx_quantum = 16;
  // progress() transmits, then receives, and leaves the responses the received packets caused
  // for the next pass, instead of receive-then-transmit. For a caller that runs passes on the
  // thread that posts and polls (uroce bench): a post leaves without waiting behind a receive
  // system call, and an ACK shares a send call with the reply that follows it. Off by default:
  // it shifts the order of events the fabric experiments calibrate on, and a progress thread
  // would pay an extra pass per response.
  bool transmit_before_receive = false;
  TransportFactory transport_factory;  // empty: transport::TransportQp::create
  // Caps on what all QPs together hold for their peers (transport/device_totals.h,
  // docs/security.md): at a cap the packet is dropped and counted, and the peer retries.
  transport::DeviceTotals::Limits totals;
  // Every call on the device and on its objects comes from one thread (a simulated world, which
  // posts, polls and runs passes on its loop's thread): their locks do nothing
  // (verbs/device_mutex.h). Off for anything with a progress thread.
  bool single_threaded = false;
};

class Context;

class Device {
 public:
  // The link must outlive the device. Nothing else is needed: this is how the simulator builds a
  // device on a fabric link, and how the progress engine builds one on a UDP link.
  explicit Device(link::Link& link, DeviceConfig config = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return config_.name; }
  const DeviceConfig& config() const { return config_; }
  Gid gid() const { return gid_; }
  const DeviceAttr& attr() const { return config_.attr; }
  PortAttr port_attr() const;
  link::Link& link() { return link_; }
  // The link writes Ethernet frames and so can send RoCE v1 (the GID table's v1 entry usable).
  bool carries_roce_v1() const { return link_.carries_roce_v1(); }
  // A RoCE v1 packet to `dgid` can arrive: the peer is on the link's Ethernet segment.
  bool reaches_roce_v1(const Gid& dgid) const { return link_.reaches_roce_v1(dgid); }

  // ibv_open_device.
  Result<std::unique_ptr<Context>> open();

  // One pass of the NIC's work at time `now`: receive up to `budget` packets from the link and
  // hand each to its QP by BTH DestQP (unknown QPN, or a QP in RESET/INIT: counted drop), let the
  // QPs transmit up to `budget` packets round-robin (tx_quantum each per turn), flush the link.
  // Returns the earliest time progress() has work again: `now` if a budget ran out, the earliest
  // QP timer or pacing deadline otherwise, kNever if idle. Call it again when that time comes or
  // when the link's wait_fd() becomes readable or after any post.
  // A pass visits only the QPs that may have work (a post, a modify, a packet received, a timer
  // or pacing deadline come due), never the idle ones, so its cost does not grow with the number
  // of QPs (qp_scheduler.h; counter `progress_qp_visits`).
  // kSendOnly: timers and transmit, without reading the link, for a caller that has just posted
  // and will look for what arrived on its next poll (the drop-in's ibv_post_send): the receive
  // system call of a pass per post is the one that seldom finds anything.
  // kReceiveOnly: timers and the link's receive, without transmitting: for a caller that wants
  // the packets a pass kept (acks_kept_by_last_pass()) and will post before anything is sent, so
  // that what is queued (an ACK) leaves with what it posts, as after a full pass.
  enum class PassScope : uint8_t { kFull, kSendOnly, kReceiveOnly };
  Nanos progress(Nanos now, size_t budget = kDefaultBudget, PassScope scope = PassScope::kFull);
  // Whether the last pass returned after a received message's completion and kept the ACKs read
  // behind it in the link (transmit_before_receive; link::Link::defer_acks_behind_this_packet):
  // a caller looking for the completions those ACKs make runs another pass at once. Read by the
  // thread that ran the pass, before another can start.
  bool acks_kept_by_last_pass() const { return acks_kept_; }
  // Large enough that a pass sends a whole GSO-batched burst in one sendmmsg and pays one receive,
  // ACK flush and caller round per burst; smaller budgets cost WRITE bandwidth (measured:
  // docs/performance.md, "Tuning behind the code's constants").
  static constexpr size_t kDefaultBudget = 256;

  // Port state changes (link down/up) post PORT_ERR / PORT_ACTIVE to every open context.
  void set_port_state(PortState state);
  // The link can take packets again after refusing them for a while (a NIC's transmit FIFO has
  // drained below its mark): the next pass visits every QP, since a QP held back by the link
  // sleeps without a deadline of its own (sim::NicFifoGate). Its caller schedules that pass.
  void link_has_room() { mark_all_ready(); }

  // Device-wide counters (rdma-core hw_counters names where one exists): the sum over live and
  // destroyed QPs plus the device's own drops.
  std::vector<Counter> counters() const;

  uint32_t users() const { return contexts_open_.load(); }
  // Passes run (counter `progress_passes`): what a simulation pays per device.
  uint64_t progress_passes() const { return progress_passes_.load(std::memory_order_relaxed); }

  // The GSI QP's consumer (verbs/gsi.h): MADs to QPN 1 go to `agent`, and every progress() pass
  // lets it send and fire its timers. Null detaches. The agent must stay alive until detached;
  // attaching waits out a pass in flight.
  void attach_management_agent(ManagementAgent* agent);
  GsiCounters gsi_counters() const;

 private:
  friend class Context;
  friend class ProtectionDomain;
  friend class MemoryRegion;
  friend class MemoryWindow;
  friend class QueuePair;
  friend class CompletionQueue;
  friend class SharedReceiveQueue;
  friend class AddressHandle;
  friend class DeviceMemory;
  friend class XrcDomain;
  friend class XrcSharedReceiveQueue;

  // Resources with a DeviceAttr limit.
  enum Resource { kPd, kCq, kQp, kMr, kAh, kSrq, kMw, kXrcd, kResourceCount };
  bool acquire(Resource r);
  void release(Resource r);

  Result<uint32_t> register_qp(QueuePair* qp);  // allocates the QPN; needs quiesce_ exclusive
  void unregister_qp(QueuePair* qp);            // needs quiesce_ exclusive
  // With transmit_before_receive a pass leaves responses for the next one; a QP destroyed
  // between the two would take the ACK of the last message it received with it (the peer would
  // retry into RETRY_EXC_ERR). Sends what the QP has ready, as a NIC would have. Needs quiesce_
  // exclusive.
  void send_ready_before_destroy(QueuePair* qp);
  void post_to_all_contexts(const AsyncEvent& e);
  // Whether the packet completed a receive WQE.
  bool deliver(const wire::RxPacket& packet, Nanos now);
  bool acks_kept_ = false;  // by the last pass (acks_kept_by_last_pass())
  // The scheduler (qp_scheduler.h), under sched_mu_. mark_ready: `qp` may have work now (a post,
  // a modify, a packet); any deadline it had is forgotten. set_idle: `qp`, just visited, has no
  // work before `deadline` (kNever: none at all). Both are called with the QP's lock held, so a
  // post cannot slip between a visit's verdict and its recording.
  void mark_ready(QueuePair& qp);
  void set_idle(QueuePair& qp, Nanos deadline);
  void mark_all_ready();
  // Moves the QPs whose deadline is at or before `now` to the ready set.
  void fire_due_timers(Nanos now);
  // The earliest current deadline of a QP that is not ready (stale entries dropped), or kNever.
  Nanos earliest_timer();
  // Sends up to `limit` packets from ready QPs, round-robin in slot order from rr_next_.
  size_t transmit_ready(Nanos now, size_t limit);
  void deliver_gsi(const wire::RxPacket& packet, Nanos now);
  // A packet to QPN 0xFFFFFF: a copy to every QP attached to its destination group.
  void deliver_multicast(const wire::RxPacket& packet, Nanos now);
  // ibv_attach_mcast / ibv_detach_mcast (QueuePair::attach_mcast); take quiesce_ exclusive.
  int attach_mcast(QueuePair& qp, const Gid& group);
  int detach_mcast(QueuePair& qp, const Gid& group);
  // Needs quiesce_ exclusive: takes `qp` out of every group (its destruction).
  void detach_all_mcast(QueuePair* qp);
  // Lets the agent fire its timers and send; returns its next deadline.
  Nanos transmit_gsi(Nanos now);

  link::Link& link_;
  DeviceConfig config_;
  Gid gid_;
  KeyTable keys_;
  std::atomic<uint8_t> port_state_;

  // See "Lock order" above.
  mutable DeviceSharedMutex quiesce_;
  std::unordered_map<uint32_t, QueuePair*> qps_;
  // QPs by slot (the round-robin order; null where a destroyed QP's slot waits for reuse) and the
  // free slots; both change only under quiesce_ exclusive. At most max_qp entries each.
  std::vector<QueuePair*> slots_;
  std::vector<uint32_t> free_slots_;
  uint32_t rr_next_ = 0;  // slot the next transmit round starts at
  // Guards ready_, timers_, timer_seq_ and every QueuePair::timer_seq_. Taken after a QP's lock.
  DeviceMutex sched_mu_;
  ReadySet ready_;    // slots of QPs that may have work now; at most one bit per slot
  TimerHeap timers_;  // compacted at 2 * live QPs + 64 entries (set_idle)
  uint64_t timer_seq_ = 0;
  std::vector<uint32_t> still_ready_;     // progress()'s scratch, at most one entry per slot
  const uint32_t qpn_first_, qpn_limit_;  // QPNs handed out: [first, limit)
  uint32_t next_qpn_ = 0;
  // XRC SRQ numbers, device-wide like QPNs (24 bits, as the XRCETH carries).
  std::atomic<uint32_t> next_srqn_{1};

  std::mutex contexts_mu_;
  std::vector<Context*> contexts_;
  std::atomic<uint32_t> contexts_open_{0};

  std::array<std::atomic<uint32_t>, kResourceCount> in_use_{};
  std::atomic<uint64_t> dm_bytes_{0};  // device memory allocated, <= DeviceAttr::max_dm_size
  // Shared by every QP (QpConfig::totals); outlives them, as the device does.
  transport::DeviceTotals totals_;

  // Counters of the device itself.
  std::atomic<uint64_t> rx_drop_unknown_qpn_{0};
  std::atomic<uint64_t> rx_drop_qp_state_{0};
  std::atomic<uint64_t> progress_passes_{0};
  std::atomic<uint64_t> progress_qp_visits_{0};  // QP transmit turns, summed over passes
  // ibv_req_notify_cq calls on the device's CQs: how often programs went to sleep on a
  // completion channel rather than finding their completions by polling.
  std::atomic<uint64_t> cq_notify_requests_{0};
  std::atomic<Nanos> last_pass_at_{0};  // the `now` of the latest progress() pass
  ManagementAgent* agent_ = nullptr;    // guarded by quiesce_
  // Multicast groups with at least one QP attached, each joined on the link. Guarded by
  // quiesce_; at most attr.max_mcast_grp groups, max_mcast_qp_attach QPs each and
  // max_total_mcast_qp_attach in all (mcast_attachments_).
  struct McastGroup {
    Gid gid{};
    std::vector<QueuePair*> qps;
  };
  std::vector<McastGroup> mcast_groups_;
  uint32_t mcast_attachments_ = 0;
  std::atomic<uint64_t> rx_mcast_packets_{0}, rx_mcast_deliveries_{0}, rx_mcast_drops_{0};
  uint32_t gsi_psn_ = 0;  // UD PSNs are not checked; counted for a readable capture
  std::atomic<uint64_t> gsi_rx_{0}, gsi_rx_drops_{0}, gsi_tx_{0};
  // Counters of QPs already destroyed, so device totals never go backwards.
  std::vector<Counter> retired_;
};

class Context {
 public:
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device& device() { return dev_; }
  AsyncEventQueue& async_events() { return events_; }

  Result<std::unique_ptr<ProtectionDomain>> alloc_pd();
  Result<std::unique_ptr<CompletionChannel>> create_comp_channel();
  // ibv_create_cq: at least `cqe` entries (rounded up to a power of two; cqe() says how many).
  // EINVAL for 0 or more than max_cqe.
  Result<std::unique_ptr<CompletionQueue>> create_cq(uint32_t cqe,
                                                     CompletionChannel* channel = nullptr);

  // ibv_alloc_dm: `length` bytes aligned to 2^log_align (at most 2^kMaxDmLogAlign), zeroed.
  // EINVAL for 0, more than max_dm_size or a larger alignment; ENOMEM once the device's DM is
  // spent.
  Result<std::unique_ptr<DeviceMemory>> alloc_dm(size_t length, uint32_t log_align);
  // ibv_open_xrcd: a new XRC domain (verbs/xrc.h). ENOMEM past DeviceAttr::max_xrcd.
  Result<std::unique_ptr<XrcDomain>> open_xrcd();
  static constexpr uint32_t kMaxDmLogAlign = 12;

  const DeviceAttr& query_device() const { return dev_.attr(); }
  Result<PortAttr> query_port(uint8_t port_num) const;
  // The GID table (attrs.h): index 0 RoCEv2, 1 RoCE v1, the same value. EINVAL past its end.
  Result<Gid> query_gid(uint8_t port_num, int index) const;
  Result<GidType> query_gid_type(uint8_t port_num, int index) const;
  Result<uint16_t> query_pkey(uint8_t port_num, int index) const;

  uint32_t users() const { return users_.load(); }

 private:
  friend class Device;
  friend class ProtectionDomain;
  friend class CompletionQueue;
  friend class DeviceMemory;
  friend class XrcDomain;
  explicit Context(Device& dev);
  Device& dev_;
  AsyncEventQueue events_;
  std::atomic<uint32_t> users_{0};
};

}  // namespace uroce::verbs
