#pragma once
// link::Link over real UDP sockets: RoCEv2 in real time, between processes or hosts.
//
// One link is one unconnected UDP socket bound to one specific IPv4 or IPv6 address on port 4791
// (IBA annex A17.2: RoCEv2 packets go to UDP destination port 4791). The link's GID is that
// address (IPv4-mapped for IPv4). Several links on one host use different addresses (127.0.0.1,
// 127.0.0.2, ...) or network namespaces.
//
// Sending: transmit() queues a packet; flush() sends everything queued with sendmmsg, folding runs
// of equal-size packets to one destination into single UDP GSO sends (UDP_SEGMENT). The payload is
// read from the caller's memory at flush() time, copied with its headers and ICRC into one buffer
// per send (or, with linearize off, gathered by the kernel from an iovec per piece), so the
// memory a TxPacket points to must stay valid until the next flush(); the queue flushes itself
// when full. Every packet leaves with source port 4791: an unconnected socket cannot choose a
// source port per packet, so AddressVector::udp_src_port (ECMP entropy) is not honoured.
//
// Receiving: poll() reads with recvmmsg (and UDP GRO, split by the gso_size control message),
// rebuilds the IP and UDP headers the kernel stripped, checks the ICRC over them (IBA A17.4.1),
// parses the transport headers, and hands each valid packet to the handler. Anything else is
// dropped and counted. poll() never blocks; wait_fd() is the socket, for blocking waits.
//
// Multicast (IPv4 groups only, as Linux's RoCEv2 CM): join_group() opens one more socket per
// group, bound to the group's address and port 4791 and joined on the link's interface (the one
// holding its address); poll() reads those too, and a packet sent to a group's GID goes to the
// group's address, out of the link's interface (IP_MULTICAST_IF), looped back to the host's other
// members (IP_MULTICAST_LOOP). Once a group is joined, wait_fd() is an epoll set of every socket.
//
// Sharing (shared_address on): several processes' links on one address, each datagram steered
// to the process it belongs to by an SK_REUSEPORT program (shared_address.h). The link then
// reports a slot (shared_slot()) that its device puts in every QPN and its CM in every
// communication ID, and takes the service IDs its CM listens on (claim_service()). UDP GRO is off
// for the group (a blob merged before steering could mix two members' packets).
//
// Threading: one thread at a time (the progress engine's), but claim_service/release_service,
// which any thread may call. See docs/udp-link.md.
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "link/link.h"
#include "link/shared_address.h"
#include "wire/packet.h"

namespace uroce::link {

struct UdpLinkOptions {
  std::string address;                // a specific IPv4 or IPv6 address (not a wildcard)
  uint16_t port = wire::kRoceV2Port;  // others only for experiments: peers always send to 4791
  bool mmsg = true;                   // sendmmsg/recvmmsg; false: one datagram per system call
  bool gso = true;                    // UDP_SEGMENT for runs of equal-size packets to one peer
  bool gro = true;                    // UDP_GRO on receive
  bool ecn = true;                    // send ECT(0) when the TxPacket asks for it; false: Not-ECT
  // Copy each send (headers, payload, ICRC) into one contiguous buffer instead of handing the
  // kernel an iovec per piece. Measured on Linux 6.x: the kernel's per-iovec cost (three per
  // packet) outweighs a user-space copy of the payload by far (docs/udp-link.md).
  bool linearize = true;
  uint32_t tx_queue_packets = 256;    // transmit() flushes when this many are queued
  uint32_t rx_batch = 32;             // datagrams (or GRO blobs) per recvmmsg
  int socket_buffer_bytes = 8 << 20;  // SO_SNDBUF and SO_RCVBUF (forced when privileged)
  // Share the address with other processes that set this too (UROCE_SHARED_ADDRESS=1; root, a
  // build with libbpf). Off: the address is this link's alone (a second bind: EADDRINUSE).
  bool shared_address = false;
};

// Counters beyond LinkCounters, for tuning and tests.
struct UdpLinkStats {
  uint64_t tx_syscalls = 0, tx_gso_sends = 0, tx_eagain_waits = 0;
  uint64_t rx_syscalls = 0, rx_gro_blobs = 0;
  uint64_t rx_empty_syscalls = 0;    // receive calls that found the socket empty
  uint64_t rx_single_syscalls = 0;   // receive calls that asked for one datagram (rx_single_)
  uint64_t tx_socket_defaults = 0;   // times the socket took a TOS and TTL (socket_tos_)
  uint64_t rx_icrc_gso_id = 0;       // IPv4 ICRCs that matched a GSO segment's IP ID (see .cpp)
  uint64_t tx_icrc_prefix_hits = 0;  // sends whose IP/UDP part of the ICRC was kept (see .cpp)
  uint64_t rx_group_datagrams = 0;   // datagrams read from multicast group sockets
  uint64_t rx_icrc_prefix_hits = 0;  // received packets whose IP/UDP part of the ICRC was kept
};

class UdpLink final : public Link {
 public:
  // Opens and binds the socket. Errors are errno values (EINVAL for a bad or wildcard address,
  // EADDRINUSE, EADDRNOTAVAIL, ...); `why`, when sharing failed, what failed.
  static Result<std::unique_ptr<UdpLink>, int> open(const UdpLinkOptions& options,
                                                    std::string* why = nullptr);
  ~UdpLink() override;
  UdpLink(const UdpLink&) = delete;
  UdpLink& operator=(const UdpLink&) = delete;

  Gid local_gid() const override { return gid_; }
  void transmit(const wire::TxPacket& packet) override;
  void flush() override;
  size_t poll(const RxHandler& handler, size_t budget) override;
  bool defer_acks_behind_this_packet() override;
  int wait_fd() const override { return epoll_fd_ >= 0 ? epoll_fd_ : fd_; }
  const LinkCounters& counters() const override { return counters_; }
  // EOPNOTSUPP on an IPv6 link or for a GID that is not an IPv4 multicast group in the form
  // ipv4_multicast_group() returns; ENOMEM past kMaxGroups; EEXIST if joined already, ENOENT
  // (leave) if not; else the socket calls' errno.
  int join_group(const Gid& group) override;
  int leave_group(const Gid& group) override;
  size_t groups_joined() const { return groups_.size(); }
  std::optional<uint32_t> shared_slot() const override;
  int claim_service(uint64_t service_id) override;
  void release_service(uint64_t service_id) override;

  const UdpLinkStats& stats() const { return stats_; }
  const UdpLinkOptions& options() const { return options_; }
  bool ipv6() const { return ipv6_; }
  // What the kernel adds around each datagram, so that the byte counters count the IP packet as
  // every link does (link.h).
  uint32_t ip_udp_header_bytes() const {
    return (ipv6_ ? wire::kIpv6Bytes : wire::kIpv4Bytes) + wire::kUdpBytes;
  }
  // Whether GSO/GRO are in use: asked for, and accepted by the kernel.
  bool gso_active() const { return gso_; }
  bool gro_active() const { return gro_; }

  static constexpr uint32_t kMaxGsoSegments = 64;  // UDP_MAX_SEGMENTS is 64 on older kernels
  static constexpr uint32_t kMaxDatagramBytes = 65507;
  static constexpr uint32_t kMaxMmsg = 64;  // messages per sendmmsg/recvmmsg
  static constexpr size_t kMaxGroups = 64;  // multicast groups joined at once (a socket each)
  // Messages in a row with the same TOS and TTL after which the socket takes them (socket_tos_).
  static constexpr uint32_t kSocketDefaultsAfter = 16;

 private:
  struct TxSlot;
  struct RxBuffer;
  explicit UdpLink(const UdpLinkOptions& options);
  int setup(std::string* why);
  size_t run_end(size_t k, size_t limit) const;
  void requests_first();
  size_t seal(TxSlot& slot, const uint8_t* dst_ip, uint16_t ip_id, struct iovec* iov);
  size_t seal_into(TxSlot& slot, const uint8_t* dst_ip, uint16_t ip_id, uint8_t* out);
  void send_messages(size_t first_slot, size_t slots);
  size_t send_batch(struct mmsghdr* msgs, size_t count);
  size_t deliver(const RxHandler& handler, size_t budget);
  // Sets up recvmmsg's header i for rx_[i] again (after a call filled it).
  void reset_rx_header(size_t i);
  // One datagram of the receive buffer `b` (whose sender address and IP fields every segment of
  // it shares).
  // `dst_ip` and `dgid` are where it was sent: the link's address, or a group's.
  void handle_datagram(const RxHandler& handler, const uint8_t* data, size_t len, const RxBuffer& b,
                       uint16_t ip_id_guess, const uint8_t* dst_ip, const Gid& dgid);
  bool icrc_ok(const uint8_t* data, size_t len, const sockaddr_storage& from, const uint8_t* dst_ip,
               uint16_t ip_id_guess);
  // Reads the group sockets, one datagram per call, at most `budget`.
  size_t poll_groups(const RxHandler& handler, size_t budget);
  // The ICRC's running CRC over the pseudo IP and UDP headers of `slot` sent to `dst_ip` as GSO
  // segment `ip_id`, from icrc_prefix_ or computed (writing those headers into the slot).
  uint32_t icrc_prefix(TxSlot& slot, const uint8_t* dst_ip, uint16_t ip_id);
  // The same for a packet received from `from`, as its sender's kernel numbered it `ip_id`.
  uint32_t rx_icrc_prefix(const sockaddr_storage& from, const uint8_t* dst_ip,
                          uint32_t datagram_len, uint16_t ip_id);

  UdpLinkOptions options_;
  int fd_ = -1;
  bool ipv6_ = false;
  bool gso_ = false, gro_ = false;
  Gid gid_{};
  sockaddr_storage local_{};

  std::vector<TxSlot> tx_;
  size_t tx_count_ = 0;
  size_t tx_responses_ = 0;         // of the tx_count_ queued, how many are responses
  std::vector<TxSlot> tx_scratch_;  // requests_first()'s room, sized with tx_
  std::vector<uint8_t> tx_linear_;  // linearize: the datagrams of one sendmmsg, back to back
  std::vector<iovec> tx_iovs_;      // send_messages()'s gather lists (passes are serialised)

  std::vector<RxBuffer> rx_;
  // recvmmsg's headers for rx_, set up once: a call writes only the entries it fills, which are
  // set up again after they are read, so a poll that finds the socket empty (a spinning caller's
  // usual poll) prepares nothing.
  std::vector<mmsghdr> rx_msgs_;
  std::vector<iovec> rx_iov_;
  // The packet being handed up (handle_datagram), kept so that parsing it does not build a new
  // one per packet.
  wire::TransportPacket rx_parsed_;
  size_t rx_filled_ = 0;       // datagrams from the last recvmmsg
  size_t rx_next_ = 0;         // the next one to deliver
  size_t rx_next_offset_ = 0;  // within a GRO blob, the next segment's offset
  size_t delivering_len_ = 0;  // while deliver() hands up a segment: its length (else 0)
  // defer_acks_behind_this_packet() said yes: this poll ends, and what follows in rx_ waits for
  // the next one (which then makes no receive call after it).
  bool deferred_ = false;
  // Receive calls ask for one datagram while traffic comes one datagram at a time (a call that
  // found the socket empty, then one that found a single datagram): each further entry a
  // recvmmsg asks for costs the kernel a message header's import even when nothing is queued,
  // and on a ping-pong that sits between the request and the reply. Two calls in a row that
  // find data go back to whole batches.
  bool rx_single_ = false;
  bool rx_last_call_empty_ = false;

  // The socket's own TOS and TTL (IP_TOS, IP_TTL or their IPv6 forms), which a send that agrees
  // with them needs no control message for. After kSocketDefaultsAfter messages in a row with
  // the same other values the socket takes those once the sendmmsg call is done (the kernel
  // reads a control message per send, a setsockopt once).
  int socket_tos_ = 0;
  int socket_ttl_ = -1;  // -1: the route's default
  int pending_tos_ = -1, pending_ttl_ = -1;
  uint32_t pending_sends_ = 0;  // messages in a row with pending_tos_ and pending_ttl_
  // Which of a send's TOS and TTL (0: the default) must go as control messages.
  struct ControlNeeded {
    bool tos, ttl;
  };
  ControlNeeded control_needed(int tos, int ttl, bool multicast);
  void set_socket_defaults(int tos, int ttl);

  // One entry per IPv4 identification (GSO segment index), each kept for one destination and
  // datagram length: a stream of full-MTU packets to one peer finds its entry every time, and
  // the CRC of those 44 bytes (LRH stand-in, masked IP and UDP) is computed once per entry.
  struct IcrcPrefix {
    std::array<uint8_t, 16> dst{};  // the peer's address (the sender's, on receive)
    uint32_t datagram_len = 0;
    uint32_t crc = 0;
    uint16_t ip_id = 0;
    uint16_t port = 0;  // receive only: the sender's UDP source port
    bool valid = false;
  };
  std::array<IcrcPrefix, kMaxGsoSegments> icrc_prefix_{};
  std::array<IcrcPrefix, kMaxGsoSegments> rx_icrc_prefix_{};

  struct Group {
    Gid gid{};
    int fd = -1;
  };
  std::vector<Group> groups_;       // at most kMaxGroups
  int epoll_fd_ = -1;               // made at the first join, kept: the engine may be waiting in it
  size_t next_group_ = 0;           // where poll_groups() starts, so that no group starves
  std::vector<RxBuffer> group_rx_;  // one buffer, sized at the first join

  std::unique_ptr<AddressShare> share_;  // sharing the address with other processes

  LinkCounters counters_;
  UdpLinkStats stats_;
};

}  // namespace uroce::link
