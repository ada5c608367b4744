// XRC through the drop-in libibverbs' ABI (docs/ibverbs.md, "XRC"): an XRC initiator on one
// device, an XRC domain with a target QP and two XRC SRQs on the other; SEND (classic
// ibv_post_send and the ibv_wr_* API) lands in the SRQ remote_srqn names, RDMA WRITE/READ and an
// atomic reach the memory of the SRQ's PD; domain lifetimes and the errors of ibv_open_xrcd.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "abi/abi_test_support.h"

namespace uroce::abi_test {
namespace {

constexpr size_t kSrq1Offset = 1024, kSrq2Offset = 2048, kRemoteOffset = 3072;

void to_init(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  ASSERT_EQ(
      ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
      0);
}

// The masks of Linux's qp_state_table XRC columns: an initiator RC's requester attributes, a
// target RC's responder ones.
void connect_xrc(ibv_qp* qp, bool target, const ibv_gid& peer_gid, uint32_t peer_qpn) {
  ASSERT_NO_FATAL_FAILURE(to_init(qp));
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = 7;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer_gid;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 1;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (target) {
    mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  } else {
    // An initiator answers nothing: the responder's attributes are not its to set.
    EXPECT_EQ(ibv_modify_qp(qp, &a, mask | IBV_QP_MAX_DEST_RD_ATOMIC), EINVAL);
  }
  ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 7;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT;
  if (!target) mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
}

// verbs.h's ibv_close_xrcd, which dereferences verbs_get_ctx() unchecked (GCC's
// -Wnull-dereference sees that); the same call with the check.
int close_xrcd(ibv_xrcd* xrcd) {
  verbs_context* vctx = verbs_get_ctx(xrcd->context);
  return vctx ? vctx->close_xrcd(xrcd) : EINVAL;
}

ibv_xrcd* open_anonymous_xrcd(ibv_context* ctx) {
  ibv_xrcd_init_attr x{};
  x.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  x.fd = -1;
  x.oflags = O_CREAT;
  return ibv_open_xrcd(ctx, &x);
}

ibv_srq* create_xrc_srq(End& e, ibv_xrcd* xrcd) {
  ibv_srq_init_attr_ex s{};
  s.attr.max_wr = 8;
  s.attr.max_sge = 1;
  s.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  s.srq_type = IBV_SRQT_XRC;
  s.pd = e.pd;
  s.xrcd = xrcd;
  s.cq = e.cq;
  return ibv_create_srq_ex(e.ctx, &s);
}

class Xrc : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(open_end(ini, "uroce0"));
    ASSERT_NO_FATAL_FAILURE(open_end(tgt, "uroce1"));
    ibv_device_attr dattr{};
    ASSERT_EQ(ibv_query_device(tgt.ctx, &dattr), 0);
    EXPECT_TRUE(dattr.device_cap_flags & IBV_DEVICE_XRC);

    xrcd = open_anonymous_xrcd(tgt.ctx);
    ASSERT_NE(xrcd, nullptr) << errno;
    srq1 = create_xrc_srq(tgt, xrcd);
    srq2 = create_xrc_srq(tgt, xrcd);
    ASSERT_NE(srq1, nullptr) << errno;
    ASSERT_NE(srq2, nullptr) << errno;
    ASSERT_EQ(ibv_get_srq_num(srq1, &srqn1), 0);
    ASSERT_EQ(ibv_get_srq_num(srq2, &srqn2), 0);
    EXPECT_NE(srqn1, srqn2);

    ibv_qp_init_attr_ex t{};
    t.qp_type = IBV_QPT_XRC_RECV;
    t.comp_mask = IBV_QP_INIT_ATTR_XRCD;
    t.xrcd = xrcd;
    tgt.qp = ibv_create_qp_ex(tgt.ctx, &t);
    ASSERT_NE(tgt.qp, nullptr) << errno;
    EXPECT_EQ(tgt.qp->pd, nullptr);
    EXPECT_EQ(tgt.qp->send_cq, nullptr);

    ASSERT_NO_FATAL_FAILURE(create_initiator(0));
    ASSERT_NO_FATAL_FAILURE(connect_xrc(ini.qp, false, tgt.gid, tgt.qp->qp_num));
    ASSERT_NO_FATAL_FAILURE(connect_xrc(tgt.qp, true, ini.gid, ini.qp->qp_num));
  }
  void TearDown() override {
    if (tgt.qp) {
      EXPECT_EQ(ibv_destroy_qp(tgt.qp), 0);
    }
    tgt.qp = nullptr;
    if (srq1) {
      EXPECT_EQ(ibv_destroy_srq(srq1), 0);
    }
    if (srq2) {
      EXPECT_EQ(ibv_destroy_srq(srq2), 0);
    }
    if (xrcd) {
      EXPECT_EQ(close_xrcd(xrcd), 0);
    }
  }

  void create_initiator(uint64_t send_ops) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_SEND;
    a.send_cq = ini.cq;
    a.cap.max_send_wr = 8;
    a.cap.max_send_sge = 1;
    a.sq_sig_all = 1;
    a.comp_mask = IBV_QP_INIT_ATTR_PD;
    a.pd = ini.pd;
    if (send_ops) {
      a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      a.send_ops_flags = send_ops;
    }
    ini.qp = ibv_create_qp_ex(ini.ctx, &a);
    ASSERT_NE(ini.qp, nullptr) << errno;
    EXPECT_EQ(a.cap.max_recv_wr, 0u);
  }

  void post_srq_recv(ibv_srq* srq, size_t offset, uint64_t wr_id) {
    ibv_sge sge{tgt.addr(offset), 256, tgt.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
  }

  // One initiator request, signaled, with its data at `offset` of the initiator's buffer.
  void post(ibv_wr_opcode opcode, uint32_t srqn, size_t offset, uint32_t length, uint64_t wr_id,
            uint64_t remote_addr = 0) {
    ibv_sge sge{ini.addr(offset), length, ini.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = opcode;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.qp_type.xrc.remote_srqn = srqn;
    if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic.remote_addr = remote_addr;
      wr.wr.atomic.rkey = tgt.mr->rkey;
      wr.wr.atomic.compare_add = 5;
    } else {
      wr.wr.rdma.remote_addr = remote_addr;
      wr.wr.rdma.rkey = tgt.mr->rkey;
    }
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(ini.qp, &wr, &bad), 0);
  }

  void expect_completion(ibv_cq* cq, uint64_t wr_id, ibv_wc_opcode opcode,
                         ibv_wc_status status = IBV_WC_SUCCESS) {
    ibv_wc wc{};
    ASSERT_TRUE(poll_one(cq, &wc));
    EXPECT_EQ(wc.status, status) << ibv_wc_status_str(wc.status);
    EXPECT_EQ(wc.wr_id, wr_id);
    if (status == IBV_WC_SUCCESS) {
      EXPECT_EQ(wc.opcode, opcode);
    }
    if (cq == tgt.cq) {
      EXPECT_EQ(wc.qp_num, tgt.qp->qp_num);
    }
  }

  End ini, tgt;
  ibv_xrcd* xrcd = nullptr;
  ibv_srq *srq1 = nullptr, *srq2 = nullptr;
  uint32_t srqn1 = 0, srqn2 = 0;
};

TEST_F(Xrc, SendsLandInTheSrqRemoteSrqnNames) {
  ASSERT_NO_FATAL_FAILURE(post_srq_recv(srq1, kSrq1Offset, 101));
  ASSERT_NO_FATAL_FAILURE(post_srq_recv(srq2, kSrq2Offset, 202));
  std::memcpy(ini.buf.data(), "for srq two", 12);
  std::memcpy(ini.buf.data() + 64, "for srq one", 12);
  ASSERT_NO_FATAL_FAILURE(post(IBV_WR_SEND, srqn2, 0, 12, 1));
  ASSERT_NO_FATAL_FAILURE(expect_completion(ini.cq, 1, IBV_WC_SEND));
  ASSERT_NO_FATAL_FAILURE(expect_completion(tgt.cq, 202, IBV_WC_RECV));
  EXPECT_STREQ(reinterpret_cast<char*>(tgt.buf.data() + kSrq2Offset), "for srq two");
  EXPECT_EQ(tgt.buf[kSrq1Offset], 0);  // srq1's WQE untouched

  ASSERT_NO_FATAL_FAILURE(post(IBV_WR_SEND, srqn1, 64, 12, 2));
  ASSERT_NO_FATAL_FAILURE(expect_completion(ini.cq, 2, IBV_WC_SEND));
  ASSERT_NO_FATAL_FAILURE(expect_completion(tgt.cq, 101, IBV_WC_RECV));
  EXPECT_STREQ(reinterpret_cast<char*>(tgt.buf.data() + kSrq1Offset), "for srq one");
}

TEST_F(Xrc, WriteReadAndAtomicReachTheSrqsPdMemory) {
  for (size_t i = 0; i < 64; ++i) ini.buf[i] = static_cast<uint8_t>(i * 3 + 1);
  ASSERT_NO_FATAL_FAILURE(post(IBV_WR_RDMA_WRITE, srqn1, 0, 64, 1, tgt.addr(kRemoteOffset)));
  ASSERT_NO_FATAL_FAILURE(expect_completion(ini.cq, 1, IBV_WC_RDMA_WRITE));
  EXPECT_EQ(std::memcmp(tgt.buf.data() + kRemoteOffset, ini.buf.data(), 64), 0);
  EXPECT_TRUE(stays_empty(tgt.cq));  // a WRITE takes no receive WQE

  for (size_t i = 0; i < 32; ++i) tgt.buf[kRemoteOffset + 256 + i] = static_cast<uint8_t>(200 - i);
  ASSERT_NO_FATAL_FAILURE(post(IBV_WR_RDMA_READ, srqn2, 512, 32, 2, tgt.addr(kRemoteOffset + 256)));
  ASSERT_NO_FATAL_FAILURE(expect_completion(ini.cq, 2, IBV_WC_RDMA_READ));
  EXPECT_EQ(std::memcmp(ini.buf.data() + 512, tgt.buf.data() + kRemoteOffset + 256, 32), 0);

  uint64_t before = 1000;
  std::memcpy(tgt.buf.data() + kRemoteOffset + 512, &before, 8);
  ASSERT_NO_FATAL_FAILURE(
      post(IBV_WR_ATOMIC_FETCH_AND_ADD, srqn1, 1024, 8, 3, tgt.addr(kRemoteOffset + 512)));
  ASSERT_NO_FATAL_FAILURE(expect_completion(ini.cq, 3, IBV_WC_FETCH_ADD));
  uint64_t fetched = 0, after = 0;
  std::memcpy(&fetched, ini.buf.data() + 1024, 8);
  std::memcpy(&after, tgt.buf.data() + kRemoteOffset + 512, 8);
  EXPECT_EQ(fetched, 1000u);
  EXPECT_EQ(after, 1005u);
}

TEST_F(Xrc, UnknownSrqNumberIsRemoteAccessError) {
  const uint32_t unknown = (srqn1 > srqn2 ? srqn1 : srqn2) + 100;
  ASSERT_NO_FATAL_FAILURE(post(IBV_WR_SEND, unknown, 0, 8, 9));
  ASSERT_NO_FATAL_FAILURE(expect_completion(ini.cq, 9, IBV_WC_SEND, IBV_WC_REM_ACCESS_ERR));
  EXPECT_TRUE(stays_empty(tgt.cq));
}

TEST_F(Xrc, WrApiSetsTheSrqNumber) {
  ASSERT_EQ(ibv_destroy_qp(ini.qp), 0);
  ini.qp = nullptr;
  ASSERT_NO_FATAL_FAILURE(create_initiator(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE));
  // A new initiator QP: the target follows it to RESET and back.
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(tgt.qp, &reset, IBV_QP_STATE), 0);
  ASSERT_NO_FATAL_FAILURE(connect_xrc(ini.qp, false, tgt.gid, tgt.qp->qp_num));
  ASSERT_NO_FATAL_FAILURE(connect_xrc(tgt.qp, true, ini.gid, ini.qp->qp_num));
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(ini.qp);
  ASSERT_NE(qpx, nullptr);
  ASSERT_NE(qpx->wr_set_xrc_srqn, nullptr);
  ASSERT_NO_FATAL_FAILURE(post_srq_recv(srq2, kSrq2Offset, 7));
  std::memcpy(ini.buf.data(), "wr api", 7);
  ibv_wr_start(qpx);
  qpx->wr_id = 70;
  ibv_wr_send(qpx);
  ibv_wr_set_xrc_srqn(qpx, srqn2);
  ibv_wr_set_sge(qpx, ini.mr->lkey, ini.addr(), 7);
  ASSERT_EQ(ibv_wr_complete(qpx), 0);
  ASSERT_NO_FATAL_FAILURE(expect_completion(ini.cq, 70, IBV_WC_SEND));
  ASSERT_NO_FATAL_FAILURE(expect_completion(tgt.cq, 7, IBV_WC_RECV));
  EXPECT_STREQ(reinterpret_cast<char*>(tgt.buf.data() + kSrq2Offset), "wr api");
}

TEST_F(Xrc, DomainInUseIsBusyAndOtherVerbsAnswerAsRdmaCore) {
  EXPECT_EQ(close_xrcd(xrcd), EBUSY);  // SRQs and a target QP in it
  uint32_t n = 0;
  ibv_srq_init_attr basic_attr{};
  basic_attr.attr.max_wr = 2;
  basic_attr.attr.max_sge = 1;
  ibv_srq* basic = ibv_create_srq(tgt.pd, &basic_attr);
  ASSERT_NE(basic, nullptr);
  EXPECT_EQ(ibv_get_srq_num(basic, &n), EINVAL);  // only XRC SRQs have numbers to name
  EXPECT_EQ(ibv_destroy_srq(basic), 0);
  // A target has no receive queue of its own, an initiator none at all.
  ibv_sge sge{tgt.addr(), 8, tgt.mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_recv(tgt.qp, &rwr, &bad), EINVAL);
  EXPECT_EQ(ibv_post_recv(ini.qp, &rwr, &bad), EINVAL);
  // ibv_create_qp has no XRC domain to give a target.
  ibv_qp_init_attr plain{};
  plain.qp_type = IBV_QPT_XRC_RECV;
  plain.send_cq = plain.recv_cq = tgt.cq;
  errno = 0;
  EXPECT_EQ(ibv_create_qp(tgt.pd, &plain), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_qp_open_attr open_attr{};
  errno = 0;
  EXPECT_EQ(ibv_open_qp(tgt.ctx, &open_attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST(XrcDomainFiles, AFileNamesOneDomainPerContextWithTheKernelsErrors) {
  End e;
  ASSERT_NO_FATAL_FAILURE(open_end(e, "uroce0"));
  char path[] = "/tmp/uroce-xrcd-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  ibv_xrcd_init_attr x{};
  x.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  x.fd = fd;
  x.oflags = 0;
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(e.ctx, &x), nullptr);  // no domain yet, and no O_CREAT
  EXPECT_EQ(errno, EAGAIN);
  x.oflags = O_CREAT;
  ibv_xrcd* first = ibv_open_xrcd(e.ctx, &x);
  ASSERT_NE(first, nullptr);
  x.oflags = O_CREAT | O_EXCL;
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(e.ctx, &x), nullptr);
  EXPECT_EQ(errno, EINVAL);
  x.oflags = 0;
  ibv_xrcd* second = ibv_open_xrcd(e.ctx, &x);  // the same domain
  ASSERT_NE(second, nullptr);
  ibv_srq* srq = create_xrc_srq(e, first);
  ASSERT_NE(srq, nullptr);
  EXPECT_EQ(close_xrcd(first), 0);  // the domain stays open through `second`
  EXPECT_EQ(close_xrcd(second), EBUSY);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(close_xrcd(second), 0);
  x.fd = 1 << 20;  // no such descriptor
  x.oflags = O_CREAT;
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(e.ctx, &x), nullptr);
  EXPECT_EQ(errno, EBADF);
  close(fd);
}

}  // namespace
}  // namespace uroce::abi_test
