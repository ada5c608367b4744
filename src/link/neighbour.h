#pragma once
// MAC addresses of on-link peers, from the kernel's neighbour table (netlink RTM_GETNEIGH), for a
// link that writes whole Ethernet frames (raw_link.h). A bounded cache in front of it: an entry is
// trusted for kEntryLifetimeNs, then the table is read again; a full cache starts over empty.
// A peer the kernel does not know is asked for (RTM_NEWNEIGH with NTF_USE, which makes the kernel
// send ARP or neighbour solicitation) and reported unresolved; the caller drops and counts the
// packet, and RoCE's retransmission carries it once the answer is in.
//
// Only the peer's own address is looked up, never a gateway's: RoCE v1 is not routable, and the
// raw link reaches on-link RoCEv2 peers only (docs/links.md).
#include <array>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "common/types.h"

namespace uroce::link {

using Mac = std::array<uint8_t, 6>;

// Whether the kernel routes packets for `peer` (an IPv4-mapped or IPv6 GID) straight out of
// interface `ifindex` with no gateway (an RTM_GETROUTE lookup): a peer on that interface's Ethernet
// segment, the only kind RoCE v1 reaches. An IPv6 link-local peer always is. nullopt when the
// routing table cannot be asked (no netlink socket). Opens its own socket: safe on any thread.
std::optional<bool> routes_on_link(int ifindex, const Gid& peer);

struct NeighbourStats {
  uint64_t lookups = 0, dumps = 0, misses = 0, resolve_requests = 0, evictions = 0;
};

class NeighbourTable {
 public:
  static constexpr size_t kDefaultCapacity = 256;
  static constexpr Nanos kEntryLifetimeNs = 1'000'000'000;
  // A miss reads the kernel's table at most this often.
  static constexpr Nanos kMinDumpIntervalNs = 10'000'000;

  NeighbourTable(int ifindex, size_t capacity = kDefaultCapacity);
  ~NeighbourTable();
  NeighbourTable(const NeighbourTable&) = delete;
  NeighbourTable& operator=(const NeighbourTable&) = delete;

  // The MAC of `peer` (an IPv4-mapped or IPv6 GID) on the interface, or nullopt if unresolved.
  std::optional<Mac> lookup(const Gid& peer, Nanos now);
  // Puts an entry in (tests, and static peers).
  void insert(const Gid& peer, const Mac& mac, Nanos now);
  size_t size() const { return cache_.size(); }
  size_t capacity() const { return capacity_; }
  const NeighbourStats& stats() const { return stats_; }

 private:
  struct Entry {
    Mac mac{};
    Nanos at = 0;
  };
  struct GidHash {
    size_t operator()(const Gid& g) const;
  };
  void dump(Nanos now);
  void request_resolution(const Gid& peer);
  int netlink();

  int ifindex_;
  size_t capacity_;
  int nl_fd_ = -1;
  uint32_t seq_ = 0;
  Nanos last_dump_ = 0;
  bool dumped_ = false;
  std::unordered_map<Gid, Entry, GidHash> cache_;
  NeighbourStats stats_;
};

}  // namespace uroce::link
