// DCQCN closed over the fabric, without the transport: senders pace with cc::Dcqcn + cc::Pacer,
// receivers answer CE marks with CNPs through cc::CnpPacer, switches mark with RED ECN and PFC
// underneath. Checks the direction of the effects the DCQCN paper reports for an incast: with
// DCQCN an incast needs far fewer pauses and keeps a shorter queue, and nothing is lost.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cc/cnp.h"
#include "cc/dcqcn.h"
#include "cc/pacer.h"
#include "fabric/topology.h"
#include "fabric_switch_util.h"

namespace uroce::fabric {
namespace {

constexpr uint64_t kCnpTag = 1ull << 63;
constexpr uint32_t kPacket = 4096;

struct Flow final : EventTarget {
  SwitchFabric* f = nullptr;
  HostId src = 0, dst = 0;
  uint64_t id = 0, remaining = 0;
  std::unique_ptr<cc::Dcqcn> rp;
  cc::Pacer pacer;
  cc::CnpPacer np{cc::kCnpIntervalMlx5Ns};  // at the receiver, for this flow
  uint64_t delivered = 0;
  Nanos done_at = 0;

  void on_event(uint32_t, uint64_t, Nanos now) override {
    if (remaining == 0) return;
    Nanos next = now + 100;
    if (rp) {
      rp->on_timer(now);
      pacer.set_rate_at(now, rp->rate_bps());
    }
    // Keep the NIC queue short so the pacer, not the queue, sets the pace.
    if (f->host_queue_bytes(src) < 2 * (kPacket + kEthOverheadBytes)) {
      if (pacer.may_send(now, kPacket, 0)) {
        if (f->host_send(src, test::meta(dst, kPacket, 3, id, static_cast<uint16_t>(id)))) {
          pacer.on_sent(now, kPacket);
          if (rp) rp->on_bytes_sent(now, kPacket);
          --remaining;
        }
      }
      next = std::max(now + 1, pacer.next_send_time(now, kPacket));
    }
    // Wake for DCQCN's own timers too: a flow cut to 1 Mb/s must not sleep through its recovery.
    if (rp) next = std::min(next, std::max(now + 1, rp->next_deadline()));
    if (remaining) (void)f->loop().schedule_at(next, *this, 0);
  }
};

struct Host final : HostReceiver {
  SwitchFabric* f = nullptr;
  std::vector<std::unique_ptr<Flow>>* flows = nullptr;
  uint64_t cnps_sent = 0;
  void on_receive(const Delivered& d, Nanos now) override {
    if (d.tag & kCnpTag) {
      Flow& fl = *(*flows)[d.tag & ~kCnpTag];
      if (fl.rp) {
        fl.rp->on_cnp(now);
        fl.pacer.set_rate_at(now, fl.rp->rate_bps());
      }
      return;
    }
    Flow& fl = *(*flows)[d.tag];
    if (++fl.delivered == 512) fl.done_at = now;
    if (d.ce && fl.np.on_ce(now)) {
      PacketMeta cnp = test::meta(d.src, 64, 6, d.tag | kCnpTag);
      cnp.dscp = cc::kCnpDscp;
      cnp.ect = false;
      cnps_sent += f->host_send(d.dst, cnp);
    }
  }
};

struct Outcome {
  uint64_t pauses = 0, cnps = 0, delivered = 0, max_queue = 0, avg_queue = 0, drops = 0;
  Nanos last_done = 0;
};

// Samples the bottleneck queue every 10 us after a 200 us start-up transient.
struct Sampler final : EventTarget {
  SwitchFabric* f = nullptr;
  PortId port = 0;
  uint64_t sum = 0, n = 0;
  bool stop = false;
  void on_event(uint32_t, uint64_t, Nanos now) override {
    if (stop) return;
    if (now >= 200'000) {
      sum += f->queue_bytes(port, 3);
      ++n;
    }
    (void)f->loop().schedule_at(now + 10'000, *this, 0);
  }
};

enum class Cc { kOff, kPaper, kMlx5 };

Outcome run_incast(Cc cc, uint32_t senders) {
  EventLoop loop(1, 1 << 18);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.ecn.kmin_bytes = 20 * 1024;
  sw.ecn.kmax_bytes = 200 * 1024;
  sw.ecn.pmax = 0.2;
  sw.xoff_bytes = 256 * 1024;  // per ingress port: ECN should act long before PFC
  sw.xon_bytes = 192 * 1024;
  build_star(f, senders + 1, {100'000'000'000, 1000, 0}, sw);
  EXPECT_EQ(f.finalize(), 0);
  std::vector<std::unique_ptr<Flow>> flows;
  std::vector<Host> hosts(senders + 1);
  for (HostId h = 0; h <= senders; ++h) {
    hosts[h].f = &f;
    hosts[h].flows = &flows;
    f.set_receiver(h, &hosts[h]);
  }
  for (uint32_t s = 0; s < senders; ++s) {
    auto fl = std::make_unique<Flow>();
    fl->f = &f;
    fl->src = s;
    fl->dst = senders;
    fl->id = s;
    fl->remaining = 512;  // 2 MiB
    if (cc == Cc::kPaper) {
      fl->rp = std::make_unique<cc::Dcqcn>(cc::DcqcnParams::paper(100e9));
      fl->np = cc::CnpPacer(cc::kCnpIntervalPaperNs);
    }
    if (cc == Cc::kMlx5) fl->rp = std::make_unique<cc::Dcqcn>(cc::DcqcnParams::mlx5(100e9));
    EXPECT_TRUE(loop.schedule_at(0, *fl, 0));
    flows.push_back(std::move(fl));
  }
  Sampler sampler;
  sampler.f = &f;
  sampler.port = f.peer(f.host_port(senders));
  EXPECT_TRUE(loop.schedule_at(0, sampler, 0));
  for (size_t guard = 0; guard < 100'000'000 && loop.step(); ++guard) {
    bool all_done = true;
    for (const auto& fl : flows) all_done = all_done && fl->delivered == 512;
    if (all_done) break;
  }
  sampler.stop = true;
  Outcome o;
  o.avg_queue = sampler.n ? sampler.sum / sampler.n : 0;
  o.pauses = f.counters().pause_frames;
  o.drops = f.counters().drops_buffer;
  o.max_queue = f.port_counters(f.peer(f.host_port(senders))).max_queue_bytes;
  for (const auto& h : hosts) o.cnps += h.cnps_sent;
  for (const auto& fl : flows) {
    o.delivered += fl->delivered;
    o.last_done = std::max(o.last_done, fl->done_at);
  }
  return o;
}

void print(const char* name, const Outcome& o) {
  std::printf(
      "[ dcqcn ] 8:1 incast, %s: %llu pauses, %llu CNPs, queue avg %llu max %llu B, "
      "done %.1f us\n",
      name, static_cast<unsigned long long>(o.pauses), static_cast<unsigned long long>(o.cnps),
      static_cast<unsigned long long>(o.avg_queue), static_cast<unsigned long long>(o.max_queue),
      static_cast<double>(o.last_done) / 1e3);
}

TEST(FabricDcqcn, IncastNeedsFewerPausesAndAShorterQueue) {
  const Outcome off = run_incast(Cc::kOff, 8), paper = run_incast(Cc::kPaper, 8),
                mlx = run_incast(Cc::kMlx5, 8);
  print("off", off);
  print("paper", paper);
  print("mlx5", mlx);
  for (const Outcome* o : {&off, &paper, &mlx}) {
    EXPECT_EQ(o->delivered, 8u * 512);
    EXPECT_EQ(o->drops, 0u);
  }
  for (const Outcome* on : {&paper, &mlx}) {
    EXPECT_GT(on->cnps, 10u);
    EXPECT_LT(on->pauses * 2, off.pauses);
    EXPECT_LT(on->avg_queue * 4, off.avg_queue);
    // PFC alone keeps the port busy (8 x 2 MiB at 100 Gb/s: 1.39 ms of frames); DCQCN gives up
    // some throughput for the short queue, but not most of it.
    EXPECT_LT(on->last_done, 5 * off.last_done);
  }
  EXPECT_GE(off.last_done, 1'350'000u);
}

}  // namespace
}  // namespace uroce::fabric
