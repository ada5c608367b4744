#pragma once
// link::Link over an AF_PACKET socket: whole Ethernet frames on one interface, built and parsed
// here. Needs CAP_NET_RAW (root), and suits a veth between namespaces or a NIC that is not
// RoCE-capable. See docs/links.md for when to choose it over the UDP link.
//
// Sending: each packet becomes one frame, queued until flush() or a full batch (tx_batch) sends the
// queue in one sendmmsg: Ethernet (destination MAC from the kernel's neighbour
// table, neighbour.h), an 802.1Q tag when a VLAN is configured (PCP from the traffic class, so a
// PFC priority is visible on a real wire), then either IPv4/IPv6 + UDP 4791 + BTH .. ICRC
// (RoCEv2) or EtherType 0x8915 + GRH + BTH .. ICRC (RoCE v1, when the link is configured for it
// or the AddressVector asks). A peer whose MAC is unknown is a counted drop (tx_errors and
// RawLinkStats::tx_no_neighbour); its resolution is started so that a retransmission gets through.
//
// Receiving: up to rx_batch frames per recvmmsg. A classic BPF filter on the socket passes only
// EtherType 0x8915 and unfragmented UDP to port 4791 over IPv4/IPv6; everything else stays with the
// kernel alone. Frames this link sent are not looped back (PACKET_IGNORE_OUTGOING). Each frame is
// checked (IPv4 header checksum, ICRC) and parsed with the wire codec; what is not addressed to
// this link's GID is counted as not RoCE.
//
// The kernel sees the RoCEv2 frames too and, with no UDP socket on port 4791, would answer each
// with ICMP port unreachable; the link therefore also binds a UDP socket to address:4791 that it
// never reads, with the smallest receive buffer, so the kernel queues a datagram or two there and
// drops the rest silently (UDP receive-buffer errors, not ICMP). v1 frames have no kernel handler
// and are ignored by it.
//
// Threading: one thread at a time, like every link.
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "link/link.h"
#include "link/neighbour.h"
#include "wire/packet.h"

namespace uroce::link {

// What the links that write Ethernet frames themselves (this one, xdp_link.h) share.
// The address as a GID (IPv4-mapped or IPv6); false if it is neither.
bool parse_gid_address(const std::string& text, Gid& gid);
// The interface that has exactly `gid` assigned, or "".
std::string interface_holding(const Gid& gid);
// Binds a UDP socket to gid:4791 that is never read, with the smallest receive buffer, so the
// kernel drops RoCEv2 datagrams that reach its stack silently instead of answering each with ICMP
// port unreachable (docs/links.md). Returns an errno (EADDRINUSE: a UDP link holds the port);
// `fd` is set whenever a socket was made, for the caller to close.
int bind_roce_guard_socket(const Gid& gid, int ifindex, int& fd);
// The interface's MAC and MTU (ioctl on any socket `fd`; `mtu` is left alone if unknown).
int read_interface_identity(int fd, const std::string& ifname, Mac& mac, uint32_t& mtu);

struct RawLinkOptions {
  std::string address;    // local IPv4 or IPv6 address: the GID (v1 and v2 share the value)
  std::string interface;  // empty: the interface that holds `address`
  // 802.1Q: tag every frame with this VLAN ID (0: priority tag only) and the PCP of
  // priority_code_point(). nullopt: untagged.
  std::optional<uint16_t> vlan_id;
  bool roce_v1 = false;  // send every packet as RoCE v1, whatever the AddressVector says
  bool ecn = true;       // RoCEv2: ECT(0) when the TxPacket asks for it
  size_t neighbour_cache_entries = NeighbourTable::kDefaultCapacity;
  uint32_t rx_batch = 64;  // frames read per poll() at most (and the budget's cap)
  // Frames queued by transmit() before they go in one sendmmsg (flush() sends what is queued
  // sooner). 1: each frame is sent at once.
  uint32_t tx_batch = 64;
  // sendmmsg/recvmmsg: a system call per batch. false: send()/recv() per frame (for comparison).
  bool mmsg = true;
  // SO_RCVBUF and SO_SNDBUF (forced, as root): a packet socket's default holds a few hundred
  // frames, and a burst of full-MTU packets overruns it.
  int socket_buffer_bytes = 8 << 20;
};

struct RawLinkStats {
  uint64_t tx_v1 = 0, tx_v2 = 0, tx_no_neighbour = 0, tx_too_big = 0;
  uint64_t rx_v1 = 0, rx_v2 = 0;
  uint64_t tx_syscalls = 0, rx_syscalls = 0;  // sending and receiving calls made
  uint64_t tx_eagain_waits = 0;               // waits for room in a full socket buffer
};

class RawLink final : public Link {
 public:
  // Errors are errno values: EINVAL (bad address, no interface holds it), ENODEV, EPERM (not
  // root), EADDRINUSE (another socket holds address:4791, such as a UDP link).
  static Result<std::unique_ptr<RawLink>, int> open(const RawLinkOptions& options);
  ~RawLink() override;
  RawLink(const RawLink&) = delete;
  RawLink& operator=(const RawLink&) = delete;

  Gid local_gid() const override { return gid_; }
  void transmit(const wire::TxPacket& packet) override;
  void flush() override;
  size_t poll(const RxHandler& handler, size_t budget) override;
  int wait_fd() const override { return fd_; }
  const LinkCounters& counters() const override { return counters_; }
  bool carries_roce_v1() const override { return true; }
  // A v1 peer must be on this interface's segment: routes_on_link (the kernel's routing table,
  // no gateway). When the table cannot be asked, the path is allowed, as before this check.
  bool reaches_roce_v1(const Gid& dgid) const override;

  const RawLinkStats& stats() const { return stats_; }
  const std::string& interface() const { return ifname_; }
  const Mac& mac() const { return mac_; }
  NeighbourTable& neighbours() { return *neighbours_; }
  uint32_t interface_mtu() const { return if_mtu_; }

  // Frame building and parsing without a socket, for tests: writes the frame for `packet` from
  // `src_mac`/`local` to `dst_mac` into `out`; returns its length or 0.
  static uint32_t build_frame(const wire::TxPacket& packet, const Gid& local, const Mac& src_mac,
                              const Mac& dst_mac, std::optional<uint16_t> vlan_id, bool roce_v1,
                              bool ecn, std::span<uint8_t> out);
  // Checks and parses one received frame, counting into `counters` (and `stats` when given);
  // calls `handler` for a good packet addressed to `local`.
  static void receive_frame(std::span<const uint8_t> frame, const Gid& local,
                            LinkCounters& counters, RawLinkStats* stats, const RxHandler& handler);

  // An 802.1Q tag's PCP for a path: its service level when set (on RoCE the SL is the 802.1p
  // priority, as mlx5 takes it), else the traffic class's top three bits (the DSCP's class
  // selector: DSCP 26 -> 3).
  static uint8_t priority_code_point(const wire::AddressVector& av);

  static constexpr uint32_t kMaxFrameBytes = 14 + 4 + 40 + 8 + 64 + 4096 + 3 + 4;

 private:
  explicit RawLink(const RawLinkOptions& options) : options_(options) {}
  int setup();

  RawLinkOptions options_;
  int fd_ = -1;
  int guard_fd_ = -1;
  int ifindex_ = 0;
  uint32_t if_mtu_ = 1500;
  std::string ifname_;
  Mac mac_{};
  Gid gid_{};
  std::unique_ptr<NeighbourTable> neighbours_;
  // Slot i of a buffer is the bytes [i * kSlotBytes, (i + 1) * kSlotBytes).
  static constexpr size_t kSlotBytes = kMaxFrameBytes + 64;  // rx: room to see a frame too long
  std::vector<uint8_t> tx_buf_, rx_buf_;                     // tx_batch and rx_batch slots
  std::vector<mmsghdr> tx_msgs_, rx_msgs_;
  std::vector<iovec> tx_iov_, rx_iov_;
  struct Queued {
    uint32_t network_bytes;
    bool v1;
  };
  std::vector<Queued> tx_queued_;  // one per frame in tx_buf_, at most tx_batch
  LinkCounters counters_;
  RawLinkStats stats_;
};

}  // namespace uroce::link
