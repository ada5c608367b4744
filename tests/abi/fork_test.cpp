// A process forked from one that has the device open, on a shared address
// (UROCE_SHARED_ADDRESS=1), as pyverbs' rdmacm tests fork their players from a runner that keeps
// the device open: the child's own verbs objects must be served by a NIC of its own. With the
// parent's (inherited) one, the child had no progress thread and the parent's thread took its
// packets, so a completion the child waited for as an event never came.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "abi/abi_test_support.h"

namespace uroce::abi_test {
namespace {

// In the child: a SEND between two RC QPs of one fresh context on `device`, waited for through a
// completion channel only (no poll before the event, so only a progress thread can complete it).
// Returns the child's exit status: 0 when the event and a successful receive completion came.
int child_sends_and_waits_for_the_event(const char* device) {
  ibv_context* ctx = open_device(device);
  if (ctx == nullptr) return 10;
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_comp_channel* channel = ibv_create_comp_channel(ctx);
  ibv_cq* scq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  ibv_cq* rcq = ibv_create_cq(ctx, 8, nullptr, channel, 0);
  std::vector<uint8_t> buf(kBufBytes, 0x5a);
  ibv_mr* mr = pd ? ibv_reg_mr(pd, buf.data(), buf.size(), kAccess) : nullptr;
  if (!pd || !channel || !scq || !rcq || !mr) return 11;
  ibv_qp_init_attr a{};
  a.send_cq = scq;
  a.recv_cq = rcq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  ibv_qp* sender = ibv_create_qp(pd, &a);
  ibv_qp* receiver = ibv_create_qp(pd, &a);
  ibv_gid gid{};
  if (!sender || !receiver || ibv_query_gid(ctx, 1, 0, &gid) != 0) return 12;
  connect(sender, IBV_QPT_RC, gid, receiver->qp_num);
  connect(receiver, IBV_QPT_RC, gid, sender->qp_num);
  if (::testing::Test::HasFatalFailure()) return 13;
  ibv_sge rsge{reinterpret_cast<uint64_t>(buf.data()) + 2048, 64, mr->lkey};
  ibv_recv_wr rwr{};
  rwr.wr_id = 7;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ibv_recv_wr* bad_recv = nullptr;
  if (ibv_post_recv(receiver, &rwr, &bad_recv) != 0 || ibv_req_notify_cq(rcq, 0) != 0) return 14;
  ibv_sge ssge{reinterpret_cast<uint64_t>(buf.data()), 16, mr->lkey};
  ibv_send_wr swr{};
  swr.wr_id = 8;
  swr.sg_list = &ssge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  ibv_send_wr* bad_send = nullptr;
  if (ibv_post_send(sender, &swr, &bad_send) != 0) return 15;
  pollfd pfd{channel->fd, POLLIN, 0};
  if (::poll(&pfd, 1, 10'000) != 1) return 16;  // no event within 10 s
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) != 0 || ev_cq != rcq) return 17;
  ibv_ack_cq_events(rcq, 1);
  ibv_wc wc{};
  if (ibv_poll_cq(rcq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != 7) return 18;
  return 0;
}

TEST(AbiFork, AChildOnASharedAddressGetsANicOfItsOwn) {
  setenv("UROCE_SHARED_ADDRESS", "1", 1);
  // The parent keeps the device open, with its NIC started (a PD is a first use), across the
  // fork, as the test runner does.
  End parent;
  open_end(parent, "uroce0");
  ASSERT_FALSE(HasFatalFailure());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(child_sends_and_waits_for_the_event("uroce0"));
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 300 && done == 0; ++i) {  // 30 s at most
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the child did not finish";
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "16: no completion event; 1x: a verb failed";
}

// Alone on an address the child cannot have a NIC of its own (the parent holds the address), and
// the parent's has no progress thread in it: opening the device is refused with EADDRINUSE (and a
// line saying why), not left to lose packets and wait for ever.
TEST(AbiFork, AChildAloneOnTheParentsAddressIsRefused) {
  unsetenv("UROCE_SHARED_ADDRESS");
  End parent;
  open_end(parent, "uroce0");
  ASSERT_FALSE(HasFatalFailure());
  // The child reports what it saw through a pipe, so a failure says which call and which errno.
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    errno = 0;
    ibv_context* ctx = open_device("uroce0");
    int seen[2] = {1, errno};  // {1: ibv_open_device failed, 2: ibv_alloc_pd returned, errno}
    if (ctx != nullptr) {
      errno = 0;
      ibv_pd* pd = ibv_alloc_pd(ctx);
      seen[0] = pd == nullptr ? 2 : 3;  // 3: ibv_alloc_pd succeeded
      seen[1] = errno;
    }
    const bool told = write(report[1], seen, sizeof seen) == static_cast<ssize_t>(sizeof seen);
    _exit(told ? 0 : 1);
  }
  close(report[1]);
  int seen[2] = {0, 0};
  const ssize_t got = read(report[0], seen, sizeof seen);
  close(report[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof seen));
  EXPECT_NE(seen[0], 3) << "the child allocated a PD on the parent's address";
  EXPECT_EQ(seen[1], EADDRINUSE) << "stage " << seen[0]
                                 << " (1: ibv_open_device, 2: ibv_alloc_pd) failed with errno "
                                 << seen[1];
  // The parent's own objects are untouched.
  ibv_pd* pd = ibv_alloc_pd(parent.ctx);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

}  // namespace
}  // namespace uroce::abi_test
