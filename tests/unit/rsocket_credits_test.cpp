// The rsockets flow control (src/api/rdmacm/rsocket_credits.h): the immediate's encoding, the
// credit rules, and two sides exchanging messages through bounded receive queues in a seeded
// random order, which must never overrun a receive queue and never stop while data is waiting.
#include "api/rdmacm/rsocket_credits.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>

namespace uroce::rsocket {
namespace {

TEST(RsocketCredits, ImmediateEncoding) {
  EXPECT_EQ(encode_imm(MessageType::kData, 5), 0x00000005u);
  EXPECT_EQ(encode_imm(MessageType::kCredit, 7), 0x40000007u);
  EXPECT_EQ(encode_imm(MessageType::kFin, 0), 0x80000000u);
  EXPECT_EQ(encode_imm(MessageType::kIomap, kCreditMask), 0xffffffffu);
  EXPECT_EQ(imm_type(0xc0000001u), MessageType::kIomap);
  EXPECT_EQ(imm_credits(0xc0000001u), 1u);
  EXPECT_EQ(imm_type(0x40000000u), MessageType::kCredit);
}

TEST(RsocketCredits, ReceiveSlots) {
  EXPECT_EQ(StreamCredits::receive_slots(32, 8), 73u);
  EXPECT_EQ(StreamCredits::receive_slots(2, 0), 5u);
}

TEST(RsocketCredits, SendingTakesCreditsAndCreditsComeBack) {
  StreamCredits c(3, 4);
  EXPECT_EQ(c.credits(), 3u);
  c.on_data_sent();
  c.on_data_sent();
  c.on_data_sent();
  EXPECT_FALSE(c.can_send_data());
  EXPECT_TRUE(c.on_credits(2));
  EXPECT_EQ(c.credits(), 2u);
  // More than was taken: a protocol error, and nothing changes.
  EXPECT_FALSE(c.on_credits(2));
  EXPECT_EQ(c.credits(), 2u);
  EXPECT_TRUE(c.on_credits(0));
}

TEST(RsocketCredits, UpdateDueAtHalfAWindowOrWhenDrained) {
  StreamCredits c(4, 4);
  EXPECT_FALSE(c.credit_update_due(false));  // nothing owed
  c.on_slot_reposted();
  EXPECT_FALSE(c.credit_update_due(true));  // 1 of 4, more unread
  EXPECT_TRUE(c.credit_update_due(false));  // everything consumed
  c.on_slot_reposted();
  EXPECT_TRUE(c.credit_update_due(true));  // half the window
  EXPECT_EQ(c.take_owed(), 2u);
  EXPECT_EQ(c.owed(), 0u);
  EXPECT_FALSE(c.credit_update_due(false));
}

// One side of a connection as the library runs it: messages travel in order; each takes one of
// the receiver's posted slots when it arrives (as the NIC does) and is handled later, when the
// receiver polls its CQ; a data message carries the credits owed, as the immediate does.
struct Message {
  bool data;
  uint32_t credits;
};

struct Side {
  Side(uint32_t send_window, uint32_t receive_window)
      : credits(send_window, receive_window),
        posted(StreamCredits::receive_slots(receive_window, 0)) {}
  StreamCredits credits;
  uint32_t posted;      // receive slots posted
  uint32_t unread = 0;  // data messages handled, not consumed by the application
  uint64_t sent = 0, consumed = 0;
  std::deque<Message> wire_in;    // messages on their way to this side
  std::deque<Message> completed;  // arrived (a slot taken), not yet polled
};

// One message arrives; false when no slot was posted (the overrun the scheme prevents).
bool arrive(Side& to) {
  if (to.posted == 0) return false;
  --to.posted;
  to.completed.push_back(to.wire_in.front());
  to.wire_in.pop_front();
  return true;
}

// The receiver polls one completion; false when the credits exceed what was taken.
bool poll_one(Side& me) {
  const Message m = me.completed.front();
  me.completed.pop_front();
  if (m.data)
    ++me.unread;
  else
    ++me.posted;  // a credit-only message: its slot is posted again at once
  return me.credits.on_credits(m.credits);
}

TEST(RsocketCredits, NoOverrunNoStallUnderRandomSchedules) {
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    std::mt19937 rng(seed);
    const uint32_t window = 2 + seed % 7;
    Side a(window, window), b(window, window);
    const uint64_t target = 2000;
    uint64_t steps = 0;
    while ((a.consumed < target || b.consumed < target) && steps < 1'000'000) {
      ++steps;
      Side& me = rng() % 2 ? a : b;
      Side& peer = &me == &a ? b : a;
      switch (rng() % 5) {
        case 0:  // the application sends a message
          if (me.sent < target && me.credits.can_send_data()) {
            me.credits.on_data_sent();
            ++me.sent;
            peer.wire_in.push_back({true, me.credits.take_owed()});
          }
          break;
        case 1:  // a message arrives
          if (!me.wire_in.empty()) {
            ASSERT_TRUE(arrive(me)) << "receive queue overrun, seed " << seed;
          }
          break;
        case 4:  // the receiver polls its CQ
          if (!me.completed.empty()) {
            ASSERT_TRUE(poll_one(me)) << "seed " << seed;
          }
          break;
        case 2:  // the application reads one message; its slot is posted again
          if (me.unread) {
            --me.unread;
            ++me.consumed;
            ++me.posted;
            me.credits.on_slot_reposted();
          }
          break;
        case 3:  // progress: a credit-only message when due
          if (me.credits.credit_update_due(me.unread > 0))
            peer.wire_in.push_back({false, me.credits.take_owed()});
          break;
      }
    }
    EXPECT_EQ(a.consumed, target) << "seed " << seed;
    EXPECT_EQ(b.consumed, target) << "seed " << seed;
  }
}

}  // namespace
}  // namespace uroce::rsocket
