// PFC: a pause really stops the upstream sender's priority (and only it) and XON or expiry
// resumes it; incast on a lossless priority never drops; on a lossy one drops are counted.
#include <gtest/gtest.h>

#include "fabric/topology.h"
#include "fabric_switch_util.h"

namespace uroce::fabric {
namespace {

using test::meta;
using test::Recorder;

constexpr LinkParams k100G{100'000'000'000, 1000, 0};

TEST(FabricPfc, PauseStopsOnlyThatPriorityUntilItExpires) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  Topology t = build_star(f, 2, k100G);
  ASSERT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(1, &rx);
  // The switch pauses priority 3 on its port facing host 0 for 65535 quanta.
  f.send_pause(f.peer(f.host_port(0)), 3, 0xffff);
  loop.run_until(2000);
  // The pause (84 B: 6.72 -> 7 ns) plus 1 us of cable lands at 1007 ns and lasts
  // 65535 x 512 bits / 100 Gb/s = 335539.2 -> 335540 ns: host 0's priority 3 is paused until
  // 336547.
  EXPECT_TRUE(f.paused(f.host_port(0), 3, 2000));
  EXPECT_FALSE(f.paused(f.host_port(0), 0, 2000));
  for (uint64_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(f.host_send(0, meta(1, 1024, 3, i)));
    ASSERT_TRUE(f.host_send(0, meta(1, 1024, 0, 100 + i)));
  }
  loop.run_until(300'000);
  EXPECT_EQ(rx.count_priority(0), 10u);
  EXPECT_EQ(rx.count_priority(3), 0u);
  loop.run_until(1'000'000);
  ASSERT_EQ(rx.count_priority(3), 10u);
  // The first priority-3 frame (1062 B on the wire: 84.96 -> 85 ns) leaves at 336547, reaches the
  // switch at 337632 and host 1 at 338717.
  for (const auto& a : rx.arrivals)
    if (a.priority == 3) {
      EXPECT_EQ(a.at, 338717u);
      break;
    }
  EXPECT_EQ(f.port_counters(f.host_port(0)).pause_received, 1u);
  EXPECT_EQ(f.port_counters(f.host_port(0)).paused_ns, 335540u);
}

TEST(FabricPfc, XonResumesAtOnce) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  build_star(f, 2, k100G);
  ASSERT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(1, &rx);
  const PortId sw_port = f.peer(f.host_port(0));
  f.send_pause(sw_port, 3, 0xffff);
  loop.run_until(2000);
  ASSERT_TRUE(f.host_send(0, meta(1, 1024, 3)));
  loop.run_until(50'000);
  EXPECT_TRUE(rx.arrivals.empty());
  f.send_pause(sw_port, 3, 0);  // XON at 50 us: lands at 51007, frame leaves then
  loop.run_until(100'000);
  ASSERT_EQ(rx.arrivals.size(), 1u);
  EXPECT_EQ(rx.arrivals[0].at, 51007u + 2 * (85 + 1000));
  EXPECT_EQ(f.port_counters(f.host_port(0)).paused_ns, 51007u - 1007u);
}

struct Incast {
  uint64_t sent = 0;
  Recorder rx;
  Nanos last = 0;
};

// N senders, `packets` each of `bytes`, to the last host of a star, all at t = 0.
void run_incast(EventLoop& loop, SwitchFabric& f, Incast& r, uint32_t senders, uint32_t packets,
                uint32_t bytes, uint8_t priority) {
  f.set_receiver(senders, &r.rx);
  for (uint32_t p = 0; p < packets; ++p)
    for (HostId s = 0; s < senders; ++s)
      r.sent += f.host_send(s, meta(senders, bytes, priority, p));
  loop.run_until(kNever);
  for (const auto& a : r.rx.arrivals) r.last = std::max(r.last, a.at);
}

TEST(FabricPfc, LosslessIncastNeverDropsAndPausesSenders) {
  for (uint64_t seed : {1, 2, 3}) {
    EventLoop loop(seed);
    SwitchFabric f(loop);
    SwitchParams sw;
    sw.buffer_bytes = 1 << 20;  // 1 MiB: far less than the 16 x 200 x 4 KiB offered
    build_star(f, 17, k100G, sw);
    ASSERT_EQ(f.finalize(), 0);
    Incast r;
    run_incast(loop, f, r, 16, 200, 4096, 3);
    EXPECT_EQ(r.sent, 3200u);
    EXPECT_EQ(r.rx.arrivals.size(), 3200u);  // and UROCE_CHECK never fired inside
    EXPECT_EQ(f.counters().drops_buffer, 0u);
    EXPECT_EQ(f.counters().pause_frames, 604u) << seed;
    EXPECT_EQ(f.port_counters(f.host_port(0)).pause_received, 36u) << seed;
    EXPECT_LE(f.counters().max_lossless_headroom_used, f.headroom_bytes(f.peer(f.host_port(0))));
    // The receiver's link stays busy: 3200 x 4134 B x 8 / 100 Gb/s = 1058.304 us of frames, plus
    // one frame and two cables of latency.
    EXPECT_GE(r.last, 1'058'304u);
    EXPECT_LE(r.last, 1'058'304u + 60'000u);
  }
}

TEST(FabricPfc, LossyIncastDropsAreCounted) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.buffer_bytes = 1 << 20;
  build_star(f, 17, k100G, sw);
  ASSERT_EQ(f.finalize(), 0);
  Incast r;
  run_incast(loop, f, r, 16, 200, 4096, 0);  // priority 0 is lossy
  EXPECT_EQ(r.sent, 3200u);
  EXPECT_EQ(f.counters().drops_buffer, 2952u);
  EXPECT_EQ(r.rx.arrivals.size() + f.counters().drops_buffer, 3200u);
  EXPECT_EQ(f.counters().pause_frames, 0u);
  uint64_t at_ports = 0;
  for (PortId p = 0; p < f.ports(); ++p) at_ports += f.port_counters(p).drops_buffer;
  EXPECT_EQ(at_ports, f.counters().drops_buffer);
}

TEST(FabricPfc, LosslessAcrossAFatTreeUnderCrossPodIncast) {
  EventLoop loop(9);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.buffer_bytes = 2 << 20;
  Topology t = build_fat_tree(f, 4, k100G, sw);
  ASSERT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(0, &rx);
  uint64_t sent = 0;
  for (uint32_t p = 0; p < 100; ++p)
    for (HostId s = 4; s < 16; ++s)
      sent += f.host_send(s, meta(0, 4096, 3, p, static_cast<uint16_t>(0xc000 + s)));
  loop.run_until(kNever);
  EXPECT_EQ(sent, 1200u);
  EXPECT_EQ(rx.arrivals.size(), 1200u);
  EXPECT_EQ(f.counters().drops_buffer, 0u);
  EXPECT_EQ(f.counters().pause_frames, 868u);
}

TEST(FabricPfc, WatchdogBreaksAPauseStorm) {
  EventLoop loop(1);
  SwitchFabric f(loop);
  SwitchParams sw;
  sw.watchdog_poll_ns = 100'000;
  sw.watchdog_detect_ns = 1'000'000;
  sw.watchdog_restore_ns = 2'000'000;
  build_star(f, 2, k100G, sw);
  ASSERT_EQ(f.finalize(), 0);
  Recorder rx;
  f.set_receiver(1, &rx);
  // Host 1's NIC is stuck sending pauses (a pause storm) for 5 ms.
  const PortId storm = f.host_port(1);
  const PortId egress = f.peer(storm);
  for (uint64_t i = 0; i < 20; ++i) ASSERT_TRUE(f.host_send(0, meta(1, 4096, 3, i)));
  size_t during_restore = 0;
  for (Nanos t = 0; t < 5'000'000; t += 100'000) {
    f.send_pause(storm, 3, 0xffff);
    if (t == 1'500'000) {
      // Detected at the first poll 1 ms after the storm began: pauses are ignored until ~3.1 ms,
      // so what host 0 sends now gets through although the storm goes on.
      EXPECT_EQ(f.port_counters(egress).watchdog_storms, 1u);
      EXPECT_FALSE(f.paused(egress, 3, t));
      const size_t before = rx.arrivals.size();
      for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(f.host_send(0, meta(1, 4096, 3, 100 + i)));
      loop.run_until(t + 50'000);
      during_restore = rx.arrivals.size() - before;
    }
    if (t == 3'500'000) {
      for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(f.host_send(0, meta(1, 4096, 3, 200 + i)));
    }
    loop.run_until(t + 100'000);
  }
  EXPECT_EQ(during_restore, 5u);
  EXPECT_EQ(f.counters().drops_watchdog, 16u);
  // Restored at ~3.1 ms while the storm went on: packets queued at 3.5 ms are stuck again and
  // the storm is detected a second time about 1 ms later.
  EXPECT_EQ(f.port_counters(egress).watchdog_storms, 2u);
  EXPECT_EQ(f.counters().drops_buffer, 0u);
}

}  // namespace
}  // namespace uroce::fabric
