// The RC responder fed hand-built request packets: PSN checks, ACK coalescing, every NAK it
// sends, READ/atomic responses and their replay.
#include "harness.h"

namespace uroce::transport::test {
namespace {

namespace op = wire::op;
constexpr uint32_t kEpsn = 1000;

struct Responder : ::testing::Test {
  Endpoint r{QpType::kRc, 1};
  FakeMemory::Region* rbuf = nullptr;    // receive buffer
  FakeMemory::Region* target = nullptr;  // remote-accessible memory
  Nanos now = 0;

  void SetUp() override {
    QpConfig cfg;
    cfg.dest_qpn = 9;
    cfg.rq_psn = Psn(kEpsn);
    cfg.sq_psn = Psn(1);
    cfg.path_mtu_bytes = 256;
    cfg.min_rnr_timer = 14;
    cfg.max_dest_rd_atomic = 2;
    cfg.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    configure(cfg);
  }
  void configure(const QpConfig& cfg) {
    rbuf = &r.memory.add(4096, kAccessLocalWrite);
    target = &r.memory.add(4096, kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
    r.qp->set_state(QpState::kInit);
    r.qp->configure(cfg);
    r.qp->set_state(QpState::kRtr);
  }
  // AckReq defaults to what a requester does: set on the last packet of a message.
  Packet send(uint8_t opcode, uint32_t psn, size_t len, int ack_req = -1) {
    Packet p = make_packet(opcode, psn, pattern(len, static_cast<uint8_t>(psn)));
    p.hdr.bth.ack_req = ack_req < 0 ? wire::opcode_info(opcode).ends_message() : ack_req;
    return p;
  }
  Packet write(uint8_t opcode, uint32_t psn, size_t len, uint64_t va, uint32_t dma_len,
               uint32_t rkey = 0) {
    Packet p = send(opcode, psn, len);
    p.hdr.reth = {va, rkey ? rkey : target->key, dma_len};
    return p;
  }
  Packet read(uint32_t psn, uint64_t va, uint32_t len) {
    Packet p = make_packet(op::kRcReadRequest, psn);
    p.hdr.reth = {va, target->key, len};
    p.hdr.bth.ack_req = true;
    return p;
  }
  Packet atomic(uint8_t opcode, uint32_t psn, uint64_t va, uint64_t swap_add, uint64_t cmp = 0) {
    Packet p = make_packet(opcode, psn);
    p.hdr.atomic = {va, target->key, swap_add, cmp};
    p.hdr.bth.ack_req = true;
    return p;
  }
  void feed(const Packet& p) { r.deliver(p, now); }
  // Everything the responder sends now.
  std::vector<Packet> drain() {
    r.run(now);
    std::vector<Packet> v(r.out.packets.begin(), r.out.packets.end());
    r.out.packets.clear();
    return v;
  }
  static void expect_ack(const Packet& p, uint32_t psn, uint32_t msn) {
    EXPECT_EQ(p.opcode(), op::kRcAck);
    EXPECT_EQ(p.psn(), psn & Psn::kMask);
    EXPECT_EQ(p.hdr.aeth.type(), wire::AckType::kAck);
    EXPECT_EQ(p.hdr.aeth.msn, msn);
    EXPECT_EQ(p.hdr.bth.dest_qp, 9u);
  }
  static void expect_nak(const Packet& p, uint32_t psn, wire::NakCode code) {
    EXPECT_EQ(p.opcode(), op::kRcAck);
    EXPECT_EQ(p.psn(), psn);
    EXPECT_EQ(p.hdr.aeth.type(), wire::AckType::kNak);
    EXPECT_EQ(p.hdr.aeth.nak_code(), code);
  }
};

TEST_F(Responder, InOrderSendIsPlacedCompletedAndAcked) {
  ASSERT_EQ(r.post_recv(77, *rbuf, 4096), 0);
  feed(send(op::kRcSendOnly, kEpsn, 100));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_ack(out[0], kEpsn, 1);
  Completion c = r.recv_cq.pop();
  EXPECT_EQ(c.wr_id, 77u);
  EXPECT_EQ(c.byte_len, 100u);
  EXPECT_EQ(c.wc_flags, 0u);
  EXPECT_TRUE(std::equal(rbuf->data.begin(), rbuf->data.begin() + 100,
                         pattern(100, static_cast<uint8_t>(kEpsn)).begin()));
}

TEST_F(Responder, AcksCoalesceUntilAckReqAndEveryNPackets) {
  for (int i = 0; i < 40; ++i) ASSERT_EQ(r.post_recv(i, *rbuf, 4096), 0);
  feed(send(op::kRcSendOnly, kEpsn, 10, false));
  feed(send(op::kRcSendOnly, kEpsn + 1, 10, false));
  EXPECT_TRUE(drain().empty());
  feed(send(op::kRcSendOnly, kEpsn + 2, 10, true));
  feed(send(op::kRcSendOnly, kEpsn + 3, 10, true));  // supersedes the queued ACK
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_ack(out[0], kEpsn + 3, 4);
  // Without AckReq the responder still ACKs after 16 unacknowledged packets.
  for (uint32_t i = 4; i < 4 + 16; ++i) feed(send(op::kRcSendOnly, kEpsn + i, 10, false));
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_ack(out[0], kEpsn + 19, 20);
}

TEST_F(Responder, DuplicateIsReAckedNotReExecuted) {
  ASSERT_EQ(r.post_recv(1, *rbuf, 4096), 0);
  ASSERT_EQ(r.post_recv(2, *rbuf, 4096), 0);
  feed(send(op::kRcSendOnly, kEpsn, 10));
  feed(send(op::kRcSendOnly, kEpsn + 1, 10));
  drain();
  feed(send(op::kRcSendOnly, kEpsn, 10));  // past PSN
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_ack(out[0], kEpsn + 1, 2);  // the latest ACK, MSN unchanged
  EXPECT_EQ(r.recv_cq.entries.size(), 2u);
  EXPECT_EQ(r.qp->counters().duplicate_requests, 1u);
}

TEST_F(Responder, FuturePsnGetsOneSequenceNakUntilTheGapCloses) {
  for (int i = 0; i < 4; ++i) ASSERT_EQ(r.post_recv(i, *rbuf, 4096), 0);
  feed(send(op::kRcSendOnly, kEpsn + 2, 10));
  feed(send(op::kRcSendOnly, kEpsn + 3, 10));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_nak(out[0], kEpsn, wire::NakCode::kPsnSequenceError);
  EXPECT_EQ(r.qp->counters().seq_naks_sent, 1u);
  EXPECT_TRUE(r.recv_cq.entries.empty());
  feed(send(op::kRcSendOnly, kEpsn, 10));
  feed(send(op::kRcSendOnly, kEpsn + 2, 10));  // a new gap: a new NAK
  out = drain();
  ASSERT_EQ(out.size(), 2u);
  expect_ack(out[0], kEpsn, 1);
  expect_nak(out[1], kEpsn + 1, wire::NakCode::kPsnSequenceError);
  EXPECT_EQ(r.qp->state(), QpState::kRtr);
}

TEST_F(Responder, EmptyReceiveQueueGetsRnrNakWithConfiguredTimer) {
  feed(send(op::kRcSendFirst, kEpsn, 256));
  feed(send(op::kRcSendLast, kEpsn + 1, 10));  // dropped silently after the RNR NAK
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), kEpsn);
  EXPECT_EQ(out[0].hdr.aeth.type(), wire::AckType::kRnrNak);
  EXPECT_EQ(out[0].hdr.aeth.value(), 14);
  EXPECT_EQ(r.qp->counters().rnr_naks_sent, 1u);
  ASSERT_EQ(r.post_recv(5, *rbuf, 4096), 0);
  feed(send(op::kRcSendFirst, kEpsn, 256));
  feed(send(op::kRcSendLast, kEpsn + 1, 10));
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_ack(out[0], kEpsn + 1, 1);
  EXPECT_EQ(r.recv_cq.pop().byte_len, 266u);
}

TEST_F(Responder, SendLongerThanReceiveBufferIsInvalidRequestAndLocLenErr) {
  ASSERT_EQ(r.post_recv(3, *rbuf, 100), 0);
  ASSERT_EQ(r.post_recv(4, *rbuf, 100), 0);
  feed(send(op::kRcSendOnly, kEpsn, 200));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_nak(out[0], kEpsn, wire::NakCode::kInvalidRequest);
  Completion c = r.recv_cq.pop();
  EXPECT_EQ(c.wr_id, 3u);
  EXPECT_EQ(c.status, WcStatus::kLocLenErr);
  EXPECT_EQ(r.recv_cq.pop().status, WcStatus::kWrFlushErr);  // the rest flush, in order
  EXPECT_EQ(r.qp->state(), QpState::kErr);
}

TEST_F(Responder, OpcodeOutOfSequenceIsInvalidRequest) {
  feed(send(op::kRcSendMiddle, kEpsn, 256));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_nak(out[0], kEpsn, wire::NakCode::kInvalidRequest);
  EXPECT_EQ(r.qp->state(), QpState::kErr);
}

TEST_F(Responder, WriteInterruptingASendIsInvalidRequest) {
  ASSERT_EQ(r.post_recv(1, *rbuf, 4096), 0);
  feed(send(op::kRcSendFirst, kEpsn, 256));
  feed(write(op::kRcWriteOnly, kEpsn + 1, 8, target->va, 8));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_nak(out[0], kEpsn + 1, wire::NakCode::kInvalidRequest);
}

TEST_F(Responder, MiddlePacketShorterThanMtuIsInvalidRequest) {
  feed(write(op::kRcWriteFirst, kEpsn, 256, target->va, 1024));
  feed(write(op::kRcWriteMiddle, kEpsn + 1, 200, 0, 0));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_nak(out[0], kEpsn + 1, wire::NakCode::kInvalidRequest);
}

TEST_F(Responder, WriteBeyondItsRethLengthIsInvalidRequest) {
  feed(write(op::kRcWriteOnly, kEpsn, 100, target->va, 50));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_nak(out[0], kEpsn, wire::NakCode::kInvalidRequest);
}

TEST_F(Responder, WriteWithBadRkeyOrOutOfBoundsIsRemoteAccessError) {
  feed(write(op::kRcWriteOnly, kEpsn, 16, target->va + 4090, 16));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_nak(out[0], kEpsn, wire::NakCode::kRemoteAccessError);
  EXPECT_EQ(r.qp->state(), QpState::kErr);
  EXPECT_TRUE(std::all_of(target->data.begin(), target->data.end(), [](uint8_t b) { return !b; }));
}

TEST_F(Responder, QpAccessFlagsGateRemoteOperations) {
  Endpoint e{QpType::kRc, 1};
  auto& mem = e.memory.add(64, kAccessRemoteRead | kAccessRemoteWrite);
  QpConfig cfg;
  cfg.rq_psn = Psn(kEpsn);
  cfg.qp_access_flags = kAccessRemoteWrite;  // no remote read
  e.qp->set_state(QpState::kInit);
  e.qp->configure(cfg);
  e.qp->set_state(QpState::kRtr);
  Packet p = make_packet(op::kRcReadRequest, kEpsn);
  p.hdr.reth = {mem.va, mem.key, 8};
  e.deliver(p);
  e.run(0);
  ASSERT_EQ(e.out.packets.size(), 1u);
  expect_nak(e.out.pop(), kEpsn, wire::NakCode::kRemoteAccessError);
}

TEST_F(Responder, ReadIsAnsweredInPacketsAndDuplicateReadReExecutesFromMemory) {
  target->data = pattern(4096, 11);
  feed(read(kEpsn, target->va + 10, 600));
  auto out = drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadResponseFirst);
  EXPECT_EQ(out[1].opcode(), op::kRcReadResponseMiddle);
  EXPECT_EQ(out[2].opcode(), op::kRcReadResponseLast);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(out[i].psn(), kEpsn + i);
  EXPECT_EQ(out[0].hdr.aeth.msn, 1u);
  EXPECT_EQ(out[2].hdr.aeth.msn, 1u);
  EXPECT_EQ(out[2].payload.size(), 88u);
  EXPECT_TRUE(
      std::equal(out[1].payload.begin(), out[1].payload.end(), target->data.begin() + 10 + 256));
  // The next request PSN is past the READ's response PSNs (IBA 9.7.4.1.2).
  ASSERT_EQ(r.post_recv(1, *rbuf, 4096), 0);
  feed(send(op::kRcSendOnly, kEpsn + 3, 4));
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_ack(out[0], kEpsn + 3, 2);
  // A duplicate asking for the rest of the READ (from its second packet) is served again, from
  // memory as it is now.
  std::fill(target->data.begin(), target->data.end(), 0x5a);
  feed(read(kEpsn + 1, target->va + 10 + 256, 344));
  out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadResponseFirst);
  EXPECT_EQ(out[0].psn(), kEpsn + 1);
  EXPECT_EQ(out[1].psn(), kEpsn + 2);
  EXPECT_EQ(out[1].payload[0], 0x5a);
}

TEST_F(Responder, ALoneReadResponseIsHandedToTheLinkEvery64Packets) {
  // With one response queued, the requester waits for this READ alone: each 64 packets go to the
  // link as they are built, so that its receive starts while the rest are built. Behind another
  // queued response the packets wait for the link's batch as before.
  FakeMemory::Region& big = r.memory.add(256 * 130, kAccessRemoteRead);
  auto big_read = [&](uint32_t psn) {
    Packet p = make_packet(op::kRcReadRequest, psn);
    p.hdr.reth = {big.va, big.key, 256 * 130};
    p.hdr.bth.ack_req = true;
    return p;
  };
  feed(big_read(kEpsn));
  auto out = drain();
  ASSERT_EQ(out.size(), 130u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].flush_after, i == 63 || i == 127) << i;
  feed(big_read(kEpsn + 130));
  feed(big_read(kEpsn + 260));
  out = drain();
  ASSERT_EQ(out.size(), 260u);
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i].flush_after, i == 130 + 63 || i == 130 + 127) << i;
}

TEST_F(Responder, ZeroLengthReadGetsOneEmptyResponse) {
  feed(read(kEpsn, 0, 0));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadResponseOnly);
  EXPECT_TRUE(out[0].payload.empty());
}

TEST_F(Responder, AtomicExecutesOnceAndDuplicateReplaysTheOriginal) {
  uint64_t v = 40;
  std::memcpy(target->data.data() + 16, &v, 8);
  feed(atomic(op::kRcFetchAdd, kEpsn, target->va + 16, 2));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAtomicAck);
  EXPECT_EQ(out[0].psn(), kEpsn);
  EXPECT_EQ(out[0].hdr.atomic_ack.original, 40u);
  EXPECT_EQ(out[0].hdr.aeth.msn, 1u);
  feed(atomic(op::kRcFetchAdd, kEpsn, target->va + 16, 2));  // duplicate
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].hdr.atomic_ack.original, 40u);
  std::memcpy(&v, target->data.data() + 16, 8);
  EXPECT_EQ(v, 42u);  // added once
  feed(atomic(op::kRcCompareSwap, kEpsn + 1, target->va + 16, 99, 42));
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].hdr.atomic_ack.original, 42u);
  std::memcpy(&v, target->data.data() + 16, 8);
  EXPECT_EQ(v, 99u);
}

TEST_F(Responder, MisalignedAtomicIsInvalidRequest) {
  feed(atomic(op::kRcFetchAdd, kEpsn, target->va + 4, 1));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_nak(out[0], kEpsn, wire::NakCode::kInvalidRequest);
}

TEST_F(Responder, MoreReadsThanResponderResourcesIsInvalidRequest) {
  feed(read(kEpsn, target->va, 8));
  feed(read(kEpsn + 1, target->va, 8));
  feed(read(kEpsn + 2, target->va, 8));  // max_dest_rd_atomic = 2, both still unanswered
  auto out = drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadResponseOnly);
  EXPECT_EQ(out[1].opcode(), op::kRcReadResponseOnly);
  expect_nak(out[2], kEpsn + 2, wire::NakCode::kInvalidRequest);
}

// A requester that timed out resends its outstanding READs; the original answers arrive, it
// completes them and posts a new READ while the responder is still queued to replay the
// duplicates. The new READ takes the oldest replaying resource instead of being NAKed, and the
// abandoned replay never goes out (found by `uroce bench read` with a short ACK timeout).
TEST_F(Responder, NewReadTakesOverAResourceThatIsOnlyReplaying) {
  target->data = pattern(4096, 3);
  feed(read(kEpsn, target->va, 8));
  feed(read(kEpsn + 1, target->va + 8, 8));
  ASSERT_EQ(drain().size(), 2u);
  feed(read(kEpsn, target->va, 8));  // duplicates, replies queued, not yet sent
  feed(read(kEpsn + 1, target->va + 8, 8));
  feed(read(kEpsn + 2, target->va + 16, 8));  // new: both resources are only replaying
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadResponseOnly);  // replay of kEpsn + 1 still goes out
  EXPECT_EQ(out[0].psn(), kEpsn + 1);
  EXPECT_EQ(out[1].opcode(), op::kRcReadResponseOnly);
  EXPECT_EQ(out[1].psn(), kEpsn + 2);
  EXPECT_TRUE(std::equal(out[1].payload.begin(), out[1].payload.end(), target->data.begin() + 16));
  EXPECT_EQ(r.qp->state(), QpState::kRtr);  // no error
}

TEST_F(Responder, SendWithInvalidateInvalidatesAndReportsTheKey) {
  ASSERT_EQ(r.post_recv(1, *rbuf, 64), 0);
  auto& victim = r.memory.add(64, kAccessRemoteWrite);
  Packet p = send(op::kRcSendOnlyInv, kEpsn, 8);
  p.hdr.ieth_rkey = victim.key;
  feed(p);
  drain();
  Completion c = r.recv_cq.pop();
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.wc_flags, uint32_t{kWcWithInvalidate});
  EXPECT_EQ(c.imm_or_invalidated_rkey, victim.key);
  ASSERT_EQ(r.memory.invalidated.size(), 1u);
  EXPECT_FALSE(victim.valid);
}

TEST_F(Responder, ImmediateDataIsReported) {
  ASSERT_EQ(r.post_recv(1, *rbuf, 64), 0);
  Packet p = send(op::kRcSendOnlyImm, kEpsn, 8);
  p.hdr.imm = 0x01020304;
  feed(p);
  drain();
  Completion c = r.recv_cq.pop();
  EXPECT_EQ(c.wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(c.imm_or_invalidated_rkey, 0x01020304u);
}

TEST_F(Responder, ReceiveBufferWithBadLkeyIsRemoteOperationalError) {
  Sge s{rbuf->va, 64, 0x7777};
  ASSERT_EQ(r.qp->post_recv(RecvWr{1, std::span<const Sge>(&s, 1)}), 0);
  feed(send(op::kRcSendOnly, kEpsn, 8));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_nak(out[0], kEpsn, wire::NakCode::kRemoteOperationalError);
  EXPECT_EQ(r.recv_cq.pop().status, WcStatus::kLocProtErr);
  EXPECT_EQ(r.qp->state(), QpState::kErr);
}

TEST_F(Responder, WriteWithImmediateWithoutReceiveWqeIsRnrAndRetryRepeatsNothing) {
  feed(write(op::kRcWriteFirst, kEpsn, 256, target->va, 300));
  Packet last = send(op::kRcWriteLastImm, kEpsn + 1, 44);
  last.hdr.imm = 5;
  feed(last);
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].hdr.aeth.type(), wire::AckType::kRnrNak);
  EXPECT_EQ(out[0].psn(), kEpsn + 1);
  ASSERT_EQ(r.post_recv(8, *rbuf, 0), 0);
  feed(last);
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  expect_ack(out[0], kEpsn + 1, 1);
  Completion c = r.recv_cq.pop();
  EXPECT_EQ(c.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(c.byte_len, 300u);
  EXPECT_TRUE(std::equal(last.payload.begin(), last.payload.end(), target->data.begin() + 256));
}

TEST_F(Responder, PsnWrapsAt24Bits) {
  Endpoint e{QpType::kRc, 1};
  auto& buf = e.memory.add(64, kAccessLocalWrite);
  QpConfig cfg;
  cfg.dest_qpn = 9;
  cfg.rq_psn = Psn(Psn::kMask);
  e.qp->set_state(QpState::kInit);
  e.qp->configure(cfg);
  e.qp->set_state(QpState::kRtr);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(e.post_recv(i, buf, 64), 0);
  for (uint32_t psn : {Psn::kMask, 0u, 1u}) {
    Packet p = make_packet(op::kRcSendOnly, psn, {1, 2, 3});
    p.hdr.bth.ack_req = true;
    e.deliver(p);
  }
  e.run(0);
  ASSERT_EQ(e.out.packets.size(), 1u);
  expect_ack(e.out.pop(), 1, 3);
  Packet dup = make_packet(op::kRcSendOnly, Psn::kMask, {1, 2, 3});
  e.deliver(dup);  // 0xffffff is now in the past
  e.run(0);
  ASSERT_EQ(e.out.packets.size(), 1u);
  expect_ack(e.out.pop(), 1, 3);
  EXPECT_EQ(e.recv_cq.entries.size(), 3u);
}

TEST_F(Responder, PacketsBeforeRtrOrWithWrongServiceArePacketsDropped) {
  Endpoint e{QpType::kRc, 1};
  e.deliver(make_packet(op::kRcSendOnly, 0, {1}));  // RESET
  e.qp->set_state(QpState::kInit);
  e.deliver(make_packet(op::kRcSendOnly, 0, {1}));  // INIT
  EXPECT_EQ(e.run(0), 0u);
  EXPECT_EQ(e.qp->counters().rx_dropped, 2u);
  feed(make_packet(op::kUcBase | op::kRcSendOnly, kEpsn, {1}));  // UC opcode on an RC QP
  EXPECT_TRUE(drain().empty());
  EXPECT_EQ(r.qp->counters().rx_dropped, 1u);
}

TEST_F(Responder, NextDeadlineIsNowWhileAResponseIsQueued) {
  ASSERT_EQ(r.post_recv(1, *rbuf, 64), 0);
  EXPECT_EQ(r.qp->next_deadline(now), kNever);
  feed(send(op::kRcSendOnly, kEpsn, 8));
  EXPECT_EQ(r.qp->next_deadline(now), now);
  EXPECT_EQ(drain().size(), 1u);
  EXPECT_EQ(r.qp->next_deadline(now), kNever);  // a responder keeps no timers
}

TEST_F(Responder, ReadResponsesGoThroughThePacer) {
  r.qp->pacer().set_rate(8'000'000, 256);  // 1 byte per us, one packet of burst
  feed(read(kEpsn, target->va, 1024));
  now = 1'000'000;
  size_t sent = drain().size();
  EXPECT_LE(sent, 2u);  // the bucket's burst, then the pacer's debt rule
  for (int i = 0; i < 10 && sent < 4; ++i) {
    const Nanos t = r.qp->next_deadline(now);
    ASSERT_GT(t, now);
    ASSERT_NE(t, kNever);
    now = t;
    sent += drain().size();
  }
  EXPECT_EQ(sent, 4u);
  EXPECT_GE(now, Nanos{1'000'000} + 2 * 250'000);  // 256 us per 256-byte packet
}

}  // namespace
}  // namespace uroce::transport::test
