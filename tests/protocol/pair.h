#pragma once
// Two QPs wired back to back through the capture sinks, with a hook to drop packets; time jumps
// to the next deadline whenever the wire goes quiet.
#include <deque>
#include <functional>
#include <random>

#include "harness.h"

namespace uroce::transport::test {

struct Pair {
  static constexpr uint32_t kQpnA = 0x11, kQpnB = 0x22;
  Endpoint a, b;
  Nanos now = 1'000'000;
  uint64_t delivered = 0;
  // Return true to lose the packet. `from_a` tells the direction.
  std::function<bool(const Packet&, bool from_a)> drop;

  explicit Pair(QpType type = QpType::kRc, QpConfig cfg = {}, uint32_t psn_a = 100,
                uint32_t psn_b = 5000, QpCapabilities caps = {})
      : a(type, kQpnA, caps), b(type, kQpnB, caps) {
    cfg.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    QpConfig ca = cfg, cb = cfg;
    ca.dest_qpn = kQpnB, ca.sq_psn = Psn(psn_a), ca.rq_psn = Psn(psn_b);
    cb.dest_qpn = kQpnA, cb.sq_psn = Psn(psn_b), cb.rq_psn = Psn(psn_a);
    a.bring_up(ca);
    b.bring_up(cb);
  }

  // Runs until both sides are idle (no packet, no deadline) or `max_steps` steps pass.
  void pump(int max_steps = 100000) {
    for (int step = 0; step < max_steps; ++step) {
      const size_t n = a.run(now) + b.run(now);
      bool moved = false;
      while (!a.out.packets.empty()) {
        Packet p = a.out.pop();
        moved = true;
        if (!drop || !drop(p, true)) b.deliver(p, now), ++delivered;
      }
      while (!b.out.packets.empty()) {
        Packet p = b.out.pop();
        moved = true;
        if (!drop || !drop(p, false)) a.deliver(p, now), ++delivered;
      }
      if (!advance(n == 0 && !moved)) return;
    }
    ADD_FAILURE() << "pump did not settle";
  }

  // The clock of every delivery loop here: a round that moved something costs 1 us of wire time;
  // a quiet one jumps to the earliest deadline of either side. False if neither has one (idle).
  bool advance(bool quiet) {
    if (!quiet) {
      now += 1000;
      return true;
    }
    const Nanos t = std::min(a.qp->next_deadline(now), b.qp->next_deadline(now));
    if (t == kNever) return false;
    now = std::max(now, t);
    return true;
  }
};

inline SendWr make_wr(uint64_t wr_id, WrOpcode op, const Sge* sge, size_t n,
                      uint32_t flags = kSendSignaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.flags = flags;
  wr.sg_list = std::span<const Sge>(sge, n);
  return wr;
}

// A seeded wire that loses, duplicates and delays (reorders) packets.
struct Lossy {
  std::mt19937_64 rng;
  double loss, dup, reorder;
  Lossy(uint64_t seed, double l, double d, double r) : rng(seed), loss(l), dup(d), reorder(r) {}
  bool chance(double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; }
};

// Runs the pair with its own delivery loop so packets can be duplicated and reordered too.
inline void run_lossy(Pair& p, Lossy& w, int max_steps = 200000) {
  std::deque<std::pair<Packet, bool>> held;  // delayed packets, with their direction
  for (int step = 0; step < max_steps; ++step) {
    const size_t n = p.a.run(p.now) + p.b.run(p.now);
    std::vector<std::pair<Packet, bool>> wire;
    for (auto* e : {&p.a, &p.b}) {
      while (!e->out.packets.empty()) wire.emplace_back(e->out.pop(), e == &p.a);
    }
    for (auto& [pkt, from_a] : wire) {
      if (w.chance(w.loss)) continue;
      if (w.chance(w.reorder)) {
        held.emplace_back(pkt, from_a);
        continue;
      }
      (from_a ? p.b : p.a).deliver(pkt, p.now);
      if (w.chance(w.dup)) (from_a ? p.b : p.a).deliver(pkt, p.now);
    }
    if (!held.empty() && w.chance(0.5)) {
      auto [pkt, from_a] = held.front();
      held.pop_front();
      (from_a ? p.b : p.a).deliver(pkt, p.now);
    }
    if (!p.advance(n == 0 && wire.empty() && held.empty())) return;
  }
  ADD_FAILURE() << "did not settle";
}

}  // namespace uroce::transport::test
