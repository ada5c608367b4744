// Responder resources under duplicates (IBA 9.7.5.1.2): the responder keeps the results of its
// last max_dest_rd_atomic READ/atomic requests, and a duplicate READ, whole or resuming mid-way,
// is served from its own resource without changing which PSNs that resource covers and without
// evicting another live one (docs/sim-findings.md section 1, seeds 4152 and 28582).
#include "harness.h"

namespace uroce::transport::test {
namespace {

namespace op = wire::op;
constexpr uint32_t kEpsn = 5000;

struct ResponderReplay : ::testing::Test {
  Endpoint r{QpType::kRc, 1};
  FakeMemory::Region* target = nullptr;

  void SetUp() override {
    QpConfig cfg;
    cfg.dest_qpn = 9;
    cfg.rq_psn = Psn(kEpsn);
    cfg.sq_psn = Psn(1);
    cfg.path_mtu_bytes = 256;
    cfg.max_dest_rd_atomic = 2;
    cfg.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    target = &r.memory.add(4096, kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
    target->data = pattern(4096, 3);
    r.qp->set_state(QpState::kInit);
    r.qp->configure(cfg);
    r.qp->set_state(QpState::kRtr);
  }
  Packet read(uint32_t psn, uint64_t offset, uint32_t len) {
    Packet p = make_packet(op::kRcReadRequest, psn);
    p.hdr.reth = {target->va + offset, target->key, len};
    p.hdr.bth.ack_req = true;
    return p;
  }
  Packet fetch_add(uint32_t psn, uint64_t offset, uint64_t add) {
    Packet p = make_packet(op::kRcFetchAdd, psn);
    p.hdr.atomic = {target->va + offset, target->key, add, 0};
    p.hdr.bth.ack_req = true;
    return p;
  }
  std::vector<Packet> exchange(const Packet& p) {
    r.deliver(p, 0);
    r.run(0);
    std::vector<Packet> v(r.out.packets.begin(), r.out.packets.end());
    r.out.packets.clear();
    return v;
  }
  uint64_t word(uint64_t offset) const {
    uint64_t v;
    std::memcpy(&v, target->data.data() + offset, 8);
    return v;
  }
  void expect_read_reply(const std::vector<Packet>& out, uint32_t first_psn, uint32_t n,
                         uint64_t offset, uint32_t msn) {
    ASSERT_EQ(out.size(), n);
    for (uint32_t i = 0; i < n; ++i) {
      EXPECT_EQ(out[i].psn(), first_psn + i);
      if (wire::opcode_info(out[i].opcode()).has(wire::kAeth)) {  // MIDDLE carries none
        EXPECT_EQ(out[i].hdr.aeth.msn, msn);
      }
      EXPECT_TRUE(std::equal(out[i].payload.begin(), out[i].payload.end(),
                             target->data.begin() + static_cast<ptrdiff_t>(offset + i * 256)));
    }
  }
};

TEST_F(ResponderReplay, PartialDuplicateReadsNeverEvictTheAtomicsReplay) {
  // READ of 3 packets at kEpsn..+2, then a FETCH_ADD at kEpsn+3: both resources in use.
  expect_read_reply(exchange(read(kEpsn, 0, 600)), kEpsn, 3, 0, 1);
  auto out = exchange(fetch_add(kEpsn + 3, 64, 5));
  ASSERT_EQ(out.size(), 1u);
  const uint64_t original = out[0].hdr.atomic_ack.original;
  EXPECT_EQ(word(64), original + 5);
  // Reordering makes the requester resend the READ twice, once from its second packet and once
  // whole, and then again: each must be served from the READ's own resource.
  for (int round = 0; round < 2; ++round) {
    expect_read_reply(exchange(read(kEpsn + 1, 256, 344)), kEpsn + 1, 2, 256, 1);
    expect_read_reply(exchange(read(kEpsn, 0, 600)), kEpsn, 3, 0, 1);
  }
  // The atomic's result is still held: its duplicate is answered with the same original value
  // and is not executed again.
  out = exchange(fetch_add(kEpsn + 3, 64, 5));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode(), op::kRcAtomicAck);
  EXPECT_EQ(out[0].psn(), kEpsn + 3);
  EXPECT_EQ(out[0].hdr.atomic_ack.original, original);
  EXPECT_EQ(out[0].hdr.aeth.msn, 2u);
  EXPECT_EQ(word(64), original + 5);
}

TEST_F(ResponderReplay, DuplicateReadBeyondItsResourceIsDropped) {
  expect_read_reply(exchange(read(kEpsn, 0, 600)), kEpsn, 3, 0, 1);
  // Starts inside the READ but asks for more PSNs than the READ covered.
  const uint64_t dropped = r.qp->counters().rx_dropped;
  EXPECT_TRUE(exchange(read(kEpsn + 1, 256, 600)).empty());
  EXPECT_EQ(r.qp->counters().rx_dropped, dropped + 1);
  // The resource still serves the real duplicate.
  expect_read_reply(exchange(read(kEpsn, 0, 600)), kEpsn, 3, 0, 1);
}

TEST_F(ResponderReplay, DuplicateReadOlderThanEveryResourceIsDroppedWithoutEvicting) {
  expect_read_reply(exchange(read(kEpsn, 0, 8)), kEpsn, 1, 0, 1);
  // Two atomics take both resources (max_dest_rd_atomic = 2): the READ's result is gone, so
  // its requester has already completed it.
  auto a = exchange(fetch_add(kEpsn + 1, 64, 1));
  auto b = exchange(fetch_add(kEpsn + 2, 128, 1));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  const uint64_t dropped = r.qp->counters().rx_dropped;
  EXPECT_TRUE(exchange(read(kEpsn, 0, 8)).empty());
  EXPECT_EQ(r.qp->counters().rx_dropped, dropped + 1);
  // Both atomics still replay.
  auto a2 = exchange(fetch_add(kEpsn + 1, 64, 1));
  auto b2 = exchange(fetch_add(kEpsn + 2, 128, 1));
  ASSERT_EQ(a2.size(), 1u);
  ASSERT_EQ(b2.size(), 1u);
  EXPECT_EQ(a2[0].hdr.atomic_ack.original, a[0].hdr.atomic_ack.original);
  EXPECT_EQ(b2[0].hdr.atomic_ack.original, b[0].hdr.atomic_ack.original);
  EXPECT_EQ(a2[0].psn(), kEpsn + 1);
  EXPECT_EQ(b2[0].psn(), kEpsn + 2);
}

}  // namespace
}  // namespace uroce::transport::test
