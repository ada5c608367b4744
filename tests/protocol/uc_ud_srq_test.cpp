// UC (no ACKs; a gap drops the rest of a message), UD (Q_Key, GRH, one packet per message) and
// receive queues shared between QPs.
#include "common/bytes.h"
#include "pair.h"
#include "transport/send_queue.h"

namespace uroce::transport::test {
namespace {

namespace op = wire::op;

TEST(Uc, SendsWithoutAcksAndCompletesWhenTheLastPacketLeaves) {
  QpConfig cfg;
  cfg.path_mtu_bytes = 256;
  Pair p(QpType::kUc, cfg);
  auto& src = p.a.memory.add(600, 0);
  auto& dst = p.b.memory.add(1024, kAccessLocalWrite);
  src.data = pattern(600);
  ASSERT_EQ(p.b.post_recv(1, dst, 1024), 0);
  Sge s{src.va, 600, src.key};
  ASSERT_EQ(p.a.qp->post_send(make_wr(1, WrOpcode::kSend, &s, 1)), 0);
  EXPECT_EQ(p.a.run(p.now), 3u);
  EXPECT_EQ(p.a.out.packets[0].opcode(), op::kUcBase | op::kRcSendFirst);
  EXPECT_FALSE(p.a.out.packets[2].hdr.bth.ack_req);
  EXPECT_EQ(p.a.send_cq.pop().status, WcStatus::kSuccess);  // no ACK needed
  EXPECT_EQ(p.a.qp->next_deadline(p.now), kNever);          // and no timer
  p.pump();
  EXPECT_EQ(p.b.out.packets.size(), 0u);
  EXPECT_EQ(p.b.recv_cq.pop().byte_len, 600u);
  EXPECT_TRUE(std::equal(src.data.begin(), src.data.end(), dst.data.begin()));
}

TEST(Uc, LostMiddlePacketDropsTheRestOfTheMessageAndTheWqeIsReused) {
  QpConfig cfg;
  cfg.path_mtu_bytes = 256;
  Pair p(QpType::kUc, cfg);
  auto& src = p.a.memory.add(600, 0);
  auto& dst = p.b.memory.add(1024, kAccessLocalWrite);
  src.data = pattern(600);
  ASSERT_EQ(p.b.post_recv(1, dst, 1024), 0);
  Sge s{src.va, 600, src.key};
  ASSERT_EQ(p.a.qp->post_send(make_wr(1, WrOpcode::kSend, &s, 1)), 0);
  Sge s2{src.va, 100, src.key};
  ASSERT_EQ(p.a.qp->post_send(make_wr(2, WrOpcode::kSendWithImm, &s2, 1)), 0);
  int n = 0;
  p.drop = [&](const Packet&, bool from_a) { return from_a && n++ == 1; };  // the MIDDLE
  p.pump();
  EXPECT_EQ(p.a.send_cq.entries.size(), 2u);
  ASSERT_EQ(p.b.recv_cq.entries.size(), 1u);
  Completion c = p.b.recv_cq.pop();
  EXPECT_EQ(c.wr_id, 1u);  // the broken message's WQE took the next message
  EXPECT_EQ(c.byte_len, 100u);
  EXPECT_EQ(c.wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(p.b.qp->counters().out_of_sequence, 1u);
  EXPECT_EQ(p.b.qp->counters().rx_dropped, 1u);
}

TEST(Uc, ALoneMessageIsHandedToTheLinkEvery64Packets) {
  // UC acknowledges nothing, so "alone" is nothing posted behind it: the last of two large
  // WRITEs posted together is split into 64-packet sends, the first is not.
  QpConfig cfg;
  cfg.path_mtu_bytes = 256;
  Pair p(QpType::kUc, cfg);
  auto& src = p.a.memory.add(130 * 256, 0);
  Sge s{src.va, 130 * 256, src.key};
  auto write = [&](uint64_t id) {
    SendWr wr = make_wr(id, WrOpcode::kRdmaWrite, &s, 1);
    wr.remote_addr = 0x1000;
    wr.rkey = 1;
    return p.a.qp->post_send(wr);
  };
  ASSERT_EQ(write(1), 0);
  ASSERT_EQ(write(2), 0);
  ASSERT_EQ(p.a.run(p.now), 260u);
  const auto& out = p.a.out.packets;
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i].flush_after, i == 130 + 63 || i == 130 + 127) << i;
}

TEST(Uc, WriteWithBadRkeyIsDroppedSilently) {
  Pair p(QpType::kUc);
  auto& src = p.a.memory.add(64, 0);
  Sge s{src.va, 64, src.key};
  SendWr wr = make_wr(1, WrOpcode::kRdmaWrite, &s, 1);
  wr.rkey = 0x4444;
  ASSERT_EQ(p.a.qp->post_send(wr), 0);
  p.pump();
  EXPECT_EQ(p.a.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(p.b.qp->state(), QpState::kRts);
  EXPECT_EQ(p.b.qp->counters().tx_packets, 0u);
  EXPECT_EQ(p.b.qp->counters().rx_dropped, 1u);
}

TEST(Uc, ReadAndAtomicsAreNotValidOnUc) {
  Endpoint e{QpType::kUc, 1};
  auto& m = e.memory.add(64, kAccessLocalWrite);
  e.bring_up({});
  Sge s{m.va, 8, m.key};
  EXPECT_EQ(e.qp->post_send(make_wr(1, WrOpcode::kRdmaRead, &s, 1)), EINVAL);
  EXPECT_EQ(e.qp->post_send(make_wr(1, WrOpcode::kAtomicFetchAdd, &s, 1)), EINVAL);
  EXPECT_EQ(e.qp->post_send(make_wr(1, WrOpcode::kSendWithInvalidate, &s, 1)), EINVAL);
}

struct Ud : ::testing::Test {
  Endpoint a{QpType::kUd, 0x31}, b{QpType::kUd, 0x32};
  FakeMemory::Region* src = nullptr;
  FakeMemory::Region* dst = nullptr;
  AddressVector ah;
  void SetUp() override {
    QpConfig cfg;
    cfg.path_mtu_bytes = 1024;
    cfg.qkey = 0x11111111;
    a.bring_up(cfg);
    cfg.qkey = 0x22222222;
    b.bring_up(cfg);
    src = &a.memory.add(2048, 0);
    src->data = pattern(2048);
    dst = &b.memory.add(4096, kAccessLocalWrite);
    ah.dgid = gid_from_ipv4({10, 0, 0, 2});
  }
  SendWr ud_wr(uint64_t id, const Sge& s, uint32_t qkey, WrOpcode opc = WrOpcode::kSend) {
    SendWr w = make_wr(id, opc, &s, 1);
    w.ah = &ah;
    w.remote_qpn = 0x32;
    w.remote_qkey = qkey;
    return w;
  }
};

TEST_F(Ud, DatagramCarriesDethAndLandsAfterA40ByteGrh) {
  Sge s{src->va, 100, src->key};
  SendWr w = ud_wr(5, s, 0x22222222, WrOpcode::kSendWithImm);
  w.imm = 0xabcdef01;
  ASSERT_EQ(a.qp->post_send(w), 0);
  ASSERT_EQ(a.run(0), 1u);
  Packet p = a.out.pop();
  EXPECT_EQ(p.opcode(), op::kUdSendOnlyImm);
  EXPECT_EQ(p.hdr.deth.qkey, 0x22222222u);
  EXPECT_EQ(p.hdr.deth.src_qp, 0x31u);
  EXPECT_EQ(p.hdr.bth.dest_qp, 0x32u);
  ASSERT_NE(p.dest, nullptr);
  EXPECT_EQ(p.dest->dgid, ah.dgid);
  EXPECT_EQ(a.send_cq.pop().status, WcStatus::kSuccess);
  ASSERT_EQ(b.post_recv(9, *dst, 4096), 0);
  b.deliver(p);
  Completion c = b.recv_cq.pop();
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.byte_len, 140u);
  EXPECT_EQ(c.src_qp, 0x31u);
  EXPECT_EQ(c.wc_flags, uint32_t{kWcGrh | kWcWithImm});
  EXPECT_EQ(c.imm_or_invalidated_rkey, 0xabcdef01u);
  // RoCEv2 over IPv4: 20 zero bytes, then the IPv4 header with the sender's address.
  EXPECT_TRUE(std::all_of(dst->data.begin(), dst->data.begin() + 20, [](uint8_t x) { return !x; }));
  EXPECT_EQ(dst->data[20], 0x45);
  EXPECT_EQ(dst->data[20 + 9], 17);  // UDP
  EXPECT_EQ(dst->data[20 + 12], 10);
  EXPECT_EQ(dst->data[20 + 15], 1);  // source 10.0.0.1 (Packet::rx)
  EXPECT_EQ(dst->data[20 + 19], 2);  // destination 10.0.0.2
  EXPECT_TRUE(std::equal(src->data.begin(), src->data.begin() + 100, dst->data.begin() + 40));
}

TEST_F(Ud, GrhCarriesTheReceivedTrafficClassAndHopLimit) {
  Sge s{src->va, 10, src->key};
  ASSERT_EQ(a.qp->post_send(ud_wr(1, s, 0x22222222)), 0);
  ASSERT_EQ(a.qp->post_send(ud_wr(2, s, 0x22222222)), 0);
  a.run(0);
  // IPv4: TOS at byte 1 of the IPv4 header (after 20 zero bytes), TTL at byte 8, and the header
  // checksum over them.
  const Packet first = a.out.pop();  // rx() points into it
  RxPacket rx = first.rx();
  rx.traffic_class = 26 << 2 | 3;  // DSCP 26, CE
  rx.hop_limit = 7;
  ASSERT_EQ(b.post_recv(9, *dst, 4096), 0);
  b.qp->receive(rx, 0);
  ASSERT_EQ(b.recv_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(dst->data[20 + 1], 26 << 2 | 3);
  EXPECT_EQ(dst->data[20 + 8], 7);
  EXPECT_EQ(wire::ipv4_header_checksum(std::span<const uint8_t, wire::kIpv4Bytes>(
                dst->data.data() + 20, wire::kIpv4Bytes)),
            load_be16(&dst->data[20 + 10]));
  // IPv6: the traffic class straddles bytes 0 and 1; the hop limit is byte 7.
  const Packet second = a.out.pop();
  rx = second.rx();
  rx.sgid = Gid{0xfe, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  rx.traffic_class = 10 << 2 | 2;
  rx.hop_limit = 200;
  ASSERT_EQ(b.post_recv(10, *dst, 4096), 0);
  b.qp->receive(rx, 0);
  ASSERT_EQ(b.recv_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ((dst->data[0] & 0x0f) << 4 | dst->data[1] >> 4, 10 << 2 | 2);
  EXPECT_EQ(dst->data[7], 200);
}

TEST_F(Ud, RoceV1DatagramGetsTheV1GrhAndSaysSo) {
  Sge s{src->va, 100, src->key};
  ASSERT_EQ(a.qp->post_send(ud_wr(1, s, 0x22222222)), 0);
  a.run(0);
  const Packet p = a.out.pop();
  RxPacket rx = p.rx();
  rx.roce_v1 = true;
  rx.traffic_class = 0x60;
  rx.hop_limit = 1;
  rx.flow_label = 0x12345;
  ASSERT_EQ(b.post_recv(9, *dst, 4096), 0);
  b.qp->receive(rx, 0);
  const Completion c = b.recv_cq.pop();
  ASSERT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.byte_len, 140u);
  EXPECT_TRUE(c.roce_v1);
  // The GRH as it came (IPv6 layout although the GIDs are IPv4-mapped): version 6, traffic class,
  // flow label, payload length BTH + DETH + 100 bytes + ICRC, next header 0x1B (a BTH).
  const std::vector<uint8_t> head(dst->data.begin(), dst->data.begin() + 8);
  EXPECT_EQ(head, (std::vector<uint8_t>{0x66, 0x01, 0x23, 0x45, 0, 12 + 8 + 100 + 4, 0x1b, 1}));
  EXPECT_TRUE(std::equal(rx.sgid.begin(), rx.sgid.end(), dst->data.begin() + 8));
  EXPECT_TRUE(std::equal(rx.dgid.begin(), rx.dgid.end(), dst->data.begin() + 24));
  EXPECT_TRUE(std::equal(src->data.begin(), src->data.begin() + 100, dst->data.begin() + 40));
  // A RoCEv2 datagram's completion does not say v1.
  ASSERT_EQ(a.qp->post_send(ud_wr(2, s, 0x22222222)), 0);
  a.run(0);
  ASSERT_EQ(b.post_recv(10, *dst, 4096), 0);
  b.deliver(a.out.pop());
  EXPECT_FALSE(b.recv_cq.pop().roce_v1);
}

TEST_F(Ud, Ipv6SourceFillsTheWholeGrh) {
  Sge s{src->va, 10, src->key};
  ASSERT_EQ(a.qp->post_send(ud_wr(1, s, 0x22222222)), 0);
  a.run(0);
  Packet p = a.out.pop();
  ASSERT_EQ(b.post_recv(9, *dst, 4096), 0);
  RxPacket rx = p.rx();
  rx.sgid = Gid{0xfe, 0x80, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  b.qp->receive(rx, 0);
  EXPECT_EQ(b.recv_cq.pop().byte_len, 50u);
  EXPECT_EQ(dst->data[0] >> 4, 6);
  EXPECT_EQ(dst->data[6], 17);
  EXPECT_TRUE(std::equal(rx.sgid.begin(), rx.sgid.end(), dst->data.begin() + 8));
}

TEST_F(Ud, QkeyMismatchIsDroppedAndHighBitUsesTheQpQkey) {
  Sge s{src->va, 10, src->key};
  ASSERT_EQ(a.qp->post_send(ud_wr(1, s, 0x80000000)), 0);  // use a's own qkey
  a.run(0);
  Packet p = a.out.pop();
  EXPECT_EQ(p.hdr.deth.qkey, 0x11111111u);
  ASSERT_EQ(b.post_recv(9, *dst, 4096), 0);
  b.deliver(p);  // b's qkey differs
  EXPECT_TRUE(b.recv_cq.entries.empty());
  EXPECT_EQ(b.qp->counters().rx_dropped, 1u);
}

TEST_F(Ud, NoReceiveWqeDropsAndShortBufferIsLocLenErr) {
  Sge s{src->va, 100, src->key};
  ASSERT_EQ(a.qp->post_send(ud_wr(1, s, 0x22222222)), 0);
  ASSERT_EQ(a.qp->post_send(ud_wr(2, s, 0x22222222)), 0);
  a.run(0);
  b.deliver(a.out.pop());
  EXPECT_EQ(b.qp->counters().rx_dropped, 1u);
  ASSERT_EQ(b.post_recv(9, *dst, 139), 0);  // one byte short of GRH + payload
  b.deliver(a.out.pop());
  EXPECT_EQ(b.recv_cq.pop().status, WcStatus::kLocLenErr);
  EXPECT_EQ(b.qp->state(), QpState::kRts);  // UD stays up
}

TEST_F(Ud, MessageOverMtuIsLocLenErrAndOnlySendIsValid) {
  Sge s{src->va, 1025, src->key};
  ASSERT_EQ(a.qp->post_send(ud_wr(1, s, 0x22222222)), 0);
  EXPECT_EQ(a.run(0), 0u);
  EXPECT_EQ(a.send_cq.pop().status, WcStatus::kLocLenErr);
  Endpoint e{QpType::kUd, 1};
  e.bring_up({});
  SendWr w = ud_wr(1, s, 0);
  w.opcode = WrOpcode::kRdmaWrite;
  EXPECT_EQ(e.qp->post_send(w), EINVAL);
  w.opcode = WrOpcode::kSend;
  w.ah = nullptr;
  EXPECT_EQ(e.qp->post_send(w), EINVAL);
}

TEST(RecvQueueTest, BoundedFifoWithLimitHook) {
  RecvQueue rq(3, 2);
  Sge sg[3] = {};
  EXPECT_EQ(rq.post(RecvWr{1, std::span<const Sge>(sg, 3)}), EINVAL);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(rq.post(RecvWr{i, std::span<const Sge>(sg, 1)}), 0);
  EXPECT_EQ(rq.post(RecvWr{9, std::span<const Sge>(sg, 1)}), ENOMEM);
  int fired = 0;
  rq.set_limit_hook([&] { ++fired; });
  rq.arm_limit(2);
  EXPECT_EQ(rq.pop()->wr_id, 0u);  // 2 left: not below the limit
  EXPECT_EQ(fired, 0);
  EXPECT_EQ(rq.pop()->wr_id, 1u);  // 1 left: fires once and disarms
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(rq.limit(), 0u);
  EXPECT_EQ(rq.pop()->wr_id, 2u);
  EXPECT_EQ(fired, 1);
  EXPECT_FALSE(rq.pop().has_value());
}

// Positions map to slots from the head's slot (common/ring_slot.h), not by division: at a
// capacity that is not a power of two, through many wraps and every fill level, each queue stays
// FIFO and each WQE keeps its own SGEs.
TEST(RingQueues, KeepOrderAndSgesAcrossManyWrapsAtAnOddCapacity) {
  constexpr uint32_t kCap = 7;
  RecvQueue rq(kCap, 2);
  SendQueue sq(kCap, 2);
  uint64_t next_in = 0, next_out = 0;
  for (uint32_t round = 0; round < 50; ++round) {
    const uint32_t fill = round % (kCap + 1);  // 0 .. capacity
    while (rq.size() < fill) {
      const Sge sg[2] = {{next_in, 1, 0}, {next_in * 3, 2, 0}};
      ASSERT_EQ(rq.post(RecvWr{next_in, std::span<const Sge>(sg, 2)}), 0);
      SendWqe& w = sq.push();
      w.wr_id = next_in;
      w.sge[0] = sg[0];
      w.sge[1] = sg[1];
      ++next_in;
    }
    if (fill == kCap) {
      EXPECT_TRUE(sq.full());
      const Sge sg[1] = {};
      EXPECT_EQ(rq.post(RecvWr{99, std::span<const Sge>(sg, 1)}), ENOMEM);
    }
    for (uint64_t pos = sq.head(); pos < sq.tail(); ++pos)
      EXPECT_EQ(sq.at(pos).wr_id, next_out + (pos - sq.head()));
    while (rq.size() > fill / 2) {
      const std::optional<RecvWqe> r = rq.pop();
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->wr_id, next_out);
      EXPECT_EQ(r->sge[1].addr, next_out * 3);
      EXPECT_EQ(sq.at(sq.head()).wr_id, next_out);
      EXPECT_EQ(sq.at(sq.head()).sge[0].addr, next_out);
      sq.pop();
      ++next_out;
    }
  }
  EXPECT_GT(next_out, 10u * kCap);  // wrapped many times
}

TEST(Srq, TwoQpsConsumeOneSharedQueueAndErrDoesNotFlushIt) {
  FakeMemory mem;
  FakeCq scq, rcq;
  RecvQueue srq(8, 1);
  auto& buf = mem.add(1024, kAccessLocalWrite);
  auto q1 = TransportQp::create(QpType::kRc, 1, {}, mem, scq, rcq, &srq);
  auto q2 = TransportQp::create(QpType::kRc, 2, {}, mem, scq, rcq, &srq);
  QpConfig cfg;
  cfg.rq_psn = Psn(10);
  for (auto* q : {q1.get(), q2.get()}) {
    q->set_state(QpState::kInit);
    q->configure(cfg);
    q->set_state(QpState::kRtr);
  }
  Sge s{buf.va, 1024, buf.key};
  EXPECT_EQ(q1->post_recv(RecvWr{0, std::span<const Sge>(&s, 1)}), EINVAL);  // use the SRQ
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(srq.post(RecvWr{i, std::span<const Sge>(&s, 1)}), 0);
  Packet p = make_packet(op::kRcSendOnly, 10, {1, 2, 3});
  q2->receive(p.rx(), 0);
  q1->receive(p.rx(), 0);
  EXPECT_EQ(rcq.pop().qp_num, 2u);
  EXPECT_EQ(rcq.pop().qp_num, 1u);
  q1->set_state(QpState::kErr);
  EXPECT_TRUE(rcq.entries.empty());
  EXPECT_EQ(srq.size(), 1u);
}

}  // namespace
}  // namespace uroce::transport::test
