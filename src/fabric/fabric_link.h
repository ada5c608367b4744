#pragma once
// A link::Link over one host port of the switched fabric (SwitchFabric), in virtual time:
// the job SimLink does over the LossyNetwork (IP, UDP and ICRC out; parse, check and count in),
// with the fabric's queues, ECN marks and PFC pauses between devices. The fabric writes CE into
// the IP header on the way; poll() reports it in RxPacket::ce.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/result.h"
#include "fabric/event_loop.h"
#include "fabric/switch_fabric.h"
#include "link/ip_packet_io.h"
#include "link/link.h"

namespace uroce::fabric {

// Payload carried by reference, for a simulation whose payload bytes are a function of their
// I/O address (sim/synthetic_memory.h): the fabric carries a packet's headers and a descriptor
// (I/O address, length) instead of its payload, and the receiving link rebuilds the bytes.
class PayloadReference {
 public:
  virtual ~PayloadReference() = default;
  // Whether [p, p + len) holds the bytes of [*iova, *iova + len) (sets *iova).
  virtual bool describe(const uint8_t* p, size_t len, uint64_t* iova) const = 0;
  // Writes the bytes of [iova, iova + out.size()).
  virtual void materialize(uint64_t iova, std::span<uint8_t> out) const = 0;
  // A sender's payload part about to be copied into a packet (not carried by reference): makes
  // [p, p + len) hold its bytes if they are among the last reads and were left unwritten (a
  // reference may leave a read's bytes unwritten until a link needs them); otherwise nothing.
  virtual void prepare_copy(const uint8_t* p, size_t len) const = 0;
  // Where a receiving link rebuilds a packet (at least link::kMaxIpPacketBytes), valid until the
  // next rebuild by any link of the world: one buffer for all of them stays in cache, where one
  // per link would be written cold at most hosts.
  virtual std::span<uint8_t> rebuild_buffer() const = 0;
};

class FabricLink final : public link::Link, public HostReceiver {
 public:
  static constexpr size_t kDefaultInboxPackets = 4096;

  // Attaches to host `host` of a finalized `fabric`, whose address is `local` (topology's
  // host_gid). EINVAL if the host does not exist. Packets that arrive while the inbox holds
  // `inbox_packets` are dropped and counted (a NIC's full receive ring).
  static Result<std::unique_ptr<FabricLink>> create(SwitchFabric& fabric, HostId host,
                                                    const Gid& local,
                                                    size_t inbox_packets = kDefaultInboxPackets);
  ~FabricLink() override;

  Gid local_gid() const override { return local_; }
  HostId host() const { return host_; }

  // Builds the IP packet (or, for a RoCE v1 path, the GRH packet) and queues it at the host's NIC
  // at the fabric's current time. A packet that can't be built or that the fabric refuses (no
  // descriptor, NIC queue full, RoCE v1 to a host off this one's segment) is a tx error.
  void transmit(const wire::TxPacket& packet) override;
  void flush() override {}
  size_t poll(const link::RxHandler& handler, size_t budget) override;
  const link::LinkCounters& counters() const override { return counters_; }
  // RoCE v1 packets cross the fabric at L2 only: to hosts on this host's switch.
  bool carries_roce_v1() const override { return true; }
  // ... so a v1 path reaches exactly the hosts on this host's segment (SwitchFabric::same_segment).
  bool reaches_roce_v1(const Gid& dgid) const override;

  // Bytes waiting in this host's NIC queue (paused, or behind the line rate): what a NIC's
  // scheduler looks at before it pulls more work.
  uint64_t tx_queue_bytes() const { return fabric_.host_queue_bytes(host_); }
  size_t rx_pending() const { return inbox_count_; }
  // Called synchronously, at the arrival time, whenever a packet lands in the inbox:
  // target.on_event(kind, host, now). For a driver that wakes a device only when it has work.
  void set_arrival_notify(EventTarget* target, uint32_t kind) {
    notify_ = target;
    notify_kind_ = kind;
  }
  // Called synchronously, at that instant, once this host's NIC queue has fallen below the bytes
  // of a request_tx_room: target.on_event(kind, host, now). For a driver whose QPs wait for room
  // in that queue (sim::NicFifoGate) instead of polling it.
  void set_tx_room_notify(EventTarget* target, uint32_t kind) {
    room_notify_ = target;
    room_notify_kind_ = kind;
  }
  // Asks for one tx-room notification when the NIC queue next holds less than `bytes` (requests
  // before it is sent merge: the largest mark wins, so no requester is woken late). False, and
  // nothing asked, without a notification target: the caller must look again by itself.
  bool request_tx_room(uint64_t bytes) {
    if (room_notify_ == nullptr) return false;
    room_below_ = std::max(room_below_, bytes);
    return true;
  }
  void on_host_queue_drained(uint64_t queued_bytes, Nanos now) override {
    if (queued_bytes >= room_below_) return;  // none asked (0), or not yet below the mark
    room_below_ = 0;
    room_notify_->on_event(room_notify_kind_, host_, now);
  }
  uint64_t rx_drop_inbox_full() const { return rx_drop_inbox_full_; }
  // A trusted wire: RoCEv2 packets leave with a zero ICRC and arrive unchecked, two CRC passes
  // over every packet saved. For simulations only, and only where nothing between the links
  // changes a packet's bytes: the fabric drops a frame with a bit error whole (its FCS), and the
  // only byte it writes is the IP header's CE mark, which the ICRC does not cover. Every link of
  // the fabric must agree (a checking receiver drops a trusted sender's packets as bad ICRCs).
  // RoCE v1 packets keep their ICRC.
  void set_trusted_wire(bool trusted) { trusted_wire_ = trusted; }
  // On a trusted wire, a RoCEv2 packet whose payload is one span `reference` describes crosses the
  // fabric as headers plus descriptor (its size on the wire unchanged) and is rebuilt on arrival:
  // the same packets and times, without 4 KiB per packet in the fabric's buffers. Every link of
  // the fabric must have one (a link without it drops such a packet as malformed).
  void set_payload_reference(const PayloadReference* reference) { reference_ = reference; }
  uint64_t tx_by_reference() const { return tx_by_reference_; }

  void on_receive(const Delivered& packet, Nanos now) override;

 private:
  FabricLink(SwitchFabric& fabric, HostId host, const Gid& local, size_t inbox)
      : fabric_(fabric), host_(host), local_(local), inbox_capacity_(inbox) {}

  SwitchFabric& fabric_;
  HostId host_;
  Gid local_;
  link::LinkCounters counters_;
  uint64_t rx_drop_inbox_full_ = 0;
  // Ring of received IP packets, of at most inbox_capacity_ slots, made as first needed. A slot
  // holds a fabric payload buffer, exchanged for the arriving packet's (no copy, no allocation in
  // steady state).
  struct Slot {
    std::unique_ptr<uint8_t[]> bytes;
    uint32_t len = 0;       // bytes held
    uint32_t wire_len = 0;  // the IP packet's length: more than len when carried by reference
  };
  // A packet carried by reference as the IP packet it stands for, in the reference's rebuild
  // buffer; empty if malformed.
  std::span<const uint8_t> rebuild(const Slot& slot);
  std::vector<Slot> inbox_;
  size_t inbox_capacity_;
  size_t inbox_head_ = 0, inbox_count_ = 0;
  bool trusted_wire_ = false;
  const PayloadReference* reference_ = nullptr;
  uint64_t tx_by_reference_ = 0;
  EventTarget* notify_ = nullptr;
  uint32_t notify_kind_ = 0;
  EventTarget* room_notify_ = nullptr;
  uint32_t room_notify_kind_ = 0;
  uint64_t room_below_ = 0;  // a pending request_tx_room's mark; 0 if none
  std::array<uint8_t, link::kMaxIpPacketBytes> buf_{};
};

}  // namespace uroce::fabric
