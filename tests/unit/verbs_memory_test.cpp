// On-demand MRs (explicit and implicit), ibv_advise_mr, device memory and CQ resizing, over the
// real transport between two devices joined by an in-memory wire: data lands where it should,
// and an access to memory that is unmapped or lacks the right is a completion error, not a
// crash.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "verbs_test_support.h"

namespace uroce::verbs {
namespace {

using testing::PairLink;
using transport::Completion;
using transport::Sge;
using transport::WcStatus;
using transport::WrOpcode;

constexpr uint32_t kAllRemote = transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                                transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;

uint64_t addr_of(const void* p) {
  return reinterpret_cast<uint64_t>(p);
}

struct Node {
  explicit Node(PairLink& l) : dev(l) {
    ctx = std::move(dev.open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(64).value());
    mem.resize(16 * 1024);
    mr = std::move(pd->reg_mr(mem.data(), mem.size(), kAllRemote).value());
    QpInitAttr a;
    a.send_cq = a.recv_cq = cq.get();
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = 16;
    qp = std::move(pd->create_qp(a).value());
  }
  ~Node() {
    qp.reset();
    mr.reset();
    cq.reset();
    pd.reset();
    ctx.reset();
  }
  Device dev;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<uint8_t> mem;
  std::unique_ptr<MemoryRegion> mr;
  std::unique_ptr<QueuePair> qp;
};

void connect(Node& me, const Node& peer) {
  testing::connect_rc(*me.qp, peer.qp->qp_num(), peer.dev.gid());
}

class VerbsOdp : public ::testing::Test {
 protected:
  VerbsOdp() : la(gid_from_ipv4({10, 0, 0, 1})), lb(gid_from_ipv4({10, 0, 0, 2})), a(la), b(lb) {
    la.connect(lb);
    lb.connect(la);
    connect(a, b);
    connect(b, a);
  }
  void SetUp() override {
    if (!on_demand_supported()) GTEST_SKIP() << "no MADV_POPULATE_READ/WRITE in this kernel";
  }
  // Posts one signaled one-SGE request on A and returns its completion (bounded passes).
  Completion run(WrOpcode op, const Sge& sge, uint64_t remote_addr, uint32_t rkey,
                 uint64_t compare_add = 0) {
    transport::SendWr w;
    w.compare_add = compare_add;
    w.wr_id = ++wr_id;
    w.opcode = op;
    w.flags = transport::kSendSignaled;
    w.sg_list = {&sge, 1};
    w.remote_addr = remote_addr;
    w.rkey = rkey;
    EXPECT_EQ(a.qp->post_send(w), 0);
    std::array<Completion, 1> out;
    for (int pass = 0; pass < 10000; ++pass) {
      testing::step_pair(now, a.dev, b.dev);
      if (a.cq->poll(out) == 1) return out[0];
    }
    ADD_FAILURE() << "no completion";
    return {};
  }
  // After an access error has moved the QPs to ERR: fresh, connected ones.
  void connect_again() {
    for (Node* n : {&a, &b}) {
      n->qp.reset();
      QpInitAttr attr;
      attr.send_cq = attr.recv_cq = n->cq.get();
      attr.cap.max_send_wr = 16;
      attr.cap.max_recv_wr = 16;
      n->qp = std::move(n->pd->create_qp(attr).value());
    }
    connect(a, b);
    connect(b, a);
    std::array<Completion, 16> drain;
    while (a.cq->poll(drain) != 0 || b.cq->poll(drain) != 0) {
    }
  }
  PairLink la, lb;
  Node a, b;
  Nanos now = 0;
  uint64_t wr_id = 0;
};

TEST_F(VerbsOdp, ImplicitMrServesWriteAndReadAtHeapAndStackAddresses) {
  auto implicit = b.pd->reg_mr(nullptr, SIZE_MAX, kAllRemote | kAccessOnDemand);
  ASSERT_TRUE(implicit.ok());
  EXPECT_EQ((*implicit)->length(), SIZE_MAX);
  const uint32_t rkey = (*implicit)->rkey();

  for (size_t i = 0; i < 3000; ++i) a.mem[i] = static_cast<uint8_t>(i * 13 + 1);
  auto heap = std::make_unique<uint8_t[]>(5000);  // never registered
  std::memset(heap.get(), 0, 5000);
  Completion c = run(WrOpcode::kRdmaWrite, {addr_of(a.mem.data()), 3000, a.mr->lkey()},
                     addr_of(heap.get() + 777), rkey);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(heap.get() + 777, a.mem.data(), 3000), 0);
  EXPECT_EQ(heap[776], 0);
  EXPECT_EQ(heap[3777], 0);

  uint8_t stack[1500];
  for (size_t i = 0; i < sizeof stack; ++i) stack[i] = static_cast<uint8_t>(255 - i % 251);
  c = run(WrOpcode::kRdmaRead, {addr_of(a.mem.data() + 8192), sizeof stack, a.mr->lkey()},
          addr_of(stack), rkey);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a.mem.data() + 8192, stack, sizeof stack), 0);

  // Atomics through it too.
  alignas(8) uint64_t counter = 40;
  c = run(WrOpcode::kAtomicFetchAdd, {addr_of(a.mem.data()), 8, a.mr->lkey()}, addr_of(&counter),
          rkey, 2);
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(counter, 42u);
  uint64_t original = 0;
  std::memcpy(&original, a.mem.data(), 8);
  EXPECT_EQ(original, 40u);
}

TEST_F(VerbsOdp, UnmappedOrReadOnlyMemoryIsARemoteAccessErrorAndTheProcessLives) {
  auto implicit = std::move(b.pd->reg_mr(nullptr, SIZE_MAX, kAllRemote | kAccessOnDemand).value());
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* region = static_cast<uint8_t*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  ASSERT_EQ(munmap(region + page, page), 0);  // a hole right after a mapped page

  // A READ crossing into the hole: the responder NAKs it, nothing faults.
  Completion c = run(WrOpcode::kRdmaRead, {addr_of(a.mem.data()), 64, a.mr->lkey()},
                     addr_of(region + page - 32), implicit->rkey());
  EXPECT_EQ(c.status, WcStatus::kRemAccessErr);
  EXPECT_EQ(a.qp->state(), QpState::kErr);
  munmap(region, page);

  // A WRITE into a read-only page fails the same way and leaves the page as it was.
  connect_again();
  auto* ro = static_cast<uint8_t*>(
      mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(ro, MAP_FAILED);
  std::memset(ro, 0x5a, page);
  ASSERT_EQ(mprotect(ro, page, PROT_READ), 0);
  c = run(WrOpcode::kRdmaWrite, {addr_of(a.mem.data()), 128, a.mr->lkey()}, addr_of(ro),
          implicit->rkey());
  EXPECT_EQ(c.status, WcStatus::kRemAccessErr);
  EXPECT_EQ(ro[0], 0x5a);
  // Reading it is allowed.
  connect_again();
  c = run(WrOpcode::kRdmaRead, {addr_of(a.mem.data()), 128, a.mr->lkey()}, addr_of(ro),
          implicit->rkey());
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(a.mem[127], 0x5a);
  munmap(ro, page);
}

TEST_F(VerbsOdp, LocalAccessToAHoleIsALocalProtectionError) {
  auto implicit = std::move(a.pd->reg_mr(nullptr, SIZE_MAX, kAllRemote | kAccessOnDemand).value());
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* hole = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  ASSERT_EQ(munmap(hole, page), 0);
  transport::SendWr w;
  Sge sge{addr_of(hole), 64, implicit->lkey()};
  w.wr_id = 5;
  w.opcode = WrOpcode::kRdmaWrite;
  w.flags = transport::kSendSignaled;
  w.sg_list = {&sge, 1};
  w.remote_addr = addr_of(b.mem.data());
  w.rkey = b.mr->rkey();
  const int rc = a.qp->post_send(w);
  std::array<Completion, 1> out;
  size_t got = 0;
  for (int pass = 0; pass < 1000 && got == 0; ++pass) {
    testing::step_pair(now, a.dev, b.dev);
    got = a.cq->poll(out);
  }
  // Either refused at post time or completed in error: never a fault, never data.
  if (rc == 0) {
    ASSERT_EQ(got, 1u);
    EXPECT_EQ(out[0].status, WcStatus::kLocProtErr);
  } else {
    EXPECT_EQ(rc, EINVAL);
  }
  EXPECT_EQ(b.mem[0], 0);
}

TEST_F(VerbsOdp, ExplicitMrKeepsBoundsAndFollowsTheMapping) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* region = static_cast<uint8_t*>(
      mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  auto odp = std::move(b.pd->reg_mr(region, page, kAllRemote | kAccessOnDemand).value());
  for (size_t i = 0; i < 256; ++i) a.mem[i] = static_cast<uint8_t>(i);

  Completion c = run(WrOpcode::kRdmaWrite, {addr_of(a.mem.data()), 256, a.mr->lkey()},
                     addr_of(region + 16), odp->rkey());
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(region + 16, a.mem.data(), 256), 0);

  // Past its end: the bounds check, before any page is looked at.
  c = run(WrOpcode::kRdmaWrite, {addr_of(a.mem.data()), 256, a.mr->lkey()},
          addr_of(region + page - 128), odp->rkey());
  EXPECT_EQ(c.status, WcStatus::kRemAccessErr);

  // Unmapped after registration: an access error, then mapped again: served from the new pages.
  ASSERT_EQ(munmap(region, page), 0);
  connect_again();
  c = run(WrOpcode::kRdmaWrite, {addr_of(a.mem.data()), 256, a.mr->lkey()}, addr_of(region),
          odp->rkey());
  EXPECT_EQ(c.status, WcStatus::kRemAccessErr);
  void* again =
      mmap(region, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  ASSERT_EQ(again, region);
  connect_again();
  c = run(WrOpcode::kRdmaWrite, {addr_of(a.mem.data()), 256, a.mr->lkey()}, addr_of(region),
          odp->rkey());
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(region, a.mem.data(), 256), 0);
  odp.reset();
  munmap(region, page);
}

TEST_F(VerbsOdp, RegistrationArguments) {
  // Implicit needs ON_DEMAND and iova 0; ON_DEMAND with a null address needs SIZE_MAX.
  EXPECT_EQ(b.pd->reg_mr(nullptr, SIZE_MAX, kAllRemote).error(), EINVAL);
  EXPECT_EQ(b.pd->reg_mr(nullptr, SIZE_MAX, 4096, kAllRemote | kAccessOnDemand).error(), EINVAL);
  EXPECT_EQ(b.pd->reg_mr(nullptr, 4096, kAllRemote | kAccessOnDemand).error(), EINVAL);
  EXPECT_EQ(b.pd->reg_mr(b.mem.data(), 64, transport::kAccessRemoteWrite | kAccessOnDemand).error(),
            EINVAL);
  // An implicit MR's keys are checked like any other: other PD, wrong key.
  auto other_pd = std::move(b.ctx->alloc_pd().value());
  auto implicit =
      std::move(other_pd->reg_mr(nullptr, SIZE_MAX, kAllRemote | kAccessOnDemand).value());
  uint64_t word = 0;
  Completion c = run(WrOpcode::kRdmaWrite, {addr_of(a.mem.data()), 8, a.mr->lkey()}, addr_of(&word),
                     implicit->rkey());
  EXPECT_EQ(c.status, WcStatus::kRemAccessErr);
  EXPECT_EQ(word, 0u);
  implicit.reset();
}

TEST_F(VerbsOdp, AdviseMrValidatesAndPrefetches) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* region = static_cast<uint8_t*>(
      mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  auto odp = std::move(b.pd->reg_mr(region, 4 * page, kAllRemote | kAccessOnDemand).value());
  auto ro = std::move(b.pd->reg_mr(region, page, kAccessOnDemand).value());
  Sge s{addr_of(region), static_cast<uint32_t>(4 * page), odp->lkey()};
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetch, 0, {&s, 1}), 0);
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetchWrite, kAdviseFlush, {&s, 1}), 0);
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetchNoFault, 0, {&s, 1}), 0);
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetch, 0, {}), 0);
  EXPECT_EQ(b.pd->advise_mr(3, 0, {&s, 1}), EINVAL);
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetch, 2, {&s, 1}), EINVAL);
  std::vector<Sge> many(kMaxAdviseSge + 1, s);
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetch, 0, many), EINVAL);
  // Not an on-demand MR, out of its range, another PD's, or write advice without LOCAL_WRITE.
  Sge plain{addr_of(b.mem.data()), 64, b.mr->lkey()};
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetch, 0, {&plain, 1}), ENOENT);
  Sge past{addr_of(region) + 4 * page - 8, 16, odp->lkey()};
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetch, 0, {&past, 1}), ENOENT);
  EXPECT_EQ(a.pd->advise_mr(kAdvisePrefetch, 0, {&s, 1}), ENOENT);
  Sge ro_sge{addr_of(region), 64, ro->lkey()};
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetch, 0, {&ro_sge, 1}), 0);
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetchWrite, 0, {&ro_sge, 1}), ENOENT);
  // A hole: a hint succeeds, a flushed prefetch says EFAULT.
  ASSERT_EQ(munmap(region + page, page), 0);
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetch, 0, {&s, 1}), 0);
  EXPECT_EQ(b.pd->advise_mr(kAdvisePrefetch, kAdviseFlush, {&s, 1}), EFAULT);
  ro.reset();
  odp.reset();
  munmap(region, 4 * page);
}

// ---- Device memory -----------------------------------------------------------------------------

TEST_F(VerbsOdp, DeviceMemoryIsBoundedAndBoundsChecked) {
  const uint64_t max = b.dev.attr().max_dm_size;
  EXPECT_EQ(b.ctx->alloc_dm(0, 0).error(), EINVAL);
  EXPECT_EQ(b.ctx->alloc_dm(max + 1, 0).error(), EINVAL);
  EXPECT_EQ(b.ctx->alloc_dm(64, Context::kMaxDmLogAlign + 1).error(), EINVAL);
  auto big = std::move(b.ctx->alloc_dm(max - 4096, 12).value());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.get()) != 0, true);
  EXPECT_EQ(b.ctx->alloc_dm(8192, 0).error(), ENOMEM);
  auto small = std::move(b.ctx->alloc_dm(4096, 0).value());
  EXPECT_EQ(b.ctx->alloc_dm(1, 0).error(), ENOMEM);
  small.reset();
  small = std::move(b.ctx->alloc_dm(100, 0).value());

  uint8_t bytes[100];
  std::iota(bytes, bytes + 100, 0);
  EXPECT_EQ(small->copy_to(0, bytes, 100), 0);
  EXPECT_EQ(small->copy_to(4, bytes, 100), EFAULT);
  EXPECT_EQ(small->copy_to(UINT64_MAX, bytes, 2), EFAULT);
  uint8_t back[100] = {};
  EXPECT_EQ(small->copy_from(back, 52, 52), EFAULT);
  EXPECT_EQ(small->copy_from(back, 52, 48), 0);
  EXPECT_EQ(std::memcmp(back, bytes + 52, 48), 0);
  // Offsets and lengths in multiples of 4 bytes (mlx5's rule): EINVAL, and nothing copied.
  uint8_t ones[8];
  std::memset(ones, 0xff, sizeof ones);
  EXPECT_EQ(small->copy_to(1, ones, 4), EINVAL);
  EXPECT_EQ(small->copy_to(0, ones, 3), EINVAL);
  EXPECT_EQ(small->copy_from(back, 2, 4), EINVAL);
  EXPECT_EQ(small->copy_from(back, 0, 6), EINVAL);
  EXPECT_EQ(small->copy_from(back, 0, 8), 0);
  EXPECT_EQ(std::memcmp(back, bytes, 8), 0);

  // DM MRs are zero-based, inside the DM, of the same context.
  EXPECT_EQ(b.pd->reg_dm_mr(*small, 0, 100, transport::kAccessLocalWrite).error(), EINVAL);
  EXPECT_EQ(b.pd->reg_dm_mr(*small, 50, 51, kAccessZeroBased).error(), EINVAL);
  EXPECT_EQ(b.pd->reg_dm_mr(*small, 101, 0, kAccessZeroBased).error(), EINVAL);
  EXPECT_EQ(
      b.pd->reg_dm_mr(*small, 0, 100, kAccessZeroBased | transport::kAccessRemoteWrite).error(),
      EINVAL);  // remote write without local write, as ibv_reg_mr
  EXPECT_EQ(a.pd->reg_dm_mr(*small, 0, 100, kAccessZeroBased).error(), EINVAL);
  {
    // Length 0, as the kernel and mlx5 allow: a key over nothing.
    auto empty = std::move(b.pd->reg_dm_mr(*small, 100, 0, kAccessZeroBased).value());
    EXPECT_EQ(empty->length(), 0u);
    EXPECT_EQ(small->users(), 1u);
  }
  auto mr = std::move(b.pd->reg_dm_mr(*small, 10, 90, kAccessZeroBased).value());
  EXPECT_EQ(small->users(), 1u);
  EXPECT_EQ(mr->iova(), 0u);
  mr.reset();
  EXPECT_EQ(small->users(), 0u);
}

TEST_F(VerbsOdp, RdmaWriteIntoDeviceMemoryUsesOffsetsAsAddresses) {
  auto dm = std::move(b.ctx->alloc_dm(4096, 0).value());
  auto mr =
      std::move(b.pd->reg_dm_mr(*dm, 1024, 2048,
                                kAccessZeroBased | transport::kAccessLocalWrite |
                                    transport::kAccessRemoteWrite | transport::kAccessRemoteRead)
                    .value());
  for (size_t i = 0; i < 1500; ++i) a.mem[i] = static_cast<uint8_t>(i * 3 + 7);
  Completion c =
      run(WrOpcode::kRdmaWrite, {addr_of(a.mem.data()), 1500, a.mr->lkey()}, 100, mr->rkey());
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  std::vector<uint8_t> back(1500);
  ASSERT_EQ(dm->copy_from(back.data(), 1024 + 100, 1500), 0);
  EXPECT_EQ(std::memcmp(back.data(), a.mem.data(), 1500), 0);
  // Past the MR's 2048 bytes: a remote access error, the DM beyond it untouched.
  c = run(WrOpcode::kRdmaWrite, {addr_of(a.mem.data()), 100, a.mr->lkey()}, 2000, mr->rkey());
  EXPECT_EQ(c.status, WcStatus::kRemAccessErr);
  uint8_t tail[4] = {1, 1, 1, 1};
  ASSERT_EQ(dm->copy_from(tail, 3072, sizeof tail), 0);
  EXPECT_EQ(tail[0], 0);
  mr.reset();
}

// ---- CQ resize (named VerbsCq.* so the TSan subset covers them) -------------------------------

Completion numbered(uint64_t id) {
  Completion c;
  c.wr_id = id;
  return c;
}

TEST(VerbsCq, ResizeGrowsAndShrinksKeepingQueuedCompletionsInOrder) {
  testing::FakeWorld w;
  auto cq = std::move(w.ctx->create_cq(8).value());
  // Wrap the ring first, so the queued entries straddle its end.
  std::array<Completion, 8> out;
  for (uint64_t i = 0; i < 6; ++i) ASSERT_TRUE(cq->push(numbered(100 + i)));
  ASSERT_EQ(cq->poll({out.data(), 6}), 6u);
  for (uint64_t i = 0; i < 7; ++i) ASSERT_TRUE(cq->push(numbered(i)));
  ASSERT_EQ(cq->resize(100), 0);
  EXPECT_EQ(cq->cqe(), 128u);
  for (uint64_t i = 7; i < 100; ++i) ASSERT_TRUE(cq->push(numbered(i)));
  EXPECT_EQ(cq->size(), 100u);
  EXPECT_EQ(cq->resize(99), EINVAL);  // fewer than queued
  EXPECT_EQ(cq->resize(0), EINVAL);
  EXPECT_EQ(cq->resize(w.device->attr().max_cqe + 1), EINVAL);
  ASSERT_EQ(cq->poll({out.data(), 8}), 8u);
  EXPECT_EQ(out[0].wr_id, 0u);
  std::vector<Completion> rest(128);
  ASSERT_EQ(cq->resize(92), 0);  // exactly what is queued
  EXPECT_EQ(cq->cqe(), 128u);
  ASSERT_EQ(cq->poll({rest.data(), 80}), 80u);
  ASSERT_EQ(cq->resize(12), 0);
  EXPECT_EQ(cq->cqe(), 16u);
  ASSERT_EQ(cq->poll(rest), 12u);
  for (uint64_t i = 0; i < 12; ++i) EXPECT_EQ(rest[i].wr_id, 88 + i);
  for (uint64_t i = 0; i < 16; ++i) EXPECT_TRUE(cq->push(numbered(i)));
  EXPECT_FALSE(cq->push(numbered(16)));  // the new depth bounds it
}

TEST(VerbsCq, ResizeWhilePushingFromAnotherThreadLosesNothing) {
  testing::FakeWorld w;
  auto cq = std::move(w.ctx->create_cq(4096).value());
  constexpr uint64_t kTotal = 20000;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    // Never past 4000 queued: a push into a full CQ would be an overrun, not back-pressure.
    for (uint64_t i = 0; i < kTotal;) {
      if (cq->size() < 4000 && cq->push(numbered(i))) ++i;
      if (cq->in_error()) return;
    }
    done = true;
  });
  uint64_t next = 0;
  std::array<Completion, 64> out;
  uint32_t round = 0;
  while (next < kTotal && !cq->in_error()) {
    // Alternate depths that always hold what the producer may have queued.
    ASSERT_EQ(cq->resize((++round % 2) ? 8192 : 4096), 0);
    size_t n = cq->poll(out);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i].wr_id, next++);
  }
  producer.join();
  EXPECT_FALSE(cq->in_error());
  EXPECT_EQ(next, kTotal);
  EXPECT_TRUE(done.load());
}

}  // namespace
}  // namespace uroce::verbs
