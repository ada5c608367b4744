/* Checks the drop-in libibverbs through its C ABI, the way verbs programs use it: compiled
 * against Debian's <infiniband/verbs.h>, so the inline wrappers (ibv_query_port,
 * ibv_query_device_ex, ibv_create_flow, ...) go through the verbs_context exactly as in a tool.
 * Run with UROCE_DEVICES="uroce0=127.0.3.6,uroce7=127.0.3.7". Exits non-zero on the first
 * failed check. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* From rdma-core's infiniband/driver.h (not installed here): private calls the library exports. */
int ibv_query_gid_type(struct ibv_context* context, uint8_t port_num, unsigned int index,
                       int* type);
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);

/* Exported by libibverbs but declared in rdma-core's driver.h, which Debian does not ship. */
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);
const char* ibv_get_sysfs_path(void);

static int failures;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static void on_alarm(int sig) {
  (void)sig;
}

static struct ibv_context* open_named(const char* name) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  struct ibv_context* ctx = NULL;
  CHECK(list != NULL);
  if (!list) return NULL;
  for (int i = 0; i < n; ++i) {
    if (strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
  }
  ibv_free_device_list(list);
  return ctx;
}

static void check_device_list(void) {
  int n = -1;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list != NULL);
  CHECK(n == 2);
  if (!list || n != 2) return;
  CHECK(strcmp(ibv_get_device_name(list[0]), "uroce0") == 0);
  CHECK(strcmp(ibv_get_device_name(list[1]), "uroce7") == 0);
  CHECK(list[2] == NULL);
  CHECK(list[0]->transport_type == IBV_TRANSPORT_IB);
  CHECK(list[0]->node_type == IBV_NODE_CA);
  CHECK(ibv_get_device_guid(list[0]) != ibv_get_device_guid(list[1]));
  char buf[64];
  CHECK(ibv_read_sysfs_file(list[0]->ibdev_path, "board_id", buf, sizeof buf) > 0);
  /* rdma-core builds ibdev_path as <sysfs path>/class/infiniband/<name>; the same holds here, so
   * a program that builds the path itself reaches the attributes ibv_read_sysfs_file answers. */
  const char* sysfs = ibv_get_sysfs_path();
  CHECK(sysfs != NULL && strcmp(sysfs, "/uroce") == 0);
  if (sysfs) {
    char dir[IBV_SYSFS_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/class/infiniband/%s", sysfs, ibv_get_device_name(list[1]));
    CHECK(strcmp(dir, list[1]->ibdev_path) == 0);
    CHECK(ibv_read_sysfs_file(dir, "board_id", buf, sizeof buf) == 5);
    CHECK(strcmp(buf, "uroce") == 0);
  }
  ibv_free_device_list(list);
}

/* ibv_init_ah_from_wc reads the three layouts a UD receive's GRH area can have: RoCEv2 over IPv4
 * (20 zero bytes, the IPv4 header), RoCEv2 over IPv6 (next header UDP) and RoCE v1 (a GRH, next
 * header 0x1B), and answers the GID index of the same version (0 v2, 1 v1). */
static void check_init_ah_from_wc(struct ibv_context* ctx) {
  struct ibv_wc wc;
  memset(&wc, 0, sizeof wc);
  wc.wc_flags = IBV_WC_GRH;
  struct ibv_grh grh;
  struct ibv_ah_attr ah;
  static const uint8_t peer[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 64, 1, 2, 3};

  memset(&grh, 0, sizeof grh); /* IPv4, a source address whose first nibble is 4 */
  uint8_t* raw = (uint8_t*)&grh;
  raw[20] = 0x45;
  raw[21] = 0x20;
  memcpy(raw + 20 + 12, peer + 12, 4);
  CHECK(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah) == 0);
  CHECK(ah.grh.sgid_index == 0 && ah.is_global == 1 && ah.grh.traffic_class == 0x20);
  CHECK(memcmp(ah.grh.dgid.raw, peer, 16) == 0);

  memset(&grh, 0, sizeof grh); /* RoCE v1 from the same IPv4-mapped GID */
  grh.version_tclass_flow = htonl(6u << 28 | 0x20u << 20 | 0x12345);
  grh.next_hdr = 0x1b;
  memcpy(grh.sgid.raw, peer, 16);
  CHECK(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah) == 0);
  CHECK(ah.grh.sgid_index == 1 && ah.grh.flow_label == 0x12345 && ah.grh.traffic_class == 0x20);
  CHECK(memcmp(ah.grh.dgid.raw, peer, 16) == 0);

  grh.next_hdr = 17; /* RoCEv2 over IPv6 */
  CHECK(ibv_init_ah_from_wc(ctx, 1, &wc, &grh, &ah) == 0);
  CHECK(ah.grh.sgid_index == 0);
}

static void check_queries(struct ibv_context* ctx) {
  /* The extended context: abi_compat marks it, sz covers every op up to query_port. */
  struct verbs_context* vctx = verbs_get_ctx(ctx);
  CHECK(vctx != NULL);
  if (vctx) CHECK(vctx->sz >= sizeof(*vctx) - offsetof(struct verbs_context, query_port));

  struct ibv_device_attr attr;
  CHECK(ibv_query_device(ctx, &attr) == 0);
  CHECK(attr.phys_port_cnt == 1);
  CHECK(attr.max_qp > 0 && attr.max_cqe > 0 && attr.max_sge > 0);

  struct ibv_device_attr_ex attr_ex;
  memset(&attr_ex, 0xa5, sizeof attr_ex);
  CHECK(ibv_query_device_ex(ctx, NULL, &attr_ex) == 0);
  CHECK(attr_ex.orig_attr.max_qp == attr.max_qp);
  CHECK(attr_ex.max_dm_size == 256 * 1024); /* device memory in host memory (abi_memory_check.c) */
  CHECK(attr_ex.phys_port_cnt_ex == 1);

  struct ibv_port_attr port;
  memset(&port, 0xa5, sizeof port);
  CHECK(ibv_query_port(ctx, 1, &port) == 0);
  CHECK(port.state == IBV_PORT_ACTIVE);
  CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(port.gid_tbl_len >= 1);
  CHECK(port.port_cap_flags2 == 0); /* written, not left as 0xa5a5 */
  CHECK(ibv_query_port(ctx, 2, &port) == EINVAL);

  union ibv_gid gid;
  CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
  static const uint8_t want[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 3, 7};
  CHECK(memcmp(gid.raw, want, 16) == 0);
  CHECK(ibv_query_gid(ctx, 1, port.gid_tbl_len, &gid) != 0);

  /* Two entries of the same GID: 0 RoCEv2, 1 RoCE v1 (docs/ibverbs.md, "GID table"). */
  CHECK(port.gid_tbl_len == 2);
  CHECK(ibv_query_gid(ctx, 1, 1, &gid) == 0);
  CHECK(memcmp(gid.raw, want, 16) == 0);
  struct ibv_gid_entry entry;
  CHECK(ibv_query_gid_ex(ctx, 1, 0, &entry, 0) == 0);
  CHECK(entry.gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(memcmp(entry.gid.raw, want, 16) == 0);
  CHECK(ibv_query_gid_ex(ctx, 1, 1, &entry, 0) == 0);
  CHECK(entry.gid_type == IBV_GID_TYPE_ROCE_V1);
  CHECK(entry.gid_index == 1);
  CHECK(memcmp(entry.gid.raw, want, 16) == 0);
  CHECK(ibv_query_gid_ex(ctx, 1, 2, &entry, 0) == EINVAL);
  struct ibv_gid_entry table[4];
  memset(table, 0, sizeof table);
  CHECK(ibv_query_gid_table(ctx, table, 4, 0) == 2);
  CHECK(table[0].gid_index == 0 && table[0].gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(table[1].gid_index == 1 && table[1].gid_type == IBV_GID_TYPE_ROCE_V1);
  CHECK(ibv_query_gid_table(ctx, table, 1, 0) == -EINVAL);
  /* The private call ibv_devinfo and pyverbs use: enum ibv_gid_type_sysfs, 0 = IB/RoCE v1. */
  int gid_type = -1;
  CHECK(ibv_query_gid_type(ctx, 1, 0, &gid_type) == 0 && gid_type == 1);
  CHECK(ibv_query_gid_type(ctx, 1, 1, &gid_type) == 0 && gid_type == 0);
  CHECK(ibv_query_gid_type(ctx, 1, 2, &gid_type) == EINVAL);
  char sysfs[64];
  CHECK(ibv_read_sysfs_file(ctx->device->ibdev_path, "ports/1/gid_attrs/types/0", sysfs,
                            sizeof sysfs) > 0 &&
        strcmp(sysfs, "RoCE v2") == 0);
  CHECK(ibv_read_sysfs_file(ctx->device->ibdev_path, "ports/1/gid_attrs/types/1", sysfs,
                            sizeof sysfs) > 0 &&
        strcmp(sysfs, "IB/RoCE v1") == 0);
  CHECK(ibv_read_sysfs_file(ctx->device->ibdev_path, "ports/1/gid_attrs/types/2", sysfs,
                            sizeof sysfs) < 0);

  __be16 pkey = 0;
  CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0);
  CHECK(pkey == htobe16(0xffff));
  CHECK(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)) == 0);
}

static void check_comp_channel(struct ibv_context* ctx) {
  struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  CHECK(ch != NULL);
  if (!ch) return;
  CHECK(ch->fd >= 0);

  /* A real fd: poll() on it times out while no event is queued. */
  struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
  CHECK(poll(&pfd, 1, 10) == 0);

  /* A signal interrupts a blocking ibv_get_cq_event with EINTR (qperf relies on this). */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm; /* no SA_RESTART */
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {.it_value = {.tv_sec = 0, .tv_usec = 50000}};
  setitimer(ITIMER_REAL, &it, NULL);
  struct ibv_cq* cq = NULL;
  void* cq_ctx = NULL;
  errno = 0;
  CHECK(ibv_get_cq_event(ch, &cq, &cq_ctx) == -1);
  if (errno != EINTR) fprintf(stderr, "errno %d (%s)\n", errno, strerror(errno));
  CHECK(errno == EINTR);

  /* Nonblocking, as programs that poll() the fd set it: EAGAIN when empty. */
  CHECK(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) == 0);
  errno = 0;
  CHECK(ibv_get_cq_event(ch, &cq, &cq_ctx) == -1);
  CHECK(errno == EAGAIN);

  CHECK(ibv_destroy_comp_channel(ch) == 0);
}

static void check_async_fd(struct ibv_context* ctx) {
  CHECK(ctx->async_fd >= 0);
  CHECK(fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK) == 0);
  struct ibv_async_event ev;
  errno = 0;
  CHECK(ibv_get_async_event(ctx, &ev) == -1);
  CHECK(errno == EAGAIN);
}

static void check_unsupported(struct ibv_context* ctx) {
  /* Extended verbs uroce does not offer answer like rdma-core's defaults: NULL + errno. */
  struct ibv_qp_open_attr oattr = {0};
  errno = 0;
  CHECK(ibv_open_qp(ctx, &oattr) == NULL);
  CHECK(errno == EOPNOTSUPP);
  /* XRC domains are offered: without FD and OFLAGS the attributes are EINVAL (as rdma-core's
   * ibv_cmd_open_xrcd); fd -1 with O_CREAT opens a domain of its own. */
  struct ibv_xrcd_init_attr xattr = {0};
  errno = 0;
  CHECK(ibv_open_xrcd(ctx, &xattr) == NULL);
  CHECK(errno == EINVAL);
  xattr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  xattr.fd = -1;
  xattr.oflags = O_CREAT;
  struct ibv_xrcd* xrcd = ibv_open_xrcd(ctx, &xattr);
  CHECK(xrcd != NULL);
  if (xrcd) CHECK(ibv_close_xrcd(xrcd) == 0);
  /* Thread domains are offered (tests/abi checks them with parent domains). */
  struct ibv_td_init_attr tattr = {0};
  struct ibv_td* td = ibv_alloc_td(ctx, &tattr);
  CHECK(td != NULL);
  if (td) CHECK(ibv_dealloc_td(td) == 0);
  /* cmd_fd is a real fd of the context's own, which programs dup to import the context; import
   * is not offered (EOPNOTSUPP, as on rxe), so pyverbs' import tests skip. */
  CHECK(ctx->cmd_fd >= 0 && ctx->cmd_fd != ctx->async_fd);
  int cmd_fd_dup = dup(ctx->cmd_fd);
  CHECK(cmd_fd_dup >= 0);
  errno = 0;
  CHECK(ibv_import_device(cmd_fd_dup) == NULL && errno == EOPNOTSUPP);
  if (cmd_fd_dup >= 0) close(cmd_fd_dup);

  /* ibv_rereg_mr: rdma-core's codes (bad arguments IBV_REREG_MR_ERR_INPUT with EINVAL, a change
   * the device refuses IBV_REREG_MR_ERR_CMD with its errno); a change keeps lkey and rkey and
   * updates the ibv_mr's pd, addr and length. */
  struct ibv_pd* pd = ibv_alloc_pd(ctx);
  struct ibv_pd* pd2 = ibv_alloc_pd(ctx);
  CHECK(pd != NULL && pd2 != NULL);
  char region[64], region2[32];
  struct ibv_mr* mr = pd ? ibv_reg_mr(pd, region, sizeof region, IBV_ACCESS_LOCAL_WRITE) : NULL;
  CHECK(mr != NULL);
  if (mr && pd2) {
    const uint32_t lkey = mr->lkey, rkey = mr->rkey;
    errno = 0;
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_FLAGS_SUPPORTED + 1, NULL, NULL, 0, 0) ==
          IBV_REREG_MR_ERR_INPUT);
    CHECK(errno == EINVAL);
    errno = 0; /* access without IBV_REREG_MR_CHANGE_ACCESS */
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, IBV_ACCESS_LOCAL_WRITE) ==
          IBV_REREG_MR_ERR_INPUT);
    CHECK(errno == EINVAL);
    errno = 0; /* a new translation needs an address and a length */
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 0, 0) ==
          IBV_REREG_MR_ERR_INPUT);
    CHECK(errno == EINVAL);
    errno = 0; /* remote write without local write: refused as ibv_reg_mr refuses it */
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE) ==
          IBV_REREG_MR_ERR_CMD);
    CHECK(errno == EINVAL);
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) == 0);
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_TRANSLATION, pd2, region2,
                       sizeof region2, 0) == 0);
    CHECK(mr->pd == pd2 && mr->addr == region2 && mr->length == sizeof region2);
    CHECK(mr->lkey == lkey && mr->rkey == rkey);
    CHECK(ibv_dealloc_pd(pd2) == EBUSY); /* the MR lies in it now */
    CHECK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, 0) == 0);
    CHECK(mr->pd == pd && mr->addr == region2);
    CHECK(ibv_dereg_mr(mr) == 0);
  }
  if (pd2) CHECK(ibv_dealloc_pd(pd2) == 0);
  if (pd) CHECK(ibv_dealloc_pd(pd) == 0);
  CHECK(ibv_resize_cq(NULL, 1) == EINVAL);
  CHECK(ibv_attach_mcast(NULL, NULL, 0) == EINVAL);
}

/* ---- Data path between two devices in this process (uroce0 and uroce7) ---- */

struct end {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_comp_channel* ch;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  struct ibv_mr* mr;
  char* buf;
  union ibv_gid gid;
};

enum { kBuf = 8192 };

static int setup_end(struct end* e, const char* name) {
  memset(e, 0, sizeof *e);
  e->ctx = open_named(name);
  CHECK(e->ctx != NULL);
  if (!e->ctx) return -1;
  e->pd = ibv_alloc_pd(e->ctx);
  e->ch = ibv_create_comp_channel(e->ctx);
  CHECK(e->pd && e->ch);
  if (!e->pd || !e->ch) return -1;
  if (strcmp(name, "uroce7") == 0) {
    /* The extended CQ (verbs_context create_cq_ex), polled with ibv_start_poll below. */
    struct ibv_cq_init_attr_ex ca = {
        .cqe = 16, .cq_context = e, .channel = e->ch, .wc_flags = IBV_WC_STANDARD_FLAGS};
    struct ibv_cq_ex* cq_ex = ibv_create_cq_ex(e->ctx, &ca);
    CHECK(cq_ex != NULL);
    e->cq = cq_ex ? ibv_cq_ex_to_cq(cq_ex) : NULL;
    ca.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    errno = 0;
    CHECK(ibv_create_cq_ex(e->ctx, &ca) == NULL && errno == EOPNOTSUPP);
  } else {
    e->cq = ibv_create_cq(e->ctx, 16, e, e->ch, 0);
  }
  CHECK(e->cq != NULL && e->cq->cqe >= 16);
  e->buf = calloc(1, kBuf);
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  e->mr = ibv_reg_mr(e->pd, e->buf, kBuf, access);
  CHECK(e->mr != NULL);
  struct ibv_qp_init_attr ia = {
      .send_cq = e->cq,
      .recv_cq = e->cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
  e->qp = ibv_create_qp(e->pd, &ia);
  CHECK(e->qp != NULL);
  if (!e->cq || !e->mr || !e->qp) return -1;
  CHECK(ia.cap.max_send_wr >= 8);
  CHECK(ibv_query_gid(e->ctx, 1, 0, &e->gid) == 0);
  return 0;
}

static int connect_qp(struct end* e, const struct end* peer) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  int rc = ibv_modify_qp(e->qp, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  CHECK(rc == 0);
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
  a.ah_attr.grh.flow_label = 0xffffffff; /* UCX passes ~0: the low 20 bits count */
  a.ah_attr.port_num = 1;
  rc |= ibv_modify_qp(e->qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  CHECK(rc == 0);
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
  CHECK(e->qp->state == IBV_QPS_RTS);
  struct ibv_qp_init_attr ia;
  CHECK(ibv_query_qp(e->qp, &a, IBV_QP_AV, &ia) == 0);
  CHECK(a.ah_attr.grh.flow_label == 0xfffff);
  return rc;
}

/* Waits for one completion through the completion channel: arm, poll (a completion may have
 * arrived before the arm), else block in ibv_get_cq_event (bounded by an alarm). */
static int wait_one(struct end* e, struct ibv_wc* wc) {
  for (int round = 0; round < 100; ++round) {
    CHECK(ibv_req_notify_cq(e->cq, 0) == 0);
    int n = ibv_poll_cq(e->cq, 1, wc);
    if (n != 0) return n;
    struct pollfd pfd = {.fd = e->ch->fd, .events = POLLIN};
    if (poll(&pfd, 1, 100) == 1) {
      struct ibv_cq* cq = NULL;
      void* cq_ctx = NULL;
      CHECK(ibv_get_cq_event(e->ch, &cq, &cq_ctx) == 0);
      CHECK(cq == e->cq && cq_ctx == e);
      ibv_ack_cq_events(cq, 1);
    }
  }
  return 0;
}

/* Memory windows between connected ends: b binds a type 2 window on its QP, a writes through it
 * and closes it with SEND with Invalidate; a type 1 window through ibv_bind_mw serves a READ. */
static void check_memory_windows(struct end* a, struct end* b) {
  struct ibv_device_attr attr;
  CHECK(ibv_query_device(b->ctx, &attr) == 0);
  CHECK(attr.max_mw > 0);
  CHECK(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  CHECK(attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  CHECK(attr.device_cap_flags & IBV_DEVICE_XRC);
  char* region = b->buf + 6144;
  struct ibv_mr* mr = ibv_reg_mr(b->pd, region, 1024, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  struct ibv_mw* mw = ibv_alloc_mw(b->pd, IBV_MW_TYPE_2);
  CHECK(mr != NULL && mw != NULL);
  if (!mr || !mw) return;
  CHECK(mw->type == IBV_MW_TYPE_2 && mw->pd == b->pd);
  const uint32_t key = ibv_inc_rkey(mw->rkey);
  struct ibv_send_wr bind = {
      .wr_id = 30, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED};
  bind.bind_mw.mw = mw;
  bind.bind_mw.rkey = key;
  /* LOCAL_WRITE among a window's rights is accepted and ignored, as by rdma-core's devices
   * (pyverbs passes it). */
  bind.bind_mw.bind_info = (struct ibv_mw_bind_info){
      .mr = mr,
      .addr = (uintptr_t)region + 256,
      .length = 512,
      .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
  struct ibv_send_wr* bad = NULL;
  CHECK(ibv_post_send(b->qp, &bind, &bad) == 0);
  struct ibv_wc wc;
  CHECK(wait_one(b, &wc) == 1);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 30);
  CHECK(ibv_dereg_mr(mr) == EBUSY); /* a window is bound to it */

  for (int i = 0; i < 512; ++i) a->buf[i] = (char)(i * 13 + 5);
  struct ibv_sge sge = {.addr = (uintptr_t)a->buf, .length = 512, .lkey = a->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 31,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED};
  wr.wr.rdma.remote_addr = (uintptr_t)region + 256;
  wr.wr.rdma.rkey = key;
  CHECK(ibv_post_send(a->qp, &wr, &bad) == 0);
  CHECK(wait_one(a, &wc) == 1);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 31);
  CHECK(memcmp(a->buf, region + 256, 512) == 0);

  struct ibv_sge rsge = {.addr = (uintptr_t)b->buf, .length = 64, .lkey = b->mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 32, .sg_list = &rsge, .num_sge = 1};
  struct ibv_recv_wr* rbad = NULL;
  CHECK(ibv_post_recv(b->qp, &rwr, &rbad) == 0);
  sge.length = 8;
  wr.wr_id = 33;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.invalidate_rkey = key;
  CHECK(ibv_post_send(a->qp, &wr, &bad) == 0);
  CHECK(wait_one(b, &wc) == 1);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 32 && (wc.wc_flags & IBV_WC_WITH_INV));
  CHECK(wc.invalidated_rkey == key);
  CHECK(wait_one(a, &wc) == 1);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 33);

  /* Type 1: ibv_bind_mw posts the bind and gives the window its next key. */
  struct ibv_mw* mw1 = ibv_alloc_mw(b->pd, IBV_MW_TYPE_1);
  CHECK(mw1 != NULL);
  if (mw1) {
    const uint32_t before = mw1->rkey;
    struct ibv_mw_bind mb = {.wr_id = 34,
                             .send_flags = IBV_SEND_SIGNALED,
                             .bind_info = {.mr = mr,
                                           .addr = (uintptr_t)region,
                                           .length = 1024,
                                           .mw_access_flags = IBV_ACCESS_REMOTE_READ}};
    CHECK(ibv_bind_mw(b->qp, mw1, &mb) == 0);
    CHECK(mw1->rkey == ibv_inc_rkey(before));
    CHECK(wait_one(b, &wc) == 1);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 34);
    CHECK(ibv_bind_mw(b->qp, mw, &mb) == EINVAL); /* type 2 binds through ibv_post_send */
    sge.length = 1024;
    wr.wr_id = 35;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = (uintptr_t)region;
    wr.wr.rdma.rkey = mw1->rkey;
    CHECK(ibv_post_send(a->qp, &wr, &bad) == 0);
    CHECK(wait_one(a, &wc) == 1);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 35);
    CHECK(memcmp(a->buf, region, 1024) == 0);
    CHECK(ibv_dealloc_mw(mw1) == 0);
  }
  CHECK(ibv_dealloc_mw(mw) == 0);
  CHECK(ibv_dereg_mr(mr) == 0);
}

static void check_data_path(void) {
  struct end a, b;
  if (setup_end(&a, "uroce0") || setup_end(&b, "uroce7")) return;
  if (connect_qp(&a, &b) || connect_qp(&b, &a)) return;

  /* RDMA WRITE a -> b, then SEND with immediate a -> b into a posted receive. */
  for (int i = 0; i < 4096; ++i) a.buf[i] = (char)(i * 7 + 1);
  struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = 4096, .lkey = a.mr->lkey};
  struct ibv_send_wr wr = {.wr_id = 1,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_RDMA_WRITE,
                           .send_flags = IBV_SEND_SIGNALED};
  wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
  wr.wr.rdma.rkey = b.mr->rkey;
  struct ibv_send_wr* bad = NULL;
  CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
  struct ibv_wc wc;
  CHECK(wait_one(&a, &wc) == 1);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE && wc.wr_id == 1);
  CHECK(memcmp(a.buf, b.buf, 4096) == 0);

  struct ibv_sge rsge = {.addr = (uintptr_t)(b.buf + 4096), .length = 4096, .lkey = b.mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 7, .sg_list = &rsge, .num_sge = 1};
  struct ibv_recv_wr* rbad = NULL;
  CHECK(ibv_post_recv(b.qp, &rwr, &rbad) == 0);
  sge.length = 100;
  wr.wr_id = 2;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htobe32(0x12345678);
  CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
  /* b's CQ is extended: read the receive through ibv_start_poll and ibv_wc_read_*. */
  struct ibv_cq_ex* bx = (struct ibv_cq_ex*)b.cq;
  struct ibv_poll_cq_attr pa = {0};
  int rc = ENOENT;
  for (int i = 0; i < 2000 && rc == ENOENT; ++i) {
    rc = ibv_start_poll(bx, &pa);
    if (rc == ENOENT) usleep(1000);
  }
  CHECK(rc == 0);
  if (rc == 0) {
    CHECK(bx->status == IBV_WC_SUCCESS && bx->wr_id == 7);
    CHECK(ibv_wc_read_opcode(bx) == IBV_WC_RECV);
    CHECK(ibv_wc_read_byte_len(bx) == 100);
    CHECK(ibv_wc_read_wc_flags(bx) & IBV_WC_WITH_IMM);
    CHECK(ibv_wc_read_imm_data(bx) == htobe32(0x12345678));
    CHECK(ibv_wc_read_qp_num(bx) == b.qp->qp_num);
    CHECK(ibv_next_poll(bx) == ENOENT);
    ibv_end_poll(bx);
  }
  CHECK(memcmp(a.buf, b.buf + 4096, 100) == 0);
  CHECK(wait_one(&a, &wc) == 1);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND && wc.wr_id == 2);

  check_memory_windows(&a, &b);

  /* A bad work request is refused with *bad_wr pointing at it. */
  wr.num_sge = 99;
  bad = NULL;
  CHECK(ibv_post_send(a.qp, &wr, &bad) == EINVAL && bad == &wr);

  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr qia;
  CHECK(ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qia) == 0);
  CHECK(qa.qp_state == IBV_QPS_RTS && qa.dest_qp_num == b.qp->qp_num);
  CHECK(qia.send_cq == a.cq && qia.qp_type == IBV_QPT_RC);

  /* Destroy order is the program's business: a PD with a QP is busy, a channel with a CQ too. */
  CHECK(ibv_dealloc_pd(a.pd) == EBUSY);
  CHECK(ibv_destroy_comp_channel(a.ch) == EBUSY);
  CHECK(ibv_destroy_qp(a.qp) == 0);
  CHECK(ibv_dereg_mr(a.mr) == 0);
  CHECK(ibv_destroy_cq(a.cq) == 0);
  CHECK(ibv_destroy_comp_channel(a.ch) == 0);
  CHECK(ibv_dealloc_pd(a.pd) == 0);
  CHECK(ibv_close_device(a.ctx) == 0);
  /* And closing a context with everything still open reclaims it all, as the kernel does. */
  CHECK(ibv_close_device(b.ctx) == 0);
  free(a.buf);
  free(b.buf);
}

/* UD between the two devices over 127.0.3.x: a QP made through ibv_create_qp_ex with
 * IBV_QP_INIT_ATTR_CREATE_FLAGS, an AH whose flow label is ~0, and a receive whose wc.sl names
 * the L3 header in the 40-byte GRH area as mlx5 does (bit 3: UDP, i.e. RoCEv2; bits 2:0: L3
 * header type, 2 for IPv4). */
enum { kUdQkey = 0x11111111, kUdPayload = 64, kWcSlRoceV2Ipv4 = 0x8 | 0x2 };

static struct ibv_qp* create_ud_qp(struct ibv_pd* pd, struct ibv_cq* cq) {
  struct ibv_qp_init_attr_ex ia = {
      .send_cq = cq,
      .recv_cq = cq,
      .qp_type = IBV_QPT_UD,
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
      .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
      .pd = pd,
      .create_flags = IBV_QP_CREATE_SCATTER_FCS};
  errno = 0;
  CHECK(ibv_create_qp_ex(pd->context, &ia) == NULL); /* a flag uroce cannot honour */
  CHECK(errno == EOPNOTSUPP);
  ia.create_flags = 0;
  struct ibv_qp* qp = ibv_create_qp_ex(pd->context, &ia);
  CHECK(qp != NULL);
  if (!qp) return NULL;
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = kUdQkey};
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
  a.qp_state = IBV_QPS_RTR;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 7;
  CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
  return qp;
}

static void check_ud(void) {
  struct ibv_context* ctx[2] = {open_named("uroce0"), open_named("uroce7")};
  CHECK(ctx[0] && ctx[1]);
  if (!ctx[0] || !ctx[1]) return;
  struct ibv_pd* pd[2];
  struct ibv_cq* cq[2];
  struct ibv_qp* qp[2];
  for (int i = 0; i < 2; ++i) {
    pd[i] = ibv_alloc_pd(ctx[i]);
    cq[i] = ibv_create_cq(ctx[i], 8, NULL, NULL, 0);
    CHECK(pd[i] && cq[i]);
    if (!pd[i] || !cq[i]) return;
    qp[i] = create_ud_qp(pd[i], cq[i]);
    if (!qp[i]) return;
  }
  static char send_buf[kUdPayload], recv_buf[40 + kUdPayload];
  for (int i = 0; i < kUdPayload; ++i) send_buf[i] = (char)(i * 3 + 1);
  struct ibv_mr* smr = ibv_reg_mr(pd[0], send_buf, sizeof send_buf, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr* rmr = ibv_reg_mr(pd[1], recv_buf, sizeof recv_buf, IBV_ACCESS_LOCAL_WRITE);
  CHECK(smr && rmr);
  struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
  CHECK(ibv_query_gid(ctx[1], 1, 0, &aa.grh.dgid) == 0);
  aa.grh.hop_limit = 64;
  aa.grh.flow_label = 0xffffffff; /* UCX passes ~0: the low 20 bits count */
  struct ibv_ah* ah = ibv_create_ah(pd[0], &aa);
  CHECK(ah != NULL);
  if (!smr || !rmr || !ah) return;

  struct ibv_sge rsge = {.addr = (uintptr_t)recv_buf, .length = sizeof recv_buf, .lkey = rmr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 40, .sg_list = &rsge, .num_sge = 1};
  struct ibv_recv_wr* rbad = NULL;
  CHECK(ibv_post_recv(qp[1], &rwr, &rbad) == 0);
  struct ibv_sge sge = {.addr = (uintptr_t)send_buf, .length = kUdPayload, .lkey = smr->lkey};
  struct ibv_send_wr wr = {.wr_id = 41,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_SIGNALED};
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = qp[1]->qp_num;
  wr.wr.ud.remote_qkey = kUdQkey;
  struct ibv_send_wr* bad = NULL;
  CHECK(ibv_post_send(qp[0], &wr, &bad) == 0);

  struct ibv_wc wc;
  int n = 0;
  for (int i = 0; i < 2000 && n == 0; ++i) {
    n = ibv_poll_cq(cq[1], 1, &wc);
    if (n == 0) usleep(1000);
  }
  CHECK(n == 1);
  if (n == 1) {
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == 40);
    CHECK(wc.byte_len == 40 + kUdPayload);
    CHECK(wc.wc_flags & IBV_WC_GRH);
    CHECK(wc.src_qp == qp[0]->qp_num);
    CHECK(wc.sl == kWcSlRoceV2Ipv4);
    CHECK(recv_buf[20] == 0x45); /* and the area does hold an IPv4 header, in its last 20 bytes */
    CHECK(memcmp(recv_buf + 40, send_buf, kUdPayload) == 0);
  }
  n = 0;
  for (int i = 0; i < 2000 && n == 0; ++i) {
    n = ibv_poll_cq(cq[0], 1, &wc);
    if (n == 0) usleep(1000);
  }
  CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 41);
  /* Closing the contexts reclaims the QPs, CQs, AH and MRs. */
  CHECK(ibv_close_device(ctx[0]) == 0);
  CHECK(ibv_close_device(ctx[1]) == 0);
}

int main(void) {
  check_device_list();
  struct ibv_context* ctx = open_named("uroce7");
  CHECK(ctx != NULL);
  if (!ctx) return 1;
  check_queries(ctx);
  check_init_ah_from_wc(ctx);
  check_comp_channel(ctx);
  check_async_fd(ctx);
  check_unsupported(ctx);
  CHECK(ibv_close_device(ctx) == 0);
  check_data_path();
  check_ud();
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}
