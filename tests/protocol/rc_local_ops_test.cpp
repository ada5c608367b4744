// BIND_MW and LOCAL_INV on the send queue (IBA 10.6.7): carried out by the requester in posting
// order, without packets or PSNs, completed in order with the WQEs around them; a failure is an
// error completion that takes the QP to ERR. The window rules themselves are the verbs layer's
// (tests/unit/verbs_mw_test.cpp); FakeMemory records the calls.
#include "pair.h"

namespace uroce::transport::test {
namespace {

SendWr bind_wr(uint64_t wr_id, uint32_t mw_rkey, uint32_t new_rkey,
               uint32_t flags = kSendSignaled) {
  SendWr wr = make_wr(wr_id, WrOpcode::kBindMw, nullptr, 0, flags);
  wr.bind = {mw_rkey, new_rkey, /*mr_lkey=*/7, /*addr=*/0x1000, /*length=*/64, kAccessRemoteRead};
  return wr;
}

TEST(RcLocalOps, BindRunsInPostingOrderWithoutPacketsAndCompletesInOrder) {
  Pair p;
  auto& src = p.a.memory.add(4096, kAccessLocalWrite);
  auto& dst = p.b.memory.add(4096, kAccessLocalWrite | kAccessRemoteWrite);
  Sge s{src.va, 1000, src.key};  // one packet at the default MTU
  SendWr write = make_wr(1, WrOpcode::kRdmaWrite, &s, 1);
  write.remote_addr = dst.va;
  write.rkey = dst.key;
  ASSERT_EQ(p.a.qp->post_send(write), 0);
  ASSERT_EQ(p.a.qp->post_send(bind_wr(2, 0x500, 0x501)), 0);
  SendWr unsignaled = bind_wr(3, 0x600, 0x6ff, 0);
  ASSERT_EQ(p.a.qp->post_send(unsignaled), 0);
  SendWr inv = make_wr(4, WrOpcode::kLocalInvalidate, nullptr, 0);
  const uint32_t window_key = p.a.memory.add(16, 0).key;  // FakeMemory invalidates any key
  inv.invalidate_rkey = window_key;
  ASSERT_EQ(p.a.qp->post_send(inv), 0);

  // The first transmit sends the WRITE's one packet and then binds: nothing waits for the ACK,
  // but the bind's completion does.
  ASSERT_EQ(p.a.run(p.now), 1u);
  EXPECT_EQ(p.a.qp->counters().tx_packets, 1u);
  ASSERT_EQ(p.a.memory.binds.size(), 2u);
  EXPECT_EQ(p.a.memory.binds[0].first.new_rkey, 0x501u);
  EXPECT_EQ(p.a.memory.binds[0].second, Pair::kQpnA);  // bound through this QP
  EXPECT_EQ(p.a.memory.binds[1].first.new_rkey, 0x6ffu);
  EXPECT_TRUE(p.a.send_cq.entries.empty());

  p.pump();
  ASSERT_EQ(p.a.send_cq.entries.size(), 3u);  // the unsignaled bind completes silently
  EXPECT_EQ(p.a.send_cq.entries[0].wr_id, 1u);
  EXPECT_EQ(p.a.send_cq.entries[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(p.a.send_cq.entries[1].wr_id, 2u);
  EXPECT_EQ(p.a.send_cq.entries[1].opcode, WcOpcode::kBindMw);
  EXPECT_EQ(p.a.send_cq.entries[1].status, WcStatus::kSuccess);
  EXPECT_EQ(p.a.send_cq.entries[2].wr_id, 4u);
  EXPECT_EQ(p.a.send_cq.entries[2].opcode, WcOpcode::kLocalInvalidate);
  EXPECT_EQ(p.a.memory.invalidated, std::vector<uint32_t>{window_key});
  EXPECT_EQ(p.a.qp->state(), QpState::kRts);
}

TEST(RcLocalOps, AFenceHoldsTheBindUntilEarlierReadsComplete) {
  Pair p;
  auto& local = p.a.memory.add(4096, kAccessLocalWrite);
  auto& remote = p.b.memory.add(4096, kAccessLocalWrite | kAccessRemoteRead);
  Sge s{local.va, 4096, local.key};
  SendWr read = make_wr(1, WrOpcode::kRdmaRead, &s, 1);
  read.remote_addr = remote.va;
  read.rkey = remote.key;
  ASSERT_EQ(p.a.qp->post_send(read), 0);
  ASSERT_EQ(p.a.qp->post_send(bind_wr(2, 0x500, 0x501, kSendSignaled | kSendFence)), 0);
  p.a.run(p.now);
  EXPECT_TRUE(p.a.memory.binds.empty());  // the READ may still use the old window
  p.pump();
  ASSERT_EQ(p.a.memory.binds.size(), 1u);
  ASSERT_EQ(p.a.send_cq.entries.size(), 2u);
  EXPECT_EQ(p.a.send_cq.entries[1].opcode, WcOpcode::kBindMw);
}

TEST(RcLocalOps, AFailedBindIsAnErrorCompletionAndTheRestFlush) {
  Pair p;
  p.a.memory.bind_status = WcStatus::kMwBindErr;
  ASSERT_EQ(p.a.qp->post_send(bind_wr(1, 0x500, 0x501)), 0);
  ASSERT_EQ(p.a.qp->post_send(bind_wr(2, 0x600, 0x601)), 0);
  p.pump();
  ASSERT_EQ(p.a.send_cq.entries.size(), 2u);
  EXPECT_EQ(p.a.send_cq.entries[0].status, WcStatus::kMwBindErr);
  EXPECT_EQ(p.a.send_cq.entries[0].opcode, WcOpcode::kBindMw);
  EXPECT_EQ(p.a.send_cq.entries[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(p.a.memory.binds.size(), 1u);  // the second never ran
  EXPECT_EQ(p.a.qp->state(), QpState::kErr);
  // An invalidation of a key that cannot be invalidated fails the same way.
  Pair q;
  SendWr inv = make_wr(1, WrOpcode::kLocalInvalidate, nullptr, 0);
  inv.invalidate_rkey = 0x4242;
  ASSERT_EQ(q.a.qp->post_send(inv), 0);
  q.pump();
  ASSERT_EQ(q.a.send_cq.entries.size(), 1u);
  EXPECT_EQ(q.a.send_cq.entries[0].status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(q.a.qp->state(), QpState::kErr);
}

TEST(RcLocalOps, ARewindOverADoneBindResendsAroundItAndNeverBindsTwice) {
  // Go-back-N brings the cursor back over the bind when the WRITE before it is lost.
  Pair p;
  auto& src = p.a.memory.add(8192, kAccessLocalWrite);
  auto& dst = p.b.memory.add(8192, kAccessLocalWrite | kAccessRemoteWrite);
  for (size_t i = 0; i < src.data.size(); ++i) src.data[i] = static_cast<uint8_t>(i * 3);
  Sge s0{src.va, 4096, src.key}, s1{src.va + 4096, 4096, src.key};
  SendWr w0 = make_wr(1, WrOpcode::kRdmaWrite, &s0, 1);
  w0.remote_addr = dst.va;
  w0.rkey = dst.key;
  SendWr w1 = make_wr(3, WrOpcode::kRdmaWrite, &s1, 1);
  w1.remote_addr = dst.va + 4096;
  w1.rkey = dst.key;
  ASSERT_EQ(p.a.qp->post_send(w0), 0);
  ASSERT_EQ(p.a.qp->post_send(bind_wr(2, 0x500, 0x501)), 0);
  ASSERT_EQ(p.a.qp->post_send(w1), 0);
  bool lost = false;
  p.drop = [&](const Packet& pkt, bool from_a) {
    if (!from_a || lost || pkt.opcode() != wire::op::kRcWriteOnly) return false;
    return lost = true;  // the first WRITE's first transmission
  };
  p.pump();
  ASSERT_EQ(p.a.send_cq.entries.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(p.a.send_cq.entries[i].wr_id, i + 1);
    EXPECT_EQ(p.a.send_cq.entries[i].status, WcStatus::kSuccess);
  }
  EXPECT_EQ(p.a.memory.binds.size(), 1u);
  // The sequence NAK for the lost first packet sends both WRITEs again, 4 x 1 KiB each.
  EXPECT_EQ(p.a.qp->counters().retransmitted_packets, 8u);
  EXPECT_EQ(src.data, dst.data);
}

TEST(LocalOps, UdRefusesThemAtPostTimeAndTheyTakeNoGatherList) {
  Pair ud(QpType::kUd);
  EXPECT_EQ(ud.a.qp->post_send(bind_wr(1, 0x500, 0x501)), EINVAL);
  Pair rc;
  auto& m = rc.a.memory.add(64, kAccessLocalWrite);
  Sge s{m.va, 8, m.key};
  SendWr with_sge = bind_wr(1, 0x500, 0x501);
  with_sge.sg_list = {&s, 1};
  EXPECT_EQ(rc.a.qp->post_send(with_sge), EINVAL);
  Pair uc(QpType::kUc);
  ASSERT_EQ(uc.a.qp->post_send(bind_wr(1, 0x500, 0x501)), 0);
  uc.pump();
  ASSERT_EQ(uc.a.send_cq.entries.size(), 1u);
  EXPECT_EQ(uc.a.send_cq.entries[0].opcode, WcOpcode::kBindMw);
}

}  // namespace
}  // namespace uroce::transport::test
