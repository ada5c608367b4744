#include "verbs/device.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/check.h"
#include "link/share/steer_decision.h"
#include "verbs/cq.h"
#include "verbs/qp.h"
#include "wire/mad.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::verbs {
namespace {

// QPN 0 and 1 are the special QPs of IBA 10.2.4 (SMI, GSI); uroce has neither and starts above.
constexpr uint32_t kFirstQpn = 0x11;
constexpr uint32_t kQpnLimit = 1u << 24;
constexpr uint32_t kMulticastQpn = 0xffffff;

// The QPNs a device may hand out: all but the special ones, or, on a link that shares its address
// with other processes, those whose top bits are the link's slot (link/share/steer_decision.h).
std::pair<uint32_t, uint32_t> qpn_range(const link::Link& link) {
  const std::optional<uint32_t> slot = link.shared_slot();
  if (!slot) return {kFirstQpn, kQpnLimit};
  const uint32_t first = *slot << UROCE_SHARE_QPN_SHIFT;
  const uint32_t limit = std::min(first + (1u << UROCE_SHARE_QPN_SHIFT), kMulticastQpn);
  return {std::max(first, kFirstQpn), limit};
}

uint32_t hash_gid(const Gid& g) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (uint8_t b : g) h = (h ^ b) * 16777619u;
  return h;
}

// A modified EUI-64 style GUID from the low bytes of the GID, so two devices differ.
uint64_t guid_from_gid(const Gid& g) {
  uint64_t v = 0;
  for (int i = 8; i < 16; ++i) v = v << 8 | g[i];
  return v ^ 0x0200000000000000ull;
}

}  // namespace

TransportFactory default_transport_factory() {
  return &transport::TransportQp::create;
}

Device::Device(link::Link& link, DeviceConfig config)
    : link_(link),
      config_(std::move(config)),
      gid_(link.local_gid()),
      keys_(config_.attr.max_mr + config_.attr.max_mw,
            config_.key_salt ? config_.key_salt : hash_gid(gid_)),
      port_state_(static_cast<uint8_t>(config_.port.state)),
      qpn_first_(qpn_range(link).first),
      qpn_limit_(qpn_range(link).second),
      next_qpn_(qpn_first_),
      totals_(config_.totals) {
  if (config_.attr.node_guid == 0) config_.attr.node_guid = guid_from_gid(gid_);
  if (config_.attr.sys_image_guid == 0) config_.attr.sys_image_guid = config_.attr.node_guid;
  config_.attr.max_qp = std::min(config_.attr.max_qp, qpn_limit_ - qpn_first_);
  if (config_.tx_quantum == 0) config_.tx_quantum = 1;
  if (!config_.transport_factory) config_.transport_factory = default_transport_factory();
  quiesce_.set_single_threaded(config_.single_threaded);
  sched_mu_.set_single_threaded(config_.single_threaded);
  keys_.set_single_threaded(config_.single_threaded);
}

Device::~Device() {
  // Contexts hold a reference to the device: closing the device first is the caller's bug.
  UROCE_CHECK(contexts_open_.load() == 0);
}

PortAttr Device::port_attr() const {
  PortAttr p = config_.port;
  p.state = static_cast<PortState>(port_state_.load());
  p.phys_state = p.state == PortState::kActive ? 5 : 3;  // LinkUp : Disabled
  return p;
}

Result<std::unique_ptr<Context>> Device::open() {
  std::unique_ptr<Context> ctx(new Context(*this));
  {
    std::lock_guard lock(contexts_mu_);
    contexts_.push_back(ctx.get());
  }
  contexts_open_.fetch_add(1);
  return ctx;
}

bool Device::acquire(Resource r) {
  static_assert(kResourceCount == 8);
  const uint32_t limits[kResourceCount] = {
      config_.attr.max_pd, config_.attr.max_cq,  config_.attr.max_qp, config_.attr.max_mr,
      config_.attr.max_ah, config_.attr.max_srq, config_.attr.max_mw, config_.attr.max_xrcd};
  uint32_t cur = in_use_[r].load();
  do {
    if (cur >= limits[r]) return false;
  } while (!in_use_[r].compare_exchange_weak(cur, cur + 1));
  return true;
}

void Device::release(Resource r) {
  UROCE_CHECK(in_use_[r].fetch_sub(1) > 0);
}

Result<uint32_t> Device::register_qp(QueuePair* qp) {
  // A bounded search: the table holds at most max_qp entries, so one of max_qp + 1 consecutive
  // candidates is free.
  for (uint32_t tries = 0; tries <= config_.attr.max_qp; ++tries) {
    uint32_t qpn = next_qpn_;
    next_qpn_ = next_qpn_ + 1 >= qpn_limit_ ? qpn_first_ : next_qpn_ + 1;
    if (qps_.count(qpn)) continue;
    qps_.emplace(qpn, qp);
    if (free_slots_.empty()) {
      qp->slot_ = static_cast<uint32_t>(slots_.size());
      slots_.push_back(qp);
    } else {
      qp->slot_ = free_slots_.back();
      free_slots_.pop_back();
      slots_[qp->slot_] = qp;
    }
    std::lock_guard sched(sched_mu_);
    ready_.reserve(static_cast<uint32_t>(slots_.size()));
    qp->timer_seq_ = ++timer_seq_;
    return qpn;
  }
  return Err(ENOMEM);
}

void Device::send_ready_before_destroy(QueuePair* qp) {
  if (!config_.transmit_before_receive) return;
  qp->transmit(last_pass_at_.load(std::memory_order_relaxed), link_, kDefaultBudget);
  link_.flush();
}

void Device::unregister_qp(QueuePair* qp) {
  qps_.erase(qp->qp_num());
  if (qp->slot_ < slots_.size() && slots_[qp->slot_] == qp) {
    std::lock_guard sched(sched_mu_);
    ready_.erase(qp->slot_);
    qp->timer_seq_ = ++timer_seq_;  // its timer entry, if any, is stale from now on
    slots_[qp->slot_] = nullptr;
    free_slots_.push_back(qp->slot_);
  }
  std::vector<Counter> c = qp->counters();
  if (retired_.empty()) {
    retired_ = std::move(c);
  } else {
    UROCE_CHECK(retired_.size() == c.size());
    for (size_t i = 0; i < c.size(); ++i) retired_[i].value += c[i].value;
  }
  // A gauge describes a live QP: a destroyed one leaves nothing behind.
  for (Counter& r : retired_)
    if (r.kind != Counter::Kind::kCount) r.value = 0;
}

void Device::post_to_all_contexts(const AsyncEvent& e) {
  std::lock_guard lock(contexts_mu_);
  for (Context* c : contexts_) c->events_.post(e);
}

void Device::set_port_state(PortState state) {
  uint8_t old = port_state_.exchange(static_cast<uint8_t>(state));
  if (old == static_cast<uint8_t>(state)) return;
  AsyncEvent e;
  e.port = 1;
  if (state == PortState::kActive) {
    // Passes sent nothing while the port was down; every QP gets a look at what waited.
    mark_all_ready();
    e.type = EventType::kPortActive;
  } else if (old == static_cast<uint8_t>(PortState::kActive)) {
    e.type = EventType::kPortErr;
  } else {
    return;
  }
  post_to_all_contexts(e);
}

void Device::attach_management_agent(ManagementAgent* agent) {
  std::unique_lock quiesce(quiesce_);
  agent_ = agent;
}

GsiCounters Device::gsi_counters() const {
  return {gsi_rx_.load(), gsi_rx_drops_.load(), gsi_tx_.load()};
}

void Device::deliver_gsi(const wire::RxPacket& packet, Nanos now) {
  // IBA 10.2.4/13.5.1: the GSI takes UD SENDs from any QP, with the GSI Q_Key. Every CM MAD is a
  // SEND ONLY without immediate data.
  const wire::TransportHeaders& h = *packet.hdr;
  if (agent_ == nullptr || h.bth.opcode != wire::op::kUdSendOnly || h.deth.qkey != wire::kGsiQkey) {
    gsi_rx_drops_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  gsi_rx_.fetch_add(1, std::memory_order_relaxed);
  agent_->receive(packet.sgid, packet.payload, now);
}

Nanos Device::transmit_gsi(Nanos now) {
  if (agent_ == nullptr) return kNever;
  return agent_->transmit(now, [this](const Gid& peer, std::span<const uint8_t> mad) {
    wire::TransportHeaders h;
    h.bth.opcode = wire::op::kUdSendOnly;
    h.bth.dest_qp = wire::kGsiQpn;
    h.bth.psn = Psn(gsi_psn_);
    gsi_psn_ = (gsi_psn_ + 1) & 0xffffff;
    h.bth.pad_count = wire::pad_for(static_cast<uint32_t>(mad.size()));
    h.deth.qkey = wire::kGsiQkey;
    h.deth.src_qp = wire::kGsiQpn;
    wire::AddressVector av;
    av.dgid = peer;
    wire::TxPacket p;
    p.header_len = wire::write_transport_headers(h, p.header);
    p.payload[0] = mad;
    p.payload_parts = 1;
    p.payload_len = static_cast<uint32_t>(mad.size());
    p.pad = h.bth.pad_count;
    p.dest = &av;
    link_.transmit(p);
    // Out now, not at the pass's end: the agent reports events after sending, and a program
    // that exits on one (a DISCONNECTED after the DREP it caused) must not take the MAD along.
    link_.flush();
    gsi_tx_.fetch_add(1, std::memory_order_relaxed);
  });
}

bool Device::deliver(const wire::RxPacket& packet, Nanos now) {
  if (packet.hdr == nullptr) {
    rx_drop_unknown_qpn_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (packet.hdr->bth.dest_qp == wire::kGsiQpn) {
    deliver_gsi(packet, now);
    return false;
  }
  if (packet.hdr->bth.dest_qp == kMulticastQpn) {
    deliver_multicast(packet, now);
    return false;
  }
  auto it = qps_.find(packet.hdr->bth.dest_qp);
  if (it == qps_.end()) {
    rx_drop_unknown_qpn_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const QueuePair::Delivery d = it->second->receive(packet, now);
  if (d == QueuePair::Delivery::kWrongState)
    rx_drop_qp_state_.fetch_add(1, std::memory_order_relaxed);
  return d == QueuePair::Delivery::kCompletedReceive;
}

// IBA 10.5.2.3 / 9.6.1.1: a datagram to QPN 0xFFFFFF goes to every QP of the port attached to
// its destination group, each checking its own Q_Key (the transport's UD receive). Only the
// attached QPs see it, so a sender gets its own datagrams back only if its QP is attached too
// (the link hears its own group sends through IP_MULTICAST_LOOP), as a hardware NIC without
// multicast loopback blocking does.
void Device::deliver_multicast(const wire::RxPacket& packet, Nanos now) {
  rx_mcast_packets_.fetch_add(1, std::memory_order_relaxed);
  const Gid group = ipv4_multicast_group(packet.dgid);
  for (const McastGroup& g : mcast_groups_) {
    if (g.gid != group) continue;
    for (QueuePair* qp : g.qps) {
      if (qp->receive(packet, now) == QueuePair::Delivery::kWrongState)
        rx_drop_qp_state_.fetch_add(1, std::memory_order_relaxed);
      else
        rx_mcast_deliveries_.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  rx_mcast_drops_.fetch_add(1, std::memory_order_relaxed);  // no QP attached (any more)
}

int Device::attach_mcast(QueuePair& qp, const Gid& gid) {
  if (qp.type() != QpType::kUd) return EINVAL;
  const Gid group = ipv4_multicast_group(gid);
  if (group == Gid{}) return gid[0] == 0xff ? EOPNOTSUPP : EINVAL;  // IPv6 groups: not carried
  std::unique_lock barrier(quiesce_);
  auto it = std::find_if(mcast_groups_.begin(), mcast_groups_.end(),
                         [&](const McastGroup& g) { return g.gid == group; });
  if (it != mcast_groups_.end() && std::find(it->qps.begin(), it->qps.end(), &qp) != it->qps.end())
    return 0;
  if (mcast_attachments_ >= config_.attr.max_total_mcast_qp_attach) return ENOMEM;
  if (it == mcast_groups_.end()) {
    if (mcast_groups_.size() >= config_.attr.max_mcast_grp) return ENOMEM;
    if (int err = link_.join_group(group); err != 0) return err;
    mcast_groups_.push_back({group, {}});
    it = mcast_groups_.end() - 1;
  }
  if (it->qps.size() >= config_.attr.max_mcast_qp_attach) return ENOMEM;
  it->qps.push_back(&qp);
  ++mcast_attachments_;
  return 0;
}

int Device::detach_mcast(QueuePair& qp, const Gid& gid) {
  const Gid group = ipv4_multicast_group(gid);
  if (group == Gid{}) return EINVAL;
  std::unique_lock barrier(quiesce_);
  for (auto it = mcast_groups_.begin(); it != mcast_groups_.end(); ++it) {
    if (it->gid != group) continue;
    if (std::erase(it->qps, &qp) == 0) return EINVAL;
    --mcast_attachments_;
    if (it->qps.empty()) {
      link_.leave_group(group);
      mcast_groups_.erase(it);
    }
    return 0;
  }
  return EINVAL;
}

void Device::detach_all_mcast(QueuePair* qp) {
  for (auto it = mcast_groups_.begin(); it != mcast_groups_.end();) {
    mcast_attachments_ -= static_cast<uint32_t>(std::erase(it->qps, qp));
    if (it->qps.empty()) {
      link_.leave_group(it->gid);
      it = mcast_groups_.erase(it);
    } else {
      ++it;
    }
  }
}

void Device::mark_ready(QueuePair& qp) {
  if (qp.known_ready_) return;
  std::lock_guard sched(sched_mu_);
  if (ready_.insert(qp.slot_)) qp.timer_seq_ = ++timer_seq_;
  qp.known_ready_ = true;
}

void Device::set_idle(QueuePair& qp, Nanos deadline) {
  qp.known_ready_ = false;
  std::lock_guard sched(sched_mu_);
  ready_.erase(qp.slot_);
  qp.timer_seq_ = ++timer_seq_;
  if (deadline == kNever) return;
  timers_.push({deadline, qp.slot_, qp.timer_seq_});
  // Every QP has at most one current entry; stale ones are dropped when they outnumber them.
  const size_t live = slots_.size() - free_slots_.size();
  if (timers_.size() > 2 * live + 64) {
    timers_.compact([this](const TimerHeap::Entry& e) {
      return e.slot < slots_.size() && slots_[e.slot] != nullptr &&
             slots_[e.slot]->timer_seq_ == e.seq;
    });
  }
}

void Device::mark_all_ready() {
  std::shared_lock quiesce(quiesce_);
  std::lock_guard sched(sched_mu_);
  for (QueuePair* qp : slots_)
    if (qp != nullptr && ready_.insert(qp->slot_)) qp->timer_seq_ = ++timer_seq_;
}

void Device::fire_due_timers(Nanos now) {
  std::lock_guard sched(sched_mu_);
  while (!timers_.empty() && timers_.top().at <= now) {
    const TimerHeap::Entry e = timers_.top();
    timers_.pop();
    QueuePair* qp = e.slot < slots_.size() ? slots_[e.slot] : nullptr;
    if (qp != nullptr && qp->timer_seq_ == e.seq && ready_.insert(e.slot))
      qp->timer_seq_ = ++timer_seq_;
  }
}

Nanos Device::earliest_timer() {
  std::lock_guard sched(sched_mu_);
  while (!timers_.empty()) {
    const TimerHeap::Entry& e = timers_.top();
    QueuePair* qp = e.slot < slots_.size() ? slots_[e.slot] : nullptr;
    if (qp != nullptr && qp->timer_seq_ == e.seq) return e.at;
    timers_.pop();
  }
  return kNever;
}

size_t Device::transmit_ready(Nanos now, size_t limit) {
  // The round robin of every QP in slot order, each turn up to tx_quantum packets, that ends
  // after a whole round of turns without a full quantum; QPs not in the ready set would send
  // nothing in their turn, so the walk jumps from one ready slot to the next. Positions count
  // on across the wrap (slot + rounds * n) so "a whole round" stays exact.
  const uint64_t n = slots_.size();
  size_t sent = 0;
  if (n != 0) {
    uint64_t pos = rr_next_ % n;
    uint64_t stop = pos + n;  // first position not visited unless a full quantum moves it on
    while (sent < limit) {
      const uint32_t from = static_cast<uint32_t>(pos % n);
      uint32_t slot;
      {
        std::lock_guard sched(sched_mu_);
        slot = ready_.next_from(from);
        if (slot >= n) slot = ready_.next_from(0);
      }
      if (slot == ReadySet::kNone || slot >= n) {
        pos = stop;
        break;
      }
      const uint64_t at = pos + (slot >= from ? slot - from : n - from + slot);
      if (at >= stop) {
        pos = stop;
        break;
      }
      const size_t quantum = std::min(config_.tx_quantum, limit - sent);
      const size_t got = slots_[slot]->transmit(now, link_, quantum);
      progress_qp_visits_.fetch_add(1, std::memory_order_relaxed);
      sent += got;
      pos = at + 1;
      if (got == quantum) stop = at + 1 + n;
    }
    rr_next_ = static_cast<uint32_t>(pos % n);
  }
  link_.flush();  // nothing queued: no system call
  return sent;
}

Nanos Device::progress(Nanos now, size_t budget, PassScope scope) {
  std::shared_lock quiesce(quiesce_);
  progress_passes_.fetch_add(1, std::memory_order_relaxed);
  last_pass_at_.store(now, std::memory_order_relaxed);
  acks_kept_ = false;
  if (budget == 0) return now;
  if (port_state_.load() != static_cast<uint8_t>(PortState::kActive)) return kNever;

  fire_due_timers(now);
  // Either receive, then send what was posted and what the received packets caused; or (for a
  // caller that posts and polls between passes on the same thread) send first, then receive,
  // leaving what the received packets caused (ACKs, READ responses) to the next pass's send. The
  // second order makes a ping-pong's reply leave at once instead of behind a receive system call,
  // and lets the ACK of the message it answers share the reply's send call (the link puts the
  // reply first). The pass then returns `now`, so the caller does not sleep on an unsent ACK.
  size_t sent = 0, received = 0;
  // A caller that posts and polls between passes gets a received message's completion without
  // waiting for the ACKs read behind it (Link::defer_acks_behind_this_packet); they stay in the
  // link for the next pass, which must then come at once.
  auto receive = [&]() -> size_t {
    if (scope == PassScope::kSendOnly) return 0;
    return link_.poll(
        [this, now](const wire::RxPacket& p) {
          if (deliver(p, now) && config_.transmit_before_receive &&
              link_.defer_acks_behind_this_packet())
            acks_kept_ = true;
        },
        budget);
  };
  if (scope == PassScope::kReceiveOnly) {
    received = receive();
  } else if (config_.transmit_before_receive) {
    sent = transmit_ready(now, budget);
    received = receive();
  } else {
    received = receive();
    sent = transmit_ready(now, budget);
  }
  // After the receive, so that a REQ that just arrived is answered in the same pass (each MAD
  // is flushed as it is sent).
  Nanos next = transmit_gsi(now);
  if (received >= budget || sent >= budget || acks_kept_) return now;

  // The QPs still ready are those a packet reached after their turn (transmit_before_receive)
  // and those that said they have work now but sent nothing: they say when themselves. Every
  // other QP's deadline is in the heap.
  still_ready_.clear();
  {
    std::lock_guard sched(sched_mu_);
    for (uint32_t s = ready_.next_from(0); s != ReadySet::kNone; s = ready_.next_from(s + 1))
      still_ready_.push_back(s);
  }
  for (uint32_t s : still_ready_) next = std::min(next, slots_[s]->next_deadline(now));
  return std::min(next, earliest_timer());
}

std::vector<Counter> Device::counters() const {
  std::shared_lock quiesce(quiesce_);
  std::vector<Counter> total = retired_;
  for (const QueuePair* qp : slots_) {
    if (qp == nullptr) continue;
    std::vector<Counter> c = qp->counters();
    if (total.empty()) {
      total = std::move(c);
      continue;
    }
    UROCE_CHECK(total.size() == c.size());
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i].kind == Counter::Kind::kGaugeMin) {
        if (c[i].value != 0 && (total[i].value == 0 || c[i].value < total[i].value))
          total[i].value = c[i].value;
      } else {
        total[i].value += c[i].value;
      }
    }
  }
  const link::LinkCounters& l = link_.counters();
  std::vector<Counter> own = {
      {"rx_unknown_qpn_drops", rx_drop_unknown_qpn_.load()},
      {"rx_qp_state_drops", rx_drop_qp_state_.load()},
      // Multicast: packets to QPN 0xFFFFFF, copies handed to attached QPs, and packets for a
      // group no QP is attached to.
      {"rx_mcast_packets", rx_mcast_packets_.load()},
      {"rx_mcast_deliveries", rx_mcast_deliveries_.load()},
      {"rx_mcast_no_group_drops", rx_mcast_drops_.load()},
      // Device totals (transport/device_totals.h): what is held now, and drops at the caps.
      {"sr_reorder_bytes_held", totals_.reorder_bytes(), Counter::Kind::kGaugeSum},
      {"sr_reorder_total_drops", totals_.reorder_cap_drops()},
      {"responses_queued", totals_.responses(), Counter::Kind::kGaugeSum},
      {"responses_total_drops", totals_.response_cap_drops()},
      {"recv_wqes_allocated", totals_.recv_wqes(), Counter::Kind::kGaugeSum},
      {"recv_wqe_total_refusals", totals_.recv_wqe_refusals()},
      {"link_tx_packets", l.tx_packets},
      {"link_tx_bytes", l.tx_bytes},
      {"link_rx_packets", l.rx_packets},
      {"link_rx_bytes", l.rx_bytes},
      {"link_rx_ce_marked", l.rx_ce_marked},
      {"rx_icrc_encapsulated", l.rx_drop_bad_icrc},  // mlx5's name for RoCE ICRC errors
      {"link_rx_malformed_drops", l.rx_drop_malformed},
      {"link_rx_not_roce_drops", l.rx_drop_not_roce},
      {"link_tx_errors", l.tx_errors},
      {"progress_passes", progress_passes_.load()},
      {"cq_notify_requests", cq_notify_requests_.load()},
      {"progress_qp_visits", progress_qp_visits_.load()},
      {"gsi_rx_mads", gsi_rx_.load()},
      {"gsi_rx_drops", gsi_rx_drops_.load()},
      {"gsi_tx_mads", gsi_tx_.load()},
      // Objects alive now: a program that tears down what it set up brings these back (the
      // rdma_cm loop in tests/e2e/rdmacm_cmtime_test.sh checks QPs, CQs and MRs).
      {"pds_in_use", in_use_[kPd].load(), Counter::Kind::kGaugeSum},
      {"cqs_in_use", in_use_[kCq].load(), Counter::Kind::kGaugeSum},
      {"qps_in_use", in_use_[kQp].load(), Counter::Kind::kGaugeSum},
      {"mrs_in_use", in_use_[kMr].load(), Counter::Kind::kGaugeSum},
  };
  total.insert(total.end(), own.begin(), own.end());
  return total;
}

// ---- Context ----------------------------------------------------------------------------------

Context::Context(Device& dev) : dev_(dev) {}

Context::~Context() {
  UROCE_CHECK(users_.load() == 0);
  {
    std::lock_guard lock(dev_.contexts_mu_);
    std::erase(dev_.contexts_, this);
  }
  dev_.contexts_open_.fetch_sub(1);
}

Result<std::unique_ptr<ProtectionDomain>> Context::alloc_pd() {
  if (!dev_.acquire(Device::kPd)) return Err(ENOMEM);
  users_.fetch_add(1);
  return std::unique_ptr<ProtectionDomain>(new ProtectionDomain(*this));
}

Result<std::unique_ptr<CompletionChannel>> Context::create_comp_channel() {
  auto ch = std::make_unique<CompletionChannel>();
  if (ch->fd() < 0) return Err(EMFILE);
  return ch;
}

Result<std::unique_ptr<CompletionQueue>> Context::create_cq(uint32_t cqe,
                                                            CompletionChannel* channel) {
  if (cqe == 0 || cqe > dev_.attr().max_cqe) return Err(EINVAL);
  if (!dev_.acquire(Device::kCq)) return Err(ENOMEM);
  uint32_t capacity = 1;
  while (capacity < cqe) capacity <<= 1;
  users_.fetch_add(1);
  return std::unique_ptr<CompletionQueue>(new CompletionQueue(*this, capacity, channel));
}

Result<std::unique_ptr<DeviceMemory>> Context::alloc_dm(size_t length, uint32_t log_align) {
  const uint64_t limit = dev_.attr().max_dm_size;
  if (length == 0 || length > limit || log_align > kMaxDmLogAlign) return Err(EINVAL);
  uint64_t used = dev_.dm_bytes_.load();
  do {
    if (used + length > limit) return Err(ENOMEM);
  } while (!dev_.dm_bytes_.compare_exchange_weak(used, used + length));
  const size_t align = std::max<size_t>(64, size_t{1} << log_align);
  const size_t rounded = (length + align - 1) & ~(align - 1);
  auto* bytes = static_cast<uint8_t*>(std::aligned_alloc(align, rounded));
  if (bytes == nullptr) {
    dev_.dm_bytes_.fetch_sub(length);
    return Err(ENOMEM);
  }
  std::memset(bytes, 0, rounded);  // nothing of an earlier owner shows through
  users_.fetch_add(1);
  return std::unique_ptr<DeviceMemory>(new DeviceMemory(*this, bytes, length));
}

Result<PortAttr> Context::query_port(uint8_t port_num) const {
  if (port_num != 1) return Err(EINVAL);
  return dev_.port_attr();
}

Result<Gid> Context::query_gid(uint8_t port_num, int index) const {
  if (port_num != 1 || index < 0 || index >= dev_.port_attr().gid_tbl_len) return Err(EINVAL);
  return dev_.gid();
}

Result<GidType> Context::query_gid_type(uint8_t port_num, int index) const {
  if (port_num != 1 || index < 0 || index >= dev_.port_attr().gid_tbl_len) return Err(EINVAL);
  return gid_type_at(index);
}

Result<uint16_t> Context::query_pkey(uint8_t port_num, int index) const {
  if (port_num != 1 || index != 0) return Err(EINVAL);
  return uint16_t{0xffff};  // the default full-membership P_Key (IBA 10.9.1.2)
}

}  // namespace uroce::verbs
