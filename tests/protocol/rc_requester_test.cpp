// The RC requester and completer fed hand-built responses: segmentation, cumulative ACKs, every
// NAK, go-back-N, the ACK timer and RNR timer with made-up times, retry exhaustion, implied NAKs,
// limits, fences, pacing, local errors and flushing.
#include "harness.h"
#include "transport/timers.h"

namespace uroce::transport::test {
namespace {

namespace op = wire::op;
constexpr uint32_t kSpsn = 2000;
constexpr Nanos kT0 = 1'000'000'000;

struct Requester : ::testing::Test {
  Endpoint q{QpType::kRc, 3};
  FakeMemory::Region* buf = nullptr;
  QpConfig cfg;
  Nanos now = kT0;

  void SetUp() override {
    cfg.dest_qpn = 4;
    cfg.sq_psn = Psn(kSpsn);
    cfg.rq_psn = Psn(1);
    cfg.path_mtu_bytes = 256;
    cfg.timeout = 10;  // 4.096 us * 1024
    cfg.retry_cnt = 2;
    cfg.rnr_retry = 1;
    cfg.max_rd_atomic = 2;
    buf = &q.memory.add(64 * 1024, kAccessLocalWrite);
    buf->data = pattern(buf->data.size());
  }
  void up() { q.bring_up(cfg); }
  std::vector<Packet> drain(size_t budget = 1000) {
    q.run(now, budget);
    std::vector<Packet> v(q.out.packets.begin(), q.out.packets.end());
    q.out.packets.clear();
    return v;
  }
  void ack(uint32_t psn, wire::Aeth aeth = wire::Aeth::ack(0)) {
    Packet p = make_packet(op::kRcAck, psn, {}, 3);
    p.hdr.aeth = aeth;
    q.deliver(p, now);
  }
  void nak(uint32_t psn, wire::NakCode code) { ack(psn, wire::Aeth::nak(0, code)); }
  static std::vector<uint32_t> psns(const std::vector<Packet>& v) {
    std::vector<uint32_t> out;
    for (auto& p : v) out.push_back(p.psn());
    return out;
  }
  WrMaker wr{buf};  // reads buf when called, so SetUp may set it later
};

TEST_F(Requester, SegmentsByMtuWithAckReqOnTheLastPacket) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 1000)), 0);
  auto out = drain();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].opcode(), op::kRcSendFirst);
  EXPECT_EQ(out[1].opcode(), op::kRcSendMiddle);
  EXPECT_EQ(out[2].opcode(), op::kRcSendMiddle);
  EXPECT_EQ(out[3].opcode(), op::kRcSendLast);
  EXPECT_EQ(psns(out), (std::vector<uint32_t>{kSpsn, kSpsn + 1, kSpsn + 2, kSpsn + 3}));
  EXPECT_EQ(out[3].payload.size(), 1000u - 768);
  EXPECT_EQ(out[3].hdr.bth.pad_count, 0);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(out[i].hdr.bth.ack_req);
  EXPECT_TRUE(out[3].hdr.bth.ack_req);
  EXPECT_EQ(out[0].hdr.bth.dest_qp, 4u);
  EXPECT_NE(out[0].dest, nullptr);  // the QP's primary path
  EXPECT_TRUE(std::equal(out[2].payload.begin(), out[2].payload.end(), buf->data.begin() + 512));
}

TEST_F(Requester, LongMessagesAskForAnAckPeriodically) {
  cfg.write_segments = WriteSegments::kPerMessage;
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaWrite, 40 * 256)), 0);
  auto out = drain();
  ASSERT_EQ(out.size(), 40u);
  EXPECT_EQ(out[0].opcode(), op::kRcWriteFirst);
  EXPECT_EQ(out[0].hdr.reth.dma_length, 40u * 256);
  EXPECT_TRUE(out[15].hdr.bth.ack_req);
  EXPECT_TRUE(out[31].hdr.bth.ack_req);
  EXPECT_FALSE(out[16].hdr.bth.ack_req);
  EXPECT_TRUE(out[39].hdr.bth.ack_req);
}

// The default: each MTU of a WRITE is a WRITE ONLY whose RETH names exactly its bytes, PSNs and
// AckReq as for one message, and the work request completes once, when its last packet is acked.
TEST_F(Requester, PerPacketWritesCarryTheirOwnReth) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaWrite, 20 * 256 + 100)), 0);
  auto out = drain();
  ASSERT_EQ(out.size(), 21u);
  for (uint32_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(out[i].opcode(), op::kRcWriteOnly);
    EXPECT_EQ(out[i].psn(), kSpsn + i);
    const uint32_t len = i < 20 ? 256 : 100;
    EXPECT_EQ(out[i].hdr.reth.dma_length, len);
    EXPECT_EQ(out[i].payload.size(), len);
    EXPECT_EQ(out[i].hdr.reth.va, 0x5000u + 256 * i);
    EXPECT_EQ(out[i].hdr.bth.ack_req, i == 15 || i == 20);
    EXPECT_TRUE(
        std::equal(out[i].payload.begin(), out[i].payload.end(), buf->data.begin() + 256 * i));
  }
  ack(kSpsn + 19);
  EXPECT_TRUE(q.send_cq.entries.empty());
  ack(kSpsn + 20);
  ASSERT_EQ(q.send_cq.entries.size(), 1u);
  EXPECT_EQ(q.send_cq.pop().wr_id, 1u);
}

// WRITE with immediate keeps FIRST/MIDDLE/LAST: the responder's receive completion reports the
// whole message's length, which per-packet WRITEs could not carry.
TEST_F(Requester, ALoneMessageIsHandedToTheLinkEvery64Packets) {
  // With nothing of ours unacknowledged before it, the responder waits for this message alone:
  // each 64 packets go to the link as they are built, so that its receive starts while the rest
  // are built. A small message posted behind it (a rendezvous's notice) changes nothing; a message
  // behind an unacknowledged one waits for the link's batch as before.
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaWrite, 130 * 256)), 0);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kSend, 8)), 0);
  auto out = drain();
  ASSERT_EQ(out.size(), 131u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].flush_after, i == 63 || i == 127) << i;
  ack(kSpsn + 130);
  ASSERT_EQ(q.qp->post_send(wr(3, WrOpcode::kSend, 130 * 256)), 0);
  ASSERT_EQ(q.qp->post_send(wr(4, WrOpcode::kSend, 130 * 256)), 0);
  out = drain();
  ASSERT_EQ(out.size(), 260u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].flush_after, i == 63 || i == 127) << i;
}

TEST_F(Requester, WriteWithImmediateStaysOneMessage) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaWriteWithImm, 3 * 256)), 0);
  auto out = drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].opcode(), op::kRcWriteFirst);
  EXPECT_EQ(out[0].hdr.reth.dma_length, 3u * 256);
  EXPECT_EQ(out[1].opcode(), op::kRcWriteMiddle);
  EXPECT_EQ(out[2].opcode(), op::kRcWriteLastImm);
}

TEST_F(Requester, AcksAreCumulativeAndCompletionsInOrder) {
  up();
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(q.qp->post_send(wr(i, WrOpcode::kSend, 300)), 0);
  EXPECT_EQ(drain().size(), 6u);  // 2 packets each
  ack(kSpsn);                     // mid first message: nothing completes
  EXPECT_TRUE(q.send_cq.entries.empty());
  ack(kSpsn + 3);  // covers messages 0 and 1
  ASSERT_EQ(q.send_cq.entries.size(), 2u);
  EXPECT_EQ(q.send_cq.pop().wr_id, 0u);
  EXPECT_EQ(q.send_cq.pop().wr_id, 1u);
  ack(kSpsn + 2);  // older than una: a stale duplicate, ignored
  ack(kSpsn + 9);  // beyond anything sent: ignored
  EXPECT_TRUE(q.send_cq.entries.empty());
  ack(kSpsn + 5);
  EXPECT_EQ(q.send_cq.pop().wr_id, 2u);
  EXPECT_EQ(q.qp->next_deadline(now), kNever);  // nothing outstanding: no timer
}

TEST_F(Requester, SequenceNakRetransmitsFromItsPsn) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 1024)), 0);
  drain();
  nak(kSpsn + 2, wire::NakCode::kPsnSequenceError);
  auto out = drain();
  EXPECT_EQ(psns(out), (std::vector<uint32_t>{kSpsn + 2, kSpsn + 3}));
  EXPECT_EQ(out[0].opcode(), op::kRcSendMiddle);
  EXPECT_EQ(out[1].opcode(), op::kRcSendLast);
  EXPECT_EQ(q.qp->counters().seq_naks_received, 1u);
  EXPECT_EQ(q.qp->counters().retransmitted_packets, 2u);
  ack(kSpsn + 3);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
}

TEST_F(Requester, AckTimeoutGoesBackNAndRetryExhaustionFails) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 512)), 0);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kSend, 10)), 0);
  EXPECT_EQ(drain().size(), 3u);
  const Nanos timeout = ack_timeout_ns(10);
  EXPECT_EQ(timeout, 4096u * 1024);
  EXPECT_EQ(q.qp->next_deadline(now), now + timeout);
  now += timeout - 1;
  EXPECT_TRUE(drain().empty());
  now += 1;
  auto out = drain();  // retry 1 of 2
  EXPECT_EQ(psns(out), (std::vector<uint32_t>{kSpsn, kSpsn + 1, kSpsn + 2}));
  EXPECT_EQ(q.qp->counters().local_ack_timeouts, 1u);
  now = q.qp->next_deadline(now);
  EXPECT_EQ(drain().size(), 3u);  // retry 2 of 2
  now = q.qp->next_deadline(now);
  EXPECT_TRUE(drain().empty());
  ASSERT_EQ(q.send_cq.entries.size(), 2u);
  Completion c = q.send_cq.pop();
  EXPECT_EQ(c.wr_id, 1u);
  EXPECT_EQ(c.status, WcStatus::kRetryExcErr);
  c = q.send_cq.pop();
  EXPECT_EQ(c.wr_id, 2u);
  EXPECT_EQ(c.status, WcStatus::kWrFlushErr);
  EXPECT_EQ(q.qp->state(), QpState::kErr);
  EXPECT_EQ(q.qp->next_deadline(now), kNever);
}

TEST_F(Requester, ProgressRestoresTheRetryBudget) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 10)), 0);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kSend, 10)), 0);
  drain();
  for (int i = 0; i < 2; ++i) {
    now = q.qp->next_deadline(now);
    drain();
  }
  ack(kSpsn);  // progress
  for (int i = 0; i < 2; ++i) {
    now = q.qp->next_deadline(now);
    EXPECT_EQ(psns(drain()), (std::vector<uint32_t>{kSpsn + 1}));
  }
  ack(kSpsn + 1);
  EXPECT_EQ(q.send_cq.entries.size(), 2u);
  EXPECT_EQ(q.qp->state(), QpState::kRts);
}

TEST_F(Requester, ZeroTimeoutMeansNoAckTimer) {
  cfg.timeout = 0;
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 10)), 0);
  drain();
  EXPECT_EQ(q.qp->next_deadline(now), kNever);
}

TEST_F(Requester, RnrNakWaitsTheTableTimeThenRetriesUntilExhausted) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 10)), 0);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kSend, 10)), 0);
  drain();
  ack(kSpsn + 1, wire::Aeth::rnr_nak(1, 14));  // acknowledges kSpsn, RNR for kSpsn + 1
  EXPECT_EQ(q.send_cq.pop().wr_id, 1u);
  EXPECT_EQ(q.qp->next_deadline(now), now + 1'280'000);  // table 45: code 14 = 1.28 ms
  now += 1'279'999;
  EXPECT_TRUE(drain().empty());
  now += 1;
  EXPECT_EQ(psns(drain()), (std::vector<uint32_t>{kSpsn + 1}));
  ack(kSpsn + 1, wire::Aeth::rnr_nak(1, 1));  // rnr_retry = 1 was used up
  EXPECT_TRUE(drain().empty());
  Completion c = q.send_cq.pop();
  EXPECT_EQ(c.wr_id, 2u);
  EXPECT_EQ(c.status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(q.qp->state(), QpState::kErr);
  EXPECT_EQ(q.qp->counters().rnr_naks_received, 2u);
}

TEST_F(Requester, RnrRetrySevenRetriesForever) {
  cfg.rnr_retry = 7;
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 10)), 0);
  drain();
  for (int i = 0; i < 50; ++i) {
    ack(kSpsn, wire::Aeth::rnr_nak(0, 1));
    now = q.qp->next_deadline(now);
    ASSERT_EQ(drain().size(), 1u);
  }
  ack(kSpsn);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
}

TEST_F(Requester, RnrTableMatchesIbaTable45) {
  EXPECT_EQ(rnr_timer_ns(0), 655'360'000u);
  EXPECT_EQ(rnr_timer_ns(1), 10'000u);
  EXPECT_EQ(rnr_timer_ns(12), 640'000u);
  EXPECT_EQ(rnr_timer_ns(18), 5'120'000u);
  EXPECT_EQ(rnr_timer_ns(31), 491'520'000u);
}

struct NakCase {
  wire::NakCode code;
  WcStatus status;
};
class RequesterNak : public Requester, public ::testing::WithParamInterface<NakCase> {};

TEST_P(RequesterNak, FatalNakFailsTheWqeAndFlushesTheRest) {
  up();
  for (uint64_t i = 1; i <= 3; ++i) ASSERT_EQ(q.qp->post_send(wr(i, WrOpcode::kSend, 10, 0)), 0);
  drain();
  nak(kSpsn + 1, GetParam().code);          // message 1 is acknowledged by the NAK
  ASSERT_EQ(q.send_cq.entries.size(), 2u);  // wr 1 was unsignaled and succeeded: no entry
  Completion c = q.send_cq.pop();
  EXPECT_EQ(c.wr_id, 2u);
  EXPECT_EQ(c.status, GetParam().status);
  c = q.send_cq.pop();
  EXPECT_EQ(c.wr_id, 3u);
  EXPECT_EQ(c.status, WcStatus::kWrFlushErr);
  EXPECT_EQ(q.qp->state(), QpState::kErr);
  EXPECT_EQ(q.qp->counters().naks_received, 1u);
}

INSTANTIATE_TEST_SUITE_P(
    AllCodes, RequesterNak,
    ::testing::Values(NakCase{wire::NakCode::kInvalidRequest, WcStatus::kRemInvReqErr},
                      NakCase{wire::NakCode::kRemoteAccessError, WcStatus::kRemAccessErr},
                      NakCase{wire::NakCode::kRemoteOperationalError, WcStatus::kRemOpErr},
                      NakCase{wire::NakCode::kInvalidRdRequest, WcStatus::kRemInvRdReqErr}));

Packet read_response(uint8_t opcode, uint32_t psn, std::vector<uint8_t> data) {
  Packet p = make_packet(opcode, psn, std::move(data), 3);
  p.hdr.aeth = wire::Aeth::ack(1);
  return p;
}

TEST_F(Requester, ReadResponsesFillTheBufferAndAckEarlierSends) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 10)), 0);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kRdmaRead, 600)), 0);
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].opcode(), op::kRcReadRequest);
  EXPECT_EQ(out[1].hdr.reth.dma_length, 600u);
  EXPECT_EQ(out[1].hdr.reth.va, 0x5000u);
  std::vector<uint8_t> remote = pattern(600, 77);
  auto part = [&](size_t off, size_t n) {
    return std::vector<uint8_t>(remote.begin() + off, remote.begin() + off + n);
  };
  q.deliver(read_response(op::kRcReadResponseFirst, kSpsn + 1, part(0, 256)), now);
  EXPECT_EQ(q.send_cq.pop().wr_id, 1u);  // the READ response acknowledged the SEND
  q.deliver(read_response(op::kRcReadResponseMiddle, kSpsn + 2, part(256, 256)), now);
  q.deliver(read_response(op::kRcReadResponseLast, kSpsn + 3, part(512, 88)), now);
  Completion c = q.send_cq.pop();
  EXPECT_EQ(c.wr_id, 2u);
  EXPECT_EQ(c.opcode, WcOpcode::kRdmaRead);
  EXPECT_TRUE(std::equal(remote.begin(), remote.end(), buf->data.begin()));
  // The next request uses the PSN after the READ's responses.
  ASSERT_EQ(q.qp->post_send(wr(3, WrOpcode::kSend, 1)), 0);
  EXPECT_EQ(drain()[0].psn(), kSpsn + 4);
}

TEST_F(Requester, LostReadResponseIsReRequestedFromTheFirstMissingPsn) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaRead, 768)), 0);
  drain();
  q.deliver(read_response(op::kRcReadResponseFirst, kSpsn, std::vector<uint8_t>(256, 1)), now);
  // The middle response is lost; the last one arrives: an implied NAK.
  q.deliver(read_response(op::kRcReadResponseLast, kSpsn + 2, std::vector<uint8_t>(256, 3)), now);
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRequest);
  EXPECT_EQ(out[0].psn(), kSpsn + 1);
  EXPECT_EQ(out[0].hdr.reth.va, 0x5000u + 256);
  EXPECT_EQ(out[0].hdr.reth.dma_length, 512u);
  q.deliver(read_response(op::kRcReadResponseFirst, kSpsn + 1, std::vector<uint8_t>(256, 2)), now);
  q.deliver(read_response(op::kRcReadResponseLast, kSpsn + 2, std::vector<uint8_t>(256, 3)), now);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(buf->data[0], 1);
  EXPECT_EQ(buf->data[300], 2);
  EXPECT_EQ(buf->data[600], 3);
}

TEST_F(Requester, AckBeyondAnUnansweredReadIsAnImpliedNak) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaRead, 8)), 0);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kSend, 8)), 0);
  drain();
  ack(kSpsn + 1);  // the READ's response must have been lost
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].opcode(), op::kRcReadRequest);
  EXPECT_EQ(out[0].psn(), kSpsn);
  EXPECT_TRUE(q.send_cq.entries.empty());
}

TEST_F(Requester, AtomicAckDeliversTheOriginalValue) {
  up();
  SendWr w = wr(1, WrOpcode::kAtomicCompareSwap, 8);
  w.compare_add = 5;
  w.swap = 6;
  w.remote_addr = 0x5008;
  ASSERT_EQ(q.qp->post_send(w), 0);
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcCompareSwap);
  EXPECT_EQ(out[0].hdr.atomic.compare, 5u);
  EXPECT_EQ(out[0].hdr.atomic.swap_add, 6u);
  EXPECT_EQ(out[0].hdr.atomic.va, 0x5008u);
  Packet a = make_packet(op::kRcAtomicAck, kSpsn, {}, 3);
  a.hdr.atomic_ack.original = 0x1122334455667788ull;
  q.deliver(a, now);
  uint64_t v = 0;
  std::memcpy(&v, buf->data.data(), 8);
  EXPECT_EQ(v, 0x1122334455667788ull);
  EXPECT_EQ(q.send_cq.pop().opcode, WcOpcode::kCompareSwap);
}

TEST_F(Requester, AtNoMoreThanMaxRdAtomicOutstanding) {
  up();
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(q.qp->post_send(wr(i, WrOpcode::kRdmaRead, 8)), 0);
  EXPECT_EQ(drain().size(), 2u);  // max_rd_atomic = 2
  q.deliver(read_response(op::kRcReadResponseOnly, kSpsn, std::vector<uint8_t>(8, 1)), now);
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), kSpsn + 2);
}

TEST_F(Requester, FenceWaitsForEarlierReads) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kRdmaRead, 8)), 0);
  ASSERT_EQ(q.qp->post_send(wr(2, WrOpcode::kSend, 8, kSendSignaled | kSendFence)), 0);
  EXPECT_EQ(drain().size(), 1u);
  EXPECT_EQ(q.qp->next_deadline(now), now + ack_timeout_ns(10));  // only the ACK timer
  q.deliver(read_response(op::kRcReadResponseOnly, kSpsn, std::vector<uint8_t>(8, 1)), now);
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcSendOnly);
}

TEST_F(Requester, PsnWindowCapsOutstandingPackets) {
  cfg.max_psn_window = 4;
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 10 * 256)), 0);
  EXPECT_EQ(drain().size(), 4u);
  ack(kSpsn + 1);
  EXPECT_EQ(psns(drain()), (std::vector<uint32_t>{kSpsn + 4, kSpsn + 5}));
}

TEST_F(Requester, PacerRateAndWindowAreRespected) {
  up();
  // 8 Mbit/s = 1 byte per us; a 1 KB burst.
  q.qp->pacer().set_rate(8'000'000, 1024);
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 8 * 256)), 0);
  // A packet goes while the credit is not negative: 1024, 768, 512, 256 and 0 bytes of it.
  EXPECT_EQ(drain().size(), 5u);
  const Nanos t = q.qp->next_deadline(now);
  EXPECT_EQ(t, now + 256'000);   // 256 bytes of debt paid at 1 byte per us
  EXPECT_TRUE(drain().empty());  // nothing before the pacer allows
  now = t;
  EXPECT_EQ(drain().size(), 1u);  // back at 0 credit, one packet into debt again
  // A window of 2 packets in flight.
  Endpoint e{QpType::kRc, 3};
  auto& m = e.memory.add(4096, 0);
  e.bring_up(cfg);
  e.qp->pacer().set_window(2);
  Sge s{m.va, 2048, m.key};
  SendWr w;
  w.sg_list = std::span<const Sge>(&s, 1);
  ASSERT_EQ(e.qp->post_send(w), 0);
  EXPECT_EQ(e.run(now), 2u);
  EXPECT_EQ(e.run(now), 0u);
}

TEST_F(Requester, TransmitBudgetIsHonoured) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 5 * 256)), 0);
  EXPECT_EQ(drain(2).size(), 2u);
  EXPECT_EQ(q.qp->next_deadline(now), now);  // more is ready
  EXPECT_EQ(drain().size(), 3u);
}

TEST_F(Requester, PostSendValidation) {
  QpCapabilities caps;
  caps.max_send_wr = 2;
  caps.max_send_sge = 2;
  caps.max_inline_data = 16;
  Endpoint e{QpType::kRc, 3, caps};
  auto& m = e.memory.add(64, kAccessLocalWrite);
  Sge sg[3] = {{m.va, 8, m.key}, {m.va, 8, m.key}, {m.va, 8, m.key}};
  SendWr w;
  w.sg_list = std::span<const Sge>(sg, 1);
  EXPECT_EQ(e.qp->post_send(w), EINVAL);  // RESET
  e.bring_up(cfg);
  w.sg_list = std::span<const Sge>(sg, 3);
  EXPECT_EQ(e.qp->post_send(w), EINVAL);  // too many SGEs
  w.flags = kSendInline;
  std::vector<uint8_t> big(17);
  Sge in{reinterpret_cast<uint64_t>(big.data()), 17, 0};
  w.sg_list = std::span<const Sge>(&in, 1);
  EXPECT_EQ(e.qp->post_send(w), EINVAL);  // inline too long
  w.flags = 0;
  w.sg_list = std::span<const Sge>(sg, 1);
  w.opcode = WrOpcode::kAtomicFetchAdd;
  w.remote_addr = 0x1004;
  EXPECT_EQ(e.qp->post_send(w), EINVAL);  // misaligned atomic
  w.remote_addr = 0x1000;
  sg[0].length = 4;
  EXPECT_EQ(e.qp->post_send(w), EINVAL);  // atomic needs 8 bytes
  sg[0].length = 8;
  w.opcode = WrOpcode::kLocalInvalidate;
  EXPECT_EQ(e.qp->post_send(w), EINVAL);
  w.opcode = WrOpcode::kSend;
  EXPECT_EQ(e.qp->post_send(w), 0);
  EXPECT_EQ(e.qp->post_send(w), 0);
  EXPECT_EQ(e.qp->post_send(w), ENOMEM);  // the SQ is full; nothing grows
}

TEST_F(Requester, BadLkeyFailsWithLocProtErrInOrder) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 10)), 0);
  SendWr bad = wr(2, WrOpcode::kSend, 10);
  Sge s{buf->va, 10, 0x4242};
  bad.sg_list = std::span<const Sge>(&s, 1);
  ASSERT_EQ(q.qp->post_send(bad), 0);
  ASSERT_EQ(q.qp->post_send(wr(3, WrOpcode::kSend, 10)), 0);
  EXPECT_EQ(drain().size(), 1u);           // the requester stops at the bad WQE
  EXPECT_TRUE(q.send_cq.entries.empty());  // and reports it only after wr 1
  ack(kSpsn);
  ASSERT_EQ(q.send_cq.entries.size(), 3u);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kLocProtErr);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kWrFlushErr);
  EXPECT_EQ(q.qp->state(), QpState::kErr);
}

TEST_F(Requester, ReadIntoReadOnlyBufferIsLocProtErr) {
  auto& ro = q.memory.add(64, 0);
  up();
  SendWr w = wr(1, WrOpcode::kRdmaRead, 8);
  Sge s{ro.va, 8, ro.key};
  w.sg_list = std::span<const Sge>(&s, 1);
  ASSERT_EQ(q.qp->post_send(w), 0);
  EXPECT_TRUE(drain().empty());
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kLocProtErr);
}

TEST_F(Requester, MessageOverTwoGigabytesIsLocLenErr) {
  auto& big = q.memory.add(16, kAccessLocalWrite);
  up();
  Sge sg[2] = {{big.va, 0x80000000u, big.key}, {big.va, 1, big.key}};
  SendWr w = wr(1, WrOpcode::kRdmaWrite, 0);
  w.sg_list = std::span<const Sge>(sg, 2);
  ASSERT_EQ(q.qp->post_send(w), 0);
  EXPECT_TRUE(drain().empty());
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kLocLenErr);
}

TEST_F(Requester, ErrStateFlushesEverythingInOrderAndLaterPostsFlushToo) {
  up();
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(q.qp->post_send(wr(i, WrOpcode::kSend, 10, 0)), 0);
  ASSERT_EQ(q.post_recv(10, *buf, 64), 0);
  ASSERT_EQ(q.post_recv(11, *buf, 64), 0);
  drain();
  q.qp->set_state(QpState::kErr);
  for (uint64_t i = 0; i < 3; ++i) {
    Completion c = q.send_cq.pop();
    EXPECT_EQ(c.wr_id, i);
    EXPECT_EQ(c.status, WcStatus::kWrFlushErr);
  }
  EXPECT_EQ(q.recv_cq.pop().wr_id, 10u);
  EXPECT_EQ(q.recv_cq.pop().wr_id, 11u);
  ASSERT_EQ(q.qp->post_send(wr(7, WrOpcode::kSend, 10, 0)), 0);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kWrFlushErr);
  ASSERT_EQ(q.post_recv(12, *buf, 64), 0);
  EXPECT_EQ(q.recv_cq.pop().status, WcStatus::kWrFlushErr);
  ack(kSpsn + 2);  // responses to an ERR QP are dropped
  EXPECT_TRUE(q.send_cq.entries.empty());
  EXPECT_TRUE(drain().empty());
}

TEST_F(Requester, CompletionQueueOverrunTakesTheQpToErr) {
  Endpoint e{QpType::kRc, 3};
  FakeCq small(1);
  auto qp = TransportQp::create(QpType::kRc, 3, {}, e.memory, small, e.recv_cq, nullptr);
  auto& m = e.memory.add(64, 0);
  qp->set_state(QpState::kInit);
  qp->configure(cfg);
  qp->set_state(QpState::kRtr);
  qp->set_state(QpState::kRts);
  Sge s{m.va, 8, m.key};
  SendWr w;
  w.flags = kSendSignaled;
  w.sg_list = std::span<const Sge>(&s, 1);
  ASSERT_EQ(qp->post_send(w), 0);
  ASSERT_EQ(qp->post_send(w), 0);
  CaptureSink sink;
  qp->transmit(now, sink, 10);
  Packet a = make_packet(op::kRcAck, kSpsn + 1, {}, 3);
  qp->receive(a.rx(), now);
  EXPECT_EQ(small.entries.size(), 1u);
  EXPECT_EQ(small.overruns, 1);
  EXPECT_EQ(qp->state(), QpState::kErr);
}

TEST_F(Requester, SendPsnsWrapAt24Bits) {
  cfg.sq_psn = Psn(Psn::kMask - 1);
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 4 * 256)), 0);
  auto out = drain();
  EXPECT_EQ(psns(out), (std::vector<uint32_t>{Psn::kMask - 1, Psn::kMask, 0, 1}));
  nak(0, wire::NakCode::kPsnSequenceError);
  EXPECT_EQ(psns(drain()), (std::vector<uint32_t>{0, 1}));
  ack(1);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
}

TEST_F(Requester, WrsPostedBeforeRtsUseTheSendPsnGivenAtRts) {
  QpConfig init = cfg;
  init.sq_psn = Psn(0);
  q.qp->set_state(QpState::kInit);
  q.qp->configure(init);
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 10)), 0);
  EXPECT_TRUE(drain().empty());  // INIT sends nothing
  q.qp->set_state(QpState::kRtr);
  q.qp->configure(cfg);  // the verbs layer hands over sq_psn at RTS
  q.qp->set_state(QpState::kRts);
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn(), kSpsn);
}

TEST_F(Requester, FailedWqeIsNotSkippedWhenALateAckOvertakesARetransmission) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 300)), 0);  // PSNs kSpsn, kSpsn + 1
  SendWr bad = wr(2, WrOpcode::kSend, 10);
  Sge s{buf->va, 10, 0x4242};
  bad.sg_list = std::span<const Sge>(&s, 1);
  ASSERT_EQ(q.qp->post_send(bad), 0);
  ASSERT_EQ(q.qp->post_send(wr(3, WrOpcode::kSend, 10)), 0);
  EXPECT_EQ(drain().size(), 2u);
  now = q.qp->next_deadline(now);
  EXPECT_EQ(drain(1).size(), 1u);  // retransmission of kSpsn only (budget 1)
  ack(kSpsn + 1);                  // the original's ACK arrives late
  EXPECT_TRUE(drain().empty());    // wr 3 never goes out
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kLocProtErr);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kWrFlushErr);
}

TEST_F(Requester, SendWithInvalidateCarriesTheKeyInIeth) {
  up();
  SendWr w = wr(1, WrOpcode::kSendWithInvalidate, 300);
  w.invalidate_rkey = 0xcafe;
  ASSERT_EQ(q.qp->post_send(w), 0);
  auto out = drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].opcode(), op::kRcSendFirst);
  EXPECT_EQ(out[1].opcode(), op::kRcSendLastInv);
  EXPECT_EQ(out[1].hdr.ieth_rkey, 0xcafeu);
}

TEST_F(Requester, DuplicatedNaksCostNoExtraRetries) {
  up();
  ASSERT_EQ(q.qp->post_send(wr(1, WrOpcode::kSend, 1024)), 0);
  drain();
  for (int i = 0; i < 5; ++i) nak(kSpsn + 2, wire::NakCode::kPsnSequenceError);
  EXPECT_EQ(psns(drain()), (std::vector<uint32_t>{kSpsn + 2, kSpsn + 3}));  // one go-back-N
  EXPECT_EQ(q.qp->state(), QpState::kRts);
  for (int i = 0; i < 3; ++i) ack(kSpsn + 2, wire::Aeth::rnr_nak(0, 14));  // rnr_retry = 1
  EXPECT_EQ(q.qp->state(), QpState::kRts);
  now = q.qp->next_deadline(now);
  EXPECT_EQ(psns(drain()), (std::vector<uint32_t>{kSpsn + 2, kSpsn + 3}));
  ack(kSpsn + 3);
  EXPECT_EQ(q.send_cq.pop().status, WcStatus::kSuccess);
}

}  // namespace
}  // namespace uroce::transport::test
