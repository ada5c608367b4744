// Verbs over the real transport: two devices joined by an in-memory wire, RC SEND/RECV, RDMA
// WRITE and READ through registered memory, remote key checks seen as completion errors, and the
// transport's flush of outstanding work on ERR in posting order.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <numeric>
#include <vector>

#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "verbs_test_support.h"
#include "wire/packet.h"

namespace uroce::verbs {
namespace {

using transport::Completion;
using transport::Sge;
using transport::WcStatus;
using transport::WrOpcode;

using testing::PairLink;

struct Node {
  explicit Node(PairLink& l, const DeviceConfig& config = {}) : link(l), dev(l, config) {
    ctx = std::move(dev.open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(256).value());
    mem.resize(64 * 1024);
    mr = std::move(pd->reg_mr(mem.data(), mem.size(),
                              transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                                  transport::kAccessRemoteRead | transport::kAccessRemoteAtomic)
                       .value());
    QpInitAttr a;
    a.send_cq = a.recv_cq = cq.get();
    a.cap.max_send_wr = 64;
    a.cap.max_recv_wr = 64;
    qp = std::move(pd->create_qp(a).value());
  }
  ~Node() {
    qp.reset();
    mr.reset();
    cq.reset();
    pd.reset();
    ctx.reset();
  }
  uint64_t addr(size_t off) const { return reinterpret_cast<uint64_t>(mem.data()) + off; }

  PairLink& link;
  Device dev;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<uint8_t> mem;
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<QueuePair> qp;
};

// A signaled work request with one SGE (post_send copies it: `sge` need only outlive the call).
transport::SendWr signaled(uint64_t wr_id, WrOpcode opcode, const Sge& sge,
                           uint64_t remote_addr = 0, uint32_t rkey = 0) {
  transport::SendWr w;
  w.wr_id = wr_id;
  w.opcode = opcode;
  w.flags = transport::kSendSignaled;
  w.sg_list = {&sge, 1};
  w.remote_addr = remote_addr;
  w.rkey = rkey;
  return w;
}

int post_recv(Node& n, uint64_t wr_id, const Sge& sge) {
  transport::RecvWr r;
  r.wr_id = wr_id;
  r.sg_list = {&sge, 1};
  return n.qp->post_recv(r);
}

void connect(Node& me, const Node& peer) {
  testing::connect_rc(*me.qp, peer.qp->qp_num(), peer.dev.gid());
}

class VerbsLoopback : public ::testing::Test {
 protected:
  VerbsLoopback()
      : la(gid_from_ipv4({10, 0, 0, 1})), lb(gid_from_ipv4({10, 0, 0, 2})), a(la), b(lb) {
    la.connect(lb);
    lb.connect(la);
    connect(a, b);
    connect(b, a);
  }
  // Runs both devices in virtual time until `n` completions arrive at `node` (bounded).
  std::vector<Completion> run_until(Node& node, size_t n) {
    std::vector<Completion> got;
    std::array<Completion, 16> out;
    for (int pass = 0; pass < 10000 && got.size() < n; ++pass) {
      testing::step_pair(now, a.dev, b.dev);
      size_t k = node.cq->poll(out);
      got.insert(got.end(), out.begin(), out.begin() + k);
    }
    return got;
  }
  PairLink la, lb;
  Node a, b;
  Nanos now = 0;
};

TEST_F(VerbsLoopback, SendRecvMovesBytesAcrossPackets) {
  std::iota(a.mem.begin(), a.mem.begin() + 3000, 0);
  Sge rsge{b.addr(100), 4000, b.mr->lkey()};
  ASSERT_EQ(post_recv(b, 7, rsge), 0);
  Sge ssge{a.addr(0), 3000, a.mr->lkey()};
  transport::SendWr s = signaled(9, WrOpcode::kSend, ssge);
  ASSERT_EQ(a.qp->post_send(s), 0);

  auto rc = run_until(b, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].wr_id, 7u);
  EXPECT_EQ(rc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(rc[0].byte_len, 3000u);
  EXPECT_EQ(std::memcmp(a.mem.data(), b.mem.data() + 100, 3000), 0);
  auto sc = run_until(a, 1);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].wr_id, 9u);
  EXPECT_EQ(sc[0].status, WcStatus::kSuccess);
}

TEST_F(VerbsLoopback, RdmaWriteAndReadUseTheRemoteKey) {
  for (int i = 0; i < 2048; ++i) a.mem[i] = static_cast<uint8_t>(i * 7);
  Sge sge{a.addr(0), 2048, a.mr->lkey()};
  transport::SendWr w = signaled(1, WrOpcode::kRdmaWrite, sge, b.addr(8192), b.mr->rkey());
  ASSERT_EQ(a.qp->post_send(w), 0);
  auto c = run_until(a, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a.mem.data(), b.mem.data() + 8192, 2048), 0);

  // Read it back into another part of A's memory.
  Sge rs{a.addr(30000), 2048, a.mr->lkey()};
  transport::SendWr rd = signaled(2, WrOpcode::kRdmaRead, rs, b.addr(8192), b.mr->rkey());
  ASSERT_EQ(a.qp->post_send(rd), 0);
  c = run_until(a, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a.mem.data(), a.mem.data() + 30000, 2048), 0);
}

TEST_F(VerbsLoopback, WriteWithABadOrDeadRkeyIsARemoteAccessError) {
  Sge sge{a.addr(0), 64, a.mr->lkey()};
  transport::SendWr w =
      signaled(1, WrOpcode::kRdmaWrite, sge, b.addr(0), b.mr->lkey());  // an lkey is not an rkey
  ASSERT_EQ(a.qp->post_send(w), 0);
  auto c = run_until(a, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(a.qp->state(), QpState::kErr);
  EXPECT_EQ(b.mem[0], 0);
}

TEST_F(VerbsLoopback, DeregisteredRemoteMemoryIsNeverWritten) {
  const uint32_t rkey = b.mr->rkey();
  std::vector<uint8_t> keep = b.mem;
  b.mr.reset();
  std::fill(a.mem.begin(), a.mem.begin() + 64, 0xee);
  Sge sge{a.addr(0), 64, a.mr->lkey()};
  transport::SendWr w = signaled(1, WrOpcode::kRdmaWrite, sge, b.addr(0), rkey);
  ASSERT_EQ(a.qp->post_send(w), 0);
  auto c = run_until(a, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(b.mem, keep);
}

TEST_F(VerbsLoopback, APeerWritesThroughABoundWindowAndItsSendWithInvalidateClosesIt) {
  // b binds a type 2 window over 256 bytes of a second MR and hands a the key (as an
  // application would, in a message); a writes into it, then invalidates it with its SEND.
  std::vector<uint8_t> region(4096, 0);
  auto mr = std::move(b.pd->reg_mr(region.data(), region.size(),
                                   transport::kAccessLocalWrite | transport::kAccessMwBind)
                          .value());
  auto mw = std::move(b.pd->alloc_mw(MwType::kType2).value());
  const uint32_t key = next_window_key(mw->rkey());
  const uint64_t base = reinterpret_cast<uint64_t>(region.data());
  transport::SendWr bind;
  bind.wr_id = 50;
  bind.opcode = WrOpcode::kBindMw;
  bind.flags = transport::kSendSignaled;
  bind.bind = {mw->rkey(), key, mr->lkey(), base + 1024, 256, transport::kAccessRemoteWrite};
  ASSERT_EQ(b.qp->post_send(bind), 0);
  auto bound = run_until(b, 1);
  ASSERT_EQ(bound.size(), 1u);
  EXPECT_EQ(bound[0].opcode, transport::WcOpcode::kBindMw);
  EXPECT_EQ(bound[0].status, WcStatus::kSuccess);

  std::iota(a.mem.begin(), a.mem.begin() + 256, 1);
  Sge sge{a.addr(0), 256, a.mr->lkey()};
  transport::SendWr write = signaled(1, WrOpcode::kRdmaWrite, sge, base + 1024, key);
  ASSERT_EQ(a.qp->post_send(write), 0);
  auto wrote = run_until(a, 1);
  ASSERT_EQ(wrote.size(), 1u);
  EXPECT_EQ(wrote[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(a.mem.begin(), a.mem.begin() + 256, region.begin() + 1024));
  EXPECT_EQ(mr->windows_bound(), 1u);

  Sge rsge{b.addr(0), 64, b.mr->lkey()};
  ASSERT_EQ(post_recv(b, 60, rsge), 0);
  Sge ssge{a.addr(0), 8, a.mr->lkey()};
  transport::SendWr send = signaled(2, WrOpcode::kSendWithInvalidate, ssge);
  send.invalidate_rkey = key;
  ASSERT_EQ(a.qp->post_send(send), 0);
  auto recv = run_until(b, 1);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].status, WcStatus::kSuccess);
  EXPECT_EQ(recv[0].wc_flags & transport::kWcWithInvalidate, transport::kWcWithInvalidate);
  EXPECT_EQ(recv[0].imm_or_invalidated_rkey, key);
  EXPECT_EQ(mr->windows_bound(), 0u);
  ASSERT_EQ(run_until(a, 1).size(), 1u);

  // The key is dead now: the same WRITE is a remote access error and writes nothing.
  std::fill(region.begin(), region.end(), 0);
  write.wr_id = 3;
  ASSERT_EQ(a.qp->post_send(write), 0);
  auto refused = run_until(a, 1);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].status, WcStatus::kRemAccessErr);
  EXPECT_TRUE(std::all_of(region.begin(), region.end(), [](uint8_t x) { return x == 0; }));
  b.qp.reset();  // before the window and MR it may still name
}

TEST_F(VerbsLoopback, ErrFlushesOutstandingWorkInPostingOrder) {
  // Nobody runs progress: every request stays outstanding until the QP moves to ERR.
  Sge sge{a.addr(0), 16, a.mr->lkey()};
  for (uint64_t id = 1; id <= 6; ++id) {
    transport::SendWr s;
    s.wr_id = id;
    s.flags = transport::kSendSignaled;
    s.sg_list = {&sge, 1};
    ASSERT_EQ(a.qp->post_send(s), 0);
    Sge rsge{a.addr(1000), 64, a.mr->lkey()};
    transport::RecvWr r;
    r.wr_id = 100 + id;
    r.sg_list = {&rsge, 1};
    ASSERT_EQ(a.qp->post_recv(r), 0);
  }
  QpAttr err;
  err.qp_state = QpState::kErr;
  ASSERT_EQ(a.qp->modify(err, kQpState), 0);
  std::array<Completion, 32> out;
  size_t n = a.cq->poll(out);
  ASSERT_EQ(n, 12u);
  std::vector<uint64_t> sends, recvs;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i].status, WcStatus::kWrFlushErr);
    (out[i].wr_id >= 100 ? recvs : sends).push_back(out[i].wr_id);
  }
  EXPECT_EQ(sends, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(recvs, (std::vector<uint64_t>{101, 102, 103, 104, 105, 106}));
}

TEST(VerbsTransmitFirst, ResponsesWaitForTheNextPassButNotForADestroy) {
  DeviceConfig config;
  config.transmit_before_receive = true;
  PairLink la(gid_from_ipv4({10, 0, 1, 1})), lb(gid_from_ipv4({10, 0, 1, 2}));
  la.connect(lb);
  lb.connect(la);
  Node a(la, config), b(lb, config);
  connect(a, b);
  connect(b, a);
  Sge rsge{b.addr(0), 64, b.mr->lkey()};
  ASSERT_EQ(post_recv(b, 1, rsge), 0);
  Sge ssge{a.addr(0), 8, a.mr->lkey()};
  transport::SendWr s = signaled(2, WrOpcode::kSend, ssge);
  ASSERT_EQ(a.qp->post_send(s), 0);
  Nanos now = 1000;
  a.dev.progress(now);  // the SEND leaves
  EXPECT_EQ(la.counters().tx_packets, 1u);
  // b receives it and completes the receive; its ACK waits for b's next pass, which is due now.
  EXPECT_EQ(b.dev.progress(now), now);
  EXPECT_EQ(lb.counters().tx_packets, 0u);
  std::array<Completion, 4> out;
  ASSERT_EQ(b.cq->poll(out), 1u);
  EXPECT_EQ(out[0].status, WcStatus::kSuccess);
  // Destroyed before that pass: the ACK still goes, so a's SEND completes instead of retrying.
  b.qp.reset();
  EXPECT_EQ(lb.counters().tx_packets, 1u);
  a.dev.progress(now + 1000);
  ASSERT_EQ(a.cq->poll(out), 1u);
  EXPECT_EQ(out[0].wr_id, 2u);
  EXPECT_EQ(out[0].status, WcStatus::kSuccess);
}

}  // namespace
}  // namespace uroce::verbs
