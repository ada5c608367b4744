/* Checks the drop-in libibverbs through its C ABI, the way verbs programs use it: compiled
 * against Debian's <infiniband/verbs.h>, so the inline wrappers (ibv_query_port,
 * ibv_query_device_ex, ibv_create_flow, ...) go through the verbs_context exactly as in a tool.
 * Run with UROCE_DEVICES="uroce0=127.0.0.1,uroce7=127.0.3.7". Exits non-zero on the first
 * failed check. */
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

/* Exported by libibverbs but declared in rdma-core's driver.h, which Debian does not ship. */
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);

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
  ibv_free_device_list(list);
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
  CHECK(attr_ex.max_dm_size == 0);

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

  struct ibv_gid_entry entry;
  CHECK(ibv_query_gid_ex(ctx, 1, 0, &entry, 0) == 0);
  CHECK(entry.gid_type == IBV_GID_TYPE_ROCE_V2);
  CHECK(memcmp(entry.gid.raw, want, 16) == 0);
  struct ibv_gid_entry table[4];
  CHECK(ibv_query_gid_table(ctx, table, 4, 0) == port.gid_tbl_len);

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
  struct ibv_xrcd_init_attr xattr = {0};
  errno = 0;
  CHECK(ibv_open_xrcd(ctx, &xattr) == NULL);
  CHECK(errno == EOPNOTSUPP || errno == ENOSYS);
  struct ibv_alloc_dm_attr dattr = {.length = 4096};
  errno = 0;
  CHECK(ibv_alloc_dm(ctx, &dattr) == NULL);
  CHECK(errno == EOPNOTSUPP || errno == ENOSYS);
  struct ibv_td_init_attr tattr = {0};
  errno = 0;
  CHECK(ibv_alloc_td(ctx, &tattr) == NULL);
  CHECK(errno == EOPNOTSUPP || errno == ENOSYS);
  CHECK(ibv_import_device(3) == NULL);
  CHECK(ibv_resize_cq(NULL, 1) == EOPNOTSUPP);
  CHECK(ibv_attach_mcast(NULL, NULL, 0) == EOPNOTSUPP);
}

int main(void) {
  check_device_list();
  struct ibv_context* ctx = open_named("uroce7");
  CHECK(ctx != NULL);
  if (!ctx) return 1;
  check_queries(ctx);
  check_comp_channel(ctx);
  check_async_fd(ctx);
  check_unsupported(ctx);
  CHECK(ibv_close_device(ctx) == 0);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}
