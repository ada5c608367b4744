#pragma once
// A link moves RoCEv2 packets between a device and the network: UDP sockets in real time
// (udp_link.h) or the emulated fabric in virtual time (fabric/sim_link.h, fabric/fabric_link.h,
// which live with the fabric so that this layer needs only the wire). It builds IP/UDP and the
// ICRC on the way out, and parses, checks and counts on the way in. Whatever drives the device
// calls it, one pass at a time: the progress engine in real time (api/progress_engine.h), the world
// core in virtual time (sim/world_core.h); links are not thread-safe.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "common/types.h"
#include "wire/packet_io.h"

namespace uroce::link {

// The same meaning in every link. A packet is one RoCE packet, however the link batches it (a GSO
// send of 16 segments counts 16). A byte is a byte of the network-layer packet: the IP header
// (RoCEv2) or the GRH (RoCE v1), UDP, BTH through ICRC; not Ethernet framing, which some links
// never see. rx_* count packets handed up; the rx_drop_* counters count what was not.
struct LinkCounters {
  uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
  uint64_t rx_ce_marked = 0;
  uint64_t rx_drop_bad_icrc = 0, rx_drop_malformed = 0, rx_drop_not_roce = 0;
  uint64_t tx_errors = 0;
};

using RxHandler = std::function<void(const wire::RxPacket&)>;

class Link : public wire::PacketSink {
 public:
  ~Link() override = default;
  virtual Gid local_gid() const = 0;
  // transmit() (from PacketSink) may queue for batching; flush() pushes everything queued.
  virtual void flush() = 0;
  // Receives up to `budget` packets, calling `handler` for each valid one. Returns the number of
  // packets taken off the wire (valid or not). Never blocks.
  virtual size_t poll(const RxHandler& handler, size_t budget) = 0;
  // Called by poll()'s handler: if the next packet this link has read but not yet handed up is an
  // ACK or NAK, poll() returns after the packet being handled and keeps the rest for the next
  // poll (no system call needed then), and this says true; otherwise false and nothing changes.
  // A device whose caller polls between passes uses it after a packet that completed a receive:
  // in a ping-pong the ACK of the last message arrives right behind the reply (udp_link.cpp puts
  // requests first), and handling it before the pass returns only delays the reply's completion.
  // A link that reads one packet at a time has nothing to defer.
  virtual bool defer_acks_behind_this_packet() { return false; }
  // A file descriptor that becomes readable when packets arrive, for blocking waits; -1 if none.
  virtual int wait_fd() const { return -1; }
  virtual const LinkCounters& counters() const = 0;
  // Whether transmit() honours AddressVector::roce_v1 (writes Ethernet frames itself). A link
  // that cannot must never be handed a v1 path: the device refuses one (verbs make_address_vector).
  virtual bool carries_roce_v1() const { return false; }
  // Whether a RoCE v1 packet to `dgid` can arrive: v1 is not routable, so the peer must be on
  // this link's Ethernet segment. The device refuses a v1 path to a peer outside it with
  // EHOSTUNREACH at create_ah / modify_qp rather than let every packet vanish. Called from
  // application threads, concurrently with passes: it may read only what does not change.
  virtual bool reaches_roce_v1(const Gid& dgid) const {
    (void)dgid;
    return carries_roce_v1();
  }
  // Receives (join) or stops receiving (leave) the packets sent to a multicast group, given in
  // the form ipv4_multicast_group() returns. Called between passes (the device holds its
  // quiesce lock). 0, or an errno: EOPNOTSUPP for a link that cannot, ENOMEM past its bound.
  virtual int join_group(const Gid&) { return EOPNOTSUPP; }
  virtual int leave_group(const Gid&) { return EOPNOTSUPP; }
  // A link that shares its address with other processes (udp_link.h, shared_address.h): this
  // process's slot, which the device puts in the top bits of every QPN it hands out and the CM in
  // every communication ID, so that the packets answering them find this process. nullopt: the
  // address is this link's alone, and QPNs and IDs are unconstrained.
  virtual std::optional<uint32_t> shared_slot() const { return std::nullopt; }
  // Sends connection requests for `service_id` to this process (the CM calls it when it listens):
  // 0, or EADDRINUSE when another process at the address listens on it. Any thread.
  virtual int claim_service(uint64_t service_id) {
    (void)service_id;
    return 0;
  }
  virtual void release_service(uint64_t service_id) { (void)service_id; }
};

}  // namespace uroce::link
