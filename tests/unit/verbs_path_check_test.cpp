// The path check of connected QPs (QueuePair::on_path, docs/security.md): an RC QP takes
// requests and responses only from the remote GID its address vector names, sent to the GID of
// its path here. The three attacks of a third host on the wire, each with the right QPN, PSN and
// keys: a WRITE that would land and be ACKed to the real peer, a READ request whose responses
// would go to the real peer, and a READ response that would complete the victim's own READ.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "verbs_test_support.h"
#include "wire/packet.h"

namespace uroce::verbs {
namespace {

using testing::PairLink;
using transport::Sge;
using transport::WcStatus;
using transport::WrOpcode;
namespace op = wire::op;

constexpr uint32_t kPsn = 1000;
const Gid kGidA = gid_from_ipv4({10, 0, 0, 1});
const Gid kGidB = gid_from_ipv4({10, 0, 0, 2});
const Gid kAttacker = gid_from_ipv4({10, 0, 0, 3});

uint64_t counter_of(const std::vector<Counter>& cs, const char* name) {
  for (const Counter& c : cs)
    if (c.name == name) return c.value;
  ADD_FAILURE() << name;
  return 0;
}

struct Node {
  explicit Node(PairLink& l) : dev(l) {
    ctx = std::move(dev.open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(64).value());
    mem.assign(4096, 0);
    mr = std::move(pd->reg_mr(mem.data(), mem.size(),
                              transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                                  transport::kAccessRemoteRead)
                       .value());
    QpInitAttr a;
    a.send_cq = a.recv_cq = cq.get();
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
  uint64_t counter(const char* name) const { return counter_of(dev.counters(), name); }

  Device dev;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<uint8_t> mem;
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<QueuePair> qp;
};

void connect(Node& me, const Node& peer) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = transport::kAccessRemoteWrite | transport::kAccessRemoteRead;
  ASSERT_EQ(me.qp->modify(a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  a.qp_state = QpState::kRtr;
  a.path_mtu = Mtu::k1024;
  a.dest_qp_num = peer.qp->qp_num();
  a.rq_psn = kPsn;
  a.max_dest_rd_atomic = 1;
  a.ah_attr.grh.dgid = peer.dev.gid();
  ASSERT_EQ(me.qp->modify(a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                 kQpMaxDestRdAtomic | kQpMinRnrTimer),
            0);
  a.qp_state = QpState::kRts;
  a.sq_psn = kPsn;
  a.timeout = 10;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  ASSERT_EQ(me.qp->modify(
                a, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic),
            0);
}

std::vector<uint8_t> encode(const wire::TransportHeaders& h, std::span<const uint8_t> payload) {
  std::vector<uint8_t> b(wire::kMaxTransportHeaderBytes);
  b.resize(wire::write_transport_headers(h, b));
  b.insert(b.end(), payload.begin(), payload.end());
  b.resize(b.size() + h.bth.pad_count, 0);
  return b;
}

class PathCheck : public ::testing::Test {
 protected:
  PathCheck() : la(kGidA), lb(kGidB), a(la), b(lb) {
    la.connect(lb);
    lb.connect(la);
    connect(a, b);
    connect(b, a);
  }
  void step(int n = 1) {
    for (int i = 0; i < n; ++i) testing::step_pair(now, a.dev, b.dev);
  }
  // A request for b's QP at the PSN it expects, with b's real R_Key: all that is wrong is where
  // it comes from.
  wire::TransportHeaders request_to_b(uint8_t opcode, uint32_t len) {
    wire::TransportHeaders h;
    h.bth.opcode = opcode;
    h.bth.dest_qp = b.qp->qp_num();
    h.bth.psn = Psn(kPsn);
    h.bth.ack_req = true;
    h.bth.pad_count = opcode == op::kRcWriteOnly ? wire::pad_for(len) : 0;
    h.reth = {b.addr(0), b.mr->rkey(), len};
    return h;
  }
  uint64_t tx_packets(Node& n) { return n.counter("tx_packets"); }

  PairLink la, lb;
  Node a, b;
  Nanos now = 0;
};

TEST_F(PathCheck, SpoofedWriteDoesNotLandAndIsNotAcked) {
  const std::vector<uint8_t> evil(64, 0xee);
  // From a third address, and from the right address to a GID that is not b's.
  lb.inject(encode(request_to_b(op::kRcWriteOnly, 64), evil), kAttacker, kGidB);
  lb.inject(encode(request_to_b(op::kRcWriteOnly, 64), evil), kGidA, kAttacker);
  step(3);
  EXPECT_TRUE(std::all_of(b.mem.begin(), b.mem.end(), [](uint8_t x) { return x == 0; }));
  EXPECT_EQ(tx_packets(b), 0u);  // no ACK to the real peer
  EXPECT_EQ(b.counter("rx_path_drops"), 2u);
  EXPECT_EQ(b.counter("rx_packets"), 0u);
  // The PSN the attacker used is still the one b expects: the real peer's WRITE lands.
  std::fill(a.mem.begin(), a.mem.begin() + 64, 0x11);
  Sge s{a.addr(0), 64, a.mr->lkey()};
  transport::SendWr w;
  w.wr_id = 1;
  w.opcode = WrOpcode::kRdmaWrite;
  w.flags = transport::kSendSignaled;
  w.sg_list = {&s, 1};
  w.remote_addr = b.addr(0);
  w.rkey = b.mr->rkey();
  ASSERT_EQ(a.qp->post_send(w), 0);
  std::array<transport::Completion, 4> wc;
  size_t got = 0;
  for (int i = 0; i < 100 && got == 0; ++i) {
    step();
    got = a.cq->poll(wc);
  }
  ASSERT_EQ(got, 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::all_of(b.mem.begin(), b.mem.begin() + 64, [](uint8_t x) { return x == 0x11; }));
}

TEST_F(PathCheck, SpoofedReadRequestIsNotExecuted) {
  std::fill(b.mem.begin(), b.mem.end(), 0x5a);
  lb.inject(encode(request_to_b(op::kRcReadRequest, 1 << 20), {}), kAttacker, kGidB);
  step(3);
  EXPECT_EQ(tx_packets(b), 0u);  // nothing streamed at the real peer
  EXPECT_EQ(a.counter("rx_packets"), 0u);
  EXPECT_EQ(b.counter("rx_path_drops"), 1u);
}

TEST_F(PathCheck, SpoofedReadResponseDoesNotCompleteTheVictimsRead) {
  std::fill(b.mem.begin(), b.mem.begin() + 32, 0x42);
  Sge s{a.addr(0), 32, a.mr->lkey()};
  transport::SendWr w;
  w.wr_id = 7;
  w.opcode = WrOpcode::kRdmaRead;
  w.flags = transport::kSendSignaled;
  w.sg_list = {&s, 1};
  w.remote_addr = b.addr(0);
  w.rkey = b.mr->rkey();
  ASSERT_EQ(a.qp->post_send(w), 0);
  a.dev.progress(now);  // the READ request is on its way to b
  // The attacker's answer reaches a first, with a's READ PSN and the right length.
  wire::TransportHeaders h;
  h.bth.opcode = op::kRcReadResponseOnly;
  h.bth.dest_qp = a.qp->qp_num();
  h.bth.psn = Psn(kPsn);
  h.aeth = wire::Aeth::ack(1);
  const std::vector<uint8_t> evil(32, 0xee);
  la.inject_front(encode(h, evil), kAttacker, kGidA);
  std::array<transport::Completion, 4> wc;
  size_t got = 0;
  for (int i = 0; i < 100 && got == 0; ++i) {
    step();
    got = a.cq->poll(wc);
  }
  ASSERT_EQ(got, 1u);
  EXPECT_EQ(wc[0].wr_id, 7u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::all_of(a.mem.begin(), a.mem.begin() + 32, [](uint8_t x) { return x == 0x42; }));
  EXPECT_EQ(a.counter("rx_path_drops"), 1u);
}

// A UD QP has no path: datagrams come from anyone, and the Q_Key decides (IBA 10.2.5).
TEST_F(PathCheck, UdQpsHaveNoPathAndKeepTheirQkeyCheck) {
  QpInitAttr ia;
  ia.qp_type = QpType::kUd;
  ia.send_cq = ia.recv_cq = b.cq.get();
  auto ud = std::move(b.pd->create_qp(ia).value());
  QpAttr at;
  at.qp_state = QpState::kInit;
  at.port_num = 1;
  at.qkey = 0x1234;
  ASSERT_EQ(ud->modify(at, kQpState | kQpPkeyIndex | kQpPort | kQpQkey), 0);
  at.qp_state = QpState::kRtr;
  ASSERT_EQ(ud->modify(at, kQpState), 0);
  Sge s{b.addr(0), 256, b.mr->lkey()};
  transport::RecvWr r{1, std::span<const Sge>(&s, 1)};
  ASSERT_EQ(ud->post_recv(r), 0);
  ASSERT_EQ(ud->post_recv(r), 0);
  wire::TransportHeaders h;
  h.bth.opcode = op::kUdSendOnly;
  h.bth.dest_qp = ud->qp_num();
  h.deth = {0x9999, 5};  // wrong Q_Key: dropped by the transport
  const std::vector<uint8_t> data(8, 0x77);
  lb.inject(encode(h, data), kAttacker, kGidB);
  h.deth.qkey = 0x1234;  // from any address, with the Q_Key: taken
  lb.inject(encode(h, data), kAttacker, kGidB);
  step(2);
  std::array<transport::Completion, 4> wc;
  ASSERT_EQ(b.cq->poll(wc), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[0].byte_len, 40u + 8u);
  EXPECT_EQ(b.counter("rx_path_drops"), 0u);
  EXPECT_EQ(counter_of(ud->counters(), "rx_qp_drops"), 1u);
  ud.reset();
}

}  // namespace
}  // namespace uroce::verbs
