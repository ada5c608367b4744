// XRC (IBA annex A14) in the transport: an initiator QP sends RC requests that each name an XRC
// SRQ (XRCETH); the target QP takes receive WQEs, the CQ and the memory of the PD from that SRQ,
// and answers a number that names no SRQ of its XRC domain with NAK Remote Access Error.
#include <cstring>
#include <map>

#include "pair.h"

namespace uroce::transport::test {
namespace {

namespace op = wire::op;

// An XRC SRQ with its own PD memory and CQ, as the verbs layer builds one.
struct TestSrq : XrcSrq {
  RecvQueue rq{16, 4};
  FakeCq completions;
  FakeMemory pd_memory;
  std::optional<RecvWqe> pop() override { return rq.pop(); }
  CompletionSink& cq() override { return completions; }
  MemoryAccess& memory() override { return pd_memory; }
  int post(uint64_t wr_id, const FakeMemory::Region& r, uint32_t len) {
    Sge s{r.va, len, r.key};
    return rq.post(RecvWr{wr_id, std::span<const Sge>(&s, 1)});
  }
};

// The SRQs of one XRC domain, by number.
struct Domain : XrcSrqDirectory {
  std::map<uint32_t, XrcSrq*> srqs;
  XrcSrq* find(uint32_t srqn) override {
    auto it = srqs.find(srqn);
    return it == srqs.end() ? nullptr : it->second;
  }
};

constexpr uint32_t kSrqA = 0x000101, kSrqB = 0x000202, kSrqOtherDomain = 0x000303;

struct XrcPair {
  Endpoint ini{QpType::kXrcSend, 0x11}, tgt{QpType::kXrcRecv, 0x22};
  TestSrq srq_a, srq_b, srq_other;
  Domain domain, other_domain;
  Nanos now = 1'000'000;

  explicit XrcPair(uint32_t mtu = 1024) {
    domain.srqs = {{kSrqA, &srq_a}, {kSrqB, &srq_b}};
    other_domain.srqs = {{kSrqOtherDomain, &srq_other}};
    tgt.qp->set_xrc_srqs(&domain);
    QpConfig cfg;
    cfg.path_mtu_bytes = mtu;
    cfg.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    QpConfig ci = cfg, ct = cfg;
    ci.dest_qpn = 0x22, ci.sq_psn = Psn(100), ci.rq_psn = Psn(0);
    ct.dest_qpn = 0x11, ct.sq_psn = Psn(0), ct.rq_psn = Psn(100);
    ini.bring_up(ci);
    // A target needs no RTS: it only answers (rdma-core moves it to RTR and may stop there).
    tgt.qp->set_state(QpState::kInit);
    tgt.qp->configure(ct);
    tgt.qp->set_state(QpState::kRtr);
  }

  // Delivers every packet both ways until nothing moves; records what went on the wire.
  void pump() {
    for (int step = 0; step < 10000; ++step) {
      const size_t n = ini.run(now) + tgt.run(now);
      bool moved = false;
      while (!ini.out.packets.empty()) {
        Packet p = ini.out.pop();
        requests.push_back(p.hdr);
        tgt.deliver(p, now);
        moved = true;
      }
      while (!tgt.out.packets.empty()) {
        Packet p = tgt.out.pop();
        responses.push_back(p.hdr);
        ini.deliver(p, now);
        moved = true;
      }
      if (n == 0 && !moved) {
        const Nanos t = std::min(ini.qp->next_deadline(now), tgt.qp->next_deadline(now));
        if (t == kNever) return;
        now = std::max(now, t);
      } else {
        now += 1000;
      }
    }
    ADD_FAILURE() << "pump did not settle";
  }
  std::vector<wire::TransportHeaders> requests, responses;
};

uint64_t u64_at(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

SendWr to_srq(SendWr wr, uint32_t srqn) {
  wr.remote_srqn = srqn;
  return wr;
}

TEST(Xrc, SendsLandInTheSrqEachRequestNames) {
  XrcPair p(256);
  auto& src = p.ini.memory.add(600, 0);
  src.data = pattern(600);
  auto& dst_a = p.srq_a.pd_memory.add(1024, kAccessLocalWrite);
  auto& dst_b = p.srq_b.pd_memory.add(1024, kAccessLocalWrite);
  ASSERT_EQ(p.srq_a.post(0xa, dst_a, 1024), 0);
  ASSERT_EQ(p.srq_b.post(0xb, dst_b, 1024), 0);
  Sge whole{src.va, 600, src.key}, part{src.va, 40, src.key};
  ASSERT_EQ(p.ini.qp->post_send(to_srq(make_wr(1, WrOpcode::kSend, &whole, 1), kSrqB)), 0);
  SendWr imm = to_srq(make_wr(2, WrOpcode::kSendWithImm, &part, 1), kSrqA);
  imm.imm = 0x01020304;
  ASSERT_EQ(p.ini.qp->post_send(imm), 0);
  p.pump();

  ASSERT_EQ(p.requests.size(), 4u);  // FIRST, MIDDLE, LAST to B; ONLY with immediate to A
  EXPECT_EQ(p.requests[0].bth.opcode, op::kXrcBase | op::kRcSendFirst);
  EXPECT_EQ(p.requests[2].bth.opcode, op::kXrcBase | op::kRcSendLast);
  EXPECT_EQ(p.requests[3].bth.opcode, op::kXrcBase | op::kRcSendOnlyImm);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.requests[i].xrc_srqn, kSrqB);
  EXPECT_EQ(p.requests[3].xrc_srqn, kSrqA);
  ASSERT_FALSE(p.responses.empty());
  for (const auto& r : p.responses) EXPECT_EQ(r.bth.opcode, op::kXrcBase | op::kRcAck);

  ASSERT_EQ(p.srq_b.completions.entries.size(), 1u);
  Completion b = p.srq_b.completions.pop();
  EXPECT_EQ(b.wr_id, 0xbu);
  EXPECT_EQ(b.status, WcStatus::kSuccess);
  EXPECT_EQ(b.byte_len, 600u);
  EXPECT_EQ(b.qp_num, 0x22u);  // the target QP it came through
  EXPECT_TRUE(std::equal(src.data.begin(), src.data.end(), dst_b.data.begin()));
  ASSERT_EQ(p.srq_a.completions.entries.size(), 1u);
  Completion a = p.srq_a.completions.pop();
  EXPECT_EQ(a.wr_id, 0xau);
  EXPECT_EQ(a.byte_len, 40u);
  EXPECT_EQ(a.wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(a.imm_or_invalidated_rkey, 0x01020304u);
  EXPECT_TRUE(std::equal(src.data.begin(), src.data.begin() + 40, dst_a.data.begin()));
  EXPECT_TRUE(p.tgt.recv_cq.entries.empty());  // nothing goes to the QP's own CQ
  ASSERT_EQ(p.ini.send_cq.entries.size(), 2u);
  EXPECT_EQ(p.ini.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(p.ini.send_cq.pop().status, WcStatus::kSuccess);
}

TEST(Xrc, WriteReadAndAtomicsUseTheMemoryOfTheSrqsPd) {
  XrcPair p(256);
  auto& local = p.ini.memory.add(1024, kAccessLocalWrite);
  local.data = pattern(1024, 3);
  constexpr uint32_t kRemote = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  auto& remote = p.srq_a.pd_memory.add(1024, kRemote);
  // The target QP's own memory has nothing registered: only the SRQ's PD can resolve the keys.
  Sge w{local.va, 600, local.key};
  SendWr write = to_srq(make_wr(1, WrOpcode::kRdmaWrite, &w, 1), kSrqA);
  write.remote_addr = remote.va;
  write.rkey = remote.key;
  ASSERT_EQ(p.ini.qp->post_send(write), 0);
  Sge r{local.va + 700, 300, local.key};
  SendWr read = to_srq(make_wr(2, WrOpcode::kRdmaRead, &r, 1), kSrqA);
  read.remote_addr = remote.va + 100;
  read.rkey = remote.key;
  ASSERT_EQ(p.ini.qp->post_send(read), 0);
  Sge f{local.va + 1000, 8, local.key};
  SendWr fadd = to_srq(make_wr(3, WrOpcode::kAtomicFetchAdd, &f, 1), kSrqA);
  fadd.remote_addr = remote.va + 1016;
  fadd.rkey = remote.key;
  fadd.compare_add = 5;
  ASSERT_EQ(p.ini.qp->post_send(fadd), 0);
  const std::vector<uint8_t> original = local.data;
  p.pump();

  for (int id = 1; id <= 3; ++id) {
    const Completion c = p.ini.send_cq.pop();
    EXPECT_EQ(c.wr_id, static_cast<uint64_t>(id));
    EXPECT_EQ(c.status, WcStatus::kSuccess);
  }
  EXPECT_TRUE(std::equal(original.begin(), original.begin() + 600, remote.data.begin()));
  // READ brought back bytes 100..399 of what the WRITE placed.
  EXPECT_TRUE(std::equal(original.begin() + 100, original.begin() + 400, local.data.begin() + 700));
  EXPECT_EQ(u64_at(local.data.data() + 1000), 0u);  // the original value
  EXPECT_EQ(u64_at(remote.data.data() + 1016), 5u);
  bool read_response = false, atomic_ack = false;
  for (const auto& h : p.responses) {
    read_response |= h.bth.opcode == (op::kXrcBase | op::kRcReadResponseFirst);
    atomic_ack |= h.bth.opcode == (op::kXrcBase | op::kRcAtomicAck);
  }
  EXPECT_TRUE(read_response);
  EXPECT_TRUE(atomic_ack);
  EXPECT_EQ(p.tgt.memory.remote_calls, 0);
}

void expect_rejected(uint32_t srqn) {
  XrcPair p;
  auto& src = p.ini.memory.add(64, 0);
  auto& dst = p.srq_other.pd_memory.add(64, kAccessLocalWrite);
  ASSERT_EQ(p.srq_other.post(7, dst, 64), 0);
  Sge s{src.va, 64, src.key};
  ASSERT_EQ(p.ini.qp->post_send(to_srq(make_wr(1, WrOpcode::kSend, &s, 1), srqn)), 0);
  p.pump();
  ASSERT_EQ(p.responses.size(), 1u);
  EXPECT_EQ(p.responses[0].bth.opcode, op::kXrcBase | op::kRcAck);
  EXPECT_EQ(p.responses[0].aeth.type(), wire::AckType::kNak);
  EXPECT_EQ(p.responses[0].aeth.nak_code(), wire::NakCode::kRemoteAccessError);
  EXPECT_EQ(p.ini.send_cq.pop().status, WcStatus::kRemAccessErr);
  EXPECT_EQ(p.ini.qp->state(), QpState::kErr);
  EXPECT_EQ(p.tgt.qp->state(), QpState::kErr);  // class C: the target stops too
  EXPECT_EQ(p.tgt.qp->counters().xrc_bad_srqn, 1u);
  EXPECT_TRUE(p.srq_other.completions.entries.empty());
  EXPECT_EQ(p.srq_other.rq.size(), 1u);  // its WQE untouched
}

TEST(Xrc, UnknownSrqNumberIsNakedRemoteAccessError) {
  expect_rejected(0x00beef);
}

TEST(Xrc, SrqOfAnotherXrcDomainIsNakedRemoteAccessError) {
  expect_rejected(kSrqOtherDomain);
}

TEST(Xrc, NoSrqWqeIsAnRnrNakAndTheRetryDelivers) {
  XrcPair p;
  auto& src = p.ini.memory.add(64, 0);
  src.data = pattern(64);
  auto& dst = p.srq_a.pd_memory.add(64, kAccessLocalWrite);
  Sge s{src.va, 64, src.key};
  ASSERT_EQ(p.ini.qp->post_send(to_srq(make_wr(1, WrOpcode::kSend, &s, 1), kSrqA)), 0);
  p.ini.run(p.now);
  p.tgt.deliver(p.ini.out.pop(), p.now);
  p.tgt.run(p.now);
  Packet nak = p.tgt.out.pop();
  EXPECT_EQ(nak.hdr.aeth.type(), wire::AckType::kRnrNak);
  p.ini.deliver(nak, p.now);
  ASSERT_EQ(p.srq_a.post(9, dst, 64), 0);
  p.pump();
  EXPECT_EQ(p.ini.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(p.srq_a.completions.pop().wr_id, 9u);
  EXPECT_TRUE(std::equal(src.data.begin(), src.data.end(), dst.data.begin()));
}

TEST(Xrc, EachHalfRefusesTheOtherHalfsVerbs) {
  XrcPair p;
  auto& buf = p.ini.memory.add(64, kAccessLocalWrite);
  EXPECT_EQ(p.ini.post_recv(1, buf, 64), EINVAL);  // an initiator receives nothing
  EXPECT_EQ(p.tgt.post_recv(1, buf, 64), EINVAL);  // a target receives through SRQs
  Sge s{buf.va, 8, buf.key};
  EXPECT_EQ(p.tgt.qp->post_send(make_wr(1, WrOpcode::kSend, &s, 1)), EINVAL);
  // A request arriving at an initiator, or a response at a target, is a counted drop.
  Packet req;
  req.hdr.bth.opcode = op::kXrcBase | op::kRcSendOnly;
  req.hdr.bth.psn = Psn(0);
  p.ini.deliver(req, p.now);
  EXPECT_EQ(p.ini.qp->counters().rx_dropped, 1u);
  Packet ack;
  ack.hdr.bth.opcode = op::kXrcBase | op::kRcAck;
  p.tgt.deliver(ack, p.now);
  EXPECT_EQ(p.tgt.qp->counters().rx_dropped, 1u);
  // RC opcodes are another service: dropped too.
  Packet rc;
  rc.hdr.bth.opcode = op::kRcSendOnly;
  rc.hdr.bth.psn = Psn(100);
  p.tgt.deliver(rc, p.now);
  EXPECT_EQ(p.tgt.qp->counters().rx_dropped, 2u);
}

}  // namespace
}  // namespace uroce::transport::test
