#pragma once
// Two QPs wired back to back through the capture sinks, with a hook to drop packets; time jumps
// to the next deadline whenever the wire goes quiet.
#include <functional>

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
      if (n == 0 && !moved) {
        const Nanos t = std::min(a.qp->next_deadline(now), b.qp->next_deadline(now));
        if (t == kNever) return;
        now = std::max(now, t);
      } else {
        now += 1000;  // 1 us of wire time per round
      }
    }
    ADD_FAILURE() << "pump did not settle";
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

}  // namespace uroce::transport::test
