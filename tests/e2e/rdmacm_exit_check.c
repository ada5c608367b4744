// A program that exits right after rdma_disconnect or rdma_reject does not take the DREQ or REJ
// along (docs/cm.md, "The GSI QP"): the peer hears it at once, as from a kernel's CM, which sends
// it whatever the process does next. Two processes on two addresses of one host: this one (the
// peer, on its UROCE_DEVICES) and, each round, a child (this program again, run with the child's
// address as its device) that
//   - connects to the peer, waits until the peer is established too, calls rdma_disconnect and
//     _exit(0) (the last round exit(0)) at once: the peer must see DISCONNECTED;
//   - listens, calls rdma_reject on the peer's request and _exit(0) at once: the peer must see
//     REJECTED with reason 28 and the REJ's private data.
// The peer waits kPromptMs for each: a lost DREQ would leave it waiting for ever (nobody is left
// to retry it), a lost REJ until its REQ's retries are spent (the first resend alone comes after
// about 4.8 s), so the bound tells "sent" from "lost" without timing anything that is sent.
// Usage: rdmacm_exit_check PEER_ADDR CHILD_ADDR [disconnect|reject] (UROCE_DEVICES naming
// PEER_ADDR; both parts unless one is named).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { kPort = 7491, kRounds = 4, kPromptMs = 3000 };
static const char kRejectData[] = "not now";

#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #cond, errno); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

static struct sockaddr_in address(const char* ip, int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1);
  return a;
}

// The channel's next event, waiting at most `ms` (-1: for ever); NULL when none came.
static struct rdma_cm_event* event_within(struct rdma_event_channel* channel, int ms) {
  struct pollfd p = {.fd = channel->fd, .events = POLLIN};
  int r;
  do r = poll(&p, 1, ms);
  while (r < 0 && errno == EINTR);
  CHECK(r >= 0);
  if (r == 0) return NULL;
  struct rdma_cm_event* event = NULL;
  CHECK(rdma_get_cm_event(channel, &event) == 0);
  return event;
}

static struct rdma_cm_event* expect(struct rdma_event_channel* channel,
                                    enum rdma_cm_event_type want, int ms) {
  struct rdma_cm_event* event = event_within(channel, ms);
  if (event == NULL) {
    fprintf(stderr, "no %s within %d ms\n", rdma_event_str(want), ms);
    exit(1);
  }
  if (event->event != want) {
    fprintf(stderr, "event %s (status %d), expected %s\n", rdma_event_str(event->event),
            event->status, rdma_event_str(want));
    exit(1);
  }
  return event;
}

static void create_qp(struct rdma_cm_id* id) {
  struct ibv_qp_init_attr attr = {
      .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
      .qp_type = IBV_QPT_RC};
  CHECK(rdma_create_qp(id, NULL, &attr) == 0);
}

// ---- the child: one connection, then gone without a word of its own ----

static int child_disconnect(const char* peer, int use_exit, int go_fd) {
  struct rdma_event_channel* channel = rdma_create_event_channel();
  CHECK(channel != NULL);
  struct rdma_cm_id* id = NULL;
  CHECK(rdma_create_id(channel, &id, NULL, RDMA_PS_TCP) == 0);
  struct sockaddr_in dst = address(peer, kPort);
  CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 2000) == 0);
  rdma_ack_cm_event(expect(channel, RDMA_CM_EVENT_ADDR_RESOLVED, -1));
  CHECK(rdma_resolve_route(id, 2000) == 0);
  rdma_ack_cm_event(expect(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, -1));
  create_qp(id);
  struct rdma_conn_param param = {
      .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
  CHECK(rdma_connect(id, &param) == 0);
  rdma_ack_cm_event(expect(channel, RDMA_CM_EVENT_ESTABLISHED, 10000));
  char byte = 0;  // the peer is established too: what follows is the DREQ alone
  CHECK(read(go_fd, &byte, 1) == 1 && byte == 'g');
  CHECK(rdma_disconnect(id) == 0);
  if (use_exit) exit(0);
  _exit(0);
}

static int child_reject(const char* self, int ready_fd) {
  struct rdma_event_channel* channel = rdma_create_event_channel();
  CHECK(channel != NULL);
  struct rdma_cm_id* listener = NULL;
  CHECK(rdma_create_id(channel, &listener, NULL, RDMA_PS_TCP) == 0);
  struct sockaddr_in addr = address(self, kPort);
  CHECK(rdma_bind_addr(listener, (struct sockaddr*)&addr) == 0);
  CHECK(rdma_listen(listener, 1) == 0);
  CHECK(write(ready_fd, "r", 1) == 1);
  struct rdma_cm_event* request = expect(channel, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
  struct rdma_cm_id* id = request->id;
  rdma_ack_cm_event(request);
  CHECK(rdma_reject(id, kRejectData, sizeof kRejectData) == 0);
  _exit(0);
}

// ---- the peer ----

// Runs this program again as a child on `child_addr`'s device, with `argv` (argv[0] names its
// part). The environment is built before fork(): the child only calls execve.
static pid_t spawn(const char* child_addr, char* const argv[]) {
  extern char** environ;
  static char devices[64];
  static char* envp[256];
  snprintf(devices, sizeof devices, "UROCE_DEVICES=uroce0=%s", child_addr);
  size_t n = 0;
  for (char** e = environ; *e != NULL && n + 2 < sizeof envp / sizeof envp[0]; ++e)
    if (strncmp(*e, "UROCE_DEVICES=", 14) != 0) envp[n++] = *e;
  envp[n++] = devices;
  envp[n] = NULL;
  const pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid > 0) return pid;
  execve("/proc/self/exe", argv, envp);
  _exit(127);
}

static void reap(pid_t pid) {
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "child failed: status 0x%x\n", status);
    exit(1);
  }
}

static void disconnect_rounds(const char* peer, const char* child_addr) {
  struct rdma_event_channel* channel = rdma_create_event_channel();
  CHECK(channel != NULL);
  struct rdma_cm_id* listener = NULL;
  CHECK(rdma_create_id(channel, &listener, NULL, RDMA_PS_TCP) == 0);
  struct sockaddr_in addr = address(peer, kPort);
  CHECK(rdma_bind_addr(listener, (struct sockaddr*)&addr) == 0);
  CHECK(rdma_listen(listener, 4) == 0);
  for (int round = 0; round < kRounds; ++round) {
    // The last round leaves with exit(0): its at-exit handler runs too.
    char mode[] = "_exit", mode_exit[] = "exit", cmd[] = "disconnect";
    char peer_arg[64], fd_arg[16];
    int go[2];
    CHECK(pipe(go) == 0);
    snprintf(peer_arg, sizeof peer_arg, "%s", peer);
    snprintf(fd_arg, sizeof fd_arg, "%d", go[0]);
    char* argv[] = {cmd, peer_arg, round == kRounds - 1 ? mode_exit : mode, fd_arg, NULL};
    const pid_t pid = spawn(child_addr, argv);
    close(go[0]);
    struct rdma_cm_event* request = expect(channel, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
    struct rdma_cm_id* id = request->id;
    rdma_ack_cm_event(request);
    create_qp(id);
    struct rdma_conn_param param = {
        .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7};
    CHECK(rdma_accept(id, &param) == 0);
    struct rdma_cm_event* established = expect(channel, RDMA_CM_EVENT_ESTABLISHED, 10000);
    CHECK(established->id == id);
    rdma_ack_cm_event(established);
    CHECK(write(go[1], "g", 1) == 1);
    close(go[1]);
    struct rdma_cm_event* disconnected = expect(channel, RDMA_CM_EVENT_DISCONNECTED, kPromptMs);
    CHECK(disconnected->id == id);
    rdma_ack_cm_event(disconnected);
    reap(pid);
    rdma_destroy_qp(id);
    CHECK(rdma_destroy_id(id) == 0);
  }
  CHECK(rdma_destroy_id(listener) == 0);
  rdma_destroy_event_channel(channel);
}

static void reject_rounds(const char* child_addr) {
  struct rdma_event_channel* channel = rdma_create_event_channel();
  CHECK(channel != NULL);
  for (int round = 0; round < kRounds; ++round) {
    int ready[2];
    CHECK(pipe(ready) == 0);
    char cmd[] = "reject", self_arg[64], fd_arg[16];
    snprintf(self_arg, sizeof self_arg, "%s", child_addr);
    snprintf(fd_arg, sizeof fd_arg, "%d", ready[1]);
    char* argv[] = {cmd, self_arg, fd_arg, NULL};
    const pid_t pid = spawn(child_addr, argv);
    close(ready[1]);
    char byte = 0;
    CHECK(read(ready[0], &byte, 1) == 1 && byte == 'r');  // listening
    close(ready[0]);
    struct rdma_cm_id* id = NULL;
    CHECK(rdma_create_id(channel, &id, NULL, RDMA_PS_TCP) == 0);
    struct sockaddr_in dst = address(child_addr, kPort);
    CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 2000) == 0);
    rdma_ack_cm_event(expect(channel, RDMA_CM_EVENT_ADDR_RESOLVED, -1));
    CHECK(rdma_resolve_route(id, 2000) == 0);
    rdma_ack_cm_event(expect(channel, RDMA_CM_EVENT_ROUTE_RESOLVED, -1));
    create_qp(id);
    struct rdma_conn_param param = {.responder_resources = 1, .initiator_depth = 1};
    CHECK(rdma_connect(id, &param) == 0);
    struct rdma_cm_event* rejected = expect(channel, RDMA_CM_EVENT_REJECTED, kPromptMs);
    CHECK(rejected->id == id && rejected->status == 28);
    CHECK(rejected->param.conn.private_data_len >= sizeof kRejectData);
    CHECK(memcmp(rejected->param.conn.private_data, kRejectData, sizeof kRejectData) == 0);
    rdma_ack_cm_event(rejected);
    reap(pid);
    rdma_destroy_qp(id);
    CHECK(rdma_destroy_id(id) == 0);
  }
  rdma_destroy_event_channel(channel);
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[0], "disconnect") == 0)
    return child_disconnect(argv[1], strcmp(argv[2], "exit") == 0, atoi(argv[3]));
  if (argc == 3 && strcmp(argv[0], "reject") == 0) return child_reject(argv[1], atoi(argv[2]));
  // PEER_ADDR CHILD_ADDR [disconnect|reject]: both parts unless one is named.
  CHECK(argc == 3 || argc == 4);
  const char* only = argc == 4 ? argv[3] : "";
  if (strcmp(only, "reject") != 0) disconnect_rounds(argv[1], argv[2]);
  if (strcmp(only, "disconnect") != 0) reject_rounds(argv[2]);
  printf("every DREQ and REJ heard at once\n");
  return 0;
}
