#pragma once
// Test doubles for the verbs unit tests: a link that records what is sent and replays what the
// test queues, and a transport QP that keeps FIFO queues and flushes them in order on ERR, so the
// verbs rules are tested apart from the real transport.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "link/link.h"
#include "transport/qp.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "wire/packet.h"

namespace uroce::verbs::testing {

class FakeLink : public link::Link {
 public:
  explicit FakeLink(Gid gid = gid_from_ipv4({10, 0, 0, 1})) : gid_(gid) {}
  Gid local_gid() const override { return gid_; }
  void transmit(const wire::TxPacket& p) override {
    sent.push_back(p);
    ++counters_.tx_packets;
  }
  void flush() override { ++flushes; }
  size_t poll(const link::RxHandler& handler, size_t budget) override {
    size_t n = 0;
    while (n < budget && !inbox.empty()) {
      wire::TransportHeaders h = inbox.front();
      inbox.pop_front();
      wire::RxPacket p;
      p.hdr = &h;
      p.sgid = peer_gid;  // the path good_attr() sets
      p.dgid = gid_;
      handler(p);
      ++n;
      ++counters_.rx_packets;
    }
    return n;
  }
  const link::LinkCounters& counters() const override { return counters_; }
  bool carries_roce_v1() const override { return writes_frames; }
  bool reaches_roce_v1(const Gid& dgid) const override {
    return writes_frames && dgid != off_segment;
  }
  bool writes_frames = false;  // stands in for a raw Ethernet link (RoCE v1 paths allowed)
  Gid off_segment{};           // a peer behind a router: v1 cannot reach it

  // A packet for QP `qpn` (only the BTH matters to the device).
  void inject(uint32_t qpn) {
    wire::TransportHeaders h;
    h.bth.dest_qp = qpn;
    inbox.push_back(h);
  }

  std::vector<wire::TxPacket> sent;
  std::deque<wire::TransportHeaders> inbox;
  Gid peer_gid = gid_from_ipv4({10, 0, 0, 2});
  int flushes = 0;

 private:
  Gid gid_;
  link::LinkCounters counters_;
};

// Keeps send and receive WRs in FIFOs; transmit() "sends" one packet per send WR and completes
// it; set_state(kErr) flushes both queues oldest first with WR_FLUSH_ERR (IBA 10.3.1).
// The clock of the two-device wires below (PairLink): each round is 1 us of virtual time and
// one progress pass of each device, in this order.
inline void step_pair(Nanos& now, Device& a, Device& b) {
  now += 1000;
  a.progress(now);
  b.progress(now);
}

// One end of a lossless in-memory wire between two devices: transmit() serialises the packet
// (headers, payload, pad) and queues it at the peer, whose poll() parses it back. With `mark_ce`
// the receiving end marks every ECN-capable packet CE, as a congested switch would (RFC 3168:
// only ECT packets can be marked).
class PairLink : public link::Link {
 public:
  explicit PairLink(Gid gid) : gid_(gid) {}
  void connect(PairLink& peer) { peer_ = &peer; }
  Gid local_gid() const override { return gid_; }
  void transmit(const wire::TxPacket& p) override {
    std::vector<uint8_t> bytes(p.header.begin(), p.header.begin() + p.header_len);
    for (uint32_t i = 0; i < p.payload_parts; ++i)
      bytes.insert(bytes.end(), p.payload[i].begin(), p.payload[i].end());
    bytes.resize(bytes.size() + p.pad, 0);
    ++counters_.tx_packets;
    peer_->inbox_.push_back({std::move(bytes), p.ect, gid_, peer_->gid_});
  }
  // Queues transport bytes (BTH .. pad) at this end as if they came from `sgid` to `dgid`: a
  // third host on the wire, or a spoofed address.
  void inject(std::vector<uint8_t> bytes, Gid sgid, Gid dgid) {
    inbox_.push_back({std::move(bytes), false, sgid, dgid});
  }
  void inject_front(std::vector<uint8_t> bytes, Gid sgid, Gid dgid) {
    inbox_.push_front({std::move(bytes), false, sgid, dgid});
  }
  void flush() override {}
  size_t poll(const link::RxHandler& handler, size_t budget) override {
    size_t n = 0;
    while (n < budget && !inbox_.empty()) {
      auto [bytes, ect, sgid, dgid] = std::move(inbox_.front());
      inbox_.pop_front();
      ++n;
      auto parsed = wire::parse_transport(bytes);
      if (!parsed) {
        ++counters_.rx_drop_malformed;
        continue;
      }
      wire::RxPacket rx;
      rx.hdr = &parsed->hdr;
      rx.payload = parsed->payload;
      rx.sgid = sgid;
      rx.dgid = dgid;
      rx.ce = mark_ce && ect;
      ++counters_.rx_packets;
      handler(rx);
    }
    return n;
  }
  const link::LinkCounters& counters() const override { return counters_; }
  bool mark_ce = false;

 private:
  struct Arrival {
    std::vector<uint8_t> bytes;
    bool ect;
    Gid sgid, dgid;
  };
  Gid gid_;
  PairLink* peer_ = nullptr;
  std::deque<Arrival> inbox_;
  link::LinkCounters counters_;
};

class FakeTransportQp : public transport::TransportQp {
 public:
  FakeTransportQp(uint32_t qpn, const transport::QpCapabilities& caps,
                  transport::MemoryAccess& memory, transport::CompletionSink& scq,
                  transport::CompletionSink& rcq)
      : qpn_(qpn), caps_(caps), memory_(memory), scq_(scq), rcq_(rcq) {}

  int post_send_all(std::span<const transport::SendWr> wrs) override {
    for (const transport::SendWr& wr : wrs) {
      if (wr.sg_list.size() > caps_.max_send_sge) return EINVAL;
    }
    if (state_ != transport::QpState::kErr && sends.size() + wrs.size() > caps_.max_send_wr) {
      return ENOMEM;
    }
    for (const transport::SendWr& wr : wrs) post_send(wr);
    return 0;
  }
  int post_send(const transport::SendWr& wr) override {
    if (wr.sg_list.size() > caps_.max_send_sge) return EINVAL;
    if (state_ == transport::QpState::kErr) {
      flush(wr.wr_id, true);
      return 0;
    }
    if (sends.size() >= caps_.max_send_wr) return ENOMEM;
    sends.push_back(wr.wr_id);
    return 0;
  }
  int post_recv(const transport::RecvWr& wr) override {
    if (wr.sg_list.size() > caps_.max_recv_sge) return EINVAL;
    if (state_ == transport::QpState::kErr) {
      flush(wr.wr_id, false);
      return 0;
    }
    if (recvs.size() >= caps_.max_recv_wr) return ENOMEM;
    recvs.push_back(wr.wr_id);
    return 0;
  }
  void configure(const transport::QpConfig& c) override {
    config = c;
    ++configures;
  }
  void set_state(transport::QpState s) override {
    state_ = s;
    states.push_back(s);
    if (s == transport::QpState::kErr) {
      while (!sends.empty()) {
        flush(sends.front(), true);
        sends.pop_front();
      }
      while (!recvs.empty()) {
        flush(recvs.front(), false);
        recvs.pop_front();
      }
    }
    if (s == transport::QpState::kReset) sends.clear(), recvs.clear();
  }
  transport::QpState state() const override { return state_; }
  void receive(const transport::RxPacket&, Nanos) override { ++counters_.rx_packets; }
  size_t transmit(Nanos now, transport::PacketSink& sink, size_t budget) override {
    if (on_transmit) on_transmit(now);
    size_t n = 0;
    if (state_ != transport::QpState::kRts) return 0;
    while (n < budget && !sends.empty()) {
      wire::TxPacket p;
      p.header[0] = static_cast<uint8_t>(qpn_);  // which QP sent it
      p.header_len = 1;
      sink.transmit(p);
      transport::Completion c;
      c.wr_id = sends.front();
      c.qp_num = qpn_;
      sends.pop_front();
      scq_.push(c);
      ++counters_.tx_packets;
      ++n;
    }
    return n;
  }
  Nanos next_deadline(Nanos now) const override {
    if (on_transmit) return now;  // it does something on every pass
    if (state_ == transport::QpState::kRts && !sends.empty()) return now;
    return deadline;
  }
  uint32_t qpn() const override { return qpn_; }
  uint32_t packets_in_flight() const override { return 0; }
  const transport::QpCounters& counters() const override { return counters_; }
  cc::Pacer& pacer() override { return pacer_; }

  transport::MemoryAccess& memory() { return memory_; }

  std::deque<uint64_t> sends, recvs;
  std::vector<transport::QpState> states;
  transport::QpConfig config;
  int configures = 0;
  Nanos deadline = kNever;
  std::function<void(Nanos)> on_transmit;
  transport::QpCounters counters_;

 private:
  void flush(uint64_t wr_id, bool send) {
    transport::Completion c;
    c.wr_id = wr_id;
    c.status = transport::WcStatus::kWrFlushErr;
    c.opcode = send ? transport::WcOpcode::kSend : transport::WcOpcode::kRecv;
    c.qp_num = qpn_;
    (send ? scq_ : rcq_).push(c);
  }
  uint32_t qpn_;
  transport::QpCapabilities caps_;
  transport::MemoryAccess& memory_;
  transport::CompletionSink& scq_;
  transport::CompletionSink& rcq_;
  transport::QpState state_ = transport::QpState::kReset;
  cc::Pacer pacer_;
};

// A device on a FakeLink whose QPs are FakeTransportQps, with a registry to reach them.
struct FakeWorld {
  explicit FakeWorld(DeviceConfig config = {}) {
    config.transport_factory = [this](QpType, uint32_t qpn, const QpCapabilities& caps,
                                      transport::MemoryAccess& mem, transport::CompletionSink& scq,
                                      transport::CompletionSink& rcq, transport::RecvQueue*) {
      auto qp = std::make_unique<FakeTransportQp>(qpn, caps, mem, scq, rcq);
      fakes[qpn] = qp.get();
      return std::unique_ptr<transport::TransportQp>(std::move(qp));
    };
    device = std::make_unique<Device>(link, std::move(config));
    ctx = std::move(device->open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(64).value());
  }
  ~FakeWorld() {
    pd.reset();
    cq.reset();
    ctx.reset();
  }
  std::unique_ptr<QueuePair> qp(QpType type = QpType::kRc, CompletionQueue* scq = nullptr,
                                CompletionQueue* rcq = nullptr) {
    QpInitAttr a;
    a.qp_type = type;
    a.send_cq = scq ? scq : cq.get();
    a.recv_cq = rcq ? rcq : cq.get();
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = 16;
    return std::move(pd->create_qp(a).value());
  }
  FakeTransportQp& fake(const QueuePair& q) { return *fakes.at(q.qp_num()); }

  FakeLink link;
  std::unique_ptr<Device> device;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::map<uint32_t, FakeTransportQp*> fakes;
};

// Attributes that satisfy every transition's value checks.
inline QpAttr good_attr(QpState state) {
  QpAttr a;
  a.qp_state = state;
  a.port_num = 1;
  a.pkey_index = 0;
  a.qkey = 0x11111111;
  a.qp_access_flags = transport::kAccessRemoteWrite | transport::kAccessRemoteRead;
  a.path_mtu = Mtu::k1024;
  a.dest_qp_num = 0x42;
  a.rq_psn = 100;
  a.sq_psn = 200;
  a.max_dest_rd_atomic = 4;
  a.max_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.ah_attr.is_global = true;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.dgid = gid_from_ipv4({10, 0, 0, 2});
  a.alt_ah_attr = a.ah_attr;
  a.alt_port_num = 1;
  return a;
}

// Drives `w`'s device on a progress thread whose passes (through `qp`'s fake) write 256 bytes at
// address 0 through `rkey`, as a responder would, until 20 have written; then runs `destroy`
// (deregistering or deallocating what `rkey` names) and keeps going until 20 passes were refused.
// Returns the passes that wrote while or after `destroy` returned: 0 when destruction is
// synchronous with the progress pass.
inline int writes_after_destroy(FakeWorld& w, QueuePair& qp, uint32_t rkey, uint32_t qpn,
                                const std::function<void()>& destroy) {
  std::atomic<bool> gone{false}, stop{false};
  std::atomic<int> writes{0}, violations{0}, refused{0};
  FakeTransportQp& fake = w.fake(qp);
  // Any state but RESET lets transmit() run; the modify also tells the device the QP has work,
  // and with on_transmit set the fake keeps saying so.
  EXPECT_EQ(
      qp.modify(good_attr(QpState::kInit), kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  fake.on_transmit = [&](Nanos) {
    auto p = fake.memory().remote(rkey, 0, 256, transport::kAccessRemoteWrite, qpn);
    if (!p.ok()) {
      ++refused;
      return;
    }
    if (gone) ++violations;
    for (int i = 0; i < 256; ++i) {
      (*p)[i] = static_cast<uint8_t>(i);
      if (i % 64 == 0) std::this_thread::yield();
    }
    if (gone) ++violations;
    ++writes;
  };
  std::thread progress([&] {
    for (Nanos t = 0; !stop; ++t) w.device->progress(t);
  });
  while (writes < 20) std::this_thread::yield();
  destroy();
  gone = true;
  while (refused < 20) std::this_thread::yield();
  stop = true;
  progress.join();
  fake.on_transmit = nullptr;
  return violations.load();
}

// Moves `qp` through INIT, RTR and RTS to the RC peer `peer_qpn` at `peer_gid`, with every remote
// right, PSNs 1000 both ways, 1024-byte MTU and 4 READ/atomics in flight: the loopback pairs'
// common connection.
inline void connect_rc(QueuePair& qp, uint32_t peer_qpn, const Gid& peer_gid) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags =
      transport::kAccessRemoteWrite | transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;
  ASSERT_EQ(qp.modify(a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  a.qp_state = QpState::kRtr;
  a.path_mtu = Mtu::k1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = 1000;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 1;
  a.ah_attr.grh.dgid = peer_gid;
  ASSERT_EQ(qp.modify(a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                             kQpMaxDestRdAtomic | kQpMinRnrTimer),
            0);
  a.qp_state = QpState::kRts;
  a.sq_psn = 1000;
  a.timeout = 10;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  ASSERT_EQ(
      qp.modify(a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic),
      0);
}

}  // namespace uroce::verbs::testing
