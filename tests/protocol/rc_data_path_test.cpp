// RC SEND / WRITE / READ / atomics between two QPs wired back to back, without loss.
#include "pair.h"

namespace uroce::transport::test {
namespace {

TEST(RcDataPath, MultiPacketSendLandsAndCompletesBothSides) {
  QpConfig cfg;
  cfg.path_mtu_bytes = 256;
  Pair p(QpType::kRc, cfg);
  auto& src = p.a.memory.add(1000, kAccessLocalWrite);
  auto& dst = p.b.memory.add(2048, kAccessLocalWrite);
  src.data = pattern(1000);
  ASSERT_EQ(p.b.post_recv(7, dst, 2048), 0);
  Sge s{src.va, 1000, src.key};
  ASSERT_EQ(p.a.qp->post_send(make_wr(42, WrOpcode::kSendWithImm, &s, 1)), 0);
  p.pump();
  ASSERT_EQ(p.a.send_cq.entries.size(), 1u);
  Completion sc = p.a.send_cq.pop();
  EXPECT_EQ(sc.wr_id, 42u);
  EXPECT_EQ(sc.status, WcStatus::kSuccess);
  EXPECT_EQ(sc.opcode, WcOpcode::kSend);
  ASSERT_EQ(p.b.recv_cq.entries.size(), 1u);
  Completion rc = p.b.recv_cq.pop();
  EXPECT_EQ(rc.wr_id, 7u);
  EXPECT_EQ(rc.status, WcStatus::kSuccess);
  EXPECT_EQ(rc.opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc.byte_len, 1000u);
  EXPECT_EQ(rc.wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(rc.qp_num, Pair::kQpnB);
  EXPECT_TRUE(std::equal(src.data.begin(), src.data.end(), dst.data.begin()));
  EXPECT_EQ(p.a.qp->counters().tx_packets, 4u);  // 1000 bytes at MTU 256
  EXPECT_EQ(p.a.qp->counters().retransmitted_packets, 0u);
}

TEST(RcDataPath, WriteWithGatherListAndUnsignaledCompletions) {
  QpConfig cfg;
  cfg.path_mtu_bytes = 512;
  Pair p(QpType::kRc, cfg);
  auto& s1 = p.a.memory.add(700, kAccessLocalWrite);
  auto& s2 = p.a.memory.add(700, kAccessLocalWrite);
  s1.data = pattern(700, 3);
  s2.data = pattern(700, 9);
  auto& dst = p.b.memory.add(4096, kAccessRemoteWrite | kAccessLocalWrite);
  Sge sg[2] = {{s1.va + 100, 600, s1.key}, {s2.va, 700, s2.key}};
  SendWr wr = make_wr(1, WrOpcode::kRdmaWrite, sg, 2, 0);  // unsignaled
  wr.remote_addr = dst.va + 8;
  wr.rkey = dst.key;
  ASSERT_EQ(p.a.qp->post_send(wr), 0);
  wr.wr_id = 2;
  wr.flags = kSendSignaled;
  wr.remote_addr = dst.va + 2048;
  ASSERT_EQ(p.a.qp->post_send(wr), 0);
  p.pump();
  ASSERT_EQ(p.a.send_cq.entries.size(), 1u);
  EXPECT_EQ(p.a.send_cq.pop().wr_id, 2u);
  EXPECT_TRUE(p.b.recv_cq.entries.empty());
  for (uint64_t base : {8u, 2048u}) {
    EXPECT_TRUE(std::equal(s1.data.begin() + 100, s1.data.end(), dst.data.begin() + base));
    EXPECT_TRUE(std::equal(s2.data.begin(), s2.data.end(), dst.data.begin() + base + 600));
  }
}

TEST(RcDataPath, WriteWithImmediateConsumesReceiveWqe) {
  Pair p;
  auto& src = p.a.memory.add(64, kAccessLocalWrite);
  auto& dst = p.b.memory.add(64, kAccessRemoteWrite | kAccessLocalWrite);
  auto& rbuf = p.b.memory.add(16, kAccessLocalWrite);
  src.data = pattern(64);
  ASSERT_EQ(p.b.post_recv(9, rbuf, 16), 0);
  Sge s{src.va, 64, src.key};
  SendWr wr = make_wr(1, WrOpcode::kRdmaWriteWithImm, &s, 1);
  wr.remote_addr = dst.va;
  wr.rkey = dst.key;
  wr.imm = 0xdeadbeef;
  ASSERT_EQ(p.a.qp->post_send(wr), 0);
  p.pump();
  Completion rc = p.b.recv_cq.pop();
  EXPECT_EQ(rc.wr_id, 9u);
  EXPECT_EQ(rc.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc.imm_or_invalidated_rkey, 0xdeadbeefu);
  EXPECT_EQ(rc.byte_len, 64u);
  EXPECT_EQ(rc.wc_flags, uint32_t{kWcWithImm});
  EXPECT_EQ(dst.data, src.data);
  EXPECT_EQ(p.a.send_cq.pop().opcode, WcOpcode::kRdmaWrite);
}

TEST(RcDataPath, ReadAcrossPacketsIntoScatterList) {
  QpConfig cfg;
  cfg.path_mtu_bytes = 256;
  Pair p(QpType::kRc, cfg);
  auto& remote = p.b.memory.add(1500, kAccessRemoteRead);
  remote.data = pattern(1500, 5);
  auto& l1 = p.a.memory.add(300, kAccessLocalWrite);
  auto& l2 = p.a.memory.add(1200, kAccessLocalWrite);
  Sge sg[2] = {{l1.va, 300, l1.key}, {l2.va, 1200, l2.key}};
  SendWr wr = make_wr(5, WrOpcode::kRdmaRead, sg, 2);
  wr.remote_addr = remote.va;
  wr.rkey = remote.key;
  ASSERT_EQ(p.a.qp->post_send(wr), 0);
  p.pump();
  Completion c = p.a.send_cq.pop();
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(c.byte_len, 1500u);
  EXPECT_TRUE(std::equal(l1.data.begin(), l1.data.end(), remote.data.begin()));
  EXPECT_TRUE(std::equal(l2.data.begin(), l2.data.end(), remote.data.begin() + 300));
  EXPECT_EQ(p.b.qp->counters().tx_packets, 6u);  // ceil(1500 / 256) responses
}

TEST(RcDataPath, AtomicsReturnOriginalAndUpdateTarget) {
  Pair p;
  auto& remote = p.b.memory.add(64, kAccessRemoteAtomic);
  uint64_t v = 100;
  std::memcpy(remote.data.data() + 8, &v, 8);
  auto& local = p.a.memory.add(16, kAccessLocalWrite);
  Sge s{local.va, 8, local.key};
  SendWr fa = make_wr(1, WrOpcode::kAtomicFetchAdd, &s, 1);
  fa.remote_addr = remote.va + 8;
  fa.rkey = remote.key;
  fa.compare_add = 5;
  ASSERT_EQ(p.a.qp->post_send(fa), 0);
  p.pump();
  uint64_t got = 0;
  std::memcpy(&got, local.data.data(), 8);
  EXPECT_EQ(got, 100u);
  std::memcpy(&v, remote.data.data() + 8, 8);
  EXPECT_EQ(v, 105u);

  Sge s2{local.va + 8, 8, local.key};
  SendWr cas = make_wr(2, WrOpcode::kAtomicCompareSwap, &s2, 1);
  cas.remote_addr = remote.va + 8;
  cas.rkey = remote.key;
  cas.compare_add = 105;
  cas.swap = 7;
  ASSERT_EQ(p.a.qp->post_send(cas), 0);
  p.pump();
  std::memcpy(&got, local.data.data() + 8, 8);
  EXPECT_EQ(got, 105u);
  std::memcpy(&v, remote.data.data() + 8, 8);
  EXPECT_EQ(v, 7u);
  EXPECT_EQ(p.a.send_cq.pop().opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(p.a.send_cq.pop().opcode, WcOpcode::kCompareSwap);
}

TEST(RcDataPath, InlineSendCopiesAtPostTime) {
  Pair p;
  auto& dst = p.b.memory.add(64, kAccessLocalWrite);
  ASSERT_EQ(p.b.post_recv(1, dst, 64), 0);
  std::vector<uint8_t> data = pattern(40);
  Sge s{reinterpret_cast<uint64_t>(data.data()), 40, 0xbad};  // inline: lkey unused
  ASSERT_EQ(p.a.qp->post_send(make_wr(1, WrOpcode::kSend, &s, 1, kSendSignaled | kSendInline)), 0);
  std::vector<uint8_t> expect = data;
  std::fill(data.begin(), data.end(), 0);  // the caller may reuse its buffer at once
  p.pump();
  EXPECT_EQ(p.a.send_cq.pop().status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), dst.data.begin()));
  EXPECT_EQ(p.a.memory.local_calls, 0);
}

TEST(RcDataPath, ManyMessagesCompleteInPostingOrderAcrossPsnWrap) {
  QpConfig cfg;
  cfg.path_mtu_bytes = 256;
  Pair p(QpType::kRc, cfg, Psn::kMask - 5, Psn::kMask - 2);
  auto& src = p.a.memory.add(4096, kAccessLocalWrite);
  auto& dst = p.b.memory.add(64 * 1024, kAccessLocalWrite | kAccessRemoteWrite);
  src.data = pattern(4096);
  for (int i = 0; i < 20; ++i) {
    Sge s{src.va, static_cast<uint32_t>(100 + i * 150), src.key};
    SendWr wr = make_wr(i, i % 2 ? WrOpcode::kRdmaWrite : WrOpcode::kSend, &s, 1);
    wr.remote_addr = dst.va + 32768;
    wr.rkey = dst.key;
    if (i % 2 == 0) {
      ASSERT_EQ(p.b.post_recv(i, dst, 4096), 0);
    }
    ASSERT_EQ(p.a.qp->post_send(wr), 0);
  }
  p.pump();
  ASSERT_EQ(p.a.send_cq.entries.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    Completion c = p.a.send_cq.pop();
    EXPECT_EQ(c.wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(c.status, WcStatus::kSuccess);
  }
  EXPECT_EQ(p.b.recv_cq.entries.size(), 10u);
}

}  // namespace
}  // namespace uroce::transport::test
