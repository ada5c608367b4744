/* Checks the drop-in librdmacm's event channels against a pattern rping and other rdmacm-utils
 * programs rely on: a thread blocked in rdma_get_cm_event while another thread destroys the id
 * and then the channel, and exits. With the kernel's rdma_cm the blocked thread sleeps on: the
 * destroyed id's queued events are dropped, and the channel's file outlives close() while a
 * GET_EVENT is in it. So here too: the waiting thread gets the event it was woken for, or waits
 * for ever; it never fails and never touches a freed channel (ASan sees that).
 *
 * Each round queues an event (ADDR_RESOLVED, which rdma_resolve_addr reports at once) while a
 * thread waits, and destroys the id and the channel right away, so the thread wakes either
 * before (it gets the event) or after them (the channel is gone under it).
 * Then the calls that come after the destroy, as rping's event thread makes after its main
 * thread destroyed the channel: rdma_get_cm_event, rdma_create_id and rdma_migrate_id on the
 * destroyed channel fail with EBADF (the kernel's answer on the closed file), and a second
 * rdma_destroy_event_channel frees nothing. ASan sees any touch of the freed channel.
 *
 * Run with UROCE_DEVICES="uroce0=127.0.3.10". Exits non-zero on a failed check. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { kRounds = 200 };

static int failures;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

struct waiter {
  struct rdma_event_channel* channel;
  atomic_int tid;     /* set just before the thread calls rdma_get_cm_event */
  atomic_int outcome; /* 0: still waiting, 1: got an event, 2: the call failed */
  int error;
};

static atomic_int events_got, calls_failed;

static void* wait_for_event(void* arg) {
  struct waiter* w = arg;
  struct rdma_cm_event* event = NULL;
  atomic_store(&w->tid, (int)syscall(SYS_gettid));
  if (rdma_get_cm_event(w->channel, &event) == 0) {
    CHECK(event->event == RDMA_CM_EVENT_ADDR_RESOLVED);
    rdma_ack_cm_event(event);
    atomic_fetch_add(&events_got, 1);
    atomic_store(&w->outcome, 1);
  } else {
    w->error = errno;
    atomic_fetch_add(&calls_failed, 1);
    atomic_store(&w->outcome, 2);
  }
  return NULL;
}

/* True once thread `tid` sleeps (in the eventfd read: it does nothing else that sleeps). */
static int sleeping(int tid) {
  char path[64], stat[256];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(stat, 1, sizeof stat - 1, f);
  fclose(f);
  stat[n] = '\0';
  const char* state = strrchr(stat, ')');
  return state && state[1] == ' ' && state[2] == 'S';
}

int main(void) {
  static struct waiter waiters[kRounds];
  struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(7300)};
  inet_pton(AF_INET, "127.0.3.10", &dst.sin_addr);
  for (int round = 0; round < kRounds; ++round) {
    struct waiter* w = &waiters[round];
    w->channel = rdma_create_event_channel();
    CHECK(w->channel != NULL);
    struct rdma_cm_id* id = NULL;
    CHECK(rdma_create_id(w->channel, &id, NULL, RDMA_PS_TCP) == 0);
    if (!w->channel || !id) break;
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, wait_for_event, w) == 0);
    pthread_detach(thread);
    while (atomic_load(&w->tid) == 0 || !sleeping(atomic_load(&w->tid))) usleep(100);
    CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)&dst, 1000) == 0);
    CHECK(rdma_destroy_id(id) == 0); /* waits for the event's ack if the thread got it */
    rdma_destroy_event_channel(w->channel);
  }
  /* Calls on a channel after its destroy: a clear error, no touch of the freed memory. */
  struct rdma_event_channel* gone = rdma_create_event_channel();
  struct rdma_event_channel* other = rdma_create_event_channel();
  struct rdma_cm_id* moving = NULL;
  CHECK(gone != NULL && other != NULL);
  CHECK(rdma_create_id(other, &moving, NULL, RDMA_PS_TCP) == 0);
  if (gone && other && moving) {
    rdma_destroy_event_channel(gone);
    struct rdma_cm_event* event = NULL;
    errno = 0;
    CHECK(rdma_get_cm_event(gone, &event) == -1 && errno == EBADF && event == NULL);
    struct rdma_cm_id* late = NULL;
    errno = 0;
    CHECK(rdma_create_id(gone, &late, NULL, RDMA_PS_TCP) == -1 && errno == EBADF && late == NULL);
    errno = 0;
    CHECK(rdma_migrate_id(moving, gone) == -1 && errno == EBADF);
    CHECK(moving->channel == other);
    rdma_destroy_event_channel(gone); /* a second destroy: nothing to free */
    CHECK(rdma_destroy_id(moving) == 0);
    rdma_destroy_event_channel(other);
  }

  usleep(100 * 1000); /* a failing call would come back by now */
  int got = atomic_load(&events_got), failed = atomic_load(&calls_failed);
  for (int round = 0; round < kRounds; ++round) {
    if (atomic_load(&waiters[round].outcome) == 2)
      fprintf(stderr, "round %d: rdma_get_cm_event failed, errno %d\n", round,
              waiters[round].error);
  }
  CHECK(failed == 0);
  printf("%d rounds: %d waiters got their event, %d wait on in destroyed channels\n", kRounds, got,
         kRounds - got - failed);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}
