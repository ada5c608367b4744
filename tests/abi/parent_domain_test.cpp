// Thread domains and parent domains (ibv_alloc_td(3), ibv_alloc_parent_domain(3)) through the
// drop-in libibverbs' ABI: a parent domain serves as a PD for QPs, extended CQs and MRs, shares
// its protection domain with the PD it contains, and is EBUSY while in use.
#include "abi/abi_test_support.h"

namespace uroce::abi_test {
namespace {

struct AllocatorLog {
  int allocs = 0;
  int frees = 0;
};

void* counting_alloc(ibv_pd*, void* pd_context, size_t, size_t, uint64_t) {
  ++static_cast<AllocatorLog*>(pd_context)->allocs;
  return IBV_ALLOCATOR_USE_DEFAULT;
}
void counting_free(ibv_pd*, void* pd_context, void*, uint64_t) {
  ++static_cast<AllocatorLog*>(pd_context)->frees;
}

TEST(ParentDomain, AllocationRulesAndEbusy) {
  End a;
  ASSERT_NO_FATAL_FAILURE(open_end(a, "uroce0"));
  ibv_td_init_attr td_attr{};
  td_attr.comp_mask = 1;
  errno = 0;
  EXPECT_EQ(ibv_alloc_td(a.ctx, &td_attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  td_attr.comp_mask = 0;
  ibv_td* td = ibv_alloc_td(a.ctx, &td_attr);
  ASSERT_NE(td, nullptr);
  EXPECT_EQ(td->context, a.ctx);

  ibv_parent_domain_init_attr attr{};
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(a.ctx, &attr), nullptr);  // no PD
  EXPECT_EQ(errno, EINVAL);
  attr.pd = a.pd;
  attr.comp_mask = 1u << 2;  // a bit uroce does not know
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(a.ctx, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);

  AllocatorLog log;
  attr.td = td;
  attr.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  attr.alloc = counting_alloc;
  attr.free = counting_free;
  attr.pd_context = &log;
  ibv_pd* parent = ibv_alloc_parent_domain(a.ctx, &attr);
  ASSERT_NE(parent, nullptr);
  EXPECT_EQ(parent->context, a.ctx);
  EXPECT_EQ(parent->handle, a.pd->handle);

  // A parent domain cannot contain another one.
  attr.pd = parent;
  errno = 0;
  EXPECT_EQ(ibv_alloc_parent_domain(a.ctx, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);

  // What it is made of cannot go while it exists; it cannot go while something uses it.
  EXPECT_EQ(ibv_dealloc_td(td), EBUSY);
  EXPECT_EQ(ibv_dealloc_pd(a.pd), EBUSY);
  std::vector<uint8_t> mem(256);
  ibv_mr* mr = ibv_reg_mr(parent, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->pd, parent);
  EXPECT_EQ(ibv_dealloc_pd(parent), EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
  EXPECT_EQ(ibv_dealloc_td(td), 0);
  // uroce has no device-read queue buffers for the allocator to place (docs/ibverbs.md).
  EXPECT_EQ(log.allocs, 0);
  EXPECT_EQ(log.frees, 0);
}

TEST(ParentDomain, ExtendedCqNeedsAParentDomainOfItsContext) {
  End a;
  ASSERT_NO_FATAL_FAILURE(open_end(a, "uroce0"));
  ibv_cq_init_attr_ex cq_attr{};
  cq_attr.cqe = 16;
  cq_attr.wc_flags = IBV_WC_STANDARD_FLAGS;
  cq_attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  cq_attr.parent_domain = a.pd;  // a plain PD
  errno = 0;
  EXPECT_EQ(ibv_create_cq_ex(a.ctx, &cq_attr), nullptr);
  EXPECT_EQ(errno, EINVAL);

  ibv_parent_domain_init_attr attr{};
  attr.pd = a.pd;
  ibv_pd* parent = ibv_alloc_parent_domain(a.ctx, &attr);
  ASSERT_NE(parent, nullptr);
  cq_attr.parent_domain = parent;
  ibv_cq_ex* cq = ibv_create_cq_ex(a.ctx, &cq_attr);
  ASSERT_NE(cq, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(parent), EBUSY);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
}

// a's QP and CQ are made on a parent domain with a thread domain (so the ibv_wr_* region takes
// no lock); its MR is on the contained PD, which is the same protection domain.
TEST(ParentDomain, TrafficThroughAParentDomain) {
  End a, b;
  ASSERT_NO_FATAL_FAILURE(open_end(a, "uroce0"));
  ASSERT_NO_FATAL_FAILURE(open_end(b, "uroce1"));
  ibv_td_init_attr td_attr{};
  ibv_td* td = ibv_alloc_td(a.ctx, &td_attr);
  ASSERT_NE(td, nullptr);
  ibv_parent_domain_init_attr attr{};
  attr.pd = a.pd;
  attr.td = td;
  ibv_pd* parent = ibv_alloc_parent_domain(a.ctx, &attr);
  ASSERT_NE(parent, nullptr);
  ibv_cq_init_attr_ex cq_attr{};
  cq_attr.cqe = 16;
  cq_attr.wc_flags = IBV_WC_STANDARD_FLAGS;
  cq_attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
  cq_attr.parent_domain = parent;
  ibv_cq_ex* cq_ex = ibv_create_cq_ex(a.ctx, &cq_attr);
  ASSERT_NE(cq_ex, nullptr);
  ibv_cq* cq = ibv_cq_ex_to_cq(cq_ex);

  ibv_qp_init_attr_ex qa = qp_attr_ex(a, IBV_QPT_RC, IBV_QP_EX_WITH_RDMA_WRITE);
  qa.pd = parent;
  qa.send_cq = qa.recv_cq = cq;
  a.qp = ibv_create_qp_ex(a.ctx, &qa);
  ASSERT_NE(a.qp, nullptr) << errno;
  EXPECT_EQ(a.qp->pd, parent);
  a.qpx = ibv_qp_to_qp_ex(a.qp);
  ASSERT_NE(a.qpx, nullptr);
  ibv_qp_init_attr_ex qb = qp_attr_ex(b, IBV_QPT_RC, IBV_QP_EX_WITH_SEND);
  b.qp = ibv_create_qp_ex(b.ctx, &qb);
  ASSERT_NE(b.qp, nullptr);
  ASSERT_NO_FATAL_FAILURE(connect(a.qp, IBV_QPT_RC, b.gid, b.qp->qp_num));
  ASSERT_NO_FATAL_FAILURE(connect(b.qp, IBV_QPT_RC, a.gid, a.qp->qp_num));

  std::memcpy(a.buf.data(), "via parent", 10);
  ibv_wr_start(a.qpx);
  a.qpx->wr_id = 70;
  a.qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(a.qpx, b.mr->rkey, b.addr(100));
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 10);
  ASSERT_EQ(ibv_wr_complete(a.qpx), 0);
  ibv_wc wc{};
  ASSERT_TRUE(poll_one(cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
  EXPECT_EQ(wc.wr_id, 70u);
  EXPECT_EQ(std::memcmp(b.buf.data() + 100, "via parent", 10), 0);

  EXPECT_EQ(ibv_dealloc_pd(parent), EBUSY);  // the QP and the CQ use it
  ASSERT_EQ(ibv_destroy_qp(a.qp), 0);
  a.qp = nullptr;
  EXPECT_EQ(ibv_dealloc_pd(parent), EBUSY);  // the CQ still does
  ASSERT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(parent), 0);
  EXPECT_EQ(ibv_dealloc_td(td), 0);
}

// ibv_close_device takes down what the program left, a parent domain and its TD included.
TEST(ParentDomain, CloseDeviceReleasesLeftovers) {
  ibv_context* ctx = open_device("uroce0");
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_NE(pd, nullptr);
  ibv_td_init_attr td_attr{};
  ibv_td* td = ibv_alloc_td(ctx, &td_attr);
  ASSERT_NE(td, nullptr);
  ibv_parent_domain_init_attr attr{};
  attr.pd = pd;
  attr.td = td;
  ibv_pd* parent = ibv_alloc_parent_domain(ctx, &attr);
  ASSERT_NE(parent, nullptr);
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = cq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap = {4, 4, 1, 1, 0};
  ASSERT_NE(ibv_create_qp(parent, &qa), nullptr);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

}  // namespace
}  // namespace uroce::abi_test
