#include "sim/world.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/check.h"

namespace uroce::simlab {
namespace {

using transport::TransportQp;

// Byte `i` of flow `f`'s data: distinct per flow and offset, so a misplaced packet shows.
uint8_t pattern(size_t f, uint64_t i) {
  uint64_t x = (f + 1) * 0x9e3779b97f4a7c15ull ^ (i / 8);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 32;
  return static_cast<uint8_t>(x >> (8 * (i % 8)));
}

// The room notification of a host's NIC queue (FabricLink::request_tx_room): the QPs a full
// queue held back wait for it without a deadline, so the device visits all of them, now.
class RoomWaker final : public fabric::EventTarget {
 public:
  RoomWaker(sim::WorldCore& core, verbs::Device& device, sim::WorldCore::ParticipantId id)
      : core_(core), device_(device), id_(id) {}
  void on_event(uint32_t /*kind*/, uint64_t /*host*/, Nanos now) override {
    device_.link_has_room();
    core_.wake(id_, now);
  }

 private:
  sim::WorldCore& core_;
  verbs::Device& device_;
  sim::WorldCore::ParticipantId id_;
};

}  // namespace

struct World::Node {
  std::unique_ptr<RoomWaker> room_waker;
  std::unique_ptr<fabric::FabricLink> link;
  std::unique_ptr<verbs::Device> dev;
  std::unique_ptr<verbs::Context> ctx;
  std::unique_ptr<verbs::ProtectionDomain> pd;
  std::unique_ptr<verbs::CompletionQueue> cq;
  sim::NicFifoGate* last_created = nullptr;
  std::unique_ptr<sim::SyntheticAccess> synthetic;  // the QPs' memory with synthetic regions
  sim::WorldCore::ParticipantId device = 0;
};

struct World::Flow {
  size_t index = 0;
  FlowSpec spec;
  std::vector<uint8_t> src, dst;        // empty with synthetic memory
  uint64_t src_addr = 0, dst_addr = 0;  // I/O addresses of the two MRs
  std::unique_ptr<verbs::MemoryRegion> src_mr, dst_mr;
  std::unique_ptr<verbs::QueuePair> sqp, rqp;
  sim::NicFifoGate* s_nic = nullptr;
  sim::NicFifoGate* r_nic = nullptr;
  uint64_t posted = 0, completed = 0;  // bytes
  uint32_t outstanding = 0;
  bool started = false;
  FlowResult result;
};

double jain_index(const std::vector<double>& x) {
  double s = 0, s2 = 0;
  for (double v : x) {
    s += v;
    s2 += v * v;
  }
  return x.empty() || s2 == 0 ? 0 : s * s / (static_cast<double>(x.size()) * s2);
}

World::World(const WorldConfig& config, std::unique_ptr<fabric::EventLoop> loop,
             std::unique_ptr<fabric::SwitchFabric> fab)
    : config_(config),
      loop_(std::move(loop)),
      fabric_(std::move(fab)),
      core_(std::make_unique<sim::WorldCore>(*loop_)) {
  // One reservation for every synthetic MR: they differ by I/O address, not host address.
  constexpr size_t kSyntheticSpan = size_t{1} << 40;
  if (config_.synthetic_memory) {
    synthetic_ = std::make_unique<sim::SyntheticMemory>(kSyntheticSpan, config_.message_bytes);
    // Every link then carries payload by reference and prepares what it must copy.
    synthetic_->set_lazy_reads(config_.trusted_wire);
  }
  sim::SyntheticMemory* synthetic = synthetic_.get();
  for (fabric::HostId h = 0; h < fabric_->hosts(); ++h) {
    auto node = std::make_unique<Node>();
    const Gid gid = fabric::host_gid(h);
    node->link = std::move(fabric::FabricLink::create(*fabric_, h, gid).value());
    node->link->set_trusted_wire(config_.trusted_wire);
    if (config_.trusted_wire) node->link->set_payload_reference(synthetic);
    verbs::DeviceConfig dc;
    dc.name = "uroce" + std::to_string(h);
    dc.port.active_mtu = verbs::Mtu::k4096;
    dc.single_threaded = true;  // the world core's thread makes every call
    dc.attr.max_mr = config_.max_mr;
    dc.attr.max_mw = config_.max_mw;
    Node* np = node.get();
    const WorldConfig cfg = config_;
    dc.transport_factory =
        [np, cfg, synthetic](verbs::QpType type, uint32_t qpn,
                             const transport::QpCapabilities& caps, transport::MemoryAccess& memory,
                             transport::CompletionSink& scq, transport::CompletionSink& rcq,
                             transport::RecvQueue* srq) -> std::unique_ptr<TransportQp> {
      transport::MemoryAccess* access = &memory;
      if (synthetic != nullptr) {
        if (!np->synthetic) {
          np->synthetic = std::make_unique<sim::SyntheticAccess>(memory, *synthetic);
        }
        UROCE_CHECK(&np->synthetic->inner() == &memory);  // one PD per node
        access = np->synthetic.get();
      }
      auto inner = TransportQp::create(type, qpn, caps, *access, scq, rcq, srq);
      if (!inner) return nullptr;
      auto qp = std::make_unique<sim::NicFifoGate>(std::move(inner), *np->link, cfg.nic_fifo_bytes,
                                                   cfg.cc.line_rate_bps);
      np->last_created = qp.get();
      return qp;
    };
    node->dev = std::make_unique<verbs::Device>(*node->link, dc);
    node->ctx = std::move(node->dev->open().value());
    node->pd = std::move(node->ctx->alloc_pd().value());
    node->cq = std::move(node->ctx->create_cq(config_.cq_entries).value());
    node->device =
        core_->add_device(*node->dev, [this, np](Nanos now) { poll_completions(*np, now); });
    node->link->set_arrival_notify(&core_->waker(node->device), sim::WorldCore::kWakeKind);
    node->room_waker = std::make_unique<RoomWaker>(*core_, *node->dev, node->device);
    node->link->set_tx_room_notify(node->room_waker.get(), 0);
    nodes_.push_back(std::move(node));
  }
}

World::~World() {
  flows_.clear();  // QPs and MRs before their PDs
  for (auto& n : nodes_) {
    n->cq.reset();
    n->pd.reset();
    n->ctx.reset();
    n->dev.reset();
    n->link.reset();
  }
}

Result<std::unique_ptr<World>, std::string> World::create(const WorldConfig& config,
                                                          const fabric::TopologySpec& topo) {
  auto loop = std::make_unique<fabric::EventLoop>(config.seed, config.max_events);
  fabric::FabricConfig fc;
  fc.max_packets = config.max_packets;
  fc.max_payload_buffers = config.max_payload_buffers;
  auto fab = std::make_unique<fabric::SwitchFabric>(*loop, fc);
  auto t = fabric::build_topology(*fab, topo);
  if (!t) return Err(t.error());
  return std::make_unique<World>(config, std::move(loop), std::move(fab));
}

fabric::PortId World::port_to_host(fabric::HostId h) const {
  return fabric_->peer(fabric_->host_port(h));
}

int World::add_flow(const FlowSpec& spec) {
  if (spec.src >= nodes_.size() || spec.dst >= nodes_.size() || spec.src == spec.dst ||
      spec.bytes == 0)
    return -1;
  auto f = std::make_unique<Flow>();
  f->index = flows_.size();
  f->spec = spec;
  f->result.spec = spec;
  std::string err;
  if (!setup_flow(*f, &err)) return -1;
  flows_.push_back(std::move(f));
  return static_cast<int>(flows_.size() - 1);
}

bool World::setup_flow(Flow& f, std::string* error) {
  Node& s = *nodes_[f.spec.src];
  Node& r = *nodes_[f.spec.dst];
  Result<std::unique_ptr<verbs::MemoryRegion>> smr = Err(EINVAL), rmr = Err(EINVAL);
  if (synthetic_) {
    // Both ends at the same I/O addresses, distinct per flow: a byte checks only where it was
    // read from.
    if (f.spec.bytes > synthetic_->size()) {
      *error = "flow larger than the synthetic reservation";
      return false;
    }
    f.src_addr = f.dst_addr = uint64_t{f.index + 1} << 40;
    smr = s.pd->reg_mr(synthetic_->base(), f.spec.bytes, f.src_addr, transport::kAccessLocalWrite);
    rmr = r.pd->reg_mr(synthetic_->base(), f.spec.bytes, f.dst_addr,
                       transport::kAccessLocalWrite | transport::kAccessRemoteWrite);
  } else {
    f.src.resize(f.spec.bytes);
    for (uint64_t i = 0; i < f.spec.bytes; ++i) f.src[i] = pattern(f.index, i);
    f.dst.assign(f.spec.bytes, 0);
    f.src_addr = reinterpret_cast<uint64_t>(f.src.data());
    f.dst_addr = reinterpret_cast<uint64_t>(f.dst.data());
    smr = s.pd->reg_mr(f.src.data(), f.src.size(), transport::kAccessLocalWrite);
    rmr = r.pd->reg_mr(f.dst.data(), f.dst.size(),
                       transport::kAccessLocalWrite | transport::kAccessRemoteWrite);
  }
  if (!smr || !rmr) {
    *error = "reg_mr failed";
    return false;
  }
  f.src_mr = std::move(*smr);
  f.dst_mr = std::move(*rmr);
  verbs::QpInitAttr init;
  init.qp_type = verbs::QpType::kRc;
  init.send_cq = init.recv_cq = s.cq.get();
  init.cap.max_send_wr = config_.max_outstanding;
  init.cap.max_recv_wr = 1;
  init.congestion = config_.cc;
  init.loss_recovery = config_.loss_recovery;
  init.max_psn_window = config_.max_psn_window;
  init.write_segments = config_.write_segments;
  auto sqp = s.pd->create_qp(init);
  f.s_nic = s.last_created;
  init.send_cq = init.recv_cq = r.cq.get();
  auto rqp = r.pd->create_qp(init);
  f.r_nic = r.last_created;
  if (!sqp || !rqp) {
    *error = "create_qp failed";
    return false;
  }
  f.sqp = std::move(*sqp);
  f.rqp = std::move(*rqp);
  const verbs::Mtu mtu = config_.path_mtu >= 4096   ? verbs::Mtu::k4096
                         : config_.path_mtu >= 2048 ? verbs::Mtu::k2048
                         : config_.path_mtu >= 1024 ? verbs::Mtu::k1024
                         : config_.path_mtu >= 512  ? verbs::Mtu::k512
                                                    : verbs::Mtu::k256;
  auto connect = [&](verbs::QueuePair& me, const verbs::QueuePair& peer, const Gid& peer_gid) {
    verbs::QpAttr a;
    a.qp_state = verbs::QpState::kInit;
    a.port_num = 1;
    a.qp_access_flags = transport::kAccessRemoteWrite;
    if (me.modify(
            a, verbs::kQpState | verbs::kQpPkeyIndex | verbs::kQpPort | verbs::kQpAccessFlags) != 0)
      return false;
    a.qp_state = verbs::QpState::kRtr;
    a.path_mtu = mtu;
    a.dest_qp_num = peer.qp_num();
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.grh.dgid = peer_gid;
    a.ah_attr.grh.sgid_index =
        static_cast<uint8_t>(f.spec.roce_v1 ? verbs::kGidIndexRoceV1 : verbs::kGidIndexRoceV2);
    a.ah_attr.grh.traffic_class = static_cast<uint8_t>(config_.data_dscp << 2);
    if (me.modify(a, verbs::kQpState | verbs::kQpAv | verbs::kQpPathMtu | verbs::kQpDestQpn |
                         verbs::kQpRqPsn | verbs::kQpMaxDestRdAtomic | verbs::kQpMinRnrTimer) != 0)
      return false;
    a.qp_state = verbs::QpState::kRts;
    a.sq_psn = 0;
    a.timeout = 8;  // 1 ms: far above any queueing delay here, short enough to recover drops
    a.retry_cnt = transport::kMaxRetryCnt;
    a.rnr_retry = transport::kRnrRetryForever;
    a.max_rd_atomic = 1;
    return me.modify(a, verbs::kQpState | verbs::kQpSqPsn | verbs::kQpTimeout | verbs::kQpRetryCnt |
                            verbs::kQpRnrRetry | verbs::kQpMaxQpRdAtomic) == 0;
  };
  if (!connect(*f.sqp, *f.rqp, r.dev->gid()) || !connect(*f.rqp, *f.sqp, s.dev->gid())) {
    *error = "QP connect failed";
    return false;
  }
  return true;
}

void World::post_more(Flow& f) {
  while (f.posted < f.spec.bytes && f.outstanding < config_.max_outstanding) {
    const uint32_t len =
        static_cast<uint32_t>(std::min<uint64_t>(config_.message_bytes, f.spec.bytes - f.posted));
    transport::Sge sge{f.src_addr + f.posted, len, f.src_mr->lkey()};
    transport::SendWr wr;
    wr.wr_id = (uint64_t{f.index} << 40) | f.posted;
    wr.opcode = transport::WrOpcode::kRdmaWrite;
    wr.flags = transport::kSendSignaled;
    wr.sg_list = {&sge, 1};
    wr.remote_addr = f.dst_addr + f.posted;
    wr.rkey = f.dst_mr->rkey();
    if (f.sqp->post_send(wr) != 0) break;
    f.posted += len;
    ++f.outstanding;
  }
  core_->wake_now(nodes_[f.spec.src]->device);
}

void World::poll_completions(Node& n, Nanos now) {
  auto& wc = polled_;
  for (;;) {
    const size_t got = n.cq->poll(wc);
    for (size_t i = 0; i < got; ++i) {
      const size_t fi = wc[i].wr_id >> 40;
      if (fi >= flows_.size()) continue;
      Flow& f = *flows_[fi];
      if (wc[i].status != transport::WcStatus::kSuccess) ++f.result.errors;
      --f.outstanding;
      f.completed += wc[i].byte_len;
      if (f.posted >= f.spec.bytes && f.outstanding == 0 && f.result.done_ns == kNever) {
        f.result.done_ns = now;
        --flows_left_;
      } else {
        post_more(f);
      }
    }
    if (got < wc.size()) break;
  }
}

void World::sample(Nanos now) {
  Sample s;
  s.t = now;
  const uint8_t prio = config_.data_dscp >> 3;
  for (fabric::PortId p : watched_) {
    s.queue_bytes.push_back(fabric_->queue_bytes(p, prio));
    s.port_tx_bytes.push_back(fabric_->port_counters(p).tx_bytes);
  }
  for (auto& f : flows_) {
    s.rate_bps.push_back(f->s_nic->pacer().rate_bps());
    s.rx_bytes.push_back(f->r_nic->counters().rx_bytes);
    s.cnps_received.push_back(f->s_nic->counters().cnps_received);
    s.rate_cuts.push_back(f->s_nic->counters().rate_cuts);
  }
  s.pause_frames = fabric_->counters().pause_frames;
  result_.samples.push_back(std::move(s));
}

RunResult World::run() {
  auto fail = [&](std::string msg) {
    result_.ok = false;
    result_.failure = std::move(msg);
  };
  Nanos next_sample = 0;
  for (auto& f : flows_) core_->round_at(f->spec.start_ns);
  start_order_.clear();
  for (size_t i = 0; i < flows_.size(); ++i) start_order_.push_back(i);
  std::stable_sort(start_order_.begin(), start_order_.end(), [&](size_t a, size_t b) {
    return flows_[a]->spec.start_ns < flows_[b]->spec.start_ns;
  });
  next_start_ = 0;
  flows_left_ = 0;
  for (auto& f : flows_) flows_left_ += f->result.done_ns == kNever;
  std::vector<size_t> due;
  // Each round starts with the sampler and the flows due to start (in flow order); the devices
  // then act. Per round this costs the flows that start, not all flows.
  auto on_round = [&](Nanos now) {
    if (now >= next_sample) {
      sample(now);
      next_sample = now + config_.sample_ns;
      core_->round_at(next_sample);
    }
    due.clear();
    while (next_start_ < start_order_.size() &&
           flows_[start_order_[next_start_]]->spec.start_ns <= now)
      due.push_back(start_order_[next_start_++]);
    std::sort(due.begin(), due.end());
    for (size_t i : due) {
      Flow& f = *flows_[i];
      f.started = true;
      post_more(f);
    }
    return flows_left_ > 0;
  };
  sim::WorldCore::Limits limits;
  limits.time = config_.time_limit_ns;
  limits.rounds = config_.step_limit;
  const sim::WorldCore::Outcome out = core_->run(on_round, limits);
  switch (out.end) {
    case sim::WorldCore::End::kRoundLimit:
      fail("step limit");
      break;
    case sim::WorldCore::End::kTimeLimit:
      fail("virtual time limit");
      break;
    case sim::WorldCore::End::kIdle:
    case sim::WorldCore::End::kStalled:
      fail("nothing left to happen");
      break;
    case sim::WorldCore::End::kDone:
    case sim::WorldCore::End::kStopped:
      break;
  }
  const uint64_t steps = out.rounds;
  result_.steps = steps;
  result_.end_ns = loop_->now();
  result_.fabric = fabric_->counters();
  if (synthetic_) synthetic_->settle();
  for (auto& n : nodes_) {
    result_.link_tx_errors += n->link->counters().tx_errors;
    result_.link_rx_drops += n->link->rx_drop_inbox_full();
    result_.link_tx_by_reference += n->link->tx_by_reference();
    result_.device_passes += n->dev->progress_passes();
    if (n->synthetic) {
      result_.synthetic_mismatched_bytes += n->synthetic->mismatched_bytes();
      result_.synthetic_checked_bytes += n->synthetic->bytes_checked();
      result_.synthetic_refused += n->synthetic->refused();
    }
  }
  for (auto& f : flows_) {
    FlowResult& r = f->result;
    // Synthetic memory keeps no bytes to compare: every byte the receiver took must have checked
    // where it landed, and all of them must have arrived.
    const bool data_ok = synthetic_ ? result_.synthetic_mismatched_bytes == 0 &&
                                          f->r_nic->counters().rx_bytes >= f->spec.bytes
                                    : f->dst == f->src;
    r.verified = r.done_ns != kNever && r.errors == 0 && data_ok;
    r.sender = f->s_nic->counters();
    r.receiver = f->r_nic->counters();
    r.final_rate_bps = f->s_nic->pacer().rate_bps();
    result_.flows.push_back(r);
  }
  return result_;
}

}  // namespace uroce::simlab
