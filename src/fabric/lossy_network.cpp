#include "fabric/lossy_network.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/check.h"

namespace uroce::fabric {

namespace {
constexpr uint32_t kArrive = 1;

// Time to clock `bytes` onto a wire of `rate_bps`, rounded up so back-to-back packets never
// overlap.
Nanos serialisation_ns(size_t bytes, uint64_t rate_bps) {
  if (rate_bps == 0) return 0;
  const unsigned __int128 bits_ns = static_cast<unsigned __int128>(bytes) * 8 * 1'000'000'000u;
  return static_cast<Nanos>((bits_ns + rate_bps - 1) / rate_bps);
}
}  // namespace

LossyNetwork::LossyNetwork(EventLoop& loop, const NetworkConfig& config)
    : loop_(loop), config_(config) {
  UROCE_CHECK(config.max_in_flight > 0 && config.max_in_flight < kNoSlot);
  UROCE_CHECK(config.max_packet_bytes > 0);
  slots_.reserve(config.max_in_flight);
  free_.reserve(config.max_in_flight);
}

LossyNetwork::~LossyNetwork() = default;

Result<EndpointId> LossyNetwork::attach(const Gid& address) {
  for (const Endpoint& e : endpoints_)
    if (e.address == address) return Err(EEXIST);
  if (endpoints_.size() >= config_.max_endpoints) return Err(ENOSPC);
  const auto id = static_cast<EndpointId>(endpoints_.size());
  endpoints_.push_back(Endpoint{address});
  for (auto& row : paths_) row.push_back(PathState{config_.defaults});
  paths_.emplace_back(endpoints_.size(), PathState{config_.defaults});
  return id;
}

const Gid& LossyNetwork::address(EndpointId ep) const {
  UROCE_CHECK(ep < endpoints_.size());
  return endpoints_[ep].address;
}

void LossyNetwork::set_arrival_notify(EndpointId ep, EventTarget* target, uint32_t kind) {
  UROCE_CHECK(ep < endpoints_.size());
  endpoints_[ep].notify = target;
  endpoints_[ep].notify_kind = kind;
}

void LossyNetwork::set_path(EndpointId from, EndpointId to, const PathParams& params) {
  UROCE_CHECK(from < endpoints_.size() && to < endpoints_.size());
  paths_[from][to].params = params;
}

void LossyNetwork::set_all_paths(const PathParams& params) {
  config_.defaults = params;
  for (auto& row : paths_)
    for (auto& p : row) p.params = params;
}

const PathParams& LossyNetwork::path(EndpointId from, EndpointId to) const {
  UROCE_CHECK(from < endpoints_.size() && to < endpoints_.size());
  return paths_[from][to].params;
}

bool LossyNetwork::route(std::span<const uint8_t> ip, EndpointId& to) const {
  Gid dst{};
  if (ip.size() >= 20 && (ip[0] >> 4) == 4) {
    dst = gid_from_ipv4({ip[16], ip[17], ip[18], ip[19]});
  } else if (ip.size() >= 40 && (ip[0] >> 4) == 6) {
    std::copy_n(&ip[24], 16, dst.begin());
  } else {
    return false;
  }
  for (EndpointId i = 0; i < endpoints_.size(); ++i) {
    if (endpoints_[i].address == dst) {
      to = i;
      return true;
    }
  }
  return false;
}

uint32_t LossyNetwork::take_slot(std::span<const uint8_t> bytes, EndpointId from, EndpointId to) {
  uint32_t s;
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
  } else if (slots_.size() < config_.max_in_flight) {
    s = static_cast<uint32_t>(slots_.size());
    slots_.push_back(Slot{std::make_unique<uint8_t[]>(config_.max_packet_bytes)});
  } else {
    return kNoSlot;
  }
  Slot& slot = slots_[s];
  std::memcpy(slot.bytes.get(), bytes.data(), bytes.size());
  slot.len = static_cast<uint32_t>(bytes.size());
  slot.from = from;
  slot.to = to;
  slot.next = kNoSlot;
  return s;
}

void LossyNetwork::free_slot(uint32_t s) {
  UROCE_DCHECK(s < slots_.size());
  free_.push_back(s);
}

bool LossyNetwork::send(EndpointId from, std::span<const uint8_t> ip_packet) {
  UROCE_CHECK(from < endpoints_.size());
  if (ip_packet.size() > config_.max_packet_bytes) {
    ++counters_.drop_too_big;
    return false;
  }
  EndpointId to = 0;
  if (!route(ip_packet, to)) {
    ++counters_.drop_no_route;
    return false;
  }
  PathState& path = paths_[from][to];
  const PathParams& p = path.params;
  // The sender's transmitter clocks the packet out even if the wire then loses it.
  const Nanos start = std::max(loop_.now(), path.busy_until);
  const Nanos departed = start + serialisation_ns(ip_packet.size(), p.rate_bps);
  path.busy_until = departed;
  ++counters_.sent;
  counters_.sent_bytes += ip_packet.size();
  tap(TapEvent::kSent, from, to, ip_packet);
  // Draws happen in a fixed order (loss, then per copy: jitter, reorder, corrupt; then
  // duplicate) so the stream, and with it the world, is a function of the seed.
  if (loop_.rng().chance(p.loss)) {
    ++counters_.lost;
    tap(TapEvent::kLost, from, to, ip_packet);
    return true;
  }
  launch(ip_packet, from, to, p, departed);
  if (loop_.rng().chance(p.duplicate)) {
    ++counters_.duplicated;
    tap(TapEvent::kDuplicated, from, to, ip_packet);
    launch(ip_packet, from, to, p, departed);
  }
  return true;
}

void LossyNetwork::launch(std::span<const uint8_t> bytes, EndpointId from, EndpointId to,
                          const PathParams& p, Nanos departed) {
  Rng& rng = loop_.rng();
  Nanos arrival = departed + p.delay_ns + rng.between(0, p.jitter_ns);
  if (rng.chance(p.reorder)) {
    ++counters_.reordered;
    arrival += rng.between(1, std::max<Nanos>(p.reorder_delay_ns, 1));
  }
  const bool corrupt = rng.chance(p.corrupt);
  const uint32_t s = take_slot(bytes, from, to);
  if (s == kNoSlot) {
    ++counters_.drop_no_buffer;
    tap(TapEvent::kDropped, from, to, bytes);
    return;
  }
  if (corrupt && !bytes.empty()) {
    ++counters_.corrupted;
    const uint64_t bit = rng.below(uint64_t{bytes.size()} * 8);
    slots_[s].bytes[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    tap(TapEvent::kCorrupted, from, to, bytes);
  }
  if (!loop_.schedule_at(arrival, *this, kArrive, s)) {
    ++counters_.drop_event_queue;
    tap(TapEvent::kDropped, from, to, bytes);
    free_slot(s);
  }
}

void LossyNetwork::on_event(uint32_t kind, uint64_t arg, Nanos now) {
  UROCE_CHECK(kind == kArrive && arg < slots_.size());
  arrive(static_cast<uint32_t>(arg), now);
}

void LossyNetwork::arrive(uint32_t s, Nanos now) {
  Slot& slot = slots_[s];
  Endpoint& ep = endpoints_[slot.to];
  if (ep.queued >= config_.inbox_packets) {
    ++counters_.drop_inbox_full;
    tap(TapEvent::kDropped, slot.from, slot.to, {slot.bytes.get(), slot.len});
    free_slot(s);
    return;
  }
  if (ep.tail == kNoSlot) {
    ep.head = s;
  } else {
    slots_[ep.tail].next = s;
  }
  ep.tail = s;
  ++ep.queued;
  ++counters_.delivered;
  counters_.delivered_bytes += slot.len;
  tap(TapEvent::kDelivered, slot.from, slot.to, {slot.bytes.get(), slot.len});
  if (ep.notify) ep.notify->on_event(ep.notify_kind, slot.to, now);
}

std::span<const uint8_t> LossyNetwork::front(EndpointId ep) const {
  UROCE_CHECK(ep < endpoints_.size());
  const Endpoint& e = endpoints_[ep];
  if (e.head == kNoSlot) return {};
  const Slot& slot = slots_[e.head];
  return {slot.bytes.get(), slot.len};
}

void LossyNetwork::pop(EndpointId ep) {
  UROCE_CHECK(ep < endpoints_.size());
  Endpoint& e = endpoints_[ep];
  if (e.head == kNoSlot) return;
  const uint32_t s = e.head;
  e.head = slots_[s].next;
  if (e.head == kNoSlot) e.tail = kNoSlot;
  --e.queued;
  free_slot(s);
}

size_t LossyNetwork::inbox_size(EndpointId ep) const {
  UROCE_CHECK(ep < endpoints_.size());
  return endpoints_[ep].queued;
}

}  // namespace uroce::fabric
