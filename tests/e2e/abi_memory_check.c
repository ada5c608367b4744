/* The memory verbs of the drop-in libibverbs through its C ABI, between two devices of this
 * process: RDMA WRITE and READ into an implicit on-demand MR at heap and stack addresses, a READ
 * of an unmapped address answered with a remote access error (and the process alive),
 * ibv_advise_mr, the ODP caps and max_dm_size of ibv_query_device_ex, device memory written by
 * RDMA and read back with ibv_memcpy_from_dm, and ibv_resize_cq with completions queued and with
 * UD sends just posted.
 * Run with UROCE_DEVICES="uroce0=127.0.3.8,uroce1=127.0.3.9". */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int failures;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

enum { kBuf = 8192 };
#define ALL_ACCESS                                                             \
  (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
   IBV_ACCESS_REMOTE_ATOMIC)

struct end {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  char* buf;
  union ibv_gid gid;
};

static struct ibv_context* open_named(const char* name) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  struct ibv_context* ctx = NULL;
  if (!list) return NULL;
  for (int i = 0; i < n; ++i)
    if (strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
  ibv_free_device_list(list);
  return ctx;
}

static int make_qp(struct end* e) {
  struct ibv_qp_init_attr ia = {
      .send_cq = e->cq,
      .recv_cq = e->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
  e->qp = ibv_create_qp(e->pd, &ia);
  CHECK(e->qp != NULL);
  return e->qp ? 0 : -1;
}

static int setup_end(struct end* e, const char* name) {
  memset(e, 0, sizeof *e);
  e->ctx = open_named(name);
  CHECK(e->ctx != NULL);
  if (!e->ctx) return -1;
  e->pd = ibv_alloc_pd(e->ctx);
  e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
  e->buf = calloc(1, kBuf);
  e->mr = e->pd ? ibv_reg_mr(e->pd, e->buf, kBuf, ALL_ACCESS) : NULL;
  CHECK(e->pd && e->cq && e->mr);
  if (!e->pd || !e->cq || !e->mr) return -1;
  CHECK(ibv_query_gid(e->ctx, 1, 0, &e->gid) == 0);
  return make_qp(e);
}

static int connect_qp(struct end* e, const struct end* peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  int rc = ibv_modify_qp(e->qp, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer->qp->qp_num;
  a.rq_psn = 100;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer->gid;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  rc |= ibv_modify_qp(e->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 100;
  a.max_rd_atomic = 1;
  rc |= ibv_modify_qp(e->qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  CHECK(rc == 0);
  return rc;
}

/* Fresh connected QPs after an access error has moved both to ERR. */
static void reconnect(struct end* a, struct end* b) {
  struct ibv_wc wc[8];
  CHECK(ibv_destroy_qp(a->qp) == 0 && ibv_destroy_qp(b->qp) == 0);
  while (ibv_poll_cq(a->cq, 8, wc) > 0 || ibv_poll_cq(b->cq, 8, wc) > 0) {
  }
  if (make_qp(a) || make_qp(b)) return;
  connect_qp(a, b);
  connect_qp(b, a);
}

/* One signaled RDMA request from a; returns its completion status (-1: none within 5 s). */
static int rdma(struct end* a, enum ibv_wr_opcode op, void* local, uint32_t len, uint32_t lkey,
                uint64_t remote, uint32_t rkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
  struct ibv_send_wr wr = {
      .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED};
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  struct ibv_send_wr* bad = NULL;
  if (ibv_post_send(a->qp, &wr, &bad) != 0) return -2;
  struct ibv_wc wc;
  for (int i = 0; i < 5000; ++i) {
    if (ibv_poll_cq(a->cq, 1, &wc) == 1) return wc.status;
    usleep(1000);
  }
  return -1;
}

static void check_caps(struct ibv_context* ctx) {
  struct ibv_device_attr_ex attr;
  memset(&attr, 0, sizeof attr);
  CHECK(ibv_query_device_ex(ctx, NULL, &attr) == 0);
  CHECK(attr.odp_caps.general_caps == (IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT));
  CHECK(attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE);
  CHECK(attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_READ);
  CHECK(attr.odp_caps.per_transport_caps.ud_odp_caps & IBV_ODP_SUPPORT_SEND);
  CHECK(attr.max_dm_size == 256 * 1024);
}

static void check_odp(struct end* a, struct end* b) {
  struct ibv_mr* implicit = ibv_reg_mr(b->pd, NULL, SIZE_MAX, ALL_ACCESS | IBV_ACCESS_ON_DEMAND);
  CHECK(implicit != NULL);
  if (!implicit) return;
  CHECK(implicit->length == SIZE_MAX);

  char* heap = calloc(1, 3000); /* never registered */
  for (int i = 0; i < 2000; ++i) a->buf[i] = (char)(i * 5 + 3);
  CHECK(rdma(a, IBV_WR_RDMA_WRITE, a->buf, 2000, a->mr->lkey, (uintptr_t)(heap + 500),
             implicit->rkey) == IBV_WC_SUCCESS);
  CHECK(memcmp(heap + 500, a->buf, 2000) == 0 && heap[499] == 0 && heap[2500] == 0);
  free(heap);

  char stack[700];
  for (int i = 0; i < 700; ++i) stack[i] = (char)(i ^ 0x5a);
  CHECK(rdma(a, IBV_WR_RDMA_READ, a->buf + 4096, 700, a->mr->lkey, (uintptr_t)stack,
             implicit->rkey) == IBV_WC_SUCCESS);
  CHECK(memcmp(a->buf + 4096, stack, 700) == 0);

  /* ibv_advise_mr on the implicit MR: a hint that succeeds; bad arguments do not. */
  struct ibv_sge sge = {.addr = (uintptr_t)stack, .length = 700, .lkey = implicit->lkey};
  CHECK(ibv_advise_mr(b->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge,
                      1) == 0);
  CHECK(ibv_advise_mr(b->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80, &sge, 1) == EINVAL);
  sge.lkey = b->mr->lkey; /* not on demand */
  CHECK(ibv_advise_mr(b->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == ENOENT);

  /* An unmapped address: a remote access error, and this process goes on. */
  long page = sysconf(_SC_PAGESIZE);
  void* hole = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(hole != MAP_FAILED);
  CHECK(munmap(hole, (size_t)page) == 0);
  CHECK(rdma(a, IBV_WR_RDMA_READ, a->buf, 64, a->mr->lkey, (uintptr_t)hole, implicit->rkey) ==
        IBV_WC_REM_ACCESS_ERR);
  reconnect(a, b);
  CHECK(ibv_dereg_mr(implicit) == 0);

  /* IBV_ACCESS_HUGETLB is a hint, accepted as the kernel accepts it (ignored: uroce reads process
   * memory directly, whatever backs it). */
  struct ibv_mr* huge = ibv_reg_mr(
      b->pd, b->buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB);
  CHECK(huge != NULL);
  if (huge) CHECK(ibv_dereg_mr(huge) == 0);

  /* Implicit needs ON_DEMAND. */
  errno = 0;
  CHECK(ibv_reg_mr(b->pd, NULL, SIZE_MAX, ALL_ACCESS) == NULL && errno == EINVAL);
}

/* A QP given an on-demand MR's access flags (pyverbs' ODP tests do): the MR-only bit is dropped,
 * not refused, as the kernel and rxe/mlx5 do. */
static void check_qp_takes_mr_access_flags(struct end* e) {
  struct ibv_qp_init_attr ia = {
      .send_cq = e->cq,
      .recv_cq = e->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* qp = ibv_create_qp(e->pd, &ia);
  CHECK(qp != NULL);
  if (!qp) return;
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .port_num = 1,
                          .qp_access_flags = ALL_ACCESS | IBV_ACCESS_ON_DEMAND};
  CHECK(ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  struct ibv_qp_attr q;
  struct ibv_qp_init_attr qi;
  memset(&q, 0, sizeof q);
  CHECK(ibv_query_qp(qp, &q, IBV_QP_ACCESS_FLAGS, &qi) == 0);
  CHECK(q.qp_access_flags == ALL_ACCESS);
  CHECK(ibv_destroy_qp(qp) == 0);
}

static void check_dm(struct end* a, struct end* b) {
  struct ibv_alloc_dm_attr attr = {.length = 4096, .log_align_req = 6};
  struct ibv_dm* dm = ibv_alloc_dm(b->ctx, &attr);
  CHECK(dm != NULL);
  if (!dm) return;
  struct ibv_alloc_dm_attr big = {.length = 256 * 1024 + 1};
  errno = 0;
  CHECK(ibv_alloc_dm(b->ctx, &big) == NULL && errno == EINVAL);
  struct ibv_alloc_dm_attr masked = {.length = 64, .comp_mask = 1};
  errno = 0;
  CHECK(ibv_alloc_dm(b->ctx, &masked) == NULL && errno == EINVAL);

  char pattern[64];
  memset(pattern, 0x11, sizeof pattern);
  CHECK(ibv_memcpy_to_dm(dm, 0, pattern, sizeof pattern) == 0);
  CHECK(ibv_memcpy_to_dm(dm, 4090, pattern, 7) == EFAULT);
  /* Offsets and lengths in multiples of 4 (mlx5's rule, which pyverbs' DM tests expect). */
  CHECK(ibv_memcpy_to_dm(dm, 1, pattern, 4) == EINVAL);
  CHECK(ibv_memcpy_to_dm(dm, 0, pattern, 6) == EINVAL);
  CHECK(ibv_memcpy_from_dm(pattern, dm, 2, 4) == EINVAL);
  CHECK(ibv_memcpy_from_dm(pattern, dm, 0, 3) == EINVAL);
  /* Length 0 registers, as on mlx5: a key over nothing. */
  struct ibv_mr* empty =
      ibv_reg_dm_mr(b->pd, dm, 0, 0, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE);
  CHECK(empty != NULL);
  if (empty) {
    CHECK(empty->length == 0);
    CHECK(ibv_dereg_mr(empty) == 0);
  }
  errno = 0; /* without IBV_ACCESS_ZERO_BASED */
  CHECK(ibv_reg_dm_mr(b->pd, dm, 0, 4096, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL);
  struct ibv_mr* mr = ibv_reg_dm_mr(b->pd, dm, 512, 2048,
                                    IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
                                        IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECK(mr != NULL);
  if (mr) {
    CHECK(mr->addr == NULL && mr->length == 2048);
    CHECK(ibv_free_dm(dm) == EBUSY);
    for (int i = 0; i < 1000; ++i) a->buf[i] = (char)(i * 3 + 1);
    /* Zero-based: the remote address is an offset into the MR. */
    CHECK(rdma(a, IBV_WR_RDMA_WRITE, a->buf, 1000, a->mr->lkey, 24, mr->rkey) == IBV_WC_SUCCESS);
    char back[1000];
    CHECK(ibv_memcpy_from_dm(back, dm, 512 + 24, sizeof back) == 0);
    CHECK(memcmp(back, a->buf, sizeof back) == 0);
    CHECK(ibv_memcpy_from_dm(back, dm, 0, 64) == 0 && back[0] == 0x11);
    CHECK(ibv_dereg_mr(mr) == 0);
  }
  CHECK(ibv_free_dm(dm) == 0);
}

static void check_resize(struct end* a) {
  struct ibv_cq* cq = ibv_create_cq(a->ctx, 4, NULL, NULL, 0);
  CHECK(cq != NULL);
  if (!cq) return;
  CHECK(cq->cqe == 4);
  /* Queue completions through a QP on it: flushed receives of a QP moved to ERR. */
  struct ibv_qp_init_attr ia = {
      .send_cq = cq,
      .recv_cq = cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* qp = ibv_create_qp(a->pd, &ia);
  CHECK(qp != NULL);
  if (!qp) return;
  struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT, .port_num = 1};
  CHECK(ibv_modify_qp(qp, &qa,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  struct ibv_sge sge = {.addr = (uintptr_t)a->buf, .length = 16, .lkey = a->mr->lkey};
  for (uint64_t i = 0; i < 3; ++i) {
    struct ibv_recv_wr rwr = {.wr_id = 10 + i, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr* bad = NULL;
    CHECK(ibv_post_recv(qp, &rwr, &bad) == 0);
  }
  qa.qp_state = IBV_QPS_ERR;
  CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE) == 0);
  /* No wait: the resize counts the flushes the NIC owes for the QP just moved to ERR. */
  CHECK(ibv_resize_cq(cq, 2) == EINVAL); /* fewer than the three queued */
  CHECK(ibv_resize_cq(cq, 0) == EINVAL);
  CHECK(ibv_resize_cq(cq, 100) == 0 && cq->cqe == 128);
  CHECK(ibv_resize_cq(cq, 3) == 0 && cq->cqe == 4);
  struct ibv_wc wc[8];
  int n = ibv_poll_cq(cq, 8, wc);
  CHECK(n == 3);
  for (int i = 0; i < n; ++i)
    CHECK(wc[i].wr_id == 10u + (unsigned)i && wc[i].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

/* pyverbs' test_resize_cq: signaled UD sends posted and the CQ shrunk at once. A hardware NIC has
 * completed them by then; uroce's resize runs the progress passes they wait for first. More sends
 * than one pass's packet budget, so the pass a post runs inline cannot have finished them. */
static void check_resize_after_ud_sends(struct end* a) {
  enum { kSends = 600 };
  struct ibv_cq* cq = ibv_create_cq(a->ctx, 1024, NULL, NULL, 0);
  CHECK(cq != NULL);
  if (!cq) return;
  struct ibv_qp_init_attr ia = {
      .send_cq = cq,
      .recv_cq = cq,
      .qp_type = IBV_QPT_UD,
      .cap = {.max_send_wr = kSends, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* qp = ibv_create_qp(a->pd, &ia);
  CHECK(qp != NULL);
  if (!qp) return;
  struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111};
  CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
  qa.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE) == 0);
  qa.qp_state = IBV_QPS_RTS;
  qa.sq_psn = 0;
  CHECK(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
  /* To this device's own address and a QP number nobody has: the receiver drops them. */
  struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = a->gid, .hop_limit = 64}};
  struct ibv_ah* ah = ibv_create_ah(a->pd, &aa);
  CHECK(ah != NULL);
  if (!ah) return;
  struct ibv_sge sge = {.addr = (uintptr_t)a->buf, .length = 8, .lkey = a->mr->lkey};
  static struct ibv_send_wr wrs[kSends];
  for (int i = 0; i < kSends; ++i) {
    wrs[i] = (struct ibv_send_wr){.wr_id = (uint64_t)i,
                                  .next = i + 1 < kSends ? &wrs[i + 1] : NULL,
                                  .sg_list = &sge,
                                  .num_sge = 1,
                                  .opcode = IBV_WR_SEND,
                                  .send_flags = IBV_SEND_SIGNALED,
                                  .wr.ud = {.ah = ah, .remote_qpn = 0xabcde, .remote_qkey = 1}};
  }
  struct ibv_send_wr* bad = NULL;
  CHECK(ibv_post_send(qp, &wrs[0], &bad) == 0);
  CHECK(ibv_resize_cq(cq, kSends - 1) == EINVAL); /* all kSends are queued */
  struct ibv_wc wc[64];
  int polled = 0, ok = 0;
  for (int n; (n = ibv_poll_cq(cq, 64, wc)) > 0; polled += n)
    for (int i = 0; i < n; ++i)
      ok += wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)(polled + i);
  CHECK(polled == kSends && ok == kSends);
  CHECK(ibv_destroy_qp(qp) == 0);
  CHECK(ibv_destroy_ah(ah) == 0);
  CHECK(ibv_destroy_cq(cq) == 0);
}

int main(void) {
  struct end a, b;
  if (setup_end(&a, "uroce0") || setup_end(&b, "uroce1")) return 1;
  if (connect_qp(&a, &b) || connect_qp(&b, &a)) return 1;
  check_caps(b.ctx);
  check_odp(&a, &b);
  check_qp_takes_mr_access_flags(&b);
  check_dm(&a, &b);
  check_resize(&a);
  check_resize_after_ud_sends(&a);
  CHECK(ibv_close_device(a.ctx) == 0);
  CHECK(ibv_close_device(b.ctx) == 0);
  free(a.buf);
  free(b.buf);
  if (failures) fprintf(stderr, "%d checks failed\n", failures);
  return failures ? 1 : 0;
}
