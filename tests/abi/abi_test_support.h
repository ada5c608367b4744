#pragma once
// A connected pair of ends on the drop-in libibverbs, used only through its C ABI (the header's
// inline wrappers included), as a verbs program would: two devices on two loopback addresses
// (set in UROCE_DEVICES before the first verb), one PD, CQ, 4 KiB MR and QP each.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace uroce::abi_test {

inline constexpr const char* kDevices = "uroce0=127.0.13.1,uroce1=127.0.13.2";
inline constexpr size_t kBufBytes = 4096;
inline constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                               IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                               IBV_ACCESS_MW_BIND;

inline ibv_context* open_device(const char* name) {
  setenv("UROCE_DEVICES", kDevices, 1);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list && i < n; ++i) {
    if (std::strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
  }
  if (list) ibv_free_device_list(list);
  return ctx;
}

struct End {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  ibv_qp* qp = nullptr;
  ibv_qp_ex* qpx = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBufBytes);
  ibv_gid gid{};

  uint64_t addr(size_t offset = 0) { return reinterpret_cast<uint64_t>(buf.data() + offset); }

  ~End() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

// Opens `name` and makes its PD, CQ and MR (no QP).
inline void open_end(End& e, const char* name) {
  e.ctx = open_device(name);
  ASSERT_NE(e.ctx, nullptr);
  e.pd = ibv_alloc_pd(e.ctx);
  ASSERT_NE(e.pd, nullptr);
  e.cq = ibv_create_cq(e.ctx, 64, nullptr, nullptr, 0);
  ASSERT_NE(e.cq, nullptr);
  e.mr = ibv_reg_mr(e.pd, e.buf.data(), e.buf.size(), kAccess);
  ASSERT_NE(e.mr, nullptr);
  ASSERT_EQ(ibv_query_gid(e.ctx, 1, 0, &e.gid), 0);
}

inline ibv_qp_init_attr_ex qp_attr_ex(const End& e, ibv_qp_type type, uint64_t send_ops) {
  ibv_qp_init_attr_ex a{};
  a.send_cq = e.cq;
  a.recv_cq = e.cq;
  a.qp_type = type;
  a.cap.max_send_wr = 8;
  a.cap.max_recv_wr = 8;
  a.cap.max_send_sge = 4;
  a.cap.max_recv_sge = 4;
  a.cap.max_inline_data = 64;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.pd = e.pd;
  a.send_ops_flags = send_ops;
  return a;
}

inline void to_init(ibv_qp* qp, ibv_qp_type type) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (type == IBV_QPT_UD) {
    a.qkey = 0x11111111;
    mask |= IBV_QP_QKEY;
  } else {
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
}

// RESET -> INIT -> RTR -> RTS, connected to `peer` for RC and UC.
inline void connect(ibv_qp* qp, ibv_qp_type type, const ibv_gid& peer_gid, uint32_t peer_qpn) {
  to_init(qp, type);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  int mask = IBV_QP_STATE;
  if (type != IBV_QPT_UD) {
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer_qpn;
    a.rq_psn = 7;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer_gid;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (type == IBV_QPT_RC) {
      a.max_dest_rd_atomic = 4;
      a.min_rnr_timer = 1;
      mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
  }
  ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 7;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (type == IBV_QPT_RC) {
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
}

// Polls until one completion arrives; a bounded number of polls (each empty one yields).
inline bool poll_one(ibv_cq* cq, ibv_wc* wc) {
  for (int i = 0; i < 2'000'000; ++i) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n != 0) return n == 1;
  }
  return false;
}

// Several polls that find nothing: what arrives in a pass or two would show here.
inline bool stays_empty(ibv_cq* cq) {
  ibv_wc wc;
  for (int i = 0; i < 200; ++i) {
    if (ibv_poll_cq(cq, 1, &wc) != 0) return false;
  }
  return true;
}

inline void post_recv(End& e, size_t offset, uint32_t length, uint64_t wr_id) {
  ibv_sge sge{e.addr(offset), length, e.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(e.qp, &wr, &bad), 0);
}

}  // namespace uroce::abi_test
