// The ibv_wr_* work-request API (ibv_wr_post(3)) through the drop-in libibverbs' ABI: QP
// creation with send_ops_flags, every operation uroce does with its data checked on a loopback
// pair, batches, abort, and the errors ibv_wr_complete reports (nothing posted then).
#include <arpa/inet.h>

#include "abi/abi_test_support.h"

namespace uroce::abi_test {
namespace {

constexpr uint64_t kRcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                            IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |
                            IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;

class WrApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(open_end(a, "uroce0"));
    ASSERT_NO_FATAL_FAILURE(open_end(b, "uroce1"));
    for (End* e : {&a, &b}) {
      ibv_qp_init_attr_ex attr = qp_attr_ex(*e, IBV_QPT_RC, kRcOps);
      e->qp = ibv_create_qp_ex(e->ctx, &attr);
      ASSERT_NE(e->qp, nullptr) << errno;
      e->qpx = ibv_qp_to_qp_ex(e->qp);
      ASSERT_NE(e->qpx, nullptr);
    }
    ASSERT_NO_FATAL_FAILURE(connect(a.qp, IBV_QPT_RC, b.gid, b.qp->qp_num));
    ASSERT_NO_FATAL_FAILURE(connect(b.qp, IBV_QPT_RC, a.gid, a.qp->qp_num));
  }

  // One signaled completion on a's CQ, with this wr_id and opcode, successful.
  void expect_send_completion(uint64_t wr_id, ibv_wc_opcode opcode) {
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(a.cq, &wc));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.wr_id, wr_id);
    EXPECT_EQ(wc.opcode, opcode);
  }

  End a, b;
};

TEST_F(WrApi, QpExHasTheRequestedBuildersOnly) {
  EXPECT_NE(a.qpx->wr_send, nullptr);
  EXPECT_NE(a.qpx->wr_atomic_fetch_add, nullptr);
  EXPECT_NE(a.qpx->wr_set_inline_data_list, nullptr);
  // What uroce does not do stays null, as with rdma-core's providers.
  EXPECT_EQ(a.qpx->wr_send_tso, nullptr);
  EXPECT_EQ(a.qpx->wr_atomic_write, nullptr);
  EXPECT_EQ(a.qpx->wr_set_xrc_srqn, nullptr);
  EXPECT_EQ(&a.qpx->qp_base, a.qp);

  ibv_qp_init_attr_ex attr = qp_attr_ex(a, IBV_QPT_RC, IBV_QP_EX_WITH_SEND);
  ibv_qp* send_only = ibv_create_qp_ex(a.ctx, &attr);
  ASSERT_NE(send_only, nullptr);
  ibv_qp_ex* x = ibv_qp_to_qp_ex(send_only);
  ASSERT_NE(x, nullptr);
  EXPECT_NE(x->wr_send, nullptr);
  EXPECT_EQ(x->wr_rdma_write, nullptr);
  EXPECT_EQ(ibv_destroy_qp(send_only), 0);
}

TEST_F(WrApi, CreateRefusesWhatUroceCannotDo) {
  struct Case {
    ibv_qp_type type;
    uint64_t ops;
  };
  for (Case c :
       {Case{IBV_QPT_RC, IBV_QP_EX_WITH_TSO}, Case{IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE},
        Case{IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE}, Case{IBV_QPT_UD, IBV_QP_EX_WITH_TSO},
        Case{IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ},
        Case{IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD},
        Case{IBV_QPT_UC, IBV_QP_EX_WITH_SEND_WITH_INV}}) {
    ibv_qp_init_attr_ex attr = qp_attr_ex(a, c.type, c.ops);
    errno = 0;
    EXPECT_EQ(ibv_create_qp_ex(a.ctx, &attr), nullptr) << c.type << " " << c.ops;
    EXPECT_EQ(errno, EOPNOTSUPP);
  }
  // A QP made without send_ops_flags has no ibv_qp_ex, as in rdma-core.
  ibv_qp_init_attr plain{};
  plain.send_cq = plain.recv_cq = a.cq;
  plain.qp_type = IBV_QPT_RC;
  plain.cap = {4, 4, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(a.pd, &plain);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(ibv_qp_to_qp_ex(qp), nullptr);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

TEST_F(WrApi, SendsWithSgeListImmediateAndInline) {
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(post_recv(b, 1024 * i, 1024, 100 + i));
  std::memcpy(a.buf.data(), "hello ", 6);
  std::memcpy(a.buf.data() + 100, "world", 5);
  char inline_a[] = "inline-";
  char inline_b[] = "list";

  ibv_wr_start(a.qpx);
  a.qpx->wr_id = 1;
  a.qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(a.qpx);
  const ibv_sge list[2] = {{a.addr(0), 6, a.mr->lkey}, {a.addr(100), 5, a.mr->lkey}};
  ibv_wr_set_sge_list(a.qpx, 2, list);
  a.qpx->wr_id = 2;
  ibv_wr_send_imm(a.qpx, htonl(0xfeedbeef));
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(100), 5);
  a.qpx->wr_id = 3;
  ibv_wr_send(a.qpx);
  const ibv_data_buf bufs[2] = {{inline_a, 7}, {inline_b, 4}};
  ibv_wr_set_inline_data_list(a.qpx, 2, bufs);
  ASSERT_EQ(ibv_wr_complete(a.qpx), 0);
  // Inline data was copied by the setter: the caller's buffers are free again.
  std::memset(inline_a, 'X', sizeof inline_a - 1);

  for (uint64_t id = 1; id <= 3; ++id) expect_send_completion(id, IBV_WC_SEND);
  ibv_wc wc{};
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 100u);
  EXPECT_EQ(wc.byte_len, 11u);
  EXPECT_EQ(std::memcmp(b.buf.data(), "hello world", 11), 0);
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 101u);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), 0xfeedbeefu);
  EXPECT_EQ(std::memcmp(b.buf.data() + 1024, "world", 5), 0);
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 102u);
  EXPECT_EQ(wc.byte_len, 11u);
  EXPECT_EQ(std::memcmp(b.buf.data() + 2048, "inline-list", 11), 0);
}

TEST_F(WrApi, RdmaWriteWriteImmAndRead) {
  ASSERT_NO_FATAL_FAILURE(post_recv(b, 0, 16, 200));
  std::memcpy(a.buf.data(), "written", 7);
  std::memcpy(b.buf.data() + 3000, "read me", 7);

  ibv_wr_start(a.qpx);
  a.qpx->wr_flags = IBV_SEND_SIGNALED;
  a.qpx->wr_id = 10;
  ibv_wr_rdma_write(a.qpx, b.mr->rkey, b.addr(1000));
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 7);
  a.qpx->wr_id = 11;
  ibv_wr_rdma_write_imm(a.qpx, b.mr->rkey, b.addr(2000), htonl(42));
  ibv_wr_set_inline_data(a.qpx, a.buf.data(), 7);
  a.qpx->wr_id = 12;
  ibv_wr_rdma_read(a.qpx, b.mr->rkey, b.addr(3000));
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(500), 7);
  ASSERT_EQ(ibv_wr_complete(a.qpx), 0);

  expect_send_completion(10, IBV_WC_RDMA_WRITE);
  expect_send_completion(11, IBV_WC_RDMA_WRITE);
  expect_send_completion(12, IBV_WC_RDMA_READ);
  EXPECT_EQ(std::memcmp(b.buf.data() + 1000, "written", 7), 0);
  EXPECT_EQ(std::memcmp(b.buf.data() + 2000, "written", 7), 0);
  EXPECT_EQ(std::memcmp(a.buf.data() + 500, "read me", 7), 0);
  ibv_wc wc{};
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.wr_id, 200u);
  EXPECT_EQ(ntohl(wc.imm_data), 42u);
}

TEST_F(WrApi, Atomics) {
  uint64_t target = 5;
  std::memcpy(b.buf.data() + 64, &target, 8);
  ibv_wr_start(a.qpx);
  a.qpx->wr_flags = IBV_SEND_SIGNALED;
  a.qpx->wr_id = 20;
  ibv_wr_atomic_fetch_add(a.qpx, b.mr->rkey, b.addr(64), 10);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 8);
  a.qpx->wr_id = 21;
  ibv_wr_atomic_cmp_swp(a.qpx, b.mr->rkey, b.addr(64), 15, 99);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(8), 8);
  ASSERT_EQ(ibv_wr_complete(a.qpx), 0);
  expect_send_completion(20, IBV_WC_FETCH_ADD);
  expect_send_completion(21, IBV_WC_COMP_SWAP);
  uint64_t original = 0, before_swap = 0;
  std::memcpy(&original, a.buf.data(), 8);
  std::memcpy(&before_swap, a.buf.data() + 8, 8);
  std::memcpy(&target, b.buf.data() + 64, 8);
  EXPECT_EQ(original, 5u);
  EXPECT_EQ(before_swap, 15u);
  EXPECT_EQ(target, 99u);
}

// b binds a type 2 window through the API; a writes through it and closes it with SEND with
// Invalidate; b binds it again and invalidates it locally (LOCAL_INV).
TEST_F(WrApi, BindMwSendWithInvalidateAndLocalInvalidate) {
  ibv_mw* mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t key = ibv_inc_rkey(mw->rkey);
  const ibv_mw_bind_info info{b.mr, b.addr(256), 64, IBV_ACCESS_REMOTE_WRITE};
  ibv_wr_start(b.qpx);
  b.qpx->wr_id = 30;
  b.qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(b.qpx, mw, key, &info);
  ASSERT_EQ(ibv_wr_complete(b.qpx), 0);
  ibv_wc wc{};
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wc.wr_id, 30u);

  ASSERT_NO_FATAL_FAILURE(post_recv(b, 0, 64, 300));
  std::memcpy(a.buf.data(), "window", 6);
  ibv_wr_start(a.qpx);
  a.qpx->wr_flags = IBV_SEND_SIGNALED;
  a.qpx->wr_id = 31;
  ibv_wr_rdma_write(a.qpx, key, b.addr(256));
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 6);
  a.qpx->wr_id = 32;
  ibv_wr_send_inv(a.qpx, key);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 6);
  ASSERT_EQ(ibv_wr_complete(a.qpx), 0);
  expect_send_completion(31, IBV_WC_RDMA_WRITE);
  expect_send_completion(32, IBV_WC_SEND);
  EXPECT_EQ(std::memcmp(b.buf.data() + 256, "window", 6), 0);
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 300u);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(wc.invalidated_rkey, key);

  const uint32_t key2 = ibv_inc_rkey(key);
  ibv_wr_start(b.qpx);
  b.qpx->wr_flags = IBV_SEND_SIGNALED;
  b.qpx->wr_id = 33;
  ibv_wr_bind_mw(b.qpx, mw, key2, &info);
  b.qpx->wr_id = 34;
  ibv_wr_local_inv(b.qpx, key2);
  ASSERT_EQ(ibv_wr_complete(b.qpx), 0);
  for (uint64_t id : {33u, 34u}) {
    ASSERT_TRUE(poll_one(b.cq, &wc));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.wr_id, id);
  }
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(WrApi, AbortDiscardsTheBatch) {
  ASSERT_NO_FATAL_FAILURE(post_recv(b, 0, 64, 400));
  std::memcpy(a.buf.data(), "aborted", 7);
  std::memcpy(a.buf.data() + 8, "kept", 4);
  ibv_wr_start(a.qpx);
  a.qpx->wr_id = 40;
  a.qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(a.qpx);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 7);
  ibv_wr_abort(a.qpx);
  EXPECT_TRUE(stays_empty(a.cq));
  EXPECT_TRUE(stays_empty(b.cq));

  // The next region starts empty: only its own request goes.
  ibv_wr_start(a.qpx);
  a.qpx->wr_id = 41;
  ibv_wr_send(a.qpx);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(8), 4);
  ASSERT_EQ(ibv_wr_complete(a.qpx), 0);
  expect_send_completion(41, IBV_WC_SEND);
  ibv_wc wc{};
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 400u);
  EXPECT_EQ(wc.byte_len, 4u);
  EXPECT_EQ(std::memcmp(b.buf.data(), "kept", 4), 0);
  EXPECT_TRUE(stays_empty(a.cq));
}

// Each bad batch starts with a good RDMA WRITE; complete fails and posts none of them: the
// write's bytes never land and its completion never comes.
TEST_F(WrApi, CompleteReportsTheFirstErrorAndPostsNothing) {
  std::memcpy(a.buf.data() + 3000, "must not land", 13);
  auto good_send = [&] {
    a.qpx->wr_id = 50;
    a.qpx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(a.qpx, b.mr->rkey, b.addr(3500));
    ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(3000), 13);
  };
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(a.qp, &attr, IBV_QP_CAP, &init), 0);
  // More SGEs than the QP's max_send_sge: the transport's check, as ibv_post_send.
  ibv_sge sges[17];
  for (auto& s : sges) s = {a.addr(0), 1, a.mr->lkey};
  ASSERT_LT(init.cap.max_send_sge, 17u);
  ibv_wr_start(a.qpx);
  good_send();
  ibv_wr_send(a.qpx);
  ibv_wr_set_sge_list(a.qpx, init.cap.max_send_sge + 1, sges);
  EXPECT_EQ(ibv_wr_complete(a.qpx), EINVAL);

  // More inline data than max_inline_data.
  ASSERT_LT(init.cap.max_inline_data, kBufBytes);
  ibv_wr_start(a.qpx);
  good_send();
  ibv_wr_send(a.qpx);
  ibv_wr_set_inline_data(a.qpx, a.buf.data(), init.cap.max_inline_data + 1);
  EXPECT_EQ(ibv_wr_complete(a.qpx), EINVAL);

  // An atomic on 4 bytes.
  ibv_wr_start(a.qpx);
  good_send();
  ibv_wr_atomic_fetch_add(a.qpx, b.mr->rkey, b.addr(64), 1);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 4);
  EXPECT_EQ(ibv_wr_complete(a.qpx), EINVAL);

  // A setter before any builder.
  ibv_wr_start(a.qpx);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 4);
  good_send();
  EXPECT_EQ(ibv_wr_complete(a.qpx), EINVAL);

  // More requests than the send queue holds.
  ibv_wr_start(a.qpx);
  for (uint32_t i = 0; i <= init.cap.max_send_wr; ++i) good_send();
  EXPECT_EQ(ibv_wr_complete(a.qpx), ENOMEM);

  // Complete without start.
  EXPECT_EQ(ibv_wr_complete(a.qpx), EINVAL);

  EXPECT_TRUE(stays_empty(a.cq));
  EXPECT_TRUE(stays_empty(b.cq));

  // The QP is unharmed: a good batch goes through, and its completion is the first one (RC
  // completes in order, so a write posted by a failed batch would have come before it).
  ASSERT_NO_FATAL_FAILURE(post_recv(b, 0, 64, 500));
  ibv_wr_start(a.qpx);
  a.qpx->wr_id = 51;
  ibv_wr_send(a.qpx);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 8);
  ASSERT_EQ(ibv_wr_complete(a.qpx), 0);
  expect_send_completion(51, IBV_WC_SEND);
  ibv_wc wc{};
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 500u);
  EXPECT_EQ(b.buf[3500], 0);
  EXPECT_TRUE(stays_empty(a.cq));
}

TEST(WrApiStates, CompleteBeforeRtsIsEinval) {
  End a;
  ASSERT_NO_FATAL_FAILURE(open_end(a, "uroce0"));
  ibv_qp_init_attr_ex attr = qp_attr_ex(a, IBV_QPT_RC, IBV_QP_EX_WITH_SEND);
  a.qp = ibv_create_qp_ex(a.ctx, &attr);
  ASSERT_NE(a.qp, nullptr);
  a.qpx = ibv_qp_to_qp_ex(a.qp);
  ASSERT_NE(a.qpx, nullptr);
  ibv_wr_start(a.qpx);
  ibv_wr_send(a.qpx);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 8);
  EXPECT_EQ(ibv_wr_complete(a.qpx), EINVAL);  // RESET, as ibv_post_send
  ASSERT_NO_FATAL_FAILURE(to_init(a.qp, IBV_QPT_RC));
  ibv_wr_start(a.qpx);
  ibv_wr_send(a.qpx);
  EXPECT_EQ(ibv_wr_complete(a.qpx), EINVAL);  // INIT
}

TEST(WrApiUd, SendWithUdAddress) {
  End a, b;
  ASSERT_NO_FATAL_FAILURE(open_end(a, "uroce0"));
  ASSERT_NO_FATAL_FAILURE(open_end(b, "uroce1"));
  for (End* e : {&a, &b}) {
    ibv_qp_init_attr_ex attr =
        qp_attr_ex(*e, IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
    e->qp = ibv_create_qp_ex(e->ctx, &attr);
    ASSERT_NE(e->qp, nullptr) << errno;
    e->qpx = ibv_qp_to_qp_ex(e->qp);
    ASSERT_NE(e->qpx, nullptr);
    EXPECT_EQ(e->qpx->wr_rdma_write, nullptr);
    ASSERT_NO_FATAL_FAILURE(connect(e->qp, IBV_QPT_UD, {}, 0));
  }
  ibv_ah_attr ah_attr{};
  ah_attr.is_global = 1;
  ah_attr.grh.dgid = b.gid;
  ah_attr.grh.hop_limit = 64;
  ah_attr.port_num = 1;
  ibv_ah* ah = ibv_create_ah(a.pd, &ah_attr);
  ASSERT_NE(ah, nullptr);
  ASSERT_NO_FATAL_FAILURE(post_recv(b, 0, 40 + 64, 600));
  ASSERT_NO_FATAL_FAILURE(post_recv(b, 512, 40 + 64, 601));
  std::memcpy(a.buf.data(), "datagram", 8);

  ibv_wr_start(a.qpx);
  a.qpx->wr_id = 60;
  a.qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(a.qpx);
  ibv_wr_set_ud_addr(a.qpx, ah, b.qp->qp_num, 0x11111111);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 8);
  a.qpx->wr_id = 61;
  ibv_wr_send_imm(a.qpx, htonl(7));
  ibv_wr_set_ud_addr(a.qpx, ah, b.qp->qp_num, 0x11111111);
  ibv_wr_set_inline_data(a.qpx, a.buf.data(), 4);
  ASSERT_EQ(ibv_wr_complete(a.qpx), 0);
  for (uint64_t id : {60u, 61u}) {
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(a.cq, &wc));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.wr_id, id);
  }
  ibv_wc wc{};
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 600u);
  EXPECT_EQ(wc.byte_len, 40u + 8);
  EXPECT_EQ(wc.src_qp, a.qp->qp_num);
  EXPECT_EQ(std::memcmp(b.buf.data() + 40, "datagram", 8), 0);
  ASSERT_TRUE(poll_one(b.cq, &wc));
  EXPECT_EQ(wc.wr_id, 601u);
  EXPECT_EQ(ntohl(wc.imm_data), 7u);
  EXPECT_EQ(std::memcmp(b.buf.data() + 512 + 40, "data", 4), 0);

  // A UD request without an address fails the batch.
  ibv_wr_start(a.qpx);
  ibv_wr_send(a.qpx);
  ibv_wr_set_sge(a.qpx, a.mr->lkey, a.addr(0), 8);
  EXPECT_EQ(ibv_wr_complete(a.qpx), EINVAL);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

}  // namespace
}  // namespace uroce::abi_test
