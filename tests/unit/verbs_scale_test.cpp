// Many QPs on one device: a progress pass visits only the QPs with work (the ready set and the
// timer heap of verbs/qp_scheduler.h), and what a QP costs in memory follows what it was created
// with (docs/security.md, "Scale").
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "transport/send_queue.h"
#include "transport/timers.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "verbs/qp_scheduler.h"
#include "verbs_test_support.h"

namespace uroce::verbs {
namespace {

using testing::PairLink;

uint64_t counter(const Device& dev, std::string_view name) {
  for (const Counter& c : dev.counters())
    if (c.name == name) return c.value;
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

TEST(ReadySet, FindsTheNextMemberAcrossItsLevels) {
  ReadySet s;
  s.reserve(100'000);
  EXPECT_GE(s.capacity(), 100'000u);
  EXPECT_EQ(s.next_from(0), ReadySet::kNone);
  EXPECT_TRUE(s.insert(5));
  EXPECT_FALSE(s.insert(5));
  EXPECT_TRUE(s.insert(70'000));
  EXPECT_TRUE(s.insert(99'999));
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.next_from(0), 5u);
  EXPECT_EQ(s.next_from(5), 5u);
  EXPECT_EQ(s.next_from(6), 70'000u);
  EXPECT_EQ(s.next_from(70'001), 99'999u);
  EXPECT_EQ(s.next_from(100'000), ReadySet::kNone);
  EXPECT_TRUE(s.erase(70'000));
  EXPECT_FALSE(s.erase(70'000));
  EXPECT_EQ(s.next_from(6), 99'999u);
  // Growing keeps the members.
  s.reserve(300'000);
  EXPECT_TRUE(s.contains(5) && s.contains(99'999) && !s.contains(70'000));
  EXPECT_EQ(s.next_from(6), 99'999u);
  EXPECT_TRUE(s.insert(250'000));
  EXPECT_EQ(s.next_from(100'000), 250'000u);
}

TEST(TimerHeap, EarliestFirst) {
  TimerHeap h;
  h.push({300, 1, 1});
  h.push({100, 2, 2});
  h.push({200, 3, 3});
  EXPECT_EQ(h.top().slot, 2u);
  h.pop();
  EXPECT_EQ(h.top().slot, 3u);
  h.compact([](const TimerHeap::Entry& e) { return e.slot != 3; });
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h.top().slot, 1u);
}

struct Side {
  Side(PairLink& l, uint32_t max_qp) : link(l) {
    DeviceConfig config;
    config.attr.max_qp = max_qp;
    dev = std::make_unique<Device>(l, config);
    ctx = std::move(dev->open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(1024).value());
    mem.resize(4096);
    mr = std::move(pd->reg_mr(mem.data(), mem.size(),
                              transport::kAccessLocalWrite | transport::kAccessRemoteWrite)
                       .value());
  }
  ~Side() {
    qps.clear();
    mr.reset();
    cq.reset();
    pd.reset();
    ctx.reset();
  }
  QpInitAttr init(uint32_t wrs, uint32_t sges) const {
    QpInitAttr a;
    a.send_cq = a.recv_cq = cq.get();
    a.cap.max_send_wr = a.cap.max_recv_wr = wrs;
    a.cap.max_send_sge = a.cap.max_recv_sge = sges;
    return a;
  }
  PairLink& link;
  std::unique_ptr<Device> dev;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<uint8_t> mem;
  std::unique_ptr<MemoryRegion> mr;
  std::vector<std::unique_ptr<QueuePair>> qps;
};

class ManyQps : public ::testing::Test {
 protected:
  static constexpr uint32_t kQps = 1000;
  ManyQps()
      : la(gid_from_ipv4({10, 0, 0, 1})),
        lb(gid_from_ipv4({10, 0, 0, 2})),
        a(la, kQps),
        b(lb, kQps) {
    la.connect(lb);
    lb.connect(la);
    for (uint32_t i = 0; i < kQps; ++i) {
      a.qps.push_back(std::move(a.pd->create_qp(a.init(16, 1)).value()));
      b.qps.push_back(std::move(b.pd->create_qp(b.init(16, 1)).value()));
    }
    for (uint32_t i = 0; i < kQps; ++i) {
      testing::connect_rc(*a.qps[i], b.qps[i]->qp_num(), b.dev->gid());
      testing::connect_rc(*b.qps[i], a.qps[i]->qp_num(), a.dev->gid());
    }
    // The modifies made every QP ready once; one pass each finds them idle.
    now = 1000;
    EXPECT_EQ(a.dev->progress(now), kNever);
    EXPECT_EQ(b.dev->progress(now), kNever);
  }
  // The QPs a pass of `side` visited.
  uint64_t visits(Side& side) {
    const uint64_t before = counter(*side.dev, "progress_qp_visits");
    last_next = side.dev->progress(now);
    return counter(*side.dev, "progress_qp_visits") - before;
  }
  void post_write(uint32_t i) {
    transport::Sge s{reinterpret_cast<uint64_t>(a.mem.data()), 8, a.mr->lkey()};
    transport::SendWr wr;
    wr.wr_id = i;
    wr.opcode = transport::WrOpcode::kRdmaWrite;
    wr.flags = transport::kSendSignaled;
    wr.sg_list = {&s, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(b.mem.data());
    wr.rkey = b.mr->rkey();
    ASSERT_EQ(a.qps[i]->post_send(wr), 0);
  }
  PairLink la, lb;
  Side a, b;
  Nanos now = 0;
  Nanos last_next = 0;
};

TEST_F(ManyQps, APassVisitsOnlyTheBusyQp) {
  EXPECT_EQ(visits(a), 0u);  // 1000 idle QPs cost nothing
  post_write(500);
  EXPECT_EQ(visits(a), 1u);  // the WRITE goes; its ACK timer is the device's next deadline
  EXPECT_EQ(last_next, now + transport::ack_timeout_ns(10));
  EXPECT_EQ(visits(b), 1u);  // the responder's QP gets the WRITE and sends the ACK
  EXPECT_EQ(last_next, kNever);
  EXPECT_EQ(visits(a), 1u);  // the ACK retires the WQE and stops the timer
  EXPECT_EQ(last_next, kNever);
  std::array<transport::Completion, 4> wc;
  ASSERT_EQ(a.cq->poll(wc), 1u);
  EXPECT_EQ(wc[0].wr_id, 500u);
  EXPECT_EQ(wc[0].status, transport::WcStatus::kSuccess);
  EXPECT_EQ(visits(a), 0u);
  EXPECT_EQ(visits(b), 0u);
}

TEST_F(ManyQps, ATimerWakesOnlyItsQpAtItsDeadline) {
  post_write(7);
  EXPECT_EQ(visits(a), 1u);
  const Nanos deadline = now + transport::ack_timeout_ns(10);
  ASSERT_EQ(last_next, deadline);
  lb.poll([](const wire::RxPacket&) {}, 16);  // the WRITE is lost
  const uint64_t sent = la.counters().tx_packets;
  now = deadline - 1;
  EXPECT_EQ(visits(a), 0u);
  EXPECT_EQ(last_next, deadline);
  now = deadline;
  EXPECT_EQ(visits(a), 1u);  // the timeout resends the WRITE
  EXPECT_EQ(la.counters().tx_packets, sent + 1);
  EXPECT_EQ(last_next, deadline + transport::ack_timeout_ns(10));
}

TEST_F(ManyQps, EveryBusyQpGetsItsTurnInSlotOrder) {
  for (uint32_t i : {900u, 3u, 450u}) post_write(i);
  EXPECT_EQ(visits(a), 3u);
  EXPECT_EQ(la.counters().tx_packets, 3u);
  EXPECT_EQ(visits(b), 3u);
  EXPECT_EQ(visits(a), 3u);
  std::array<transport::Completion, 4> wc;
  ASSERT_EQ(a.cq->poll(wc), 3u);
  // One pass sends in slot (creation) order, whatever the order of the posts.
  EXPECT_EQ(wc[0].wr_id, 3u);
  EXPECT_EQ(wc[1].wr_id, 450u);
  EXPECT_EQ(wc[2].wr_id, 900u);
}

// Bytes the heap holds (glibc); unchanged where a sanitizer's allocator keeps its own books.
size_t heap_in_use() {
  return mallinfo2().uordblks;
}

// What a QP may cost, from what it was created with: its send WQEs with their SGEs, its receive
// slots with theirs, and a fixed part for the QP objects themselves (the verbs QP, the transport's
// engines, 4 responder resources and their response ring, the device's tables, allocator
// overhead: about 3.2 KB). Inline buffers are not in it: they come with the first inline post.
size_t qp_bound(const QpCapabilities& cap) {
  constexpr size_t kFixed = 4096;
  constexpr size_t kRecvSlot = 32;
  return kFixed + cap.max_send_wr * (sizeof(transport::SendWqe) + cap.max_send_sge * 16) +
         cap.max_recv_wr * (kRecvSlot + cap.max_recv_sge * 16);
}

size_t bytes_per_qp(uint32_t wrs, uint32_t sges) {
  PairLink l(gid_from_ipv4({10, 0, 0, 1}));
  constexpr uint32_t kCount = 500;
  Side side(l, kCount);
  side.qps.reserve(kCount);
  const size_t before = heap_in_use();
  for (uint32_t i = 0; i < kCount; ++i) {
    side.qps.push_back(std::move(side.pd->create_qp(side.init(wrs, sges)).value()));
    testing::connect_rc(*side.qps.back(), 0x100 + i, gid_from_ipv4({10, 0, 0, 2}));
  }
  const size_t after = heap_in_use();
  return after > before ? (after - before) / kCount : 0;
}

TEST(QpMemory, BytesPerQpFollowTheCreationAttributes) {
  if (bytes_per_qp(16, 1) == 0) GTEST_SKIP() << "the allocator keeps no glibc statistics";
  for (auto [wrs, sges] : {std::pair{16u, 1u}, std::pair{64u, 4u}, std::pair{256u, 16u}}) {
    QpInitAttr init;
    init.cap.max_send_wr = init.cap.max_recv_wr = wrs;
    init.cap.max_send_sge = init.cap.max_recv_sge = sges;
    const size_t got = bytes_per_qp(wrs, sges);
    EXPECT_GT(got, 0u);
    EXPECT_LE(got, qp_bound(init.cap)) << wrs << " WRs, " << sges << " SGEs";
    std::printf("%u WRs, %u SGEs: %zu bytes per QP (bound %zu)\n", wrs, sges, got,
                qp_bound(init.cap));
  }
  // 100,000 RC QPs as bench/qp_scale creates them (16 WRs each way, 1 SGE) fit in 1 GiB.
  QpCapabilities small;
  small.max_send_wr = small.max_recv_wr = 16;
  small.max_send_sge = small.max_recv_sge = 1;
  EXPECT_LE(100'000 * qp_bound(small), size_t{1} << 30);
}

}  // namespace
}  // namespace uroce::verbs
