#pragma once
// An in-memory IP network between any number of endpoints, in virtual time, that misbehaves on
// purpose: per-direction propagation delay and jitter, serialisation at a line rate, and seeded
// loss, duplication, reordering and bit corruption. It carries whole IP packets (a RoCEv2 packet
// with its ICRC), so a flipped bit is caught where a real NIC catches it: by the receiver's ICRC or
// IP header checks, not by the network.
//
// All randomness comes from the EventLoop's generator, drawn in a fixed order per packet, so a
// world is a function of its seed. Every resource is bounded: packets in flight share one pool of
// buffers (allocated on first use, then reused), each endpoint's inbox holds a bounded number, and
// running out of either is a counted drop (a NIC ring overflowing), never an allocation or a crash.
//
// Not thread-safe; runs on its EventLoop's thread.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/types.h"
#include "fabric/event_loop.h"

namespace uroce::fabric {

// How one direction (from -> to) behaves. Probabilities are per packet, in [0, 1].
struct PathParams {
  Nanos delay_ns = 1000;  // one-way propagation
  Nanos jitter_ns = 0;    // plus uniform [0, jitter_ns] per packet (which itself reorders)
  uint64_t rate_bps = 0;  // serialisation rate; 0 = infinitely fast
  double loss = 0;
  double duplicate = 0;  // a second copy, with its own jitter, reorder and corruption draws
  double reorder = 0;    // held back by uniform [1, reorder_delay_ns] extra, so later ones overtake
  Nanos reorder_delay_ns = 10'000;
  double corrupt = 0;  // one uniformly chosen bit of the IP packet flipped
};

struct NetworkConfig {
  size_t max_endpoints = 64;
  size_t max_in_flight = 4096;       // packet buffers: on the wire plus waiting in inboxes
  size_t inbox_packets = 1024;       // per endpoint, delivered but not yet taken
  uint32_t max_packet_bytes = 4400;  // an IPv6 RoCEv2 packet with a 4096-byte payload fits
  PathParams defaults;
};

struct NetworkCounters {
  uint64_t sent = 0, sent_bytes = 0;  // packets handed to send() that left the sender
  uint64_t delivered = 0, delivered_bytes = 0;
  uint64_t lost = 0, duplicated = 0, reordered = 0, corrupted = 0;
  uint64_t drop_no_route = 0;     // destination address not attached (or not an IP packet)
  uint64_t drop_too_big = 0;      // larger than max_packet_bytes
  uint64_t drop_no_buffer = 0;    // max_in_flight reached
  uint64_t drop_inbox_full = 0;   // the receiver didn't take its packets fast enough
  uint64_t drop_event_queue = 0;  // the EventLoop was at its bound
};

using EndpointId = uint32_t;

class LossyNetwork final : public EventTarget {
 public:
  explicit LossyNetwork(EventLoop& loop, const NetworkConfig& config = {});
  ~LossyNetwork() override;
  LossyNetwork(const LossyNetwork&) = delete;
  LossyNetwork& operator=(const LossyNetwork&) = delete;

  // Adds an endpoint reachable at `address` (an IPv4-mapped or IPv6 GID); every path to and from
  // it starts with config.defaults. EEXIST if the address is taken, ENOSPC past max_endpoints.
  Result<EndpointId> attach(const Gid& address);
  size_t endpoints() const { return endpoints_.size(); }
  const Gid& address(EndpointId ep) const;

  // Called synchronously, at the arrival time, whenever a packet lands in `ep`'s inbox:
  // target.on_event(kind, ep, now). For a driver that wakes a device only when it has work.
  void set_arrival_notify(EndpointId ep, EventTarget* target, uint32_t kind);

  void set_path(EndpointId from, EndpointId to, const PathParams& params);
  void set_all_paths(const PathParams& params);
  const PathParams& path(EndpointId from, EndpointId to) const;

  // Sends an IP packet from `from`, routed by its destination address, at the loop's now().
  // Returns false if it could not leave (no route, too big, no buffer); a packet the network then
  // loses still returns true, like a real wire.
  bool send(EndpointId from, std::span<const uint8_t> ip_packet);

  // The oldest delivered packet waiting at `ep` (empty span if none), valid until pop(ep).
  std::span<const uint8_t> front(EndpointId ep) const;
  void pop(EndpointId ep);
  size_t inbox_size(EndpointId ep) const;

  // An observer of every packet's fate, for traces and debugging (off, and free, by default).
  enum class TapEvent : uint8_t { kSent, kLost, kDuplicated, kCorrupted, kDelivered, kDropped };
  using Tap = std::function<void(TapEvent, EndpointId from, EndpointId to,
                                 std::span<const uint8_t> bytes, Nanos now)>;
  void set_tap(Tap tap) { tap_ = std::move(tap); }

  const NetworkCounters& counters() const { return counters_; }
  EventLoop& loop() { return loop_; }

  void on_event(uint32_t kind, uint64_t arg, Nanos now) override;

 private:
  static constexpr uint32_t kNoSlot = ~uint32_t{0};
  struct Slot {
    std::unique_ptr<uint8_t[]> bytes;
    uint32_t len = 0;
    EndpointId from = 0, to = 0;
    uint32_t next = kNoSlot;  // inbox FIFO link
  };
  struct Endpoint {
    Gid address{};
    uint32_t head = kNoSlot, tail = kNoSlot;
    size_t queued = 0;
    EventTarget* notify = nullptr;
    uint32_t notify_kind = 0;
  };
  struct PathState {
    PathParams params;
    Nanos busy_until = 0;  // the sender's transmitter is serialising until then
  };

  bool route(std::span<const uint8_t> ip_packet, EndpointId& to) const;
  uint32_t take_slot(std::span<const uint8_t> bytes, EndpointId from, EndpointId to);
  void free_slot(uint32_t slot);
  // One copy onto the wire: draws jitter, reordering and corruption, schedules the arrival.
  void launch(std::span<const uint8_t> bytes, EndpointId from, EndpointId to, const PathParams& p,
              Nanos departed);
  void tap(TapEvent e, EndpointId from, EndpointId to, std::span<const uint8_t> bytes) {
    if (tap_) tap_(e, from, to, bytes, loop_.now());
  }
  void arrive(uint32_t slot, Nanos now);

  EventLoop& loop_;
  NetworkConfig config_;
  std::vector<Endpoint> endpoints_;
  std::vector<std::vector<PathState>> paths_;  // [from][to]
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  NetworkCounters counters_;
  Tap tap_;
};

}  // namespace uroce::fabric
