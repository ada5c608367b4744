#include "fabric/switch_fabric.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "common/bytes.h"
#include "common/check.h"
#include "wire/packet.h"

namespace uroce::fabric {

namespace {

enum EventKind : uint32_t {
  kTxDone = 1,      // arg: port
  kArrive = 2,      // arg: port << 32 | packet
  kPause = 3,       // arg: port << 32 | priority << 16 | quanta
  kKick = 4,        // arg: port (a pause ran out: try the transmitter)
  kPfcRefresh = 5,  // arg: port << 32 | priority << 24 | generation (24 bits)
  kWatchdog = 6,
};

uint64_t pack(uint32_t hi, uint32_t lo) {
  return uint64_t{hi} << 32 | lo;
}

Nanos serialisation_ns(uint64_t bytes, uint64_t rate_bps) {
  const unsigned __int128 bits_ns = static_cast<unsigned __int128>(bytes) * 8 * 1'000'000'000;
  return static_cast<Nanos>((bits_ns + rate_bps - 1) / rate_bps);
}

// One pause quantum is 512 bit times (IEEE 802.1Q-2018 36.1.3.2 / 802.3 annex 31D).
Nanos pause_ns(uint16_t quanta, uint64_t rate_bps) {
  return serialisation_ns(uint64_t{quanta} * 512 / 8, rate_bps);
}

}  // namespace

double EcnParams::probability(uint64_t queue_bytes) const {
  if (!enabled || queue_bytes <= kmin_bytes) return 0;
  if (queue_bytes > kmax_bytes) return 1;
  if (kmax_bytes == kmin_bytes) return 1;
  return pmax * static_cast<double>(queue_bytes - kmin_bytes) /
         static_cast<double>(kmax_bytes - kmin_bytes);
}

SwitchParams::SwitchParams() {
  for (size_t d = 0; d < dscp_to_priority.size(); ++d)
    dscp_to_priority[d] = static_cast<uint8_t>(d >> 3);
}

// One cache line each: a descriptor is read cold at nearly every hop, and one that straddled two
// lines would cost two misses.
struct alignas(64) SwitchFabric::Packet {
  uint32_t next = kNone;  // FIFO link, and the free list
  uint32_t payload = kNone;
  uint32_t ip_bytes = 0;
  uint32_t stored_bytes = 0;  // of the payload buffer: ip_bytes, or fewer (host_send_ip)
  HostId src = 0, dst = 0;
  PortId ingress = kNone;  // the switch port whose buffer account holds it
  uint16_t udp_src_port = 0;
  uint8_t dscp = 0, pcp = 0, prio = 0;
  wire::Ecn ecn = wire::Ecn::kNotEct;
  uint64_t tag = 0;
  Nanos sent_at = 0;
  uint32_t wire_bytes() const { return ip_bytes + kEthOverheadBytes; }
};

// A port's state, laid out by use: the first line holds what every packet through the port
// reads, the counters follow, then one line per traffic class with everything a packet of that
// class touches at this port as egress and as ingress (a fabric carrying one class reads one of
// the eight), and what only pauses and the watchdog read last.
struct SwitchFabric::Port {
  struct Fifo {
    uint32_t head = kNone, tail = kNone;
  };
  struct alignas(64) Class {
    // Egress.
    Fifo q;
    uint64_t q_bytes = 0;
    Nanos paused_until = 0;
    Nanos ignore_pause_until = 0;
    int64_t deficit = 0;
    // Ingress (switch ports): the buffer held by packets that came in here.
    uint64_t in_shared = 0, in_hdrm = 0;
    uint32_t pfc_gen = 0;
    bool xoff_sent = false;
  };
  NodeId node = kNone;
  PortId peer = kNone;
  uint32_t tx_packet = kNone;
  uint8_t rr = 0;
  bool rr_credited = false;
  bool busy = false;
  uint8_t queued = 0;        // a bit per class whose queue is not empty
  uint8_t with_deficit = 0;  // a bit per class whose deficit is not 0
  Nanos busy_until = 0;
  LinkParams link;
  uint64_t headroom = 0;
  PortCounters counters;
  std::array<Class, kPriorities> cls{};
  std::array<Nanos, kPriorities> pause_since{};
};

struct SwitchFabric::Node {
  bool is_switch = false;
  HostId host = kNone;
  SwitchParams params;
  std::vector<PortId> ports;
  uint64_t xoff = 0, xon = 0, mtu_wire = 0;
  uint64_t shared_size = 0, shared_used = 0;
  std::vector<std::vector<PortId>> route;  // [destination host] -> equal-cost egress ports
};

SwitchFabric::SwitchFabric(EventLoop& loop, const FabricConfig& config)
    : loop_(loop), config_(config) {
  UROCE_CHECK(config_.max_packets > 0 && config_.max_packets < kNone);
}

SwitchFabric::~SwitchFabric() = default;

HostId SwitchFabric::add_host(const Gid& address) {
  UROCE_CHECK(!finalized_);
  const auto h = static_cast<HostId>(hosts_.size());
  Node n;
  n.host = h;
  nodes_.push_back(std::move(n));
  hosts_.push_back(Host{static_cast<NodeId>(nodes_.size() - 1), address, nullptr, 0});
  host_index_.emplace(address, h);  // keeps the first host of an address
  return h;
}

NodeId SwitchFabric::add_switch(const SwitchParams& params) {
  UROCE_CHECK(!finalized_);
  Node n;
  n.is_switch = true;
  n.params = params;
  nodes_.push_back(std::move(n));
  ++switch_count_;
  return static_cast<NodeId>(nodes_.size() - 1);
}

PortId SwitchFabric::connect(NodeId a, NodeId b, const LinkParams& link) {
  UROCE_CHECK(!finalized_ && a < nodes_.size() && b < nodes_.size() && a != b);
  UROCE_CHECK(link.rate_bps > 0);
  const auto pa = static_cast<PortId>(ports_.size());
  for (NodeId n : {a, b}) {
    Port p;
    p.node = n;
    p.link = link;
    ports_.push_back(p);
    nodes_[n].ports.push_back(static_cast<PortId>(ports_.size() - 1));
  }
  ports_[pa].peer = pa + 1;
  ports_[pa + 1].peer = pa;
  return pa;
}

PortId SwitchFabric::host_port(HostId h) const {
  const Node& n = nodes_[hosts_[h].node];
  return n.ports.empty() ? kNone : n.ports.front();
}

size_t SwitchFabric::GidHash::operator()(const Gid& g) const {
  uint64_t a, b;
  std::memcpy(&a, g.data(), 8);
  std::memcpy(&b, g.data() + 8, 8);
  return static_cast<size_t>(splitmix64(a) ^ b);
}

bool SwitchFabric::same_segment(HostId a, HostId b) const {
  if (a >= hosts_.size() || b >= hosts_.size()) return false;
  const PortId pa = host_port(a), pb = host_port(b);
  if (pa == kNone || pb == kNone || ports_[pa].peer == kNone || ports_[pb].peer == kNone)
    return false;
  const NodeId na = ports_[ports_[pa].peer].node, nb = ports_[ports_[pb].peer].node;
  return na == nb || na == hosts_[b].node;
}

HostId SwitchFabric::host_by_address(const Gid& address) const {
  const auto it = host_index_.find(address);
  return it == host_index_.end() ? kNone : it->second;
}

size_t SwitchFabric::packet_descriptors_made() const {
  return packets_.size();
}
size_t SwitchFabric::payload_buffers_made() const {
  return payloads_.size();
}

size_t SwitchFabric::ports() const {
  return ports_.size();
}
PortId SwitchFabric::peer(PortId p) const {
  return ports_[p].peer;
}
NodeId SwitchFabric::port_node(PortId p) const {
  return ports_[p].node;
}
const PortCounters& SwitchFabric::port_counters(PortId p) const {
  return ports_[p].counters;
}
uint64_t SwitchFabric::queue_bytes(PortId p, uint8_t priority) const {
  return ports_[p].cls[priority].q_bytes;
}
uint64_t SwitchFabric::headroom_bytes(PortId ingress) const {
  return ports_[ingress].headroom;
}

uint64_t SwitchFabric::xoff_bytes(PortId ingress) const {
  return nodes_[ports_[ingress].node].xoff;
}

uint64_t SwitchFabric::buffer_used(NodeId sw) const {
  return nodes_[sw].shared_used;
}

uint64_t SwitchFabric::host_queue_bytes(HostId h) const {
  return hosts_[h].queued_bytes;
}

bool SwitchFabric::paused(PortId p, uint8_t priority, Nanos now) const {
  const Port& port = ports_[p];
  return port.cls[priority].paused_until > now && port.cls[priority].ignore_pause_until <= now;
}

std::vector<PortId> SwitchFabric::routes(NodeId sw, HostId dst) const {
  return nodes_[sw].route.empty() ? std::vector<PortId>{} : nodes_[sw].route[dst];
}

// Headroom above XOFF for one ingress port (the bytes that still arrive after the pause decision):
// the frame the port's own transmitter is finishing before the pause can leave, the pause frame,
// the round trip on the cable, and the frame the upstream sender is finishing when the pause lands
// (the terms of the Cisco/Mellanox headroom rules, docs/cc.md), plus one MTU of margin.
int SwitchFabric::finalize() {
  UROCE_CHECK(!finalized_);
  for (Node& n : nodes_) {
    n.mtu_wire = n.params.mtu_bytes + kEthOverheadBytes;
    n.xoff = n.params.xoff_bytes ? n.params.xoff_bytes : 4 * n.mtu_wire;
    n.xon = n.params.xon_bytes ? n.params.xon_bytes
                               : (n.xoff > 2 * n.mtu_wire ? n.xoff - 2 * n.mtu_wire : 0);
    if (!n.is_switch) continue;
    uint64_t reserved = 0;
    const int lossless = std::popcount(n.params.lossless_mask);
    for (PortId p : n.ports) {
      Port& port = ports_[p];
      const uint64_t bdp = static_cast<uint64_t>(
          static_cast<unsigned __int128>(port.link.rate_bps) * port.link.delay_ns / 8'000'000'000);
      port.headroom = 2 * bdp + 3 * n.mtu_wire + kPauseFrameBytes;
      reserved += port.headroom * static_cast<uint64_t>(lossless);
    }
    if (reserved + n.xoff > n.params.buffer_bytes) return ENOSPC;
    n.shared_size = n.params.buffer_bytes - reserved;
  }
  // Shortest paths from every host, by breadth-first search over switches (hosts never transit).
  std::vector<uint32_t> dist(nodes_.size());
  std::vector<NodeId> frontier, next;
  for (Node& n : nodes_)
    if (n.is_switch) n.route.assign(hosts_.size(), {});
  for (HostId h = 0; h < hosts_.size(); ++h) {
    std::fill(dist.begin(), dist.end(), kNone);
    dist[hosts_[h].node] = 0;
    frontier.assign(1, hosts_[h].node);
    while (!frontier.empty()) {
      next.clear();
      for (NodeId u : frontier) {
        if (u != hosts_[h].node && !nodes_[u].is_switch) continue;
        for (PortId p : nodes_[u].ports) {
          const NodeId v = ports_[ports_[p].peer].node;
          if (dist[v] != kNone) continue;
          dist[v] = dist[u] + 1;
          next.push_back(v);
        }
      }
      frontier.swap(next);
    }
    for (NodeId s = 0; s < nodes_.size(); ++s) {
      if (!nodes_[s].is_switch || dist[s] == kNone) continue;
      for (PortId p : nodes_[s].ports)
        if (dist[ports_[ports_[p].peer].node] + 1 == dist[s]) nodes_[s].route[h].push_back(p);
    }
  }
  Nanos poll = kNever;
  for (const Node& n : nodes_)
    if (n.is_switch && n.params.watchdog_poll_ns) poll = std::min(poll, n.params.watchdog_poll_ns);
  if (poll != kNever) schedule(loop_.now() + poll, kWatchdog, poll);
  finalized_ = true;
  return 0;
}

// Descriptors are made as needed, up to the bound: a freed one is reused first (last freed, first
// reused), then the lowest never used, the order a full free list in reverse would give.
uint32_t SwitchFabric::alloc_packet() {
  uint32_t id = kNone;
  if (!free_packets_.empty()) {
    id = free_packets_.back();
    free_packets_.pop_back();
  } else if (packets_.size() < config_.max_packets) {
    id = static_cast<uint32_t>(packets_.size());
    packets_.emplace_back();
  } else {
    ++counters_.refused_no_descriptor;
    return kNone;
  }
  packets_[id] = Packet{};
  return id;
}

void SwitchFabric::free_packet(uint32_t id) {
  Packet& pkt = packets_[id];
  if (pkt.payload != kNone) free_payloads_.push_back(pkt.payload);
  pkt.payload = kNone;
  free_packets_.push_back(id);
}

void SwitchFabric::schedule(Nanos at, uint32_t kind, uint64_t arg) {
  if (!loop_.schedule_at(at, *this, kind, arg)) ++counters_.drops_event_queue;
}

uint8_t SwitchFabric::classify(const Node& n, const Packet& pkt) const {
  return n.params.trust_pcp ? (pkt.pcp & 7) : n.params.dscp_to_priority[pkt.dscp & 63] & 7;
}

bool SwitchFabric::host_send(HostId src, const PacketMeta& meta) {
  return queue_from_host(src, meta, kNone, 0);
}

bool SwitchFabric::queue_from_host(HostId src, const PacketMeta& meta, uint32_t payload,
                                   uint32_t stored_bytes) {
  UROCE_CHECK(finalized_ && src < hosts_.size());
  Host& host = hosts_[src];
  const PortId port = host_port(src);
  if (meta.dst >= hosts_.size() || port == kNone || meta.ip_bytes == 0) {
    ++counters_.refused_bad_packet;
    return false;
  }
  if (host.queued_bytes + meta.ip_bytes + kEthOverheadBytes > config_.host_queue_bytes) {
    ++counters_.refused_host_queue;
    return false;
  }
  const uint32_t id = alloc_packet();
  if (id == kNone) return false;
  Packet& pkt = packets_[id];
  pkt.src = src;
  pkt.dst = meta.dst;
  pkt.ip_bytes = meta.ip_bytes;
  pkt.dscp = meta.dscp & 63;
  pkt.pcp = meta.pcp & 7;
  pkt.ecn = meta.ect ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
  pkt.udp_src_port = meta.udp_src_port;
  pkt.tag = meta.tag;
  pkt.sent_at = loop_.now();
  pkt.payload = payload;
  pkt.stored_bytes = stored_bytes;
  pkt.prio = classify(nodes_[host.node], pkt);
  host.queued_bytes += pkt.wire_bytes();
  ++counters_.host_sent;
  enqueue(port, id, loop_.now());
  return true;
}

bool SwitchFabric::host_send_ip(HostId src, std::span<const uint8_t> ip, uint32_t wire_ip_bytes) {
  if (wire_ip_bytes == 0) wire_ip_bytes = static_cast<uint32_t>(ip.size());
  PacketMeta meta;
  Gid dst{};
  uint32_t l4 = 0;
  if (ip.size() >= wire::kIpv4Bytes && ip[0] >> 4 == 4) {
    l4 = (ip[0] & 15) * 4u;
    meta.dscp = ip[1] >> 2;
    dst = gid_from_ipv4({ip[16], ip[17], ip[18], ip[19]});
  } else if (ip.size() >= wire::kIpv6Bytes && ip[0] >> 4 == 6) {
    l4 = wire::kIpv6Bytes;
    meta.dscp = static_cast<uint8_t>((load_be16(ip.data()) >> 6) & 63);
    std::copy(ip.begin() + 24, ip.begin() + 40, dst.begin());
  }
  meta.dst = l4 ? host_by_address(dst) : kNone;
  if (meta.dst == kNone || ip.size() < l4 + wire::kUdpBytes || ip.size() > wire_ip_bytes ||
      wire_ip_bytes > config_.max_ip_bytes) {
    ++counters_.refused_bad_packet;
    return false;
  }
  // A RoCE v1 GRH reads as an IPv6 header above (destination at byte 24, DSCP from the traffic
  // class); it has no IP routing, so no switch forwards it to another switch.
  if (ip[0] >> 4 == 6 && ip[6] == wire::kGrhNextHeaderIba && !same_segment(src, meta.dst)) {
    ++counters_.refused_v1_off_segment;
    return false;
  }
  meta.ect = wire::read_ecn(ip) != wire::Ecn::kNotEct;
  meta.udp_src_port = load_be16(ip.data() + l4);
  meta.ip_bytes = wire_ip_bytes;
  uint32_t buf = kNone;
  if (!free_payloads_.empty()) {
    buf = free_payloads_.back();
    free_payloads_.pop_back();
  } else if (payloads_.size() < config_.max_payload_buffers) {
    payloads_.push_back(std::make_unique_for_overwrite<uint8_t[]>(config_.max_ip_bytes));
    buf = static_cast<uint32_t>(payloads_.size() - 1);
  } else {
    ++counters_.refused_no_payload;
    return false;
  }
  std::memcpy(payloads_[buf].get(), ip.data(), ip.size());
  if (!queue_from_host(src, meta, buf, static_cast<uint32_t>(ip.size()))) {
    free_payloads_.push_back(buf);
    return false;
  }
  return true;
}

// ---- Egress: queues, ECN, scheduling -------------------------------------------------------

// ECN marking (DCQCN CP; RFC 3168 section 5: only ECT packets are marked), on `queue_bytes` of the
// packet's class at this port.
void SwitchFabric::maybe_mark_ce(Port& port, Packet& pkt, uint64_t queue_bytes) {
  const Node& n = nodes_[port.node];
  if (n.is_switch && (n.params.ecn_mask >> pkt.prio & 1) && pkt.ecn != wire::Ecn::kNotEct &&
      pkt.ecn != wire::Ecn::kCe && loop_.rng().chance(n.params.ecn.probability(queue_bytes))) {
    pkt.ecn = wire::Ecn::kCe;
    ++port.counters.ecn_marked;
    ++counters_.ecn_marked;
  }
}

void SwitchFabric::enqueue(PortId p, uint32_t id, Nanos now) {
  Port& port = ports_[p];
  Packet& pkt = packets_[id];
  const Node& n = nodes_[port.node];
  const uint8_t prio = pkt.prio;
  Port::Class& c = port.cls[prio];
  if (!n.params.ecn.mark_at_dequeue) maybe_mark_ce(port, pkt, c.q_bytes);
  pkt.next = kNone;
  if (c.q.tail == kNone) {
    c.q.head = id;
    port.queued |= static_cast<uint8_t>(1u << prio);
  } else {
    packets_[c.q.tail].next = id;
  }
  c.q.tail = id;
  c.q_bytes += pkt.wire_bytes();
  port.counters.max_queue_bytes = std::max(port.counters.max_queue_bytes, c.q_bytes);
  try_transmit(p, now);
}

// Strict-priority classes first, highest first; then deficit round robin over the others with a
// quantum of weight x MTU (ETS, IEEE 802.1Q-2018 37.3). A paused priority is skipped, never
// dropped. At most 2 x 8 visits: within one pass every eligible class earns at least one MTU.
// The round visits only the eligible classes and steps over the rest at once, with the effect a
// visit to each would have had (the pointer moves on, an empty class loses its credit), so the
// order and the deficits are those of visiting all eight.
uint32_t SwitchFabric::pick(Port& port, Nanos now) {
  uint32_t eligible = 0;
  for (uint32_t m = port.queued; m != 0; m &= m - 1) {
    const auto p = static_cast<uint32_t>(std::countr_zero(m));
    const Port::Class& c = port.cls[p];
    if (c.paused_until <= now || c.ignore_pause_until > now) eligible |= 1u << p;
  }
  const Node& n = nodes_[port.node];
  const uint32_t strict = eligible & n.params.strict_mask;
  if (strict != 0) return static_cast<uint32_t>(31 - std::countl_zero(strict));
  constexpr uint32_t kVisits = 2 * kPriorities;
  for (uint32_t visits = 0; visits < kVisits;) {
    uint32_t steps = kVisits - visits;  // to the next eligible class, or to the round's end
    if (eligible != 0) {
      const uint32_t from_rr = (eligible >> port.rr | eligible << (kPriorities - port.rr)) & 0xff;
      steps = std::min(steps, static_cast<uint32_t>(std::countr_zero(from_rr)));
    }
    if (steps > 0) {
      const uint32_t run = steps >= kPriorities ? 0xffu : (1u << steps) - 1;
      const uint32_t visited = (run << port.rr | run >> (kPriorities - port.rr)) & 0xff;
      // An idle class keeps no credit (DRR).
      for (uint32_t m = visited & ~port.queued & port.with_deficit; m != 0; m &= m - 1)
        port.cls[std::countr_zero(m)].deficit = 0;
      port.with_deficit &= static_cast<uint8_t>(~(visited & ~port.queued));
      port.rr = static_cast<uint8_t>((port.rr + steps) % kPriorities);
      port.rr_credited = false;
      visits += steps;
      continue;
    }
    const uint32_t p = port.rr;
    Port::Class& c = port.cls[p];
    if (!port.rr_credited) {
      c.deficit += static_cast<int64_t>(std::max<uint32_t>(1, n.params.ets_weight[p])) *
                   static_cast<int64_t>(n.mtu_wire);
      port.with_deficit |= static_cast<uint8_t>(1u << p);
      port.rr_credited = true;
    }
    const auto size = static_cast<int64_t>(packets_[c.q.head].wire_bytes());
    if (c.deficit >= size) {
      c.deficit -= size;
      if (c.deficit == 0) port.with_deficit &= static_cast<uint8_t>(~(1u << p));
      return p;
    }
    port.rr = static_cast<uint8_t>((port.rr + 1) % kPriorities);
    port.rr_credited = false;
    ++visits;
  }
  return kNone;
}

void SwitchFabric::try_transmit(PortId p, Nanos now) {
  Port& port = ports_[p];
  if (port.busy || port.peer == kNone) return;
  const uint32_t prio = pick(port, now);
  if (prio == kNone) return;
  Port::Class& c = port.cls[prio];
  const uint32_t id = c.q.head;
  Packet& pkt = packets_[id];
  c.q.head = pkt.next;
  if (c.q.head == kNone) {
    c.q.tail = kNone;
    port.queued &= static_cast<uint8_t>(~(1u << prio));
  }
  c.q_bytes -= pkt.wire_bytes();
  if (nodes_[port.node].params.ecn.mark_at_dequeue) maybe_mark_ce(port, pkt, c.q_bytes);
  port.busy = true;
  port.tx_packet = id;
  port.busy_until = now + serialisation_ns(pkt.wire_bytes(), port.link.rate_bps);
  schedule(port.busy_until, kTxDone, p);
}

void SwitchFabric::on_tx_done(PortId p, Nanos now) {
  Port& port = ports_[p];
  const uint32_t id = port.tx_packet;
  port.busy = false;
  port.tx_packet = kNone;
  if (id == kNone) return;
  Packet& pkt = packets_[id];
  ++port.counters.tx_packets;
  port.counters.tx_bytes += pkt.wire_bytes();
  const Node& n = nodes_[port.node];
  Host* host = n.is_switch ? nullptr : &hosts_[n.host];
  if (host != nullptr) host->queued_bytes -= pkt.wire_bytes();
  if (pkt.ingress != kNone) release_ingress(pkt, now);
  if (loop_.schedule_at(now + port.link.delay_ns, *this, kArrive, pack(port.peer, id))) {
    // on the wire
  } else {
    ++counters_.drops_event_queue;
    free_packet(id);
  }
  try_transmit(p, now);
  if (host != nullptr && host->receiver != nullptr)
    host->receiver->on_host_queue_drained(host->queued_bytes, now);
}

// ---- Ingress: arrival, buffer admission, PFC -----------------------------------------------

void SwitchFabric::on_arrive(PortId p, uint32_t id, Nanos now) {
  Port& port = ports_[p];
  Packet& pkt = packets_[id];
  ++port.counters.rx_packets;
  const double ber = port.link.bit_error_rate;
  if (ber > 0) {
    // P(frame hit) = 1 - (1 - BER)^bits: the FCS catches it and the MAC drops the frame.
    const double bits = 8.0 * pkt.wire_bytes();
    if (loop_.rng().chance(-std::expm1(bits * std::log1p(-ber)))) {
      ++port.counters.drops_bit_error;
      ++counters_.drops_bit_error;
      free_packet(id);
      return;
    }
  }
  const Node& n = nodes_[port.node];
  if (n.is_switch) {
    switch_receive(p, id, now);
    return;
  }
  if (pkt.dst != n.host) {
    ++counters_.drops_no_route;
    free_packet(id);
    return;
  }
  Delivered d;
  d.src = pkt.src;
  d.dst = pkt.dst;
  d.ip_bytes = pkt.ip_bytes;
  d.priority = pkt.prio;
  d.ce = pkt.ecn == wire::Ecn::kCe;
  d.tag = pkt.tag;
  d.sent_at = pkt.sent_at;
  if (pkt.payload != kNone) {
    std::span<uint8_t> bytes(payloads_[pkt.payload].get(), pkt.stored_bytes);
    if (d.ce) wire::set_ecn(bytes, wire::Ecn::kCe);
    d.ip_packet = bytes;
    d.payload_buffer = pkt.payload;
  }
  ++counters_.delivered;
  counters_.delivered_bytes += pkt.ip_bytes;
  loop_.trace(pack(pkt.dst, static_cast<uint32_t>(pkt.tag)) ^ static_cast<uint64_t>(d.ce) << 63);
  // Freed after the callback: its view of the bytes must outlive anything it sends meanwhile.
  if (HostReceiver* receiver = hosts_[n.host].receiver) receiver->on_receive(d, now);
  free_packet(id);
}

std::unique_ptr<uint8_t[]> SwitchFabric::exchange_payload(const Delivered& packet,
                                                          std::unique_ptr<uint8_t[]> replacement) {
  UROCE_CHECK(packet.payload_buffer < payloads_.size());
  if (!replacement) replacement = std::make_unique_for_overwrite<uint8_t[]>(config_.max_ip_bytes);
  std::swap(payloads_[packet.payload_buffer], replacement);
  return replacement;
}

bool SwitchFabric::xoff_needed(const Port& in, uint8_t prio) const {
  const Node& n = nodes_[in.node];
  return in.cls[prio].in_hdrm > 0 || in.cls[prio].in_shared + n.mtu_wire > n.xoff ||
         n.shared_used + n.mtu_wire > n.shared_size;
}

void SwitchFabric::switch_receive(PortId in, uint32_t id, Nanos now) {
  Port& port = ports_[in];
  Node& n = nodes_[port.node];
  Packet& pkt = packets_[id];
  pkt.prio = classify(n, pkt);
  const uint8_t prio = pkt.prio;
  const std::vector<PortId>& out = n.route[pkt.dst];
  if (out.empty()) {
    ++counters_.drops_no_route;
    free_packet(id);
    return;
  }
  // ECMP: one path per (source, destination, UDP source port), salted per switch so that
  // consecutive tiers don't all pick the same index.
  uint64_t h = uint64_t{pkt.src} << 40 ^ uint64_t { pkt.dst } << 16 ^ pkt.udp_src_port ^
               uint64_t { port.node } * 0x9e3779b97f4a7c15ull;
  const PortId egress = out.size() == 1 ? out[0] : out[splitmix64(h) % out.size()];
  const uint64_t size = pkt.wire_bytes();
  if (n.params.lossless_mask >> prio & 1) {
    if (port.cls[prio].in_shared + size <= n.xoff && n.shared_used + size <= n.shared_size) {
      port.cls[prio].in_shared += size;
      n.shared_used += size;
    } else {
      // Above XOFF: only the headroom, which the pause sent earlier guarantees is enough.
      port.cls[prio].in_hdrm += size;
      UROCE_CHECK(port.cls[prio].in_hdrm <= port.headroom);  // a lossless priority never drops
      counters_.max_lossless_headroom_used =
          std::max(counters_.max_lossless_headroom_used, port.cls[prio].in_hdrm);
    }
    if (!port.cls[prio].xoff_sent && xoff_needed(port, prio)) {
      port.cls[prio].xoff_sent = true;
      send_pause(in, prio, n.params.pause_quanta);
      const uint32_t gen = ++port.cls[prio].pfc_gen & 0xffffff;
      schedule(now + pause_ns(n.params.pause_quanta, port.link.rate_bps) / 2, kPfcRefresh,
               pack(in, uint32_t{prio} << 24 | gen));
    }
  } else if (n.shared_used + size > n.shared_size ||
             static_cast<double>(ports_[egress].cls[prio].q_bytes + size) >
                 n.params.lossy_dt_alpha * static_cast<double>(n.shared_size - n.shared_used)) {
    ++port.counters.drops_buffer;
    ++counters_.drops_buffer;
    free_packet(id);
    return;
  } else {
    port.cls[prio].in_shared += size;
    n.shared_used += size;
  }
  pkt.ingress = in;
  enqueue(egress, id, now);
}

// Headroom is the level above XOFF, so a departing packet frees headroom first, whichever packet
// it was: otherwise the headroom would drain only with the last packets queued, XON would wait for
// an almost empty queue and the link would idle through the XON round trip.
void SwitchFabric::release_ingress(Packet& pkt, Nanos now) {
  Port& in = ports_[pkt.ingress];
  Node& n = nodes_[in.node];
  const uint64_t size = pkt.wire_bytes();
  const uint64_t from_hdrm = std::min(in.cls[pkt.prio].in_hdrm, size);
  in.cls[pkt.prio].in_hdrm -= from_hdrm;
  in.cls[pkt.prio].in_shared -= size - from_hdrm;
  n.shared_used -= size - from_hdrm;
  pkt.ingress = kNone;
  if (in.cls[pkt.prio].xoff_sent)
    check_xon(static_cast<PortId>(&in - ports_.data()), pkt.prio, now);
}

bool SwitchFabric::xon_ready(const Port& in, uint8_t prio) const {
  const Node& n = nodes_[in.node];
  return in.cls[prio].in_hdrm == 0 && in.cls[prio].in_shared <= n.xon &&
         n.shared_used + n.xoff <= n.shared_size;
}

void SwitchFabric::check_xon(PortId p, uint8_t prio, Nanos now) {
  (void)now;
  Port& in = ports_[p];
  if (!in.cls[prio].xoff_sent || !xon_ready(in, prio)) return;
  in.cls[prio].xoff_sent = false;
  ++in.cls[prio].pfc_gen;  // the pending refresh is stale now
  send_pause(p, prio, 0);
}

void SwitchFabric::on_pfc_refresh(PortId p, uint8_t prio, uint32_t gen, Nanos now) {
  Port& in = ports_[p];
  if (!in.cls[prio].xoff_sent || (in.cls[prio].pfc_gen & 0xffffff) != gen) return;
  if (xon_ready(in, prio)) {
    check_xon(p, prio, now);
    return;
  }
  // Still congested: re-pause before the last pause runs out (802.1Qbb senders refresh).
  const uint16_t quanta = nodes_[in.node].params.pause_quanta;
  send_pause(p, prio, quanta);
  schedule(now + pause_ns(quanta, in.link.rate_bps) / 2, kPfcRefresh,
           pack(p, uint32_t{prio} << 24 | gen));
}

// A MAC control frame is not queued behind data: it leaves once the frame on the wire is done.
void SwitchFabric::send_pause(PortId p, uint8_t priority, uint16_t quanta) {
  Port& port = ports_[p];
  if (port.peer == kNone) return;
  const Nanos now = loop_.now();
  const Nanos leave = std::max(now, port.busy_until);
  const Nanos at =
      leave + serialisation_ns(kPauseFrameBytes, port.link.rate_bps) + port.link.delay_ns;
  quanta ? ++port.counters.pause_sent : ++port.counters.xon_sent;
  ++counters_.pause_frames;
  schedule(at, kPause, pack(port.peer, uint32_t{priority & 7u} << 16 | quanta));
}

void SwitchFabric::on_pause(PortId p, uint8_t prio, uint16_t quanta, Nanos now) {
  Port& port = ports_[p];
  ++port.counters.pause_received;
  if (port.cls[prio].ignore_pause_until > now) return;  // the watchdog stopped honouring pauses
  const Nanos old_until = port.cls[prio].paused_until;
  if (quanta == 0) {
    if (old_until > now) port.counters.paused_ns -= old_until - now;
    port.cls[prio].paused_until = now;
    try_transmit(p, now);
    return;
  }
  const Nanos until = now + pause_ns(quanta, port.link.rate_bps);
  if (old_until <= now) {
    port.pause_since[prio] = now;
    port.counters.paused_ns += until - now;
  } else if (until > old_until) {
    port.counters.paused_ns += until - old_until;
  }
  port.cls[prio].paused_until = until;
  schedule(until, kKick, p);
}

// ---- PFC watchdog --------------------------------------------------------------------------

void SwitchFabric::watchdog(Nanos now) {
  for (Node& n : nodes_) {
    if (!n.is_switch || n.params.watchdog_poll_ns == 0) continue;
    for (PortId p : n.ports) {
      Port& port = ports_[p];
      for (uint8_t prio = 0; prio < kPriorities; ++prio) {
        if (port.cls[prio].q.head == kNone || port.cls[prio].paused_until <= now ||
            port.cls[prio].ignore_pause_until > now ||
            now - port.pause_since[prio] < n.params.watchdog_detect_ns)
          continue;
        // A pause storm: drop what waits and stop honouring pauses for a while.
        ++port.counters.watchdog_storms;
        uint32_t id = port.cls[prio].q.head;
        for (size_t guard = 0; id != kNone && guard < packets_.size(); ++guard) {
          const uint32_t next = packets_[id].next;
          if (packets_[id].ingress != kNone) release_ingress(packets_[id], now);
          ++port.counters.drops_watchdog;
          ++counters_.drops_watchdog;
          free_packet(id);
          id = next;
        }
        port.cls[prio].q = {};
        port.cls[prio].q_bytes = 0;
        port.queued &= static_cast<uint8_t>(~(1u << prio));
        port.cls[prio].ignore_pause_until = now + n.params.watchdog_restore_ns;
        port.cls[prio].paused_until = now;
      }
      try_transmit(p, now);
    }
  }
}

void SwitchFabric::on_event(uint32_t kind, uint64_t arg, Nanos now) {
  const auto hi = static_cast<uint32_t>(arg >> 32), lo = static_cast<uint32_t>(arg);
  switch (kind) {
    case kTxDone:
      on_tx_done(static_cast<PortId>(arg), now);
      break;
    case kArrive:
      on_arrive(hi, lo, now);
      break;
    case kPause:
      on_pause(hi, static_cast<uint8_t>(lo >> 16 & 7), static_cast<uint16_t>(lo), now);
      break;
    case kKick:
      try_transmit(static_cast<PortId>(arg), now);
      break;
    case kPfcRefresh:
      on_pfc_refresh(hi, static_cast<uint8_t>(lo >> 24 & 7), lo & 0xffffff, now);
      break;
    case kWatchdog:
      watchdog(now);
      schedule(now + arg, kWatchdog, arg);
      break;
    default:
      break;
  }
}

}  // namespace uroce::fabric
