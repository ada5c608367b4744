#pragma once
// A switched Ethernet fabric in virtual time: hosts and switches joined by full-duplex links, with
// the data-center mechanisms RoCE depends on.
//
//  - Links: bandwidth, propagation delay, optional bit error rate (a hit frame fails its FCS and is
//    dropped at the receiver, counted). Store-and-forward: a packet arrives when its last bit does.
//  - Switches: per-port, per-priority egress queues over one shared buffer (lossy queues capped
//    by a dynamic threshold); forwarding by
//    destination host over all shortest paths, ECMP by a hash of (source, destination, UDP source
//    port), so one QP stays on one path.
//  - Classification: DSCP (or 802.1p PCP, per switch) to one of 8 priorities; priority p is
//    traffic class p. Strict-priority classes (CNPs: DSCP 48 -> priority 6) go first; the others
//    share the port by deficit round robin with ETS weights (IEEE 802.1Q-2018 clause 37).
//  - ECN: RED-style marking at egress enqueue from the egress queue's length: Kmin, Kmax, Pmax
//    (DCQCN paper section 3.1, the CP).
//  - PFC (IEEE 802.1Q-2018 clause 36, 802.1Qbb): per ingress port and priority, XOFF/XON
//    thresholds with headroom sized from link speed, delay and MTU. A pause frame carries quanta of
//    512 bit times and stops the upstream sender's priority until it expires or an XON (quanta 0)
//    arrives; it is refreshed while the queue stays above XON. A lossless priority never drops for
//    want of buffer: that is checked (UROCE_CHECK) on every admission. Lossy priorities drop when
//    the shared buffer is full, counted.
//  - PFC watchdog: a priority paused without progress for longer than `detect` has its queue
//    dropped and incoming pauses ignored for `restore` (how SONiC and Junos break pause storms).
//
// Hosts attach through HostReceiver and host_send(); FabricLink (fabric_link.h) puts real
// uroce devices on it (host_send_ip carries a whole IP packet and sets CE in its bytes).
//
// Fast: packets are pooled descriptors moved by index, events are two per hop, routes are
// precomputed, a port's state for one traffic class is one cache line. Every pool and queue is
// bounded by FabricConfig; running out is a counted refusal.
// Not thread-safe; runs on its EventLoop's thread. All randomness comes from the loop's Rng.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/types.h"
#include "fabric/event_loop.h"

namespace uroce::fabric {

inline constexpr int kPriorities = 8;
// Preamble + SFD (8), Ethernet header (14), FCS (4), inter-frame gap (12): what an IP packet costs
// on the wire beyond its own bytes.
inline constexpr uint32_t kEthOverheadBytes = 38;
inline constexpr uint32_t kPauseFrameBytes = 64 + 20;  // minimum frame plus preamble and gap

using NodeId = uint32_t;
using PortId = uint32_t;  // global: every port of every node has one
using HostId = uint32_t;  // index among hosts only
inline constexpr uint32_t kNone = ~uint32_t{0};

struct LinkParams {
  uint64_t rate_bps = 100'000'000'000;
  Nanos delay_ns = 1000;
  double bit_error_rate = 0;
};

// RED-style marking (DCQCN CP): p = 0 up to Kmin, rising linearly to Pmax at Kmax, 1 above.
struct EcnParams {
  bool enabled = true;
  uint64_t kmin_bytes = 5 * 1024;
  uint64_t kmax_bytes = 200 * 1024;
  double pmax = 0.01;
  // false: mark at egress enqueue on the queue found there (DCTCP-style switches); true: at
  // dequeue on the queue left behind, as HPCC's ns-3 switch does, so a mark is not delayed by
  // the queue it reports.
  bool mark_at_dequeue = false;
  double probability(uint64_t queue_bytes) const;
};

struct SwitchParams {
  uint64_t buffer_bytes = 12 * 1024 * 1024;    // shared buffer, headroom included
  bool trust_pcp = false;                      // classify by 802.1p PCP instead of DSCP
  std::array<uint8_t, 64> dscp_to_priority{};  // default: DSCP >> 3 (CS classes)
  uint8_t lossless_mask = 1u << 3;             // PFC on: RoCE data on priority 3
  uint8_t strict_mask = 1u << 6 | 1u << 7;     // CNPs (priority 6) and network control
  std::array<uint32_t, kPriorities> ets_weight{1, 1, 1, 1, 1, 1, 1, 1};
  uint8_t ecn_mask = 0xff;  // priorities that mark
  EcnParams ecn;
  uint32_t mtu_bytes = 4096 + 96;  // largest IP packet expected
  uint64_t xoff_bytes = 0;         // per ingress port and priority; 0 = 4 MTU
  uint64_t xon_bytes = 0;          // 0 = xoff - 2 MTU
  uint16_t pause_quanta = 0xffff;
  // Lossy admission by dynamic threshold (Choudhury and Hahne, 1998): an egress queue may grow
  // to alpha x the free shared buffer. Keeps one congested lossy queue from taking the whole pool
  // and starving lossless ingress ports of room below XOFF.
  double lossy_dt_alpha = 1.0;
  // PFC watchdog; 0 = off.
  Nanos watchdog_poll_ns = 0;
  Nanos watchdog_detect_ns = 200'000'000;
  Nanos watchdog_restore_ns = 200'000'000;
  SwitchParams();
};

struct FabricConfig {
  size_t max_packets = 1 << 16;       // descriptor pool, all hosts and switches together
  size_t max_payload_buffers = 4096;  // for host_send_ip packets carrying real bytes
  uint32_t max_ip_bytes = 4400;
  uint64_t host_queue_bytes = 4 << 20;  // a NIC's send queue, all priorities together
};

// What a host sends: a descriptor, optionally with a whole IP packet attached.
struct PacketMeta {
  HostId dst = 0;
  uint32_t ip_bytes = 1024;  // size on the wire is ip_bytes + kEthOverheadBytes
  uint8_t dscp = 26;
  uint8_t pcp = 3;
  bool ect = true;
  uint16_t udp_src_port = 0xc000;
  uint64_t tag = 0;  // the caller's: flow id, sequence number
};

struct Delivered {
  HostId src = 0, dst = 0;
  uint32_t ip_bytes = 0;
  uint8_t priority = 0;
  bool ce = false;
  uint64_t tag = 0;
  Nanos sent_at = 0;
  // Empty unless sent with host_send_ip (then its bytes, ip_bytes or fewer); valid in the call.
  std::span<const uint8_t> ip_packet;
  uint32_t payload_buffer = kNone;  // the fabric's buffer holding ip_packet (exchange_payload)
};

class HostReceiver {
 public:
  virtual ~HostReceiver() = default;
  virtual void on_receive(const Delivered& packet, Nanos now) = 0;
  // A packet of this host's finished leaving its NIC queue, which now holds `queued_bytes`
  // (host_queue_bytes): for a host whose sender waits for room in that queue.
  virtual void on_host_queue_drained(uint64_t /*queued_bytes*/, Nanos /*now*/) {}
};

struct PortCounters {
  // The ones every packet updates first, so that they share one cache line.
  uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0;
  uint64_t max_queue_bytes = 0;
  uint64_t ecn_marked = 0;
  uint64_t drops_buffer = 0;     // lossy, buffer full (counted at the ingress port)
  uint64_t drops_bit_error = 0;  // FCS failures on arrival at this port
  uint64_t drops_watchdog = 0;
  uint64_t pause_sent = 0, xon_sent = 0, pause_received = 0;
  uint64_t watchdog_storms = 0;
  Nanos paused_ns = 0;  // time this port's transmitter had a non-empty queue it could not send
};

struct FabricCounters {
  uint64_t host_sent = 0, delivered = 0, delivered_bytes = 0;
  uint64_t refused_no_descriptor = 0, refused_host_queue = 0, refused_no_payload = 0;
  uint64_t refused_bad_packet = 0;  // host_send_ip: not an IPv4/IPv6 packet to a known host
  // host_send_ip: a RoCE v1 packet (a GRH, not routable) to a host off the sender's segment
  uint64_t refused_v1_off_segment = 0;
  uint64_t drops_buffer = 0, drops_bit_error = 0, drops_watchdog = 0, drops_no_route = 0;
  uint64_t drops_event_queue = 0;
  uint64_t ecn_marked = 0, pause_frames = 0;
  uint64_t max_lossless_headroom_used = 0;  // bytes, over all ports: must stay under headroom
};

class SwitchFabric final : public EventTarget {
 public:
  SwitchFabric(EventLoop& loop, const FabricConfig& config = {});
  ~SwitchFabric() override;
  SwitchFabric(const SwitchFabric&) = delete;
  SwitchFabric& operator=(const SwitchFabric&) = delete;

  // ---- Building (before the first packet) ----
  HostId add_host(const Gid& address = {});
  NodeId add_switch(const SwitchParams& params = {});
  // A full-duplex link; returns the port on `a`'s side (the one on `b`'s side is that + 1).
  PortId connect(NodeId a, NodeId b, const LinkParams& link);
  NodeId host_node(HostId h) const { return hosts_[h].node; }
  // Computes routes and buffer reservations; call once, after the last connect(). 0, or ENOSPC
  // when a switch's buffer can't hold its PFC headroom plus one XOFF.
  [[nodiscard]] int finalize();

  // ---- Running ----
  void set_receiver(HostId h, HostReceiver* receiver) { hosts_[h].receiver = receiver; }
  // Queues a packet at host `src`'s NIC, at the loop's now(). False (counted) if no descriptor or
  // the NIC queue is full.
  bool host_send(HostId src, const PacketMeta& meta);
  // The same with a whole IP packet: destination, DSCP, ECN and UDP source port are read from it,
  // and a CE mark is written into it on the way. A packet whose bytes are not all carried (a
  // simulation's payload by reference, FabricLink) gives its size on the wire in `wire_ip_bytes`
  // (0: ip_packet.size()); the receiver gets the bytes given.
  bool host_send_ip(HostId src, std::span<const uint8_t> ip_packet, uint32_t wire_ip_bytes = 0);
  uint64_t host_queue_bytes(HostId h) const;

  // A receiver that keeps a delivered packet's bytes takes the fabric's buffer instead of copying
  // it: `replacement` (null, or a buffer an earlier call returned) goes to the fabric's pool in
  // its place. Call only inside on_receive for that packet; the bytes are then the returned
  // buffer's first ip_bytes.
  std::unique_ptr<uint8_t[]> exchange_payload(const Delivered& packet,
                                              std::unique_ptr<uint8_t[]> replacement);

  // Sends a PFC frame out of `port` to its peer (quanta 0 = XON). Switches do this themselves;
  // public for tests and for hosts that generate pauses.
  void send_pause(PortId port, uint8_t priority, uint16_t quanta);

  // ---- Looking ----
  size_t hosts() const { return hosts_.size(); }
  size_t switches() const { return switch_count_; }
  size_t ports() const;
  PortId host_port(HostId h) const;
  PortId peer(PortId p) const;
  NodeId port_node(PortId p) const;
  const PortCounters& port_counters(PortId p) const;
  uint64_t queue_bytes(PortId p, uint8_t priority) const;
  bool paused(PortId p, uint8_t priority, Nanos now) const;
  uint64_t headroom_bytes(PortId ingress) const;
  uint64_t xoff_bytes(PortId ingress) const;
  uint64_t buffer_used(NodeId sw) const;
  const FabricCounters& counters() const { return counters_; }
  // Pool high-water marks: descriptors and payload buffers made so far (both bounded by
  // FabricConfig; made as first needed, then reused).
  size_t packet_descriptors_made() const;
  size_t payload_buffers_made() const;
  HostId host_by_address(const Gid& address) const;
  // Whether two hosts share an Ethernet segment: attached to the same switch, or wired to each
  // other. RoCE v1 reaches only these (host_send_ip).
  bool same_segment(HostId a, HostId b) const;
  EventLoop& loop() { return loop_; }
  // The ports of switch `sw` on a shortest path toward host `dst`: its ECMP set.
  std::vector<PortId> routes(NodeId sw, HostId dst) const;

  void on_event(uint32_t kind, uint64_t arg, Nanos now) override;

 private:
  struct Packet;
  struct Port;
  struct Node;
  struct Host {
    NodeId node = kNone;
    Gid address{};
    HostReceiver* receiver = nullptr;
    uint64_t queued_bytes = 0;
  };

  uint32_t alloc_packet();
  void free_packet(uint32_t id);
  uint8_t classify(const Node& sw, const Packet& pkt) const;
  void enqueue(PortId port, uint32_t id, Nanos now);
  void maybe_mark_ce(Port& port, Packet& pkt, uint64_t queue_bytes);
  void try_transmit(PortId port, Nanos now);
  uint32_t pick(Port& port, Nanos now);
  void on_tx_done(PortId port, Nanos now);
  void on_arrive(PortId port, uint32_t id, Nanos now);
  bool queue_from_host(HostId src, const PacketMeta& meta, uint32_t payload, uint32_t stored_bytes);
  void switch_receive(PortId in, uint32_t id, Nanos now);
  void release_ingress(Packet& pkt, Nanos now);
  bool xon_ready(const Port& in, uint8_t prio) const;
  void check_xon(PortId in, uint8_t prio, Nanos now);
  void on_pause(PortId port, uint8_t prio, uint16_t quanta, Nanos now);
  void on_pfc_refresh(PortId in, uint8_t prio, uint32_t gen, Nanos now);
  void watchdog(Nanos now);
  void schedule(Nanos at, uint32_t kind, uint64_t arg);
  bool xoff_needed(const Port& in, uint8_t prio) const;

  EventLoop& loop_;
  FabricConfig config_;
  struct GidHash {
    size_t operator()(const Gid& g) const;
  };
  std::vector<Host> hosts_;
  // Address -> the first host with it: host_send_ip looks up every packet's destination.
  std::unordered_map<Gid, HostId, GidHash> host_index_;
  std::vector<Node> nodes_;
  std::vector<Port> ports_;
  std::vector<Packet> packets_;
  std::vector<uint32_t> free_packets_;
  std::vector<std::unique_ptr<uint8_t[]>> payloads_;
  std::vector<uint32_t> free_payloads_;
  size_t switch_count_ = 0;
  bool finalized_ = false;
  FabricCounters counters_;
};

}  // namespace uroce::fabric
