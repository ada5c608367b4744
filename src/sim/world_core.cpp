#include "sim/world_core.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace uroce::sim {

namespace {
constexpr uint32_t kActKind = 2;
constexpr unsigned kRankBits = 20;  // participants per world, far above any world's count
}  // namespace

// One participant: its rank, what acting means, and its one live event (others are stale: their
// generation is not the current one).
class WorldCore::Participant final : public fabric::EventTarget {
 public:
  Participant(WorldCore& core, size_t rank, Action act)
      : core_(core), rank_(rank), act_(std::move(act)) {}

  void on_event(uint32_t kind, uint64_t arg, Nanos now) override {
    if (kind == kWakeKind) {
      core_.wake(rank_ - 1, now);
      return;
    }
    if (rank_ == 0 || arg != generation_) return;  // the ticker, or a superseded request
    pending_ = false;
    core_.act(*this, pending_round_, now);
  }

  WorldCore& core_;
  const size_t rank_;  // 1 + participant id; 0 is the ticker
  Action act_;
  bool pending_ = false;
  Nanos pending_time_ = 0;
  uint64_t pending_round_ = 0;
  uint64_t generation_ = 0;
  bool is_device_ = false;
};

WorldCore::WorldCore(fabric::EventLoop& loop)
    : loop_(loop), ticker_(std::make_unique<Participant>(*this, 0, Action{})) {}

WorldCore::~WorldCore() = default;

uint64_t WorldCore::order(size_t rank, uint64_t round) const {
  return round << kRankBits | rank;
}

WorldCore::ParticipantId WorldCore::add_device(verbs::Device& device, Action after_pass) {
  const ParticipantId id = participants_.size();
  auto pass = [this, id, &device, after = std::move(after_pass)](Nanos now) {
    const Nanos next = device.progress(now);
    if (after) after(now);
    if (next != kNever) wake(id, next);
  };
  participants_.push_back(std::make_unique<Participant>(*this, id + 1, std::move(pass)));
  participants_.back()->is_device_ = true;
  UROCE_CHECK(participants_.size() < (size_t{1} << kRankBits));
  return id;
}

WorldCore::ParticipantId WorldCore::add_actor(Action act) {
  const ParticipantId id = participants_.size();
  participants_.push_back(std::make_unique<Participant>(*this, id + 1, std::move(act)));
  UROCE_CHECK(participants_.size() < (size_t{1} << kRankBits));
  return id;
}

fabric::EventTarget& WorldCore::waker(ParticipantId id) {
  UROCE_CHECK(id < participants_.size());
  return *participants_[id];
}

void WorldCore::wake(ParticipantId id, Nanos at) {
  UROCE_CHECK(id < participants_.size());
  Participant& p = *participants_[id];
  const Nanos now = loop_.now();
  at = std::max(at, now);
  uint64_t round = 0;
  if (at == now && round_time_ == now) {
    // Later in the round in progress if this participant's turn is still to come, else the next.
    round = in_round_ && p.rank_ > acting_rank_ ? round_ : in_round_ ? round_ + 1 : round_;
  }
  if (p.pending_ && (p.pending_time_ < at || (p.pending_time_ == at && p.pending_round_ <= round)))
    return;
  p.pending_ = true;
  p.pending_time_ = at;
  p.pending_round_ = round;
  // Keyed by rank: the request this one supersedes leaves the queue instead of waiting there.
  UROCE_CHECK(loop_.schedule_keyed_late_at(static_cast<uint32_t>(p.rank_), at,
                                           order(p.rank_, round), p, kActKind, ++p.generation_));
}

void WorldCore::wake_all_devices() {
  for (ParticipantId id = 0; id < participants_.size(); ++id) {
    if (participants_[id]->is_device_) wake(id, loop_.now());
  }
}

void WorldCore::round_at(Nanos at) {
  at = std::max(at, loop_.now());
  const uint64_t round = at == round_time_ ? (in_round_ ? round_ + 1 : round_) : 0;
  UROCE_CHECK(loop_.schedule_late_at(at, order(0, round), *ticker_, kActKind, 0));
}

void WorldCore::act(Participant& p, uint64_t round, Nanos now) {
  round_time_ = now;
  round_ = round;
  in_round_ = true;
  acting_rank_ = p.rank_;
  p.act_(now);
}

WorldCore::Outcome WorldCore::run(const std::function<bool(Nanos)>& on_round,
                                  const Limits& limits) {
  Outcome out;
  stop_ = false;
  uint64_t same_time = 0;
  Nanos last = loop_.now();
  // Steps over superseded participant events at the front, so that they neither start a round
  // nor count as something left to happen.
  auto drop_stale = [this](Nanos until) {
    for (const fabric::Event* e = loop_.peek(); e != nullptr && e->late && e->time <= until;
         e = loop_.peek()) {
      const auto* p = static_cast<const Participant*>(e->target);
      if (p->rank_ == 0 || e->arg == p->generation_) break;
      loop_.step();
    }
  };
  for (;;) {
    const Nanos now = loop_.now();
    if (round_time_ != now) {
      round_time_ = now;
      round_ = 0;
    }
    if (++out.rounds > limits.rounds) {
      out.end = End::kRoundLimit;
      break;
    }
    same_time = now == last ? same_time + 1 : 0;
    last = now;
    if (same_time > limits.rounds_at_one_time) {
      out.end = End::kStalled;
      break;
    }
    if (on_round && !on_round(now)) {
      out.end = End::kDone;
      break;
    }
    // The round: every participant due at this instant in this round, in rank order. Fabric
    // events a participant schedules for this very instant run in between.
    drop_stale(now);
    const fabric::Event* e = loop_.peek();
    if (e != nullptr && e->time == now && e->late) round_ = e->order >> kRankBits;
    const uint64_t round = round_;
    in_round_ = true;
    acting_rank_ = 0;
    while (!stop_) {
      drop_stale(now);
      e = loop_.peek();
      if (e == nullptr || e->time != now || (e->late && e->order >> kRankBits != round)) break;
      loop_.step();
    }
    in_round_ = false;
    round_ = round + 1;
    if (stop_) {
      out.end = End::kStopped;
      break;
    }
    // The fabric, up to the instant of the next round.
    drop_stale(kNever);
    const Nanos next = loop_.next_time();
    if (next == kNever) {
      out.end = End::kIdle;
      break;
    }
    if (next > limits.time) {
      out.end = End::kTimeLimit;
      out.next = next;
      break;
    }
    for (;;) {
      drop_stale(next);
      e = loop_.peek();
      if (e == nullptr || e->time > next || e->late) break;
      loop_.step();
    }
    if (loop_.now() < next) UROCE_CHECK(loop_.advance_to(next));
  }
  return out;
}

}  // namespace uroce::sim
