// The lossy network on its own: delays, serialisation, loss/duplication/reorder statistics, bounds
// and determinism per seed. Packets here are minimal IPv4 headers (the network routes on the
// destination address and doesn't parse further).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/bytes.h"
#include "fabric/event_loop.h"
#include "fabric/lossy_network.h"

namespace uroce::fabric {
namespace {

const Gid kA = gid_from_ipv4({10, 0, 0, 1});
const Gid kB = gid_from_ipv4({10, 0, 0, 2});

// An IPv4-looking packet of `size` bytes to `dst`, numbered `n` (bytes 20..23).
std::vector<uint8_t> packet_to(const Gid& dst, uint32_t n, size_t size = 64) {
  std::vector<uint8_t> p(size, 0);
  p[0] = 0x45;
  std::copy_n(dst.begin() + 12, 4, p.begin() + 16);
  store_be32(&p[20], n);
  return p;
}

struct Arrival {
  Nanos at;
  uint32_t n;
  bool operator==(const Arrival&) const = default;
};

// Drains B's inbox after every event, recording arrival times and packet numbers.
struct World {
  EventLoop loop;
  LossyNetwork net;
  EndpointId a = 0, b = 0;
  std::vector<Arrival> got;

  explicit World(uint64_t seed, const NetworkConfig& cfg = {}) : loop(seed), net(loop, cfg) {
    a = net.attach(kA).value();
    b = net.attach(kB).value();
  }
  void drain() {
    for (auto s = net.front(b); !s.empty(); s = net.front(b)) {
      got.push_back({loop.now(), load_be32(&s[20])});
      net.pop(b);
    }
  }
  void run() {
    while (loop.step()) drain();
  }
};

TEST(FabricLossyNetwork, DelayAndSerialisation) {
  NetworkConfig cfg;
  cfg.defaults.delay_ns = 5000;
  World w(1, cfg);
  ASSERT_TRUE(w.net.send(w.a, packet_to(kB, 0)));
  w.run();
  ASSERT_EQ(w.got.size(), 1u);
  EXPECT_EQ(w.got[0].at, 5000u);

  // 10 Gb/s: a 1000-byte packet takes 800 ns to clock out; three back to back queue behind each
  // other, and the other direction has its own transmitter.
  PathParams p;
  p.delay_ns = 1000;
  p.rate_bps = 10'000'000'000;
  w.net.set_path(w.a, w.b, p);
  const Nanos t0 = w.loop.now();
  for (uint32_t i = 1; i <= 3; ++i) ASSERT_TRUE(w.net.send(w.a, packet_to(kB, i, 1000)));
  w.run();
  ASSERT_EQ(w.got.size(), 4u);
  for (uint32_t i = 1; i <= 3; ++i) {
    EXPECT_EQ(w.got[i].n, i);
    EXPECT_EQ(w.got[i].at, t0 + 800 * i + 1000);
  }
  EXPECT_EQ(w.net.path(w.b, w.a).rate_bps, 0u) << "set_path is per direction";
}

TEST(FabricLossyNetwork, JitterStaysInBoundsAndNoJitterKeepsOrder) {
  NetworkConfig cfg;
  cfg.defaults.delay_ns = 2000;
  World w(3, cfg);
  for (uint32_t i = 0; i < 200; ++i) ASSERT_TRUE(w.net.send(w.a, packet_to(kB, i)));
  w.run();
  ASSERT_EQ(w.got.size(), 200u);
  for (uint32_t i = 0; i < 200; ++i) EXPECT_EQ(w.got[i].n, i) << "same-time arrivals keep order";

  PathParams p;
  p.delay_ns = 2000;
  p.jitter_ns = 500;
  w.net.set_all_paths(p);
  w.got.clear();
  const Nanos t0 = w.loop.now();
  bool reordered = false;
  for (uint32_t i = 0; i < 200; ++i) ASSERT_TRUE(w.net.send(w.a, packet_to(kB, i)));
  w.run();
  ASSERT_EQ(w.got.size(), 200u);
  for (size_t i = 0; i < w.got.size(); ++i) {
    EXPECT_GE(w.got[i].at, t0 + 2000);
    EXPECT_LE(w.got[i].at, t0 + 2500);
    if (i > 0 && w.got[i].n < w.got[i - 1].n) reordered = true;
  }
  EXPECT_TRUE(reordered) << "jitter on packets sent together reorders them";
}

TEST(FabricLossyNetwork, LossDuplicateReorderRatesMatchTheirProbabilities) {
  constexpr uint32_t kN = 20000;
  NetworkConfig cfg;
  cfg.max_in_flight = 2 * kN;
  cfg.inbox_packets = 2 * kN;
  cfg.max_packet_bytes = 64;
  cfg.defaults.loss = 0.10;
  cfg.defaults.duplicate = 0.05;
  cfg.defaults.reorder = 0.02;
  World w(2024, cfg);
  for (uint32_t i = 0; i < kN; ++i) ASSERT_TRUE(w.net.send(w.a, packet_to(kB, i)));
  w.run();
  const NetworkCounters& c = w.net.counters();
  // Binomial: expect within 5 standard deviations (a fixed seed, so this can't flake; the bound
  // says the rates are right, not just that this seed passes).
  auto near = [](uint64_t got, double n, double p) {
    return std::fabs(static_cast<double>(got) - n * p) <= 5 * std::sqrt(n * p * (1 - p));
  };
  EXPECT_TRUE(near(c.lost, kN, 0.10)) << c.lost;
  const double survived = kN - static_cast<double>(c.lost);
  EXPECT_TRUE(near(c.duplicated, survived, 0.05)) << c.duplicated;
  EXPECT_TRUE(near(c.reordered, survived + c.duplicated, 0.02)) << c.reordered;
  EXPECT_EQ(c.sent, kN);
  EXPECT_EQ(c.delivered, kN - c.lost + c.duplicated);
  EXPECT_EQ(w.got.size(), c.delivered);
  std::vector<int> copies(kN, 0);
  for (const Arrival& a : w.got) ++copies[a.n];
  uint64_t twice = 0, none = 0;
  for (int n : copies) {
    EXPECT_LE(n, 2);
    twice += n == 2;
    none += n == 0;
  }
  EXPECT_EQ(twice, c.duplicated);
  EXPECT_EQ(none, c.lost);
}

TEST(FabricLossyNetwork, SameSeedSameWorldOtherSeedOtherWorld) {
  auto run = [](uint64_t seed) {
    NetworkConfig cfg;
    cfg.defaults = {.delay_ns = 1000,
                    .jitter_ns = 300,
                    .rate_bps = 25'000'000'000,
                    .loss = 0.05,
                    .duplicate = 0.05,
                    .reorder = 0.05,
                    .corrupt = 0.05};
    World w(seed, cfg);
    for (uint32_t i = 0; i < 500; ++i) {
      EXPECT_TRUE(w.net.send(w.a, packet_to(kB, i, 64 + i % 200)));
      w.loop.run_until(w.loop.now() + w.loop.rng().below(100));
      w.drain();
    }
    w.run();
    return std::pair(w.got, w.loop.trace_hash());
  };
  const auto one = run(77);
  EXPECT_EQ(one, run(77));
  EXPECT_NE(one.first, run(78).first);
}

TEST(FabricLossyNetwork, BoundsAreCountedDrops) {
  NetworkConfig cfg;
  cfg.max_in_flight = 4;
  cfg.inbox_packets = 2;
  cfg.max_packet_bytes = 128;
  World w(5, cfg);
  EXPECT_FALSE(w.net.send(w.a, packet_to(kB, 0, 129)));
  EXPECT_EQ(w.net.counters().drop_too_big, 1u);
  EXPECT_FALSE(w.net.send(w.a, packet_to(gid_from_ipv4({10, 0, 0, 9}), 0)));
  EXPECT_FALSE(w.net.send(w.a, std::vector<uint8_t>(30, 0)));  // not IP
  EXPECT_EQ(w.net.counters().drop_no_route, 2u);
  for (uint32_t i = 0; i < 6; ++i) EXPECT_TRUE(w.net.send(w.a, packet_to(kB, i)));
  EXPECT_EQ(w.net.counters().drop_no_buffer, 2u);
  while (w.loop.step()) {
  }
  // Nobody drained the inbox: two fit, two overflowed (and their buffers came back).
  EXPECT_EQ(w.net.inbox_size(w.b), 2u);
  EXPECT_EQ(w.net.counters().drop_inbox_full, 2u);
  w.drain();
  ASSERT_EQ(w.got.size(), 2u);
  EXPECT_EQ(w.got[0].n, 0u);
  EXPECT_EQ(w.got[1].n, 1u);
  // Every buffer is free again: four more fit in flight.
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(w.net.send(w.a, packet_to(kB, i)));
  EXPECT_EQ(w.net.counters().drop_no_buffer, 2u);

  EXPECT_FALSE(w.net.attach(kA).ok()) << "address already taken";
}

TEST(FabricLossyNetwork, EventQueueBoundIsACountedDrop) {
  EventLoop loop(1, 2);
  LossyNetwork net(loop);
  const EndpointId a = net.attach(kA).value();
  net.attach(kB).value();
  for (uint32_t i = 0; i < 3; ++i) EXPECT_TRUE(net.send(a, packet_to(kB, i)));
  EXPECT_EQ(net.counters().drop_event_queue, 1u);
  EXPECT_EQ(loop.counters().rejected_full, 1u);
}

TEST(FabricLossyNetwork, ArrivalNotifyRunsAtArrivalTime) {
  struct Probe : EventTarget {
    std::vector<std::pair<uint64_t, Nanos>> calls;
    void on_event(uint32_t kind, uint64_t arg, Nanos now) override {
      EXPECT_EQ(kind, 7u);
      calls.emplace_back(arg, now);
    }
  } probe;
  NetworkConfig cfg;
  cfg.defaults.delay_ns = 300;
  World w(1, cfg);
  w.net.set_arrival_notify(w.b, &probe, 7);
  ASSERT_TRUE(w.net.send(w.a, packet_to(kB, 0)));
  w.run();
  ASSERT_EQ(probe.calls.size(), 1u);
  EXPECT_EQ(probe.calls[0].first, w.b);
  EXPECT_EQ(probe.calls[0].second, 300u);
}

}  // namespace
}  // namespace uroce::fabric

namespace uroce::fabric {
namespace {

TEST(FabricLossyNetwork, TapSeesEveryPacketsFateAndAgreesWithTheCounters) {
  NetworkConfig cfg;
  cfg.defaults.loss = 0.2;
  cfg.defaults.duplicate = 0.2;
  cfg.defaults.corrupt = 0.2;
  World w(11, cfg);
  std::array<uint64_t, 6> seen{};
  w.net.set_tap([&](LossyNetwork::TapEvent e, EndpointId from, EndpointId to,
                    std::span<const uint8_t> bytes, Nanos) {
    EXPECT_EQ(from, w.a);
    EXPECT_EQ(to, w.b);
    EXPECT_EQ(bytes.size(), 64u);
    ++seen[static_cast<size_t>(e)];
  });
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_TRUE(w.net.send(w.a, packet_to(kB, i)));
  w.run();
  const NetworkCounters& c = w.net.counters();
  using E = LossyNetwork::TapEvent;
  EXPECT_EQ(seen[static_cast<size_t>(E::kSent)], c.sent);
  EXPECT_EQ(seen[static_cast<size_t>(E::kLost)], c.lost);
  EXPECT_EQ(seen[static_cast<size_t>(E::kDuplicated)], c.duplicated);
  EXPECT_EQ(seen[static_cast<size_t>(E::kCorrupted)], c.corrupted);
  EXPECT_EQ(seen[static_cast<size_t>(E::kDelivered)], c.delivered);
  EXPECT_EQ(seen[static_cast<size_t>(E::kDropped)], 0u);
  EXPECT_EQ(c.lost, 224u);
  EXPECT_EQ(c.duplicated, 157u);
  EXPECT_EQ(c.corrupted, 194u);
}

}  // namespace
}  // namespace uroce::fabric
