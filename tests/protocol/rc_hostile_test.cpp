// A hostile or broken peer against one RC QP, sans-I/O: no byte of a request reaches memory
// before every check of its packet has passed (validate, then place), a response that does not
// fit acts on nothing, and the device totals (transport/device_totals.h) cap what many QPs hold
// for their peers, with a counted drop at the cap that the peer's retry recovers from.
#include <algorithm>

#include "harness.h"
#include "transport/reorder_buffer.h"  // kTableBytes

namespace uroce::transport::test {
namespace {

namespace op = wire::op;
constexpr uint32_t kEpsn = 1000;

bool all_zero(const std::vector<uint8_t>& v) {
  return std::all_of(v.begin(), v.end(), [](uint8_t b) { return b == 0; });
}

struct Hostile : ::testing::Test {
  Endpoint r{QpType::kRc, 1};
  FakeMemory::Region* rbuf = nullptr;
  FakeMemory::Region* target = nullptr;

  void SetUp() override {
    rbuf = &r.memory.add(4096, kAccessLocalWrite);
    target = &r.memory.add(4096, kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
    QpConfig cfg;
    cfg.dest_qpn = 9;
    cfg.rq_psn = Psn(kEpsn);
    cfg.path_mtu_bytes = 256;
    cfg.max_dest_rd_atomic = 2;
    cfg.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    r.qp->set_state(QpState::kInit);
    r.qp->configure(cfg);
    r.qp->set_state(QpState::kRtr);
  }
  Packet write(uint8_t opcode, uint32_t psn, size_t len, uint32_t dma_len) {
    Packet p = make_packet(opcode, psn, pattern(len, 3));
    p.hdr.reth = {target->va, target->key, dma_len};
    p.hdr.bth.ack_req = true;
    return p;
  }
  // The one response the responder sends: a NAK with `code` at `psn`.
  void expect_only_nak(uint32_t psn, wire::NakCode code) {
    r.run(0);
    ASSERT_EQ(r.out.packets.size(), 1u);
    Packet p = r.out.pop();
    EXPECT_EQ(p.opcode(), op::kRcAck);
    EXPECT_EQ(p.psn(), psn);
    EXPECT_EQ(p.hdr.aeth.type(), wire::AckType::kNak);
    EXPECT_EQ(p.hdr.aeth.nak_code(), code);
    EXPECT_EQ(r.qp->state(), QpState::kErr);
  }
};

// The RETH announces more than the WRITE ONLY carries: before, the payload was written and the
// NAK came after.
TEST_F(Hostile, WriteOnlyShorterThanItsRethIsNakedWithNothingPlaced) {
  r.deliver(write(op::kRcWriteOnly, kEpsn, 100, 200));
  expect_only_nak(kEpsn, wire::NakCode::kInvalidRequest);
  EXPECT_TRUE(all_zero(target->data));
}

TEST_F(Hostile, WriteWithImmediateShorterThanItsRethTakesNoReceiveAndPlacesNothing) {
  ASSERT_EQ(r.post_recv(7, *rbuf, 64), 0);
  Packet p = write(op::kRcWriteOnlyImm, kEpsn, 100, 200);
  p.hdr.imm = 1;
  r.deliver(p);
  expect_only_nak(kEpsn, wire::NakCode::kInvalidRequest);
  EXPECT_TRUE(all_zero(target->data));
  // The receive WQE was never consumed by the request: it flushes with the QP.
  ASSERT_EQ(r.recv_cq.entries.size(), 1u);
  EXPECT_EQ(r.recv_cq.pop().status, WcStatus::kWrFlushErr);
}

// A multi-packet WRITE whose first packet already carries all the RETH announces cannot end
// with a LAST: it is rejected at the FIRST, before its bytes land.
TEST_F(Hostile, WriteFirstThatLeavesNothingForItsLastIsNakedUnplaced) {
  r.deliver(write(op::kRcWriteFirst, kEpsn, 256, 256));
  expect_only_nak(kEpsn, wire::NakCode::kInvalidRequest);
  EXPECT_TRUE(all_zero(target->data));
}

TEST_F(Hostile, WriteLastShorterThanWhatIsLeftIsNakedUnplaced) {
  Packet first = write(op::kRcWriteFirst, kEpsn, 256, 600);
  first.hdr.bth.ack_req = false;
  r.deliver(first);
  Packet last = make_packet(op::kRcWriteLast, kEpsn + 1, pattern(40, 5));  // 344 left
  last.hdr.bth.ack_req = true;
  r.deliver(last);
  expect_only_nak(kEpsn + 1, wire::NakCode::kInvalidRequest);
  // The FIRST passed every check and was placed; the bad LAST placed nothing after it.
  EXPECT_TRUE(
      std::equal(target->data.begin(), target->data.begin() + 256, pattern(256, 3).begin()));
  EXPECT_TRUE(
      std::all_of(target->data.begin() + 256, target->data.end(), [](uint8_t b) { return !b; }));
}

// A receive WQE whose second SGE fails its key: the first SGE's bytes stay as they were.
TEST_F(Hostile, SendIntoAReceiveListWithABadSecondSgeWritesNoneOfIt) {
  Sge sges[2] = {{rbuf->va, 16, rbuf->key}, {rbuf->va + 16, 64, 0x7777}};
  ASSERT_EQ(r.qp->post_recv(RecvWr{1, std::span<const Sge>(sges, 2)}), 0);
  Packet p = make_packet(op::kRcSendOnly, kEpsn, pattern(40, 9));
  p.hdr.bth.ack_req = true;
  r.deliver(p);
  expect_only_nak(kEpsn, wire::NakCode::kRemoteOperationalError);
  EXPECT_EQ(r.recv_cq.pop().status, WcStatus::kLocProtErr);
  EXPECT_TRUE(all_zero(rbuf->data));
}

TEST_F(Hostile, UdReceiveWithABadSecondSgeWritesNeitherGrhNorPayload) {
  Endpoint ud{QpType::kUd, 2};
  auto& buf = ud.memory.add(4096, kAccessLocalWrite);
  QpConfig cfg;
  cfg.qkey = 0x1234;
  cfg.path_mtu_bytes = 1024;
  ud.qp->set_state(QpState::kInit);
  ud.qp->configure(cfg);
  ud.qp->set_state(QpState::kRtr);
  Sge sges[2] = {{buf.va, 48, buf.key}, {buf.va + 48, 64, 0x7777}};
  ASSERT_EQ(ud.qp->post_recv(RecvWr{1, std::span<const Sge>(sges, 2)}), 0);
  Packet p = make_packet(op::kUdSendOnly, 5, pattern(32, 1), 2);
  p.hdr.deth = {0x1234, 77};
  ud.deliver(p);
  EXPECT_EQ(ud.recv_cq.pop().status, WcStatus::kLocProtErr);
  EXPECT_TRUE(all_zero(buf.data));
}

// ---- The requester's side: responses that do not fit ------------------------------------------

struct HostileResponder : ::testing::Test {
  Endpoint q{QpType::kRc, 1};
  FakeMemory::Region* buf = nullptr;
  WrMaker wr{buf};

  void SetUp() override {
    buf = &q.memory.add(4096, kAccessLocalWrite);
    QpConfig cfg;
    cfg.dest_qpn = 9;
    cfg.sq_psn = Psn(100);
    cfg.path_mtu_bytes = 256;
    cfg.max_rd_atomic = 4;
    q.bring_up(cfg);
  }
};

// A READ response one byte short, after a SEND still unacknowledged: it neither lands nor
// acknowledges the SEND (before, the SEND completed on the strength of a malformed response).
TEST_F(HostileResponder, ShortReadResponseAcknowledgesNothingAndPlacesNothing) {
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 8)), 0);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kRdmaRead, 64)), 0);
  q.run(0);
  ASSERT_EQ(q.out.packets.size(), 2u);
  Packet resp = make_packet(op::kRcReadResponseOnly, 101, pattern(60, 4));
  resp.hdr.aeth = wire::Aeth::ack(2);
  q.deliver(resp);
  EXPECT_TRUE(q.send_cq.entries.empty());
  EXPECT_TRUE(all_zero(buf->data));
  EXPECT_EQ(q.qp->counters().rx_dropped, 1u);
}

// A response of the wrong type for the request at its PSN (an atomic ACK for a READ) is dropped.
TEST_F(HostileResponder, AtomicAckForAReadIsDropped) {
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaRead, 8)), 0);
  q.run(0);
  Packet resp = make_packet(op::kRcAtomicAck, 100);
  resp.hdr.aeth = wire::Aeth::ack(1);
  resp.hdr.atomic_ack.original = 0x1111111111111111ull;
  q.deliver(resp);
  EXPECT_TRUE(q.send_cq.entries.empty());
  EXPECT_TRUE(all_zero(buf->data));
  EXPECT_EQ(q.qp->counters().rx_dropped, 1u);
}

// ---- Device totals ------------------------------------------------------------------------

// Many QPs on one device, each asked for READs: past the device's total of queued responses the
// READ is dropped unexecuted and counted; once responses go out, the retry is answered.
TEST(DeviceTotalsTest, QueuedResponsesStopAtTheDeviceTotalAndTheRetryIsAnswered) {
  DeviceTotals totals({/*reorder_bytes=*/1 << 20, /*pending_responses=*/3});
  std::vector<std::unique_ptr<Endpoint>> qps;
  std::vector<FakeMemory::Region*> mems;
  for (uint32_t i = 0; i < 5; ++i) {
    qps.push_back(std::make_unique<Endpoint>(QpType::kRc, 10 + i));
    mems.push_back(&qps.back()->memory.add(64, kAccessRemoteRead));
    QpConfig cfg;
    cfg.dest_qpn = 9;
    cfg.rq_psn = Psn(kEpsn);
    cfg.max_dest_rd_atomic = 4;
    cfg.qp_access_flags = kAccessRemoteRead;
    cfg.totals = &totals;
    qps.back()->bring_up(cfg);
  }
  auto read = [&](uint32_t i) {
    Packet p = make_packet(op::kRcReadRequest, kEpsn, {}, 10 + i);
    p.hdr.reth = {mems[i]->va, mems[i]->key, 16};
    qps[i]->deliver(p);
  };
  for (uint32_t i = 0; i < 5; ++i) read(i);
  EXPECT_EQ(totals.responses(), 3u);
  EXPECT_EQ(totals.response_cap_drops(), 2u);
  for (uint32_t i = 3; i < 5; ++i) {
    EXPECT_EQ(qps[i]->qp->counters().rx_dropped, 1u);
    qps[i]->run(0);
    EXPECT_TRUE(qps[i]->out.packets.empty());  // silence: no NAK, nothing executed
  }
  // The first three answer; their charges come back.
  for (uint32_t i = 0; i < 3; ++i) {
    qps[i]->run(0);
    ASSERT_EQ(qps[i]->out.packets.size(), 1u);
    EXPECT_EQ(qps[i]->out.pop().opcode(), op::kRcReadResponseOnly);
  }
  EXPECT_EQ(totals.responses(), 0u);
  // The requesters' retries (same PSN: the request was never executed) are answered now.
  for (uint32_t i = 3; i < 5; ++i) {
    read(i);
    qps[i]->run(0);
    ASSERT_EQ(qps[i]->out.packets.size(), 1u);
    Packet resp = qps[i]->out.pop();
    EXPECT_EQ(resp.opcode(), op::kRcReadResponseOnly);
    EXPECT_EQ(resp.psn(), kEpsn);
  }
  EXPECT_EQ(totals.responses(), 0u);
  qps.clear();
  EXPECT_EQ(totals.responses(), 0u);
}

// An atomic refused at the total does not act on memory.
TEST(DeviceTotalsTest, AtomicAtTheTotalIsNotExecuted) {
  DeviceTotals totals({1 << 20, 0});
  Endpoint e{QpType::kRc, 1};
  auto& mem = e.memory.add(8, kAccessRemoteAtomic);
  QpConfig cfg;
  cfg.rq_psn = Psn(kEpsn);
  cfg.qp_access_flags = kAccessRemoteAtomic;
  cfg.totals = &totals;
  e.bring_up(cfg);
  Packet p = make_packet(op::kRcFetchAdd, kEpsn);
  p.hdr.atomic = {mem.va, mem.key, 5, 0};
  e.deliver(p);
  e.run(0);
  EXPECT_TRUE(e.out.packets.empty());
  EXPECT_TRUE(all_zero(mem.data));
  EXPECT_EQ(totals.response_cap_drops(), 1u);
}

// Selective-repeat QPs holding out-of-order packets: the device total of reorder bytes stops the
// third QP's buffer (its table would pass it) and every payload past the cap; each drop is
// counted, the holes are still NAKed, and after the hole fills and the held packets drain, the
// device is charged nothing more than the tables.
TEST(DeviceTotalsTest, ReorderBuffersStopAtTheDeviceTotalAndRecover) {
  const uint64_t cap = 2 * ReorderBuffer::kTableBytes + 4 * 256;
  DeviceTotals totals({cap, 4096});
  std::vector<std::unique_ptr<Endpoint>> qps;
  std::vector<FakeMemory::Region*> mems;
  for (uint32_t i = 0; i < 3; ++i) {
    qps.push_back(std::make_unique<Endpoint>(QpType::kRc, 10 + i));
    mems.push_back(&qps.back()->memory.add(4096, kAccessRemoteWrite));
    QpConfig cfg;
    cfg.dest_qpn = 9;
    cfg.rq_psn = Psn(kEpsn);
    cfg.path_mtu_bytes = 256;
    cfg.qp_access_flags = kAccessRemoteWrite;
    cfg.loss_recovery = LossRecovery::kSelectiveRepeat;
    cfg.totals = &totals;
    qps.back()->bring_up(cfg);
  }
  auto write = [&](uint32_t i, uint32_t k) {
    Packet p =
        make_packet(op::kRcWriteOnly, kEpsn + k, pattern(256, static_cast<uint8_t>(k)), 10 + i);
    p.hdr.reth = {mems[i]->va + 256 * k, mems[i]->key, 256};
    p.hdr.bth.ack_req = true;
    qps[i]->deliver(p);
  };
  // PSNs kEpsn+1.. arrive, kEpsn is lost: QP 0 holds 3, QP 1 holds 1 and is refused 2 more
  // (the byte total), QP 2 gets no table at all.
  for (uint32_t i = 0; i < 3; ++i)
    for (uint32_t k = 1; k <= 3; ++k) write(i, k);
  EXPECT_EQ(qps[0]->qp->counters().ooo_buffered, 3u);
  EXPECT_EQ(qps[1]->qp->counters().ooo_buffered, 1u);
  EXPECT_EQ(qps[1]->qp->counters().ooo_dropped, 2u);
  EXPECT_EQ(qps[2]->qp->counters().ooo_buffered, 0u);
  EXPECT_EQ(qps[2]->qp->counters().ooo_dropped, 3u);
  EXPECT_EQ(totals.reorder_cap_drops(), 5u);
  EXPECT_EQ(totals.reorder_bytes(), cap);
  for (auto& q : qps) {
    q->run(0);
    ASSERT_EQ(q->out.packets.size(), 1u);  // one sequence NAK per hole
    EXPECT_EQ(q->out.pop().hdr.aeth.nak_code(), wire::NakCode::kPsnSequenceError);
  }
  // The peers resend: QP 0 needs only the hole; QPs 1 and 2 go through what was dropped.
  for (uint32_t i = 0; i < 3; ++i) write(i, 0);
  for (uint32_t i = 1; i < 3; ++i)
    for (uint32_t k = i == 1 ? 2 : 1; k <= 3; ++k) write(i, k);
  for (uint32_t i = 0; i < 3; ++i) {
    for (uint32_t k = 0; k <= 3; ++k) {
      const std::vector<uint8_t> want = pattern(256, static_cast<uint8_t>(k));
      EXPECT_TRUE(std::equal(want.begin(), want.end(), mems[i]->data.begin() + 256 * k))
          << "qp " << i << " packet " << k;
    }
    EXPECT_EQ(qps[i]->qp->state(), QpState::kRts);
  }
  EXPECT_EQ(totals.reorder_bytes(), 2 * ReorderBuffer::kTableBytes);
  qps.clear();
  EXPECT_EQ(totals.reorder_bytes(), 0u);
}

}  // namespace
}  // namespace uroce::transport::test
