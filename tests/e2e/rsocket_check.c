// rsockets semantics the rdmacm-utils programs do not reach (tests/e2e/rsocket_test.sh runs it as
// two processes): non-blocking connect (EINPROGRESS, rpoll POLLOUT, SO_ERROR), EAGAIN, an rpoll
// that times out, rselect over an rsocket and a pipe, partial reads of an echoed stream checked
// byte for byte, end of stream after rshutdown(SHUT_WR), rgetpeername, errnos for a bad
// descriptor and a riowrite with no window, and SO_RCVBUF / SO_SNDBUF as rdma-core reports them.
//   rsocket_check server ADDR PORT | rsocket_check client ADDR PORT
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#define STREAM_BYTES 100000

static int failures;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));    \
      failures++;                                                     \
    }                                                                 \
  } while (0)

static unsigned char pattern(size_t i) {
  return (unsigned char)(i * 7 + i / 251);
}

static int send_all(int fd, const unsigned char* buf, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = rsend(fd, buf + off, len - off, 0);
    if (n <= 0) return -1;
    off += (size_t)n;
  }
  return 0;
}

static int int_option(int s, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  CHECK(rgetsockopt(s, level, name, &v, &len) == 0 && len == sizeof v, "rgetsockopt %d", name);
  return v;
}

static void set_int_option(int s, int level, int name, int v) {
  CHECK(rsetsockopt(s, level, name, &v, sizeof v) == 0, "rsetsockopt %d = %d", name, v);
}

// SO_RCVBUF / SO_SNDBUF read back as from rdma-core's rsockets: 128 KiB unless set, a set value
// doubled, a send buffer under 2 KiB as 4 KiB; a set after the buffers exist changes nothing; a
// datagram socket's receive buffer, once made, is what its queue holds (at most 384 slots of
// 2 KiB).
static void check_dgram_buffer_options(struct sockaddr_in* addr) {
  int d = rsocket(AF_INET, SOCK_DGRAM, 0);
  CHECK(d >= 0, "datagram rsocket");
  CHECK(int_option(d, SOL_SOCKET, SO_RCVBUF) == 131072, "datagram SO_RCVBUF default");
  CHECK(int_option(d, SOL_SOCKET, SO_SNDBUF) == 131072, "datagram SO_SNDBUF default");
  set_int_option(d, SOL_SOCKET, SO_RCVBUF, 524288);  // udpong's
  CHECK(int_option(d, SOL_SOCKET, SO_RCVBUF) == 1048576, "datagram SO_RCVBUF doubled");
  struct sockaddr_in local = *addr;
  local.sin_port = 0;
  CHECK(rbind(d, (struct sockaddr*)&local, sizeof local) == 0, "datagram rbind");
  CHECK(int_option(d, SOL_SOCKET, SO_RCVBUF) == 384 * 2048, "datagram SO_RCVBUF of 384 slots");
  set_int_option(d, SOL_SOCKET, SO_RCVBUF, 4096);
  CHECK(int_option(d, SOL_SOCKET, SO_RCVBUF) == 384 * 2048, "datagram SO_RCVBUF set late");
  CHECK(rclose(d) == 0, "datagram rclose");
}

static int run_server(struct sockaddr_in* addr) {
  check_dgram_buffer_options(addr);
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  CHECK(l >= 0, "rsocket");
  int one = 1;
  CHECK(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0, "SO_REUSEADDR");
  CHECK(rbind(l, (struct sockaddr*)addr, sizeof *addr) == 0, "rbind");
  CHECK(rlisten(l, 4) == 0, "rlisten");
  printf("listening\n");
  fflush(stdout);
  int s = raccept(l, NULL, NULL);
  CHECK(s >= 0, "raccept");
  if (s < 0) return 1;
  // Echo STREAM_BYTES, then a pause, one more byte, and the end of the stream.
  unsigned char* buf = malloc(STREAM_BYTES);
  size_t got = 0;
  while (got < STREAM_BYTES) {
    ssize_t n = rrecv(s, buf + got, STREAM_BYTES - got, 0);
    CHECK(n > 0, "server rrecv returned %zd", n);
    if (n <= 0) return 1;
    got += (size_t)n;
  }
  CHECK(send_all(s, buf, STREAM_BYTES) == 0, "echo");
  usleep(200000);
  CHECK(rsend(s, "!", 1, 0) == 1, "late byte");
  CHECK(rshutdown(s, SHUT_WR) == 0, "rshutdown");
  // The client closes after it saw the end: then ours ends too.
  char c;
  CHECK(rrecv(s, &c, 1, 0) == 0, "server end of stream");
  CHECK(rclose(s) == 0, "rclose");
  CHECK(rclose(l) == 0, "rclose listener");
  free(buf);
  printf("server %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static int run_client(struct sockaddr_in* addr) {
  char junk;
  errno = 0;
  CHECK(rsend(12345, "x", 1, 0) == -1 && errno == EBADF, "rsend on no rsocket");

  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  CHECK(s >= 0, "rsocket");
  CHECK(int_option(s, SOL_SOCKET, SO_RCVBUF) == 131072, "SO_RCVBUF default");
  CHECK(int_option(s, SOL_SOCKET, SO_SNDBUF) == 131072, "SO_SNDBUF default");
  set_int_option(s, SOL_SOCKET, SO_RCVBUF, 524288);  // the default window, 32 slots of 16 KiB
  CHECK(int_option(s, SOL_SOCKET, SO_RCVBUF) == 1048576, "SO_RCVBUF doubled");
  set_int_option(s, SOL_SOCKET, SO_SNDBUF, 3000);
  CHECK(int_option(s, SOL_SOCKET, SO_SNDBUF) == 6000, "SO_SNDBUF doubled");
  set_int_option(s, SOL_SOCKET, SO_SNDBUF, 512);
  CHECK(int_option(s, SOL_SOCKET, SO_SNDBUF) == 4096, "SO_SNDBUF at least 4 KiB");
  CHECK(rfcntl(s, F_SETFL, O_NONBLOCK) == 0, "rfcntl");
  CHECK((rfcntl(s, F_GETFL) & O_NONBLOCK) != 0, "O_NONBLOCK read back");
  int ret = rconnect(s, (struct sockaddr*)addr, sizeof *addr);
  CHECK(ret == -1 && errno == EINPROGRESS, "non-blocking rconnect returned %d", ret);
  struct pollfd p = {s, POLLOUT, 0};
  CHECK(rpoll(&p, 1, 10000) == 1 && (p.revents & POLLOUT), "connected: revents %x", p.revents);
  int err = -1;
  socklen_t len = sizeof err;
  CHECK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0, "SO_ERROR %d", err);
  set_int_option(s, SOL_SOCKET, SO_RCVBUF, 16384);
  CHECK(int_option(s, SOL_SOCKET, SO_RCVBUF) == 1048576, "SO_RCVBUF set when connected");

  struct sockaddr_in peer;
  len = sizeof peer;
  CHECK(rgetpeername(s, (struct sockaddr*)&peer, &len) == 0 && len == sizeof peer &&
            peer.sin_addr.s_addr == addr->sin_addr.s_addr && peer.sin_port == addr->sin_port,
        "rgetpeername");

  errno = 0;
  CHECK(rrecv(s, &junk, 1, 0) == -1 && errno == EAGAIN, "nothing to read: EAGAIN");
  p.events = POLLIN;
  CHECK(rpoll(&p, 1, 50) == 0, "rpoll with nothing to read times out");
  errno = 0;
  CHECK(riowrite(s, "x", 1, 0, 0) == (size_t)-1 && errno == EINVAL, "riowrite with no window");

  // rselect over a readable pipe and the (quiet) rsocket.
  int pipefd[2];
  CHECK(pipe(pipefd) == 0, "pipe");
  CHECK(write(pipefd[1], "p", 1) == 1, "pipe write");
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(pipefd[0], &rd);
  FD_SET(s, &rd);
  int maxfd = (pipefd[0] > s ? pipefd[0] : s) + 1;
  struct timeval tv = {5, 0};
  CHECK(rselect(maxfd, &rd, NULL, NULL, &tv) == 1 && FD_ISSET(pipefd[0], &rd) && !FD_ISSET(s, &rd),
        "rselect: the pipe only");

  // The stream, echoed back and read in 7-byte pieces.
  unsigned char* out = malloc(STREAM_BYTES);
  for (size_t i = 0; i < STREAM_BYTES; i++) out[i] = pattern(i);
  size_t sent = 0;
  while (sent < STREAM_BYTES) {
    ssize_t n = rsend(s, out + sent, STREAM_BYTES - sent, 0);
    if (n < 0 && errno == EAGAIN) {
      p.events = POLLOUT;
      rpoll(&p, 1, 1000);
      continue;
    }
    CHECK(n > 0, "rsend");
    if (n <= 0) return 1;
    sent += (size_t)n;
  }
  size_t got = 0, bad = 0;
  while (got < STREAM_BYTES) {
    unsigned char piece[7];
    size_t want = STREAM_BYTES - got < 7 ? STREAM_BYTES - got : 7;
    ssize_t n = rrecv(s, piece, want, 0);
    if (n < 0 && errno == EAGAIN) {
      p.events = POLLIN;
      rpoll(&p, 1, 1000);
      continue;
    }
    CHECK(n > 0 && (size_t)n <= want, "rrecv piece returned %zd", n);
    if (n <= 0) return 1;
    for (ssize_t i = 0; i < n; i++) bad += piece[i] != pattern(got + (size_t)i);
    got += (size_t)n;
  }
  CHECK(bad == 0, "%zu bytes differ in the echo", bad);

  // The late byte: rselect waits on the rsocket alone (the pipe drained first).
  CHECK(read(pipefd[0], &junk, 1) == 1, "pipe read");
  FD_ZERO(&rd);
  FD_SET(pipefd[0], &rd);
  FD_SET(s, &rd);
  tv.tv_sec = 10;
  CHECK(rselect(maxfd, &rd, NULL, NULL, &tv) == 1 && FD_ISSET(s, &rd) && !FD_ISSET(pipefd[0], &rd),
        "rselect: the rsocket only");
  CHECK(rrecv(s, &junk, 1, 0) == 1 && junk == '!', "late byte");
  // End of stream: rrecv 0 (blocking now).
  CHECK(rfcntl(s, F_SETFL, 0) == 0, "blocking again");
  CHECK(rrecv(s, &junk, 1, 0) == 0, "end of stream");
  CHECK(rclose(s) == 0, "rclose");
  errno = 0;
  CHECK(rclose(s) == -1 && errno == EBADF, "rclose twice");
  free(out);
  printf("client %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s server|client ADDR PORT\n", argv[0]);
    return 2;
  }
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)atoi(argv[3]));
  if (inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1) return 2;
  return strcmp(argv[1], "server") == 0 ? run_server(&addr) : run_client(&addr);
}
