// Completion queues: fixed power-of-two depth, FIFO, overrun as an async event without
// overwriting, notification (next / solicited-only) through a completion channel's eventfd, and
// posting and polling from different threads.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs_test_support.h"

namespace uroce::verbs {
namespace {

using testing::FakeWorld;
using transport::Completion;
using transport::WcStatus;

Completion wc(uint64_t id, bool solicited = false, WcStatus status = WcStatus::kSuccess) {
  Completion c;
  c.wr_id = id;
  c.solicited = solicited;
  c.status = status;
  return c;
}

bool fd_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

TEST(VerbsCq, DepthIsAPowerOfTwoAtLeastAsAsked) {
  FakeWorld w;
  for (uint32_t ask : {1u, 2u, 3u, 100u, 128u, 129u}) {
    auto cq = std::move(w.ctx->create_cq(ask).value());
    EXPECT_GE(cq->cqe(), ask);
    EXPECT_EQ(cq->cqe() & (cq->cqe() - 1), 0u);
    EXPECT_LT(cq->cqe(), 2 * ask);
  }
  EXPECT_EQ(w.ctx->create_cq(0).error(), EINVAL);
  EXPECT_EQ(w.ctx->create_cq(w.device->attr().max_cqe + 1).error(), EINVAL);
}

TEST(VerbsCq, PollsInOrderAndInBatches) {
  FakeWorld w;
  auto cq = std::move(w.ctx->create_cq(8).value());
  for (uint64_t i = 0; i < 5; ++i) EXPECT_TRUE(cq->push(wc(i)));
  std::array<Completion, 3> out;
  ASSERT_EQ(cq->poll(out), 3u);
  EXPECT_EQ(out[0].wr_id, 0u);
  EXPECT_EQ(out[2].wr_id, 2u);
  ASSERT_EQ(cq->poll(out), 2u);
  EXPECT_EQ(out[1].wr_id, 4u);
  EXPECT_EQ(cq->poll(out), 0u);
}

TEST(VerbsCq, OverrunIsRefusedNeverOverwritesAndRaisesCqErrOnce) {
  FakeWorld w;
  auto cq = std::move(w.ctx->create_cq(4).value());
  for (uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(cq->push(wc(i)));
  EXPECT_FALSE(cq->in_error());
  EXPECT_FALSE(cq->push(wc(99)));
  EXPECT_FALSE(cq->push(wc(100)));
  EXPECT_TRUE(cq->in_error());
  EXPECT_EQ(cq->lost(), 2u);

  auto e = w.ctx->async_events().get();
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->type, EventType::kCqErr);
  EXPECT_EQ(e->cq, cq.get());
  EXPECT_EQ(w.ctx->async_events().get().error(), EAGAIN);  // once

  // The four completions that fitted are intact and in order.
  std::array<Completion, 8> out;
  ASSERT_EQ(cq->poll(out), 4u);
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(out[i].wr_id, i);
  // A CQ in error stays in error: space does not bring it back (IBA 11.4.2.1).
  EXPECT_FALSE(cq->push(wc(5)));
  EXPECT_EQ(cq->lost(), 3u);
}

// Middleware sizes CQs for the worst case (libfabric's ofi_rxm: 2^18 entries per endpoint); the
// storage grows as completions queue up, in order across every doubling, to exactly the CQ's size.
TEST(VerbsCq, ALargeCqFillsInOrderToItsSizeThenOverruns) {
  FakeWorld w;
  constexpr uint32_t kCqe = 1u << 18;
  ASSERT_LE(kCqe, w.device->attr().max_cqe);
  auto cq = std::move(w.ctx->create_cq(kCqe).value());
  EXPECT_EQ(cq->cqe(), kCqe);
  // Polled halfway, so that the ring wraps before it grows.
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(cq->push(wc(i)));
  std::vector<Completion> out(kCqe + 1);
  ASSERT_EQ(cq->poll(std::span(out).first(500)), 500u);
  for (uint64_t i = 1000; i < kCqe + 500; ++i) ASSERT_TRUE(cq->push(wc(i))) << i;
  EXPECT_FALSE(cq->push(wc(kCqe + 500)));
  EXPECT_EQ(cq->lost(), 1u);
  ASSERT_EQ(cq->poll(out), kCqe);
  for (uint64_t i = 0; i < kCqe; ++i) ASSERT_EQ(out[i].wr_id, i + 500) << i;
}

TEST(VerbsCq, ReqNotifyNeedsAChannel) {
  FakeWorld w;
  auto cq = std::move(w.ctx->create_cq(4).value());
  EXPECT_EQ(cq->req_notify(false), EINVAL);
}

TEST(VerbsCq, NotifyNextFiresOnceOnTheNextCompletion) {
  FakeWorld w;
  auto ch = std::move(w.ctx->create_comp_channel().value());
  auto cq = std::move(w.ctx->create_cq(16, ch.get()).value());
  EXPECT_EQ(ch->users(), 1u);
  // Not armed: nothing.
  cq->push(wc(1));
  EXPECT_FALSE(fd_readable(ch->fd()));
  EXPECT_EQ(ch->get_event().error(), EAGAIN);

  ASSERT_EQ(cq->req_notify(false), 0);
  EXPECT_FALSE(fd_readable(ch->fd()));  // entries already queued do not fire
  cq->push(wc(2));
  EXPECT_TRUE(fd_readable(ch->fd()));
  auto ev = ch->get_event();
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(*ev, cq.get());
  EXPECT_FALSE(fd_readable(ch->fd()));
  cq->push(wc(3));  // disarmed after firing
  EXPECT_FALSE(fd_readable(ch->fd()));
}

TEST(VerbsCq, SolicitedOnlyFiresOnSolicitedOrErrorCompletions) {
  FakeWorld w;
  auto ch = std::move(w.ctx->create_comp_channel().value());
  auto cq = std::move(w.ctx->create_cq(16, ch.get()).value());
  ASSERT_EQ(cq->req_notify(true), 0);
  cq->push(wc(1));
  EXPECT_FALSE(fd_readable(ch->fd()));
  cq->push(wc(2, true));
  EXPECT_TRUE(fd_readable(ch->fd()));
  ASSERT_TRUE(ch->get_event().ok());

  ASSERT_EQ(cq->req_notify(true), 0);
  cq->push(wc(3, false, WcStatus::kRemAccessErr));
  EXPECT_EQ(ch->get_event().value(), cq.get());

  // "Next" wins over a later solicited-only request.
  ASSERT_EQ(cq->req_notify(false), 0);
  ASSERT_EQ(cq->req_notify(true), 0);
  cq->push(wc(4));
  EXPECT_EQ(ch->get_event().value(), cq.get());
}

// The device counts the arms (cq_notify_requests): how often programs slept on a channel.
TEST(VerbsCq, NotifyRequestsAreCountedByTheDevice) {
  FakeWorld w;
  auto requests = [&] {
    for (const Counter& c : w.device->counters())
      if (c.name == "cq_notify_requests") return c.value;
    ADD_FAILURE() << "no cq_notify_requests counter";
    return uint64_t{0};
  };
  auto ch = std::move(w.ctx->create_comp_channel().value());
  auto cq = std::move(w.ctx->create_cq(16, ch.get()).value());
  auto unarmable = std::move(w.ctx->create_cq(16).value());
  EXPECT_EQ(requests(), 0u);
  ASSERT_EQ(cq->req_notify(false), 0);
  ASSERT_EQ(cq->req_notify(true), 0);
  ASSERT_EQ(unarmable->req_notify(false), EINVAL);  // refused: not counted
  EXPECT_EQ(requests(), 2u);
}

TEST(VerbsCq, DestroyingACqDropsItsPendingChannelEvents) {
  FakeWorld w;
  auto ch = std::move(w.ctx->create_comp_channel().value());
  auto cq = std::move(w.ctx->create_cq(16, ch.get()).value());
  cq->req_notify(false);
  cq->push(wc(1));
  EXPECT_EQ(ch->pending(), 1u);
  cq.reset();
  EXPECT_EQ(ch->pending(), 0u);
  EXPECT_FALSE(fd_readable(ch->fd()));
  EXPECT_EQ(ch->users(), 0u);
}

TEST(VerbsCq, BlockingGetEventWakesWhenAnotherThreadCompletes) {
  FakeWorld w;
  auto ch = std::move(w.ctx->create_comp_channel().value());
  auto cq = std::move(w.ctx->create_cq(16, ch.get()).value());
  cq->req_notify(false);
  std::thread t([&] { cq->push(wc(7)); });
  auto ev = ch->get_event(/*block=*/true);
  t.join();
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(*ev, cq.get());
}

TEST(VerbsCq, ProducerAndConsumerThreadsSeeEveryCompletionInOrder) {
  FakeWorld w;
  auto cq = std::move(w.ctx->create_cq(64).value());
  constexpr uint64_t kCount = 20000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount;) {
      // push never waits: when the CQ is full, let the consumer run and retry.
      if (cq->size() < cq->cqe() && cq->push(wc(i))) {
        ++i;
      } else {
        std::this_thread::yield();
      }
    }
  });
  uint64_t expect = 0;
  bool in_order = true;
  std::array<Completion, 16> out;
  while (expect < kCount) {
    size_t n = cq->poll(out);
    if (n == 0) std::this_thread::yield();
    for (size_t i = 0; i < n; ++i) in_order = in_order && out[i].wr_id == expect++;
  }
  producer.join();
  EXPECT_TRUE(in_order);
  EXPECT_FALSE(cq->in_error());
}

TEST(VerbsCq, AsyncEventQueueIsBoundedAndCountsDrops) {
  AsyncEventQueue q;
  AsyncEvent e;
  e.type = EventType::kPortActive;
  for (size_t i = 0; i < AsyncEventQueue::kCapacity; ++i) EXPECT_TRUE(q.post(e));
  EXPECT_FALSE(q.post(e));
  EXPECT_EQ(q.dropped(), 1u);
  EXPECT_TRUE(fd_readable(q.fd()));
  for (size_t i = 0; i < AsyncEventQueue::kCapacity; ++i) EXPECT_TRUE(q.get().ok());
  EXPECT_FALSE(fd_readable(q.fd()));
}

// The ABI layer hands the fd to programs as a blocking fd, and a program may read it itself:
// emptying the queue afterwards must not block on it.
TEST(VerbsCq, EmptyingTheQueueNeverBlocksOnAnFdTheProgramAlreadyRead) {
  AsyncEventQueue q;
  int fl = fcntl(q.fd(), F_GETFL);
  ASSERT_EQ(fcntl(q.fd(), F_SETFL, fl & ~O_NONBLOCK), 0);
  AsyncEvent e;
  ASSERT_TRUE(q.post(e));
  uint64_t v = 0;
  ASSERT_EQ(::read(q.fd(), &v, sizeof v), static_cast<ssize_t>(sizeof v));
  EXPECT_TRUE(q.get().ok());  // would hang here if it read the drained fd
  EXPECT_EQ(q.get().error(), EAGAIN);
  ASSERT_TRUE(q.post(e));
  EXPECT_TRUE(fd_readable(q.fd()));
}

}  // namespace
}  // namespace uroce::verbs
