#pragma once
// link::Link over an AF_XDP socket: the raw link's Ethernet frames (raw_link.h builds and parses
// them: RoCEv2 or RoCE v1, 802.1Q PCP, the neighbour table), moved through shared-memory rings
// instead of a packet socket. Needs root (CAP_NET_ADMIN and CAP_BPF to attach the XDP program,
// CAP_NET_RAW for the socket), and an interface that takes an XDP program (veth, most NICs).
// docs/links.md says when to choose it.
//
// Receiving: an XDP program on the interface (xdp/steer.bpf.c, embedded) redirects EtherType
// 0x8915 and UDP 4791 over IPv4/IPv6 to the socket bound to the frame's receive queue and
// passes everything else to the kernel. poll() takes up to rx_batch frames off the RX ring,
// hands each to RawLink::receive_frame, and gives the frames back through the fill ring: no
// system call while frames flow (only when the kernel asks for a wake-up, XDP_USE_NEED_WAKEUP).
//
// Sending: transmit() builds the frame straight into a UMEM frame; flush() (or a full batch)
// puts the batch on the TX ring and kicks the kernel with one sendto when it asks to be woken;
// the completion ring returns frames to the free list. A batch that finds no free frame or no
// room on the ring is a counted drop (tx_errors, XdpLinkStats::tx_ring_full), recovered by the
// transport as a loss on the wire would be.
//
// Modes: the program is attached in driver (native) mode when the interface has it, else in
// generic (skb) mode; the socket binds in copy mode unless zero_copy is asked (only some NIC
// drivers have it; veth does not). One socket on one queue (`queue`): a NIC with several
// queues needs its flow steering to put RoCE on that queue, or one link per queue.
//
// Threading: one thread at a time, like every link.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "link/link.h"
#include "link/neighbour.h"
#include "link/raw_link.h"

struct xsk_socket;
struct xsk_umem;
struct bpf_object;

namespace uroce::link {

struct XdpLinkOptions {
  // Interface, VLAN, RoCE version, ECN, neighbour cache and batch sizes: as the raw link's
  // (rx_batch: frames taken per poll; tx_batch: frames per kick). mmsg and socket_buffer_bytes
  // have no meaning here.
  RawLinkOptions frames;
  uint32_t queue = 0;            // the interface's receive queue the socket binds to
  uint32_t umem_frames = 4096;   // 4 KiB each: half for receiving, half for sending
  uint32_t ring_entries = 2048;  // each of the RX, TX, fill and completion rings (power of two)
  bool zero_copy = false;        // XDP_ZEROCOPY (fails on drivers without it) instead of XDP_COPY
  // Attach the program in generic (skb) mode even where the driver has native XDP: for
  // comparison (docs/links.md, "Copy and zero-copy, native and generic").
  bool generic_mode = false;
  // SO_PREFER_BUSY_POLL with a budget of rx_batch: on a NIC whose driver supports it, the
  // socket's own calls run the driver's poll instead of its interrupts.
  bool busy_poll = true;
};

struct XdpLinkStats {
  RawLinkStats frames;        // versions sent and received, no-neighbour and too-big drops
  uint64_t tx_ring_full = 0;  // frames dropped: no free UMEM frame or TX ring slot
  uint64_t tx_kicks = 0;      // sendto() calls to wake the kernel for the TX ring
  uint64_t rx_kicks = 0;      // recvfrom() calls to wake it for the fill ring
  uint64_t rx_frames = 0;     // frames taken off the RX ring
  bool driver_mode = false;   // the program runs in the driver (native XDP), not generic
};

class XdpLink final : public Link {
 public:
  // Errors are errno values: EINVAL (bad address or options, no interface holds the address),
  // ENODEV, EPERM (not root), EBUSY (the interface already has an XDP program), EADDRINUSE
  // (another socket holds address:4791), EOPNOTSUPP (zero copy or XDP not supported), or
  // libbpf's. `error`, when given, gets the step that failed.
  static Result<std::unique_ptr<XdpLink>, int> open(const XdpLinkOptions& options,
                                                    std::string* error = nullptr);
  ~XdpLink() override;
  XdpLink(const XdpLink&) = delete;
  XdpLink& operator=(const XdpLink&) = delete;

  Gid local_gid() const override { return gid_; }
  void transmit(const wire::TxPacket& packet) override;
  void flush() override;
  size_t poll(const RxHandler& handler, size_t budget) override;
  int wait_fd() const override { return xsk_fd_; }
  const LinkCounters& counters() const override { return counters_; }
  bool carries_roce_v1() const override { return true; }
  bool reaches_roce_v1(const Gid& dgid) const override;

  const XdpLinkStats& stats() const { return stats_; }
  const std::string& interface() const { return ifname_; }

 private:
  explicit XdpLink(const XdpLinkOptions& options);
  int setup(std::string& step);
  void reclaim_completions();
  void kick_tx();

  XdpLinkOptions options_;
  std::string ifname_;
  int ifindex_ = 0;
  uint32_t if_mtu_ = 1500;
  Mac mac_{};
  Gid gid_{};
  int guard_fd_ = -1;
  int xsk_fd_ = -1;
  int prog_fd_ = -1;
  bpf_object* bpf_ = nullptr;
  uint8_t* umem_area_ = nullptr;
  size_t umem_bytes_ = 0;
  xsk_umem* umem_ = nullptr;
  xsk_socket* xsk_ = nullptr;
  // The rings (libxdp's xsk_ring_prod / xsk_ring_cons), kept opaque so this header needs no
  // libxdp: rx, tx, fill, completion.
  struct Rings;
  std::unique_ptr<Rings> rings_;
  std::unique_ptr<NeighbourTable> neighbours_;
  std::vector<uint64_t> free_tx_;  // UMEM addresses of send frames not in the kernel's hands
  struct Pending {
    uint64_t addr;
    uint32_t len, network_bytes;
    bool v1;
  };
  std::vector<Pending> pending_;  // built, not yet on the TX ring: at most tx_batch
  std::vector<uint64_t> refill_;  // scratch for poll(): rx frames to give back
  LinkCounters counters_;
  XdpLinkStats stats_;
};

}  // namespace uroce::link
