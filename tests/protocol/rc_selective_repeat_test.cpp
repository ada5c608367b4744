// Selective repeat (QpConfig::loss_recovery = kSelectiveRepeat, IRN-style): the responder's
// reorder buffer fed hand-ordered packets (holes, duplicates, overflow, ordering of SEND, WRITE
// with immediate, READ and atomics across a hole), the requester's single-packet resends, and
// pairs of QPs (both modes, and each mode against the other) over lossy wires.
#include <set>

#include "pair.h"
#include "transport/qp_context.h"  // kReorderSlots
#include "transport/timers.h"

namespace uroce::transport::test {
namespace {

namespace op = wire::op;
constexpr uint32_t kEpsn = 1000;
constexpr uint32_t kMtu = 256;

// ---- Responder ---------------------------------------------------------------------------------

struct SrResponder : ::testing::Test {
  Endpoint r{QpType::kRc, 1};
  FakeMemory::Region* rbuf = nullptr;
  FakeMemory::Region* target = nullptr;

  void SetUp() override {
    QpConfig cfg;
    cfg.dest_qpn = 9;
    cfg.rq_psn = Psn(kEpsn);
    cfg.sq_psn = Psn(1);
    cfg.path_mtu_bytes = kMtu;
    cfg.max_dest_rd_atomic = 4;
    cfg.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    cfg.loss_recovery = LossRecovery::kSelectiveRepeat;
    rbuf = &r.memory.add(8192, kAccessLocalWrite);
    target = &r.memory.add(8192, kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
    r.qp->set_state(QpState::kInit);
    r.qp->configure(cfg);
    r.qp->set_state(QpState::kRtr);
  }
  Packet pkt(uint8_t opcode, uint32_t psn, size_t len) {
    Packet p = make_packet(opcode, psn, pattern(len, static_cast<uint8_t>(psn)));
    p.hdr.bth.ack_req = wire::opcode_info(opcode).ends_message();
    return p;
  }
  Packet write(uint8_t opcode, uint32_t psn, size_t len, uint64_t va, uint32_t dma_len) {
    Packet p = pkt(opcode, psn, len);
    p.hdr.reth = {va, target->key, dma_len};
    return p;
  }
  void feed(const Packet& p) { r.deliver(p, 0); }
  std::vector<Packet> drain() {
    r.run(0);
    std::vector<Packet> v(r.out.packets.begin(), r.out.packets.end());
    r.out.packets.clear();
    return v;
  }
  static bool is_seq_nak(const Packet& p, uint32_t psn) {
    return p.opcode() == op::kRcAck && p.hdr.aeth.type() == wire::AckType::kNak &&
           p.hdr.aeth.nak_code() == wire::NakCode::kPsnSequenceError && p.psn() == psn;
  }
  static bool is_ack(const Packet& p, uint32_t psn) {
    return p.opcode() == op::kRcAck && p.hdr.aeth.type() == wire::AckType::kAck && p.psn() == psn;
  }
  // A 4-packet WRITE at target+0 (PSNs kEpsn..kEpsn+3), packet i carrying pattern(kMtu, psn).
  Packet write_part(uint32_t i) {
    const uint8_t code = i == 0   ? op::kRcWriteFirst
                         : i == 3 ? op::kRcWriteLast
                                  : op::kRcWriteMiddle;
    return i == 0 ? write(code, kEpsn, kMtu, target->va, 4 * kMtu) : pkt(code, kEpsn + i, kMtu);
  }
  bool placed(uint32_t i) const {
    auto want = pattern(kMtu, static_cast<uint8_t>(kEpsn + i));
    return std::equal(want.begin(), want.end(), target->data.begin() + i * kMtu);
  }
};

TEST_F(SrResponder, OneHoleIsNakedOnceAndTheHeldPacketsApplyWhenItFills) {
  feed(write_part(0));
  feed(write_part(2));  // 1 is missing
  feed(write_part(3));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);  // one NAK for the hole, nothing for the second held packet
  EXPECT_TRUE(is_seq_nak(out[0], kEpsn + 1));
  EXPECT_TRUE(placed(0));
  // Held, not placed: a MIDDLE has no address of its own until the packets before it arrive.
  EXPECT_FALSE(placed(2));
  EXPECT_FALSE(placed(3));
  EXPECT_EQ(r.qp->counters().ooo_buffered, 2u);
  EXPECT_EQ(r.qp->counters().seq_naks_sent, 1u);

  feed(write_part(1));
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_ack(out[0], kEpsn + 3));  // cumulative, through the held LAST
  EXPECT_EQ(out[0].hdr.aeth.msn, 1u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(placed(i)) << i;
  EXPECT_EQ(r.qp->state(), QpState::kRtr);
}

TEST_F(SrResponder, AFilledHoleThatRevealsTheNextIsNakedAtOnce) {
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(r.post_recv(i, *rbuf, 1024, static_cast<uint32_t>(i) * 1024), 0);
  // Six SEND_ONLYs; 1 and 3 are missing.
  for (uint32_t i : {0u, 2u, 4u, 5u}) feed(pkt(op::kRcSendOnly, kEpsn + i, 10 + i));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);  // the NAK also acknowledges 0: it replaced that ACK in the queue
  EXPECT_TRUE(is_seq_nak(out[0], kEpsn + 1));
  EXPECT_EQ(out[0].hdr.aeth.msn, 1u);
  EXPECT_EQ(r.recv_cq.entries.size(), 1u);

  feed(pkt(op::kRcSendOnly, kEpsn + 1, 11));  // fills hole 1; 2 applies; hole 3 shows
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_seq_nak(out[0], kEpsn + 3));  // also acknowledges 1 and 2
  EXPECT_EQ(r.recv_cq.entries.size(), 3u);

  feed(pkt(op::kRcSendOnly, kEpsn + 3, 13));
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_ack(out[0], kEpsn + 5));
  // Receive WQEs were consumed in PSN order, whatever order the packets came in.
  ASSERT_EQ(r.recv_cq.entries.size(), 6u);
  for (uint64_t i = 0; i < 6; ++i) {
    const Completion c = r.recv_cq.pop();
    EXPECT_EQ(c.wr_id, i);
    EXPECT_EQ(c.byte_len, 10 + i);
    auto want = pattern(10 + i, static_cast<uint8_t>(kEpsn + i));
    EXPECT_TRUE(std::equal(want.begin(), want.end(), rbuf->data.begin() + i * 1024)) << i;
  }
  EXPECT_EQ(r.qp->counters().seq_naks_sent, 2u);
}

TEST_F(SrResponder, DuplicatesOfHeldPacketsAreDroppedAndCounted) {
  feed(write_part(0));
  feed(write_part(2));
  feed(write_part(2));
  feed(write_part(3));
  feed(write_part(2));
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_seq_nak(out[0], kEpsn + 1));
  EXPECT_EQ(r.qp->counters().ooo_buffered, 2u);
  EXPECT_EQ(r.qp->counters().ooo_duplicates, 2u);
  feed(write_part(1));
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_ack(out[0], kEpsn + 3));
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(placed(i)) << i;
  // Once applied, a copy is an ordinary duplicate: re-ACKed, not executed again.
  target->data[2 * kMtu] ^= 0xff;
  feed(write_part(2));
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_ack(out[0], kEpsn + 3));
  EXPECT_FALSE(placed(2));
}

TEST_F(SrResponder, PacketsBeyondTheBufferAreCountedDropsNotGrowth) {
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(r.post_recv(i, *rbuf, 1024, static_cast<uint32_t>(i) * 1024), 0);
  feed(pkt(op::kRcSendOnly, kEpsn + kReorderSlots - 1, 5));  // the last PSN that fits
  feed(pkt(op::kRcSendOnly, kEpsn + kReorderSlots, 5));      // one past: dropped
  feed(pkt(op::kRcSendOnly, kEpsn + 0x400000, 5));           // far ahead: dropped
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_seq_nak(out[0], kEpsn));
  EXPECT_EQ(r.qp->counters().ooo_buffered, 1u);
  EXPECT_EQ(r.qp->counters().ooo_dropped, 2u);
  // A packet longer than the MTU is never held (it could only fail its length check later).
  feed(pkt(op::kRcSendOnly, kEpsn + 7, kMtu + 4));
  EXPECT_EQ(r.qp->counters().ooo_dropped, 3u);
  EXPECT_EQ(r.qp->state(), QpState::kRtr);
  EXPECT_TRUE(r.recv_cq.entries.empty());
}

TEST_F(SrResponder, SendWriteImmReadAndAtomicKeepPsnOrderAcrossAHole) {
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(r.post_recv(i, *rbuf, 1024, static_cast<uint32_t>(i) * 1024), 0);
  uint64_t counter = 40;
  std::memcpy(target->data.data() + 4096, &counter, 8);
  target->data[2048] = 0x5a;  // what the READ returns
  // PSNs: 0 SEND (lost at first), 1 WRITE_ONLY_IMM, 2 READ (1 response), 3 FETCH_ADD, 4 SEND.
  Packet s0 = pkt(op::kRcSendOnly, kEpsn, 16);
  Packet w1 = write(op::kRcWriteOnlyImm, kEpsn + 1, 32, target->va + 1024, 32);
  w1.hdr.imm = 0xabcd;
  Packet rd = make_packet(op::kRcReadRequest, kEpsn + 2);
  rd.hdr.reth = {target->va + 2048, target->key, 1};
  rd.hdr.bth.ack_req = true;
  Packet fa = make_packet(op::kRcFetchAdd, kEpsn + 3);
  fa.hdr.atomic = {target->va + 4096, target->key, 2, 0};
  fa.hdr.bth.ack_req = true;
  Packet s4 = pkt(op::kRcSendOnly, kEpsn + 4, 24);
  for (const Packet* p : {&s4, &fa, &rd, &w1}) feed(*p);  // reversed, hole at kEpsn
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(is_seq_nak(out[0], kEpsn));
  // Nothing executed yet: no receive consumed, no READ answered, the atomic not run.
  EXPECT_TRUE(r.recv_cq.entries.empty());
  std::memcpy(&counter, target->data.data() + 4096, 8);
  EXPECT_EQ(counter, 40u);

  feed(s0);
  out = drain();
  // Responses in PSN order: ACK of the SEND and the WRITE (coalesced), READ response, atomic
  // ACK with the value before the add, ACK of the last SEND.
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(is_ack(out[0], kEpsn + 1));
  EXPECT_EQ(out[1].opcode(), op::kRcReadResponseOnly);
  EXPECT_EQ(out[1].psn(), kEpsn + 2);
  ASSERT_EQ(out[1].payload.size(), 1u);
  EXPECT_EQ(out[1].payload[0], 0x5a);
  EXPECT_EQ(out[2].opcode(), op::kRcAtomicAck);
  EXPECT_EQ(out[2].psn(), kEpsn + 3);
  EXPECT_EQ(out[2].hdr.atomic_ack.original, 40u);
  EXPECT_TRUE(is_ack(out[3], kEpsn + 4));
  std::memcpy(&counter, target->data.data() + 4096, 8);
  EXPECT_EQ(counter, 42u);
  // Receive WQEs in PSN order: SEND, WRITE with immediate, SEND.
  ASSERT_EQ(r.recv_cq.entries.size(), 3u);
  Completion c = r.recv_cq.pop();
  EXPECT_EQ(c.wr_id, 0u);
  EXPECT_EQ(c.opcode, WcOpcode::kRecv);
  c = r.recv_cq.pop();
  EXPECT_EQ(c.wr_id, 1u);
  EXPECT_EQ(c.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(c.imm_or_invalidated_rkey, 0xabcdu);
  EXPECT_EQ(c.byte_len, 32u);
  c = r.recv_cq.pop();
  EXPECT_EQ(c.wr_id, 2u);
  EXPECT_EQ(c.byte_len, 24u);
}

TEST_F(SrResponder, AReadSwallowsHeldPsnsInsideItsResponseRange) {
  // A READ of 3 responses takes PSNs kEpsn..kEpsn+2. A (bogus) packet held at kEpsn+1 is not a
  // request of its own: it is freed, never executed, and the buffer ends empty.
  for (int i = 0; i < 2; ++i) ASSERT_EQ(r.post_recv(i, *rbuf, 1024), 0);
  feed(pkt(op::kRcSendOnly, kEpsn + 1, 8));
  Packet rd = make_packet(op::kRcReadRequest, kEpsn);
  rd.hdr.reth = {target->va, target->key, 3 * kMtu};
  rd.hdr.bth.ack_req = true;
  feed(rd);
  feed(pkt(op::kRcSendOnly, kEpsn + 3, 8));  // in order after the READ
  auto out = drain();
  ASSERT_EQ(out.size(), 5u);  // NAK, 3 READ responses, ACK
  EXPECT_TRUE(is_seq_nak(out[0], kEpsn));
  EXPECT_TRUE(is_ack(out[4], kEpsn + 3));
  EXPECT_EQ(r.recv_cq.entries.size(), 1u);
}

TEST_F(SrResponder, AFatalNakForgetsWhatIsHeld) {
  feed(write(op::kRcWriteOnly, kEpsn + 1, 8, target->va, 8));
  Packet bad = write(op::kRcWriteOnly, kEpsn, 8, target->va + 1 * 1024 * 1024, 8);  // out of range
  feed(bad);
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(is_seq_nak(out[0], kEpsn));
  EXPECT_EQ(out[1].hdr.aeth.nak_code(), wire::NakCode::kRemoteAccessError);
  EXPECT_EQ(r.qp->state(), QpState::kErr);
  EXPECT_EQ(target->data[0], 0);  // the held WRITE never ran
}

// Any arrival order (with copies) leaves an SR responder exactly where in-order arrival does:
// the same memory, the same receive completions in the same order, the same READ and atomic
// answers. Seeded shuffles of a mixed stream of SEND, WRITE (multi-packet, with immediate), READ
// and FETCH_ADD requests.
class SrResponderOrder : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SrResponderOrder, AnyArrivalOrderEndsLikeInOrder) {
  struct Side {
    Endpoint r{QpType::kRc, 1};
    FakeMemory::Region* rbuf = nullptr;
    FakeMemory::Region* target = nullptr;
    std::vector<Packet> answers;  // READ responses and atomic ACKs, as sent
  };
  auto make = [](Side& s) {
    QpConfig cfg;
    cfg.dest_qpn = 9;
    cfg.rq_psn = Psn(kEpsn);
    cfg.path_mtu_bytes = kMtu;
    cfg.max_dest_rd_atomic = 16;
    cfg.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    cfg.loss_recovery = LossRecovery::kSelectiveRepeat;
    s.rbuf = &s.r.memory.add(64 * 1024, kAccessLocalWrite);
    s.target =
        &s.r.memory.add(64 * 1024, kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
    s.target->data = pattern(s.target->data.size(), 3);
    s.r.qp->set_state(QpState::kInit);
    s.r.qp->configure(cfg);
    s.r.qp->set_state(QpState::kRtr);
    for (uint32_t i = 0; i < 32; ++i) EXPECT_EQ(s.r.post_recv(i, *s.rbuf, 2048, i * 2048), 0);
  };
  Side in_order, shuffled;
  make(in_order);
  make(shuffled);
  // The stream: both sides use the same keys (regions are created in the same order).
  std::mt19937_64 gen(GetParam());
  std::vector<Packet> stream;
  uint32_t psn = kEpsn, rd_ops = 0;
  for (int m = 0; m < 24; ++m) {
    const uint32_t kind = static_cast<uint32_t>(gen() % 4);
    const uint32_t npkt = 1 + static_cast<uint32_t>(gen() % 3);
    // WRITEs below 28 KiB, READs from 32..56 KiB, the atomic word at 60 KiB: a READ's data is
    // read when its response is sent, which (IBA 9.5, hence IBV_SEND_FENCE) may follow later
    // requests' execution, so READs never overlap what later requests change.
    const uint64_t off = kind == 2 ? 32768 + (gen() % 20) * 1024 : (gen() % 24) * 1024;
    if (kind == 0 || kind == 1) {  // SEND or WRITE (with immediate when it ends a WRITE)
      for (uint32_t i = 0; i < npkt; ++i) {
        const bool first = i == 0, last = i + 1 == npkt;
        uint8_t code;
        if (kind == 0)
          code = first && last ? op::kRcSendOnly
                 : first       ? op::kRcSendFirst
                 : last        ? op::kRcSendLast
                               : op::kRcSendMiddle;
        else
          code = first && last ? op::kRcWriteOnlyImm
                 : first       ? op::kRcWriteFirst
                 : last        ? op::kRcWriteLastImm
                               : op::kRcWriteMiddle;
        Packet p = make_packet(code, psn, pattern(last ? 100 : kMtu, static_cast<uint8_t>(psn)));
        p.hdr.bth.ack_req = last;
        if (kind == 1 && first)
          p.hdr.reth = {in_order.target->va + off, in_order.target->key, (npkt - 1) * kMtu + 100};
        p.hdr.imm = psn;
        stream.push_back(p);
        ++psn;
      }
    } else if (kind == 2) {  // READ of npkt responses
      Packet p = make_packet(op::kRcReadRequest, psn);
      p.hdr.reth = {in_order.target->va + off, in_order.target->key, npkt * kMtu};
      p.hdr.bth.ack_req = true;
      stream.push_back(p);
      psn += npkt;
      ++rd_ops;
    } else {  // FETCH_ADD on one shared word
      Packet p = make_packet(op::kRcFetchAdd, psn);
      p.hdr.atomic = {in_order.target->va + 61440, in_order.target->key, psn, 0};
      p.hdr.bth.ack_req = true;
      stream.push_back(p);
      ++psn;
      ++rd_ops;
    }
  }
  // In order, draining after each packet so no more than max_dest_rd_atomic answers wait.
  auto collect = [](Side& s) {
    s.r.run(0, 100000);
    for (Packet& p : s.r.out.packets)
      if (p.opcode() != op::kRcAck) s.answers.push_back(std::move(p));
    s.r.out.packets.clear();
  };
  for (const Packet& p : stream) {
    in_order.r.deliver(p);
    collect(in_order);
  }
  // Shuffled within windows of 12 packets, with copies of some, then every packet once more in
  // order (a requester's resends) so each hole fills.
  std::vector<Packet> order = stream;
  for (size_t at = 0; at < order.size(); at += 12) {
    const size_t end = std::min(order.size(), at + 12);
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(at),
                 order.begin() + static_cast<std::ptrdiff_t>(end), gen);
  }
  for (const Packet& p : order) {
    shuffled.r.deliver(p);
    if (gen() % 5 == 0) shuffled.r.deliver(p);
    collect(shuffled);
  }
  for (const Packet& p : stream) {
    shuffled.r.deliver(p);
    collect(shuffled);
  }
  EXPECT_EQ(shuffled.r.qp->state(), QpState::kRtr);
  EXPECT_EQ(in_order.target->data, shuffled.target->data);
  EXPECT_EQ(in_order.rbuf->data, shuffled.rbuf->data);
  ASSERT_EQ(in_order.r.recv_cq.entries.size(), shuffled.r.recv_cq.entries.size());
  for (size_t i = 0; i < in_order.r.recv_cq.entries.size(); ++i) {
    const Completion& a = in_order.r.recv_cq.entries[i];
    const Completion& b = shuffled.r.recv_cq.entries[i];
    EXPECT_EQ(a.wr_id, b.wr_id) << i;
    EXPECT_EQ(a.opcode, b.opcode) << i;
    EXPECT_EQ(a.byte_len, b.byte_len) << i;
    EXPECT_EQ(a.imm_or_invalidated_rkey, b.imm_or_invalidated_rkey) << i;
  }
  // The first answer per PSN (replays of duplicates come later) matches, in the same order.
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> a, b;
  std::set<uint32_t> seen;
  for (const Packet& p : in_order.answers) a.emplace_back(p.psn(), p.payload);
  for (const Packet& p : shuffled.answers)
    if (seen.insert(p.psn()).second) b.emplace_back(p.psn(), p.payload);
  EXPECT_EQ(a, b);
  // Per seed 1..20: packets the shuffle put ahead of a hole, and READs in the stream.
  constexpr uint64_t kHeld[] = {21, 27, 28, 18, 27, 24, 25, 24, 30, 18,
                                30, 24, 31, 30, 28, 24, 27, 28, 25, 25};
  constexpr uint32_t kReads[] = {12, 12, 15, 17, 12, 13, 10, 11, 10, 14,
                                 11, 14, 13, 16, 13, 10, 16, 14, 14, 12};
  EXPECT_EQ(shuffled.r.qp->counters().ooo_buffered, kHeld[GetParam() - 1]);
  EXPECT_EQ(in_order.r.qp->counters().ooo_buffered, 0u);
  EXPECT_EQ(rd_ops, kReads[GetParam() - 1]);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SrResponderOrder, ::testing::Range<uint64_t>(1, 21));

// ---- Requester ---------------------------------------------------------------------------------

constexpr uint32_t kSpsn = 2000;
constexpr Nanos kT0 = 1'000'000'000;

struct SrRequester : ::testing::Test {
  Endpoint q{QpType::kRc, 3};
  FakeMemory::Region* buf = nullptr;
  QpConfig cfg;
  Nanos now = kT0;
  WrMaker wr{buf};  // reads buf when called, so SetUp may set it later

  void SetUp() override {
    cfg.dest_qpn = 4;
    cfg.sq_psn = Psn(kSpsn);
    cfg.rq_psn = Psn(1);
    cfg.path_mtu_bytes = kMtu;
    cfg.timeout = 10;
    cfg.retry_cnt = 2;
    cfg.max_rd_atomic = 2;
    cfg.loss_recovery = LossRecovery::kSelectiveRepeat;
    buf = &q.memory.add(64 * 1024, kAccessLocalWrite);
    buf->data = pattern(buf->data.size());
    q.bring_up(cfg);
  }
  std::vector<Packet> drain() {
    q.run(now);
    std::vector<Packet> v(q.out.packets.begin(), q.out.packets.end());
    q.out.packets.clear();
    return v;
  }
  void ack(uint32_t psn, wire::Aeth aeth = wire::Aeth::ack(0)) {
    Packet p = make_packet(op::kRcAck, psn, {}, 3);
    p.hdr.aeth = aeth;
    q.deliver(p, now);
  }
  void seq_nak(uint32_t psn) { ack(psn, wire::Aeth::nak(0, wire::NakCode::kPsnSequenceError)); }
};

TEST_F(SrRequester, ASequenceNakResendsOnlyTheNamedPacketRebuiltFromItsWqe) {
  cfg.write_segments = WriteSegments::kPerMessage;
  q.qp->configure(cfg);
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaWrite, 8 * kMtu)), 0);
  ASSERT_EQ(drain().size(), 8u);
  seq_nak(kSpsn + 3);  // acknowledges 0..2; 3 is missing
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), kSpsn + 3);
  EXPECT_EQ(out[0].opcode(), op::kRcWriteMiddle);  // the same packet: no RETH of its own
  EXPECT_TRUE(
      std::equal(out[0].payload.begin(), out[0].payload.end(), buf->data.begin() + 3 * kMtu));
  EXPECT_EQ(q.qp->counters().retransmitted_packets, 1u);
  EXPECT_EQ(q.qp->counters().retransmitted_bytes, kMtu);
  // The same NAK again (a copy from the network) costs nothing and sends nothing.
  seq_nak(kSpsn + 3);
  EXPECT_TRUE(drain().empty());
  // The next hole, named once the first filled: again only that packet.
  seq_nak(kSpsn + 6);
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), kSpsn + 6);
  ack(kSpsn + 7);
  drain();
  ASSERT_EQ(q.send_cq.entries.size(), 1u);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(q.qp->state(), QpState::kRts);
}

TEST_F(SrRequester, NewPacketsKeepFlowingBehindAResend) {
  cfg.max_psn_window = 6;
  q.qp->configure(cfg);
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaWrite, 10 * kMtu)), 0);
  ASSERT_EQ(drain().size(), 6u);  // the window
  seq_nak(kSpsn + 1);             // acknowledges 0: the window slides by one
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].psn(), kSpsn + 1);  // the hole first
  EXPECT_EQ(out[1].psn(), kSpsn + 6);  // then new data, not a go-back-N replay
}

TEST_F(SrRequester, TheAckTimeoutResendsTheOldestPacketOnlyAndSpendsTheRetryBudget) {
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 4 * kMtu)), 0);
  ASSERT_EQ(drain().size(), 4u);
  const Nanos rto = ack_timeout_ns(cfg.timeout);
  for (int i = 0; i < 2; ++i) {  // retry_cnt = 2
    now += rto;
    auto out = drain();
    ASSERT_EQ(out.size(), 1u) << i;
    EXPECT_EQ(out[0].psn(), kSpsn);
    EXPECT_EQ(out[0].opcode(), op::kRcSendFirst);
  }
  EXPECT_EQ(q.qp->counters().local_ack_timeouts, 2u);
  now += rto;
  drain();
  ASSERT_EQ(q.send_cq.entries.size(), 1u);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kRetryExcErr);
  EXPECT_EQ(q.qp->state(), QpState::kErr);
}

TEST_F(SrRequester, ALostResendGoesAgainAfterThreeRoundTripsNotAfterTheAckTimeout) {
  // A first message measures the round trip: 10 us.
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, kMtu)), 0);
  ASSERT_EQ(drain().size(), 1u);
  now += 10'000;
  ack(kSpsn);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kSend, 4 * kMtu)), 0);
  ASSERT_EQ(drain().size(), 4u);
  now += 10'000;
  seq_nak(kSpsn + 2);  // 1 arrived, 2 is missing (the second message has PSNs 1..4)
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), kSpsn + 2);
  // That resend is lost too; the responder NAKs a hole once, so only a timer can tell. The fast
  // one fires three round trips after the last progress, long before the 4 ms ACK timeout.
  EXPECT_LE(q.qp->next_deadline(now), now + 30'000);
  now += 29'000;
  EXPECT_TRUE(drain().empty());
  now += 1'000;
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), kSpsn + 2);
  EXPECT_EQ(q.qp->counters().local_ack_timeouts, 0u);
  // Once per una: if that is lost as well, the ACK timeout (retry_cnt) takes over.
  EXPECT_EQ(q.qp->next_deadline(now), now - 30'000 + ack_timeout_ns(cfg.timeout));
  ack(kSpsn + 4);
  drain();
  EXPECT_EQ(q.send_cq.entries.size(), 2u);
}

TEST_F(SrRequester, ALostTailGoesAgainOnePacketPerThreeRoundTrips) {
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, kMtu)), 0);
  ASSERT_EQ(drain().size(), 1u);
  now += 10'000;
  ack(kSpsn);  // a 10 us round trip
  // The last three packets are lost: no later packet makes the responder NAK, so the fast timer
  // finds each, one round of three round trips apiece, well before the 4 ms ACK timeout.
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kSend, 3 * kMtu)), 0);
  ASSERT_EQ(drain().size(), 3u);
  for (uint32_t i = 1; i <= 3; ++i) {
    now += 30'000;
    auto out = drain();
    ASSERT_EQ(out.size(), 1u) << i;
    EXPECT_EQ(out[0].psn(), kSpsn + i);
    now += 10'000;
    ack(kSpsn + i);
  }
  drain();
  ASSERT_EQ(q.send_cq.entries.size(), 2u);
  EXPECT_EQ(q.qp->counters().local_ack_timeouts, 0u);
  EXPECT_EQ(q.qp->counters().retransmitted_packets, 3u);
}

TEST_F(SrRequester, AnAnswerThatOvertookALostOneIsAskedAgainAsSoonAsItsTurnComes) {
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaRead, kMtu)), 0);
  SendWr fa = wr(2, WrOpcode::kAtomicFetchAdd, 8);
  fa.remote_addr = 0x8000;
  ASSERT_EQ(q.qp->post_send(fa), 0);
  ASSERT_EQ(drain().size(), 2u);  // READ (PSN 0), FETCH_ADD (PSN 1)
  Packet aa = make_packet(op::kRcAtomicAck, kSpsn + 1, {}, 3);
  aa.hdr.aeth = wire::Aeth::ack(2);
  aa.hdr.atomic_ack.original = 5;
  q.deliver(aa, now);  // overtook the READ response, which is lost: dropped, READ asked again
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRequest);
  Packet rr = make_packet(op::kRcReadResponseOnly, kSpsn, pattern(kMtu, 9), 3);
  rr.hdr.aeth = wire::Aeth::ack(1);
  q.deliver(rr, now);
  // The READ is done; the responder had already answered the atomic (its ACK came), so the
  // atomic is asked again now, not after the ACK timeout. The responder replays its result.
  out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcFetchAdd);
  EXPECT_EQ(out[0].psn(), kSpsn + 1);
  q.deliver(aa, now);
  drain();
  ASSERT_EQ(q.send_cq.entries.size(), 2u);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(q.qp->counters().local_ack_timeouts, 0u);
}

TEST_F(SrRequester, ReadResponsesPastAGapArePlacedAndOnlyTheReadIsAskedAgain) {
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaRead, 4 * kMtu)), 0);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kRdmaWrite, 2 * kMtu)), 0);
  ASSERT_EQ(drain().size(), 3u);  // READ request (PSNs 0..3), WRITE (4, 5)
  auto response = [&](uint8_t code, uint32_t i) {
    Packet p = make_packet(code, kSpsn + i, pattern(kMtu, static_cast<uint8_t>(100 + i)), 3);
    p.hdr.aeth = wire::Aeth::ack(1);
    q.deliver(p, now);
  };
  auto placed = [&](uint32_t i) {
    const auto want = pattern(kMtu, static_cast<uint8_t>(100 + i));
    return std::equal(want.begin(), want.end(), buf->data.begin() + i * kMtu);
  };
  response(op::kRcReadResponseFirst, 0);
  response(op::kRcReadResponseMiddle, 2);  // 1 lost
  EXPECT_TRUE(placed(2));                  // placed on arrival: the requester knows its offset
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);  // the READ again for PSNs 1..3, not the WRITE after it
  EXPECT_EQ(out[0].opcode(), op::kRcReadRequest);
  EXPECT_EQ(out[0].psn(), kSpsn + 1);
  EXPECT_EQ(out[0].hdr.reth.va, 0x5000u + kMtu);
  EXPECT_EQ(out[0].hdr.reth.dma_length, 3 * kMtu);
  response(op::kRcReadResponseLast, 3);  // also placed; still one request per hole
  EXPECT_TRUE(placed(3));
  EXPECT_TRUE(drain().empty());
  EXPECT_TRUE(q.send_cq.entries.empty());
  response(op::kRcReadResponseMiddle, 1);  // the hole fills: the READ is complete at once
  drain();
  ASSERT_EQ(q.send_cq.entries.size(), 1u);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(placed(i)) << i;
  response(op::kRcReadResponseMiddle, 2);  // the replay of what was placed: dropped
  response(op::kRcReadResponseLast, 3);
  ack(kSpsn + 5, wire::Aeth::ack(2));
  drain();
  ASSERT_EQ(q.send_cq.entries.size(), 1u);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(q.qp->state(), QpState::kRts);
}

TEST_F(SrRequester, AMalformedReadResponseAheadIsDroppedNotPlaced) {
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaRead, 4 * kMtu)), 0);
  ASSERT_EQ(drain().size(), 1u);
  const uint64_t dropped = q.qp->counters().rx_dropped;
  const std::vector<uint8_t> before = buf->data;
  // Wrong length for a middle packet, and a LAST where a MIDDLE belongs.
  Packet p = make_packet(op::kRcReadResponseMiddle, kSpsn + 2, pattern(kMtu - 1, 7), 3);
  q.deliver(p, now);
  p = make_packet(op::kRcReadResponseLast, kSpsn + 2, pattern(kMtu, 7), 3);
  q.deliver(p, now);
  EXPECT_EQ(q.qp->counters().rx_dropped, dropped + 2);
  EXPECT_EQ(buf->data, before);
}

TEST_F(SrRequester, TheWindowNeverExceedsThePeersReorderBuffer) {
  cfg.max_psn_window = 100000;
  q.qp->configure(cfg);
  // 20 WRITEs of 235 packets: more than the 4096 slots at a 256-byte MTU.
  for (uint64_t i = 0; i < 20; ++i)
    ASSERT_EQ(q.qp->post_send(wr(i, WrOpcode::kRdmaWrite, 60000)), 0);
  q.run(now, 100000);
  EXPECT_EQ(q.out.packets.size(), kReorderSlots);
  // At a 4096-byte MTU the byte budget binds first: 4 MiB is 1024 packets.
  Endpoint big{QpType::kRc, 5};
  auto& mem = big.memory.add(8 << 20, kAccessLocalWrite);
  QpConfig c = cfg;
  c.path_mtu_bytes = 4096;
  big.bring_up(c);
  Sge sge{mem.va, 8 << 20, mem.key};
  SendWr w = wr(1, WrOpcode::kRdmaWrite, 0);
  w.sg_list = std::span<const Sge>(&sge, 1);
  ASSERT_EQ(big.qp->post_send(w), 0);
  big.run(now, 100000);
  EXPECT_EQ(big.out.packets.size(), kReorderBytes / 4096);
}

// ---- Pairs -------------------------------------------------------------------------------------

struct Modes {
  LossRecovery a, b;  // requester a, responder b
};

// Re-configures a fresh Pair's ends with their own loss recovery (before anything is sent, so
// configure() takes every attribute again).
void set_modes(Pair& p, QpConfig cfg, Modes m) {
  cfg.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  QpConfig ca = cfg, cb = cfg;
  ca.dest_qpn = Pair::kQpnB, ca.sq_psn = Psn(100), ca.rq_psn = Psn(5000);
  cb.dest_qpn = Pair::kQpnA, cb.sq_psn = Psn(5000), cb.rq_psn = Psn(100);
  ca.loss_recovery = m.a;
  cb.loss_recovery = m.b;
  p.a.qp->configure(ca);
  p.b.qp->configure(cb);
}

struct WriteRun {
  uint64_t retransmitted = 0, retransmitted_bytes = 0, held = 0, lost = 0, go_backs = 0;
  bool ok = false;
};

// Eight 16-packet WRITEs with every `every`th data packet lost the first time it is sent, through
// a 64-packet window.
WriteRun run_writes(Modes m, uint64_t every = 7) {
  QpConfig cfg;
  cfg.path_mtu_bytes = kMtu;
  cfg.timeout = 8;
  cfg.max_psn_window = 64;
  Pair p(QpType::kRc, cfg);
  set_modes(p, cfg, m);
  auto& src = p.a.memory.add(32 * 1024, kAccessLocalWrite);
  auto& dst = p.b.memory.add(32 * 1024, kAccessRemoteWrite);
  src.data = pattern(src.data.size(), 5);
  std::set<uint32_t> lost;
  uint64_t n = 0;
  p.drop = [&](const Packet& pkt, bool from_a) {
    if (!from_a || pkt.payload.empty() || lost.count(pkt.psn())) return false;
    if (++n % every != 0) return false;
    lost.insert(pkt.psn());
    return true;
  };
  std::vector<Sge> sges(8);
  for (uint32_t i = 0; i < 8; ++i) {
    sges[i] = {src.va + i * 4096, 4096, src.key};
    SendWr w = make_wr(i, WrOpcode::kRdmaWrite, &sges[i], 1);
    w.remote_addr = dst.va + i * 4096;
    w.rkey = dst.key;
    EXPECT_EQ(p.a.qp->post_send(w), 0);
  }
  p.pump();
  WriteRun r;
  r.ok = p.a.send_cq.entries.size() == 8 && src.data == dst.data &&
         p.a.qp->state() == QpState::kRts && p.b.qp->state() == QpState::kRts;
  for (auto& c : p.a.send_cq.entries) r.ok &= c.status == WcStatus::kSuccess;
  for (uint64_t i = 0; i < p.a.send_cq.entries.size(); ++i)
    r.ok &= p.a.send_cq.entries[i].wr_id == i;
  r.retransmitted = p.a.qp->counters().retransmitted_packets;
  r.retransmitted_bytes = p.a.qp->counters().retransmitted_bytes;
  r.held = p.b.qp->counters().ooo_buffered;
  r.lost = lost.size();
  r.go_backs = p.a.qp->counters().sr_go_backs;
  return r;
}

TEST(SrPair, SelectiveRepeatResendsExactlyTheLostPackets) {
  // Every 23rd packet: two or three holes per 64-packet window, repaired one by one.
  const WriteRun gbn = run_writes({LossRecovery::kGoBackN, LossRecovery::kGoBackN}, 23);
  const WriteRun sr =
      run_writes({LossRecovery::kSelectiveRepeat, LossRecovery::kSelectiveRepeat}, 23);
  ASSERT_TRUE(gbn.ok);
  ASSERT_TRUE(sr.ok);
  EXPECT_EQ(sr.retransmitted, sr.lost);  // one resend per loss, nothing else
  EXPECT_EQ(sr.retransmitted_bytes, sr.retransmitted * kMtu);
  EXPECT_EQ(sr.go_backs, 0u);
  EXPECT_EQ(sr.lost, 5u);
  EXPECT_EQ(sr.held, 101u);  // what arrived behind each of the 5 holes before its resend
  EXPECT_GT(gbn.retransmitted, 3 * sr.retransmitted);
  EXPECT_EQ(gbn.held, 0u);
}

TEST(SrPair, DenseHolesGoBackAndStillResendLessThanGoBackN) {
  // Every 7th packet: nine holes per window, more than one round trip apiece can repair in time,
  // so the requester goes back N now and then (sr_go_backs), and still resends less.
  const WriteRun gbn = run_writes({LossRecovery::kGoBackN, LossRecovery::kGoBackN});
  const WriteRun sr = run_writes({LossRecovery::kSelectiveRepeat, LossRecovery::kSelectiveRepeat});
  ASSERT_TRUE(gbn.ok);
  ASSERT_TRUE(sr.ok);
  EXPECT_EQ(sr.go_backs, 2u);
  EXPECT_GT(sr.retransmitted, sr.lost);
  EXPECT_LT(sr.retransmitted, gbn.retransmitted);
}

TEST(SrPair, SelectiveRepeatRequesterAgainstGoBackNResponderConverges) {
  // The responder drops what follows a gap and NAKs once per gap; the requester resends the named
  // packet only, so the responder NAKs the next gap as new packets reach it, and the timer does
  // the rest. Slower than either mode alone, but complete and intact.
  const WriteRun r = run_writes({LossRecovery::kSelectiveRepeat, LossRecovery::kGoBackN});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.held, 0u);
}

TEST(SrPair, GoBackNRequesterAgainstSelectiveRepeatResponderConverges) {
  // The responder holds what follows a gap; the go-back-N replay then meets them as duplicates.
  const WriteRun r = run_writes({LossRecovery::kGoBackN, LossRecovery::kSelectiveRepeat});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.held, 97u);
}

}  // namespace
}  // namespace uroce::transport::test
