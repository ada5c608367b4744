// The flow control of uroce's stream rsockets (docs/cm.md, "rsockets"), sans-I/O: one side's
// view of a connection's credits. Each data message takes one of the peer's receive slots; the
// receiver hands slots back as credits once the application has consumed them, piggybacked on
// any message or in a credit-only message. Credit-only messages take no credit (the receiver
// keeps a second set of `window` slots for them, see `receive_slots`), so two sides that both
// hold the other's credits can never wait on each other.
#pragma once

#include <cstdint>

namespace uroce::rsocket {

// The immediate value of every rsocket message: the type in the top two bits, the credits handed
// back in the rest.
enum class MessageType : uint32_t { kData = 0, kCredit = 1, kFin = 2, kIomap = 3 };
constexpr uint32_t kCreditMask = (1u << 30) - 1;

constexpr uint32_t encode_imm(MessageType type, uint32_t credits) {
  return (static_cast<uint32_t>(type) << 30) | (credits & kCreditMask);
}
constexpr MessageType imm_type(uint32_t imm) {
  return static_cast<MessageType>(imm >> 30);
}
constexpr uint32_t imm_credits(uint32_t imm) {
  return imm & kCreditMask;
}

class StreamCredits {
 public:
  // send_window: the peer's data slots (its `window`); receive_window: ours.
  StreamCredits(uint32_t send_window, uint32_t receive_window)
      : send_window_(send_window), receive_window_(receive_window), credits_(send_window) {}

  // Receive slots a side posts for a window: data, credit-only messages (at most one per credit
  // the peer has outstanding), the FIN and the iomap announcements.
  static constexpr uint32_t receive_slots(uint32_t window, uint32_t iomaps) {
    return 2 * window + 1 + iomaps;
  }

  bool can_send_data() const { return credits_ > 0; }
  uint32_t credits() const { return credits_; }
  void on_data_sent() { --credits_; }

  // Credits from the peer; false (a protocol error, the connection is reset) when they exceed
  // what was ever taken.
  bool on_credits(uint32_t n) {
    if (n > send_window_ - credits_) return false;
    credits_ += n;
    return true;
  }

  // A data slot the application has consumed and that is posted again.
  void on_slot_reposted() { ++owed_; }

  // The credits to send with the next message (all owed ones).
  uint32_t take_owed() {
    const uint32_t n = owed_;
    owed_ = 0;
    return n;
  }
  uint32_t owed() const { return owed_; }

  // Whether a credit-only message is due: half a window owed, or the application has consumed
  // everything received (so the peer, which may be waiting for credits, learns of every one).
  bool credit_update_due(bool unread_data) const {
    return owed_ > 0 && (owed_ >= (receive_window_ + 1) / 2 || !unread_data);
  }

 private:
  uint32_t send_window_;
  uint32_t receive_window_;
  uint32_t credits_;
  uint32_t owed_ = 0;
};

}  // namespace uroce::rsocket
