// UdpLink: RoCEv2 over UDP sockets, with sendmmsg/recvmmsg and UDP GSO/GRO batching.
#include "link/udp_link.h"

#include <arpa/inet.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/bytes.h"
#include "common/check.h"
#include "link/share/steer_decision.h"
#include "wire/crc32.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace uroce::link {

namespace {

constexpr uint32_t kPre = wire::kIpv6Bytes + wire::kUdpBytes;  // room for the pseudo IP/UDP
constexpr uint32_t kMaxIovPerMsg = 1024;                       // UIO_MAXIOV
constexpr uint32_t kIovPerPacket = wire::kMaxGather + 2;       // headers, payload, pad+ICRC
constexpr uint32_t kRxBufferBytes = 65536;                     // a whole GRO blob fits
constexpr int kEagainWaitMs = 1;
constexpr int kEagainRetries = 4;

// The IP and UDP headers the ICRC covers, as the receiver rebuilds them from what the socket
// tells it (IBA A17.4.1.1 masks TOS/traffic class, TTL/hop limit, the IPv4 header checksum, the
// flow label and the UDP checksum, so those need not match the real ones). Written so that they
// end at `end`; returns where they start.
uint8_t* write_pseudo_headers(uint8_t* end, bool v6, const uint8_t* src_ip, const uint8_t* dst_ip,
                              uint16_t src_port, uint16_t dst_port, uint32_t udp_payload,
                              uint16_t ip_id) {
  const uint32_t udp_len = wire::kUdpBytes + udp_payload;
  uint8_t* ip = end - wire::kUdpBytes - (v6 ? wire::kIpv6Bytes : wire::kIpv4Bytes);
  if (v6) {
    wire::Ipv6 h;
    h.payload_length = static_cast<uint16_t>(udp_len);
    std::memcpy(h.src.data(), src_ip, 16);
    std::memcpy(h.dst.data(), dst_ip, 16);
    wire::write_ipv6(h, {ip, wire::kIpv6Bytes});
  } else {
    // Sent with DF (IP_PMTUDISC_DO) from an unconnected socket, so Linux leaves the
    // identification 0 (ip_select_ident_segs); GSO then numbers segments 0, 1, 2, ...
    // Written field by field (RFC 791 offsets) rather than with wire::write_ipv4: the ICRC masks
    // TOS, TTL and the header checksum, so the checksum write_ipv4 computes (twice per
    // packet, on the hot path) would be thrown away.
    std::memset(ip, 0, wire::kIpv4Bytes);
    store8(ip + 0, 0x45);  // version 4, IHL 5
    store_be16(ip + 2, static_cast<uint16_t>(wire::kIpv4Bytes + udp_len));
    store_be16(ip + 4, ip_id);
    store_be16(ip + 6, 0x4000);  // DF, fragment offset 0
    store8(ip + 8, 64);          // TTL (masked)
    store8(ip + 9, 17);          // UDP
    std::memcpy(ip + 12, src_ip, 4);
    std::memcpy(ip + 16, dst_ip, 4);
  }
  wire::write_udp({src_port, dst_port, static_cast<uint16_t>(udp_len), 0},
                  {end - wire::kUdpBytes, wire::kUdpBytes});
  return ip;
}

// Two addresses of the link's family. Constant lengths, so the compiler compares in registers
// instead of calling memcmp (per packet, on both sides).
bool same_ip(bool v6, const uint8_t* a, const uint8_t* b) {
  return v6 ? std::memcmp(a, b, 16) == 0 : std::memcmp(a, b, 4) == 0;
}

const uint8_t* ip_bytes(const sockaddr_storage& sa) {
  if (sa.ss_family == AF_INET6)
    return reinterpret_cast<const sockaddr_in6*>(&sa)->sin6_addr.s6_addr;
  return reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(&sa)->sin_addr);
}
uint16_t port_of(const sockaddr_storage& sa) {
  if (sa.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&sa)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&sa)->sin_port);
}

Gid gid_of(const sockaddr_storage& sa) {
  Gid g{};
  if (sa.ss_family == AF_INET6) {
    std::memcpy(g.data(), ip_bytes(sa), 16);
  } else {
    std::array<uint8_t, 4> a;
    std::memcpy(a.data(), ip_bytes(sa), 4);
    g = gid_from_ipv4(a);
  }
  return g;
}

// The change in an ICRC when the IPv4 identification goes from 0 to `id`, for a given number of
// bytes after the identification field. CRC-32 is linear, so the change is the XOR of one value
// per set bit of `id`, each computed from CRCs over zeros; the 64 changes are tabled per packet
// length in a small cache (GSO runs share one length).
class GsoIdDelta {
 public:
  // The change that identification `id` (below kMaxGsoSegments) makes.
  uint32_t delta(uint32_t bytes_after, uint32_t id) { return table(bytes_after)[id]; }
  // The identification whose change is `diff`, or 0 if none below kMaxGsoSegments.
  uint32_t find(uint32_t bytes_after, uint32_t diff) {
    const auto& t = table(bytes_after);
    const auto it = std::find(t.begin() + 1, t.end(), diff);
    return it == t.end() ? 0 : static_cast<uint32_t>(it - t.begin());
  }

 private:
  static constexpr uint32_t kIds = UdpLink::kMaxGsoSegments;
  struct Entry {
    uint32_t bytes_after = ~0u;
    std::array<uint32_t, kIds> delta{};
  };
  const std::array<uint32_t, kIds>& table(uint32_t bytes_after) {
    for (const Entry& e : cache_)
      if (e.bytes_after == bytes_after) return e.delta;
    Entry& e = cache_[next_++ % cache_.size()];
    e.bytes_after = bytes_after;
    static const std::array<uint8_t, kRxBufferBytes> kZeros{};
    const std::span<const uint8_t> zeros(kZeros.data(),
                                         std::min<size_t>(bytes_after, kZeros.size()));
    const std::array<uint8_t, 2> zero_id{};
    const uint32_t base = wire::crc32(wire::crc32(0, zero_id), zeros);
    std::array<uint32_t, 16> bit{};
    for (uint32_t b = 0; (1u << b) < kIds; ++b) {
      std::array<uint8_t, 2> id;
      store_be16(id.data(), static_cast<uint16_t>(1u << b));
      bit[b] = wire::crc32(wire::crc32(0, id), zeros) ^ base;
    }
    for (uint32_t id = 0; id < kIds; ++id) {
      e.delta[id] = 0;
      for (uint32_t b = 0; (1u << b) < kIds; ++b)
        if (id & (1u << b)) e.delta[id] ^= bit[b];
    }
    return e.delta;
  }
  std::array<Entry, 4> cache_{};
  uint32_t next_ = 0;
};

GsoIdDelta& gso_id_delta() {
  thread_local GsoIdDelta d;
  return d;
}

}  // namespace

struct UdpLink::TxSlot {
  // Pseudo IP + UDP (ending at kPre), then the transport headers: contiguous for the ICRC.
  alignas(8) std::array<uint8_t, kPre + wire::kMaxTransportHeaderBytes> hdr{};
  uint32_t th_len = 0;
  std::array<std::span<const uint8_t>, wire::kMaxGather> payload{};
  uint32_t parts = 0, payload_len = 0;
  uint8_t pad = 0;
  uint8_t tos = 0;        // DSCP << 2 | ECN
  uint8_t ttl = 0;        // TTL or hop limit; 0: the socket's default
  bool response = false;  // ACK, READ response or atomic ACK
  Gid dgid{};
  std::array<uint8_t, 8> tail{};  // pad zeros, then the ICRC

  uint32_t datagram_len() const { return th_len + payload_len + pad + wire::kIcrcBytes; }
  uint32_t iov_count() const { return 2 + parts; }
  // Which member of a shared address the packet goes to, as far as the sender can tell: the
  // destination QPN's slot (share/steer_decision.h), or, for the GSI QP, a value of its own
  // (MADs are steered by their content, each must be its own datagram).
  uint32_t steering_key() const {
    const uint8_t* bth = hdr.data() + kPre;
    const uint32_t qpn = uint32_t{bth[5]} << 16 | uint32_t{bth[6]} << 8 | bth[7];
    return qpn == 1 ? ~0u : qpn >> UROCE_SHARE_QPN_SHIFT;
  }
};

struct UdpLink::RxBuffer {
  std::vector<uint8_t> data;
  sockaddr_storage from{};
  alignas(cmsghdr) std::array<uint8_t, 128> control{};
  size_t len = 0;
  uint32_t gso_size = 0;  // GRO: every segment but the last has this size
  // TOS or traffic class and TTL or hop limit: GRO merges only datagrams that agree on them.
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
  bool truncated = false;
};

UdpLink::UdpLink(const UdpLinkOptions& options) : options_(options) {}

UdpLink::~UdpLink() {
  for (const Group& g : groups_) ::close(g.fd);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<UdpLink>, int> UdpLink::open(const UdpLinkOptions& options,
                                                    std::string* why) {
  if (options.tx_queue_packets == 0 || options.tx_queue_packets > 4096 || options.rx_batch == 0 ||
      options.rx_batch > kMaxMmsg)
    return Err(EINVAL);
  std::unique_ptr<UdpLink> link(new UdpLink(options));
  if (int err = link->setup(why); err != 0) return Err(err);
  return link;
}

int UdpLink::setup(std::string* why) {
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET, options_.address.c_str(), &v4.sin_addr) == 1) {
    if (v4.sin_addr.s_addr == htonl(INADDR_ANY)) return EINVAL;  // the ICRC needs our address
    v4.sin_family = AF_INET;
    v4.sin_port = htons(options_.port);
    std::memcpy(&local_, &v4, sizeof v4);
  } else if (inet_pton(AF_INET6, options_.address.c_str(), &v6.sin6_addr) == 1) {
    if (IN6_IS_ADDR_UNSPECIFIED(&v6.sin6_addr) || IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr))
      return EINVAL;
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(options_.port);
    std::memcpy(&local_, &v6, sizeof v6);
    ipv6_ = true;
  } else {
    return EINVAL;
  }
  gid_ = gid_of(local_);

  fd_ = ::socket(ipv6_ ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return errno;
  const int one = 1;
  const int buf = options_.socket_buffer_bytes;
  // Big buffers absorb bursts of a whole window; forcing needs CAP_NET_ADMIN, else the sysctl
  // limits (net.core.[rw]mem_max) apply.
  if (::setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (ipv6_) {
    const int pmtu = IPV6_PMTUDISC_DO;
    if (::setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0 ||
        ::setsockopt(fd_, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0 ||
        ::setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one) != 0 ||
        ::setsockopt(fd_, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &one, sizeof one) != 0)
      return errno;
  } else {
    // DF on every packet: RoCE never fragments, and with DF set Linux writes identification 0,
    // which the receiver must know to rebuild the header the ICRC covers.
    const int pmtu = IP_PMTUDISC_DO;
    if (::setsockopt(fd_, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu) != 0 ||
        ::setsockopt(fd_, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) != 0 ||
        ::setsockopt(fd_, IPPROTO_IP, IP_RECVTTL, &one, sizeof one) != 0)
      return errno;
    // Multicast leaves by the link's own interface (without it, a 127/8 source and the default
    // route's device disagree and the send fails) and is looped back to the host's other
    // members, so that processes on one host see each other's groups.
    const in_addr ifaddr = v4.sin_addr;
    if (::setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_IF, &ifaddr, sizeof ifaddr) != 0 ||
        ::setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof one) != 0)
      return errno;
  }
  if (options_.shared_address && ::setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
    return errno;
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&local_),
             ipv6_ ? sizeof(sockaddr_in6) : sizeof(sockaddr_in)) != 0)
    return errno;
  if (options_.shared_address) {
    auto share = AddressShare::join(fd_, local_, why);
    if (!share) return share.error();
    share_ = std::move(*share);
  }
  // Probe GSO (Linux 4.18) with a zero segment size, which means "none" and changes nothing.
  if (options_.gso) {
    const int zero = 0;
    gso_ = ::setsockopt(fd_, IPPROTO_UDP, UDP_SEGMENT, &zero, sizeof zero) == 0;
  }
  // Not when shared: the kernel merges a blob before the program steers it, by its first
  // datagram, and the blob may hold another member's packets.
  if (options_.gro && !share_)
    gro_ = ::setsockopt(fd_, IPPROTO_UDP, UDP_GRO, &one, sizeof one) == 0;

  tx_.resize(options_.tx_queue_packets);
  tx_scratch_.resize(options_.tx_queue_packets);
  // Every queued packet fits a 4 KiB MTU payload and its headers; bigger ones grow it on demand.
  if (options_.linearize) tx_linear_.resize(size_t{options_.tx_queue_packets} * 4352);
  tx_iovs_.resize(size_t{options_.tx_queue_packets} * kIovPerPacket);
  rx_.resize(options_.mmsg ? options_.rx_batch : 1);
  for (RxBuffer& b : rx_) b.data.resize(gro_ ? kRxBufferBytes : kRxBufferBytes / 4);
  rx_msgs_.resize(rx_.size());
  rx_iov_.resize(rx_.size());
  for (size_t i = 0; i < rx_.size(); ++i) reset_rx_header(i);
  return 0;
}

void UdpLink::reset_rx_header(size_t i) {
  RxBuffer& b = rx_[i];
  rx_iov_[i] = {b.data.data(), b.data.size()};
  rx_msgs_[i] = {};
  msghdr& m = rx_msgs_[i].msg_hdr;
  m.msg_name = &b.from;
  m.msg_namelen = sizeof b.from;
  m.msg_iov = &rx_iov_[i];
  m.msg_iovlen = 1;
  m.msg_control = b.control.data();
  m.msg_controllen = b.control.size();
}

std::optional<uint32_t> UdpLink::shared_slot() const {
  if (!share_) return std::nullopt;
  return share_->slot();
}

int UdpLink::claim_service(uint64_t service_id) {
  return share_ ? share_->add_service(service_id) : 0;
}

void UdpLink::release_service(uint64_t service_id) {
  if (share_) share_->remove_service(service_id);
}

// ---- Transmit ------------------------------------------------------------------------------

void UdpLink::transmit(const wire::TxPacket& p) {
  if (p.dest == nullptr || p.header_len < wire::kBthBytes ||
      p.header_len > wire::kMaxTransportHeaderBytes || p.payload_parts > wire::kMaxGather ||
      p.pad > 3 || gid_is_ipv4(p.dest->dgid) == ipv6_) {
    ++counters_.tx_errors;  // a caller bug or an address of the other family: never sent
    return;
  }
  if (tx_count_ == tx_.size()) flush();
  TxSlot& s = tx_[tx_count_];
  std::memcpy(s.hdr.data() + kPre, p.header.data(), p.header_len);
  s.th_len = p.header_len;
  s.parts = p.payload_parts;
  s.payload_len = 0;
  for (uint32_t i = 0; i < p.payload_parts; ++i) {
    s.payload[i] = p.payload[i];
    s.payload_len += static_cast<uint32_t>(p.payload[i].size());
  }
  s.pad = p.pad;
  if (s.datagram_len() > kMaxDatagramBytes) {
    ++counters_.tx_errors;
    return;
  }
  // Keep the DSCP the caller chose; the ECN bits are ours (RFC 3168: ECT(0) = 0b10).
  const uint8_t ecn = options_.ecn && p.ect ? static_cast<uint8_t>(wire::Ecn::kEct0) : 0;
  s.tos = static_cast<uint8_t>((p.dest->traffic_class & 0xfc) | ecn);
  s.ttl = p.dest->hop_limit;
  s.dgid = p.dest->dgid;
  s.response = wire::opcode_info(p.header[0]).is_response();
  tx_responses_ += s.response;
  ++tx_count_;
  if (p.flush_after) flush();
}

// Requests, then responses, each in the order queued. A QP's transport puts its responder's
// output (ACKs above all) before its requester's, which on a ping-pong puts the ACK of the last
// message in front of the reply: the reply would wait for the kernel to deliver the ACK. The two
// are separate PSN streams (IBA 9.7.1: requests carry the requester's PSNs, responses the
// responder's), so their relative order is free; within each stream the order is kept.
void UdpLink::requests_first() {
  if (tx_responses_ == 0 || tx_responses_ == tx_count_) return;
  size_t requests = 0, responses = 0;
  for (size_t i = 0; i < tx_count_; ++i) {
    if (tx_[i].response)
      tx_scratch_[responses++] = tx_[i];
    else if (requests++ != i)
      tx_[requests - 1] = tx_[i];
  }
  std::copy_n(tx_scratch_.begin(), responses, tx_.begin() + static_cast<ptrdiff_t>(requests));
}

// A run starting at slot k that one send carries: with GSO, following packets to the same peer
// with the same TOS, TTL and size (UDP GSO cuts a send into gso_size pieces, all equal but the
// last, which may be shorter), within the kernel's limits on segments, bytes and iovecs.
size_t UdpLink::run_end(size_t k, size_t limit) const {
  size_t j = k + 1;
  if (!gso_) return j;
  const TxSlot& lead = tx_[k];
  // The receiving host steers a GSO send (and a GRO blob) as one datagram, by its first packet:
  // a run stays within one member of a shared address (shared_address.h), any peer's.
  const uint32_t key = lead.steering_key();
  if (key == ~0u) return j;
  uint32_t bytes = lead.datagram_len(), iovs = lead.iov_count();
  while (j < limit && j - k < kMaxGsoSegments) {
    const TxSlot& s = tx_[j];
    // memcmp of a constant 16 bytes is inlined; std::array's != calls memcmp (per packet here).
    if (std::memcmp(s.dgid.data(), lead.dgid.data(), 16) != 0 || s.tos != lead.tos ||
        s.ttl != lead.ttl || s.steering_key() != key || s.datagram_len() > lead.datagram_len() ||
        bytes + s.datagram_len() > kMaxDatagramBytes - wire::kIpv6Bytes ||
        iovs + s.iov_count() > kMaxIovPerMsg)
      break;
    bytes += s.datagram_len();
    iovs += s.iov_count();
    ++j;
    if (s.datagram_len() < lead.datagram_len()) break;
  }
  return j;
}

void UdpLink::flush() {
  requests_first();
  size_t i = 0;
  while (i < tx_count_) {
    // Up to kMaxMmsg messages (each a GSO run or a single packet) go in one sendmmsg.
    size_t end = i;
    for (size_t msgs = 0; end < tx_count_ && msgs < kMaxMmsg; ++msgs) end = run_end(end, tx_count_);
    send_messages(i, end - i);
    i = end;
  }
  tx_count_ = 0;
  tx_responses_ = 0;
}

namespace {

socklen_t fill_destination(sockaddr_storage& to, const Gid& dgid, bool v6) {
  if (v6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&to);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(wire::kRoceV2Port);
    std::memcpy(a->sin6_addr.s6_addr, dgid.data(), 16);
    return sizeof(sockaddr_in6);
  }
  auto* a = reinterpret_cast<sockaddr_in*>(&to);
  a->sin_family = AF_INET;
  a->sin_port = htons(wire::kRoceV2Port);
  std::memcpy(&a->sin_addr, dgid.data() + 12, 4);
  return sizeof(sockaddr_in);
}

// Where the send goes by address: an IPv4 destination is the mapped GID's last four bytes.
// (common/types.h's ipv4_multicast_group() also checks the mapping, which transmit() did
// already; this runs per message.)
bool multicast_destination(const Gid& dgid, bool v6) {
  return v6 ? dgid[0] == 0xff : (dgid[12] & 0xf0) == 0xe0;
}

struct alignas(cmsghdr) TxControl {
  std::array<uint8_t, CMSG_SPACE(sizeof(uint16_t)) + 2 * CMSG_SPACE(sizeof(int))> bytes;
};

// The TOS (or traffic class) of the send and its TTL (or hop limit) where the socket does not
// already apply them, and, for a GSO send, its segment size. The messages are laid out back to
// back by hand (CMSG_NXTHDR may return null, which the compiler cannot rule out).
void write_control(msghdr& m, TxControl& control, bool v6, int tos, int ttl, uint16_t gso_size,
                   bool send_tos, bool send_ttl) {
  size_t len = 0;
  auto add = [&](int level, int type, const void* data, size_t size) {
    auto* c = reinterpret_cast<cmsghdr*>(control.bytes.data() + len);
    c->cmsg_level = level;
    c->cmsg_type = type;
    c->cmsg_len = CMSG_LEN(size);
    std::memcpy(CMSG_DATA(c), data, size);
    len += CMSG_SPACE(size);
  };
  if (send_tos) add(v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_TCLASS : IP_TOS, &tos, sizeof tos);
  if (send_ttl) add(v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_HOPLIMIT : IP_TTL, &ttl, sizeof ttl);
  if (gso_size != 0) add(IPPROTO_UDP, UDP_SEGMENT, &gso_size, sizeof gso_size);
  m.msg_control = len != 0 ? control.bytes.data() : nullptr;
  m.msg_controllen = len;
}

}  // namespace

// The kernel parses a send's control messages on every call and a socket option once, so the
// TOS and TTL most sends use become the socket's. The socket changes only between sendmmsg calls
// (the messages of a call were built for what the socket applied when they were built): a
// run of kSocketDefaultsAfter messages with the same values marks them to be taken after the
// call. The socket's TTL applies to unicast only (multicast sends use IP_MULTICAST_TTL).
UdpLink::ControlNeeded UdpLink::control_needed(int tos, int ttl, bool multicast) {
  const int socket_ttl = ttl == 0 ? -1 : ttl;
  // A TTL of 0 (the default) cannot go as a control message (the kernel refuses 0):
  // send_messages() put the socket back on the default before building any message.
  UROCE_DCHECK(multicast || ttl != 0 || socket_ttl_ == -1);
  ControlNeeded need{tos != socket_tos_, ttl != 0 && (multicast || socket_ttl != socket_ttl_)};
  if (multicast || (!need.tos && !need.ttl)) {
    pending_sends_ = 0;
    return need;
  }
  if (tos != pending_tos_ || socket_ttl != pending_ttl_) {
    pending_tos_ = tos;
    pending_ttl_ = socket_ttl;
    pending_sends_ = 0;
  }
  if (pending_sends_ < kSocketDefaultsAfter) ++pending_sends_;
  return need;
}

void UdpLink::set_socket_defaults(int tos, int ttl) {
  ++stats_.tx_socket_defaults;
  // On failure the socket keeps what it had, which the members still say, and the control
  // messages go on carrying the values.
  if (ipv6_) {
    if (::setsockopt(fd_, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos) == 0) socket_tos_ = tos;
    if (::setsockopt(fd_, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &ttl, sizeof ttl) == 0)
      socket_ttl_ = ttl;
  } else {
    if (::setsockopt(fd_, IPPROTO_IP, IP_TOS, &tos, sizeof tos) == 0) socket_tos_ = tos;
    if (::setsockopt(fd_, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl) == 0) socket_ttl_ = ttl;
  }
}

// Computes the slot's ICRC into its tail and appends its iovecs (headers, payload, pad+ICRC).
// The ICRC covers the IP header as the kernel will write it: identification `ip_id`.
uint32_t UdpLink::icrc_prefix(TxSlot& s, const uint8_t* dst_ip, uint16_t ip_id) {
  // Source address and port are the link's own, so destination, length and identification are
  // all that vary.
  const size_t ip_len = ipv6_ ? 16 : 4;
  IcrcPrefix& e = icrc_prefix_[ip_id % icrc_prefix_.size()];
  if (e.valid && e.ip_id == ip_id && e.datagram_len == s.datagram_len() &&
      same_ip(ipv6_, e.dst.data(), dst_ip)) {
    ++stats_.tx_icrc_prefix_hits;
    return e.crc;
  }
  uint8_t* th = s.hdr.data() + kPre;
  const uint8_t* start = write_pseudo_headers(th, ipv6_, ip_bytes(local_), dst_ip, options_.port,
                                              wire::kRoceV2Port, s.datagram_len(), ip_id);
  e.crc = wire::icrc_ip_udp({start, static_cast<size_t>(th - start)});
  e.datagram_len = s.datagram_len();
  e.ip_id = ip_id;
  std::memcpy(e.dst.data(), dst_ip, ip_len);
  e.valid = true;
  return e.crc;
}

size_t UdpLink::seal(TxSlot& s, const uint8_t* dst_ip, uint16_t ip_id, iovec* iov) {
  uint8_t* th = s.hdr.data() + kPre;
  uint32_t crc = wire::icrc_transport(icrc_prefix(s, dst_ip, ip_id), {th, s.th_len});
  for (uint32_t p = 0; p < s.parts; ++p) crc = wire::crc32(crc, s.payload[p]);
  std::memset(s.tail.data(), 0, s.pad);
  crc = wire::crc32(crc, std::span<const uint8_t>(s.tail.data(), s.pad));
  // The ICRC goes on the wire least significant byte first (IBA A17.4.1, like the FCS).
  for (int b = 0; b < 4; ++b) s.tail[s.pad + b] = static_cast<uint8_t>(crc >> (8 * b));

  size_t n = 0;
  iov[n++] = {th, s.th_len};
  for (uint32_t p = 0; p < s.parts; ++p)
    if (!s.payload[p].empty())
      iov[n++] = {const_cast<uint8_t*>(s.payload[p].data()), s.payload[p].size()};
  iov[n++] = {s.tail.data(), s.pad + wire::kIcrcBytes};
  return n;
}

// seal() for a linearized send: the same bytes written back to back at `out` (headers, payload,
// pad, ICRC). A large payload's CRC is computed as it is copied (one pass over the caller's
// memory instead of a CRC pass and a copy); a small packet is copied first and its transport
// part CRC'd in one call (a CRC call's fixed cost dominates there). Returns the datagram's length.
size_t UdpLink::seal_into(TxSlot& s, const uint8_t* dst_ip, uint16_t ip_id, uint8_t* out) {
  constexpr uint32_t kSmallPayload = 256;  // below this the fused copy is a memcpy and a CRC
  const uint8_t* th = s.hdr.data() + kPre;
  const uint32_t prefix = icrc_prefix(s, dst_ip, ip_id);
  uint8_t* p = out;
  std::memcpy(p, th, s.th_len);
  p += s.th_len;
  uint32_t crc;
  if (s.payload_len < kSmallPayload) {
    for (uint32_t i = 0; i < s.parts; ++i) {
      if (!s.payload[i].empty()) std::memcpy(p, s.payload[i].data(), s.payload[i].size());
      p += s.payload[i].size();
    }
    std::memset(p, 0, s.pad);
    p += s.pad;
    crc = wire::icrc_transport_packet(prefix, {out, static_cast<size_t>(p - out)});
  } else {
    crc = wire::icrc_transport(prefix, {th, s.th_len});
    for (uint32_t i = 0; i < s.parts; ++i) {
      crc = wire::crc32_copy(crc, p, s.payload[i]);
      p += s.payload[i].size();
    }
    std::memset(p, 0, s.pad);
    crc = wire::crc32(crc, std::span<const uint8_t>(p, s.pad));
    p += s.pad;
  }
  // The ICRC goes on the wire least significant byte first (IBA A17.4.1, like the FCS).
  for (int b = 0; b < 4; ++b) *p++ = static_cast<uint8_t>(crc >> (8 * b));
  return static_cast<size_t>(p - out);
}

// Builds the messages for slots [first, first + count) (at most kMaxMmsg runs) and sends them.
void UdpLink::send_messages(size_t first, size_t count) {
  // Only the entries used are initialised: zeroing all kMaxMmsg of each (about 15 KiB) on every
  // flush showed up as a few percent of the sender's CPU.
  std::array<mmsghdr, kMaxMmsg> msgs;
  std::array<sockaddr_storage, kMaxMmsg> names;
  std::array<TxControl, kMaxMmsg> controls;
  std::array<uint32_t, kMaxMmsg> segs_of, bytes_of;
  // A member, not a thread_local: a process's exit handlers (librdmacm's disconnect at exit) run
  // a pass after the exiting thread's thread_locals are destroyed.
  if (tx_iovs_.size() < count * kIovPerPacket) tx_iovs_.resize(count * kIovPerPacket);
  std::vector<iovec>& iovs = tx_iovs_;
  size_t iov_used = 0;
  size_t linear_used = 0;
  if (options_.linearize) {
    size_t need = 0;
    for (size_t k = first; k < first + count; ++k) need += tx_[k].datagram_len();
    if (need > tx_linear_.size()) tx_linear_.resize(need);  // bounded: the queue's datagrams
  }

  // A message with the default TTL needs the socket on it (see control_needed()).
  if (socket_ttl_ != -1) {
    for (size_t k = first; k < first + count; ++k)
      if (tx_[k].ttl == 0 && !multicast_destination(tx_[k].dgid, ipv6_)) {
        set_socket_defaults(socket_tos_, -1);
        break;
      }
  }

  size_t n = 0;
  for (size_t k = first; k < first + count; ++n) {
    UROCE_CHECK(n < kMaxMmsg);
    const TxSlot& lead = tx_[k];
    const size_t j = run_end(k, first + count);  // the same runs flush() counted
    const uint32_t segs = static_cast<uint32_t>(j - k);
    msgs[n] = {};
    controls[n] = {};
    std::memset(&names[n], 0, sizeof(sockaddr_in6));
    msghdr& m = msgs[n].msg_hdr;
    m.msg_name = &names[n];
    m.msg_namelen = fill_destination(names[n], lead.dgid, ipv6_);
    m.msg_iov = &iovs[iov_used];
    bytes_of[n] = 0;
    uint8_t* linear = tx_linear_.data() + linear_used;
    for (uint32_t seg = 0; seg < segs; ++seg) {
      // GSO numbers the IPv4 identifications of the segments it cuts 0, 1, 2, ...
      const uint16_t ip_id = segs > 1 ? static_cast<uint16_t>(seg) : 0;
      if (options_.linearize)
        linear_used +=
            seal_into(tx_[k + seg], ip_bytes(names[n]), ip_id, tx_linear_.data() + linear_used);
      else
        iov_used += seal(tx_[k + seg], ip_bytes(names[n]), ip_id, &iovs[iov_used]);
      bytes_of[n] += tx_[k + seg].datagram_len();
    }
    if (options_.linearize) iovs[iov_used++] = {linear, bytes_of[n]};
    m.msg_iovlen = static_cast<size_t>(&iovs[iov_used] - m.msg_iov);
    const ControlNeeded need =
        control_needed(lead.tos, lead.ttl, multicast_destination(lead.dgid, ipv6_));
    write_control(m, controls[n], ipv6_, lead.tos, lead.ttl,
                  segs > 1 ? static_cast<uint16_t>(lead.datagram_len()) : 0, need.tos, need.ttl);
    segs_of[n] = segs;
    k = j;
  }

  size_t done = 0;
  while (done < n) {
    const size_t sent = send_batch(&msgs[done], n - done);
    for (size_t m = done; m < done + sent; ++m) {
      counters_.tx_packets += segs_of[m];
      counters_.tx_bytes += bytes_of[m] + segs_of[m] * ip_udp_header_bytes();
      if (segs_of[m] > 1) ++stats_.tx_gso_sends;
    }
    done += sent;
    if (done < n) {
      // The message at `done` failed for good: the transport's retransmission recovers it.
      counters_.tx_errors += segs_of[done];
      ++done;
    }
  }
  if (pending_sends_ >= kSocketDefaultsAfter) {
    pending_sends_ = 0;
    set_socket_defaults(pending_tos_, pending_ttl_);
  }
}

// Sends messages until one fails; returns how many went. EAGAIN (a full socket buffer) waits
// briefly for room, a bounded number of times, rather than dropping at once.
size_t UdpLink::send_batch(mmsghdr* msgs, size_t count) {
  size_t sent = 0;
  int waits = 0;
  while (sent < count) {
    int r;
    ++stats_.tx_syscalls;
    if (options_.mmsg) {
      r = ::sendmmsg(fd_, msgs + sent, static_cast<unsigned>(count - sent), 0);
    } else {
      r = ::sendmsg(fd_, &msgs[sent].msg_hdr, 0) >= 0 ? 1 : -1;
    }
    if (r > 0) {
      sent += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && waits < kEagainRetries) {
      ++waits;
      ++stats_.tx_eagain_waits;
      pollfd pfd{fd_, POLLOUT, 0};
      ::poll(&pfd, 1, kEagainWaitMs);
      continue;
    }
    // EIO from a GSO send means the route cannot offload the checksum: stop using GSO.
    if (r < 0 && errno == EIO && gso_) gso_ = false;
    break;
  }
  return sent;
}

// ---- Receive -------------------------------------------------------------------------------

namespace {

// The TOS or traffic class, TTL or hop limit and GRO segment size of a received datagram.
template <typename Buffer>
void read_control(const msghdr& m, Buffer& b) {
  b.gso_size = 0;
  b.traffic_class = 0;
  b.hop_limit = 64;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(const_cast<msghdr*>(&m), c)) {
    int v = 0;
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      b.traffic_class = *CMSG_DATA(c);  // IP_RECVTOS delivers one byte
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      b.traffic_class = static_cast<uint8_t>(v);
    } else if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) ||
               (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT)) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);  // both an int
      b.hop_limit = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      b.gso_size = static_cast<uint32_t>(v);
    }
  }
}

}  // namespace

size_t UdpLink::poll(const RxHandler& handler, size_t budget) {
  size_t taken = 0;
  // A receive call that returned fewer datagrams than it asked for found the socket empty: asking
  // again at once would be a system call (a microsecond or more in a VM) that finds nothing,
  // and on a ping-pong it sits between the request and the reply. What arrives meanwhile waits
  // for the next poll.
  // Packets a deferral kept are handed up without a receive call after them: the caller that
  // deferred them is waiting for their completions, not for new packets (a ping-pong's next
  // reply cannot have come yet), and the next poll makes that call.
  bool drained = deferred_;
  deferred_ = false;
  while (taken < budget && !deferred_ && !(drained && rx_next_ == rx_filled_)) {
    if (rx_next_ == rx_filled_) {
      rx_next_ = rx_filled_ = 0;
      rx_next_offset_ = 0;
      const size_t want = rx_single_ ? 1 : std::min(rx_.size(), budget - taken);
      int r;
      ++stats_.rx_syscalls;
      if (rx_single_) ++stats_.rx_single_syscalls;
      if (options_.mmsg) {
        r = ::recvmmsg(fd_, rx_msgs_.data(), static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
      } else {
        const ssize_t got = ::recvmsg(fd_, &rx_msgs_[0].msg_hdr, MSG_DONTWAIT);
        if (got >= 0) rx_msgs_[0].msg_len = static_cast<unsigned>(got);
        r = got >= 0 ? 1 : -1;
      }
      if (r <= 0) {  // EAGAIN: nothing more now (other errors: try again next poll)
        ++stats_.rx_empty_syscalls;
        rx_last_call_empty_ = true;
        break;
      }
      for (int i = 0; i < r; ++i) {
        RxBuffer& b = rx_[i];
        const msghdr& m = rx_msgs_[i].msg_hdr;
        b.len = rx_msgs_[i].msg_len;
        b.truncated = (m.msg_flags & MSG_TRUNC) != 0;
        read_control(m, b);
        reset_rx_header(static_cast<size_t>(i));
      }
      rx_filled_ = static_cast<size_t>(r);
      if (rx_single_) {
        // Whether more is queued is unknown; the next poll asks (for a batch if this call came
        // right after another that found data).
        drained = true;
        rx_single_ = rx_last_call_empty_;
      } else {
        drained = rx_filled_ < want;
        rx_single_ = rx_filled_ == 1 && rx_last_call_empty_;
      }
      rx_last_call_empty_ = false;
    }
    taken += deliver(handler, budget - taken);
  }
  if (!groups_.empty() && taken < budget && !deferred_)
    taken += poll_groups(handler, budget - taken);
  return taken;
}

bool UdpLink::defer_acks_behind_this_packet() {
  if (delivering_len_ == 0) return false;  // not called from deliver()'s handler
  const RxBuffer& b = rx_[rx_next_];
  const uint8_t* next = nullptr;
  if (rx_next_offset_ + delivering_len_ < b.len) {
    next = b.data.data() + rx_next_offset_ + delivering_len_;  // the blob's next segment
  } else if (rx_next_ + 1 < rx_filled_ && !rx_[rx_next_ + 1].truncated &&
             rx_[rx_next_ + 1].len > 0) {
    next = rx_[rx_next_ + 1].data.data();
  }
  // The first byte of a RoCEv2 datagram is the BTH's opcode; a packet that turns out malformed
  // is counted when the next poll hands it up, as it would have been now.
  if (next == nullptr || wire::opcode_info(*next).kind != wire::Kind::kAck) return false;
  deferred_ = true;
  return true;
}

// ---- Multicast groups ----------------------------------------------------------------------

size_t UdpLink::poll_groups(const RxHandler& handler, size_t budget) {
  RxBuffer& b = group_rx_.front();
  size_t taken = 0;
  // Round-robin over the groups, each read until empty or the budget is spent.
  for (size_t visited = 0; visited < groups_.size() && taken < budget; ++visited) {
    const Group& g = groups_[next_group_ % groups_.size()];
    next_group_ = (next_group_ + 1) % groups_.size();
    std::array<uint8_t, 4> group_ip;
    std::memcpy(group_ip.data(), g.gid.data() + 12, 4);
    while (taken < budget) {
      iovec iov{b.data.data(), b.data.size()};
      msghdr m{};
      m.msg_name = &b.from;
      m.msg_namelen = sizeof b.from;
      m.msg_iov = &iov;
      m.msg_iovlen = 1;
      m.msg_control = b.control.data();
      m.msg_controllen = b.control.size();
      ++stats_.rx_syscalls;
      const ssize_t got = ::recvmsg(g.fd, &m, MSG_DONTWAIT);
      if (got < 0) break;  // EAGAIN: this group is empty for now
      ++stats_.rx_group_datagrams;
      ++taken;
      if ((m.msg_flags & MSG_TRUNC) != 0) {
        ++counters_.rx_drop_malformed;
        continue;
      }
      read_control(m, b);
      // Without UDP_GRO on this socket the kernel hands out single datagrams (a GSO send it
      // looped back is cut on receive), whose IP identification the ICRC check guesses.
      handle_datagram(handler, b.data.data(), static_cast<size_t>(got), b, 0, group_ip.data(),
                      g.gid);
    }
  }
  return taken;
}

int UdpLink::join_group(const Gid& group) {
  if (ipv6_ || ipv4_multicast_group(group) != group) return EOPNOTSUPP;
  for (const Group& g : groups_)
    if (g.gid == group) return EEXIST;
  if (groups_.size() >= kMaxGroups) return ENOMEM;
  if (epoll_fd_ < 0) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) return errno;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd_;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd_, &ev) != 0) {
      const int err = errno;
      ::close(epoll_fd_);
      epoll_fd_ = -1;
      return err;
    }
    group_rx_.resize(1);
    group_rx_.front().data.resize(kRxBufferBytes);
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(options_.port);
  std::memcpy(&addr.sin_addr, group.data() + 12, 4);
  ip_mreqn join{};
  join.imr_multiaddr = addr.sin_addr;
  join.imr_address = reinterpret_cast<const sockaddr_in*>(&local_)->sin_addr;
  const int one = 1, zero = 0;
  const int buf = options_.socket_buffer_bytes;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  // Every member on the host binds the group's address and port (SO_REUSEADDR lets them share
  // it; the kernel gives each a copy). Without IP_MULTICAST_ALL off, a socket would also get the
  // groups other sockets on the host joined.
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof zero) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &one, sizeof one) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof join) != 0 ||
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    const int err = errno;
    ::close(fd);
    return err;
  }
  groups_.push_back({group, fd});
  return 0;
}

int UdpLink::leave_group(const Gid& group) {
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (groups_[i].gid != group) continue;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, groups_[i].fd, nullptr);
    ::close(groups_[i].fd);  // drops the membership
    groups_.erase(groups_.begin() + static_cast<ptrdiff_t>(i));
    next_group_ = 0;
    return 0;
  }
  return ENOENT;
}

// Hands out segments of the buffered datagrams, at most `budget`; a GRO blob may be left half
// delivered for the next poll.
size_t UdpLink::deliver(const RxHandler& handler, size_t budget) {
  size_t n = 0;
  while (n < budget && rx_next_ < rx_filled_ && !deferred_) {
    RxBuffer& b = rx_[rx_next_];
    if (b.truncated) {
      // Bigger than any RoCE packet we could have sent (or a blob beyond our buffer).
      ++counters_.rx_drop_malformed;
      ++n;
      ++rx_next_;
      continue;
    }
    if (b.gso_size != 0 && rx_next_offset_ == 0 && b.len > b.gso_size) ++stats_.rx_gro_blobs;
    const size_t seg = b.gso_size != 0 ? std::min<size_t>(b.gso_size, b.len - rx_next_offset_)
                                       : b.len - rx_next_offset_;
    // Segment k of a blob that one GSO send became (as on loopback) carries IP ID k.
    const uint32_t index =
        b.gso_size != 0 ? static_cast<uint32_t>(rx_next_offset_ / b.gso_size) : 0;
    delivering_len_ = seg;
    handle_datagram(handler, b.data.data() + rx_next_offset_, seg, b,
                    static_cast<uint16_t>(std::min(index, kMaxGsoSegments - 1)), ip_bytes(local_),
                    gid_);
    delivering_len_ = 0;
    ++n;
    rx_next_offset_ += seg;
    if (rx_next_offset_ >= b.len || seg == 0) {
      ++rx_next_;
      rx_next_offset_ = 0;
    }
  }
  return n;
}

// The receiver's counterpart of icrc_prefix(): the CRC over the LRH stand-in and the IP/UDP
// headers the sender's kernel wrote, which vary only by sender, datagram length and IPv4
// identification (the identification guessed from the segment's place in its GRO blob). Only
// datagrams to the link's own address are kept: a multicast group's address is not.
uint32_t UdpLink::rx_icrc_prefix(const sockaddr_storage& from, const uint8_t* dst_ip,
                                 uint32_t datagram_len, uint16_t ip_id) {
  const size_t ip_len = ipv6_ ? 16 : 4;
  const uint8_t* src_ip = ip_bytes(from);
  const uint16_t src_port = port_of(from);
  const bool to_own_address = same_ip(ipv6_, dst_ip, ip_bytes(local_));
  IcrcPrefix& e = rx_icrc_prefix_[ip_id % rx_icrc_prefix_.size()];
  if (to_own_address && e.valid && e.ip_id == ip_id && e.datagram_len == datagram_len &&
      e.port == src_port && same_ip(ipv6_, e.dst.data(), src_ip)) {
    ++stats_.rx_icrc_prefix_hits;
    return e.crc;
  }
  std::array<uint8_t, kPre> pseudo;
  uint8_t* end = pseudo.data() + pseudo.size();
  const uint8_t* start = write_pseudo_headers(end, ipv6_, src_ip, dst_ip, src_port, options_.port,
                                              datagram_len, ip_id);
  const uint32_t crc = wire::icrc_ip_udp({start, static_cast<size_t>(end - start)});
  if (!to_own_address) return crc;
  e.crc = crc;
  e.datagram_len = datagram_len;
  e.ip_id = ip_id;
  e.port = src_port;
  std::memcpy(e.dst.data(), src_ip, ip_len);
  e.valid = true;
  return e.crc;
}

bool UdpLink::icrc_ok(const uint8_t* data, size_t len, const sockaddr_storage& from,
                      const uint8_t* dst_ip, uint16_t ip_id_guess) {
  if (ipv6_) ip_id_guess = 0;
  const uint32_t ulen = static_cast<uint32_t>(len);
  uint32_t computed = wire::icrc_transport_packet(rx_icrc_prefix(from, dst_ip, ulen, ip_id_guess),
                                                  {data, len - wire::kIcrcBytes});
  const uint32_t received = uint32_t{data[len - 4]} | uint32_t{data[len - 3]} << 8 |
                            uint32_t{data[len - 2]} << 16 | uint32_t{data[len - 1]} << 24;
  if (computed == received) {
    if (ip_id_guess != 0) ++stats_.rx_icrc_gso_id;
    return true;
  }
  if (ipv6_) return false;
  // A GSO segment carries identification k (its number in the send). The receiver cannot see
  // it and the guess (the segment's place in its GRO blob) holds only when the blob is one send,
  // so accept any k < kMaxGsoSegments: the ICRC then guards 26 bits instead of 32. CRC-32 is
  // linear: the ICRC with identification 0 is the one computed, less the guess's change.
  // Bytes after the identification field: the rest of IPv4 (14), UDP, the datagram sans ICRC.
  const uint32_t after = 14 + wire::kUdpBytes + ulen - wire::kIcrcBytes;
  GsoIdDelta& ids = gso_id_delta();
  if (ip_id_guess != 0) computed ^= ids.delta(after, ip_id_guess);
  if (computed == received) return true;
  if (ids.find(after, computed ^ received)) {
    ++stats_.rx_icrc_gso_id;
    return true;
  }
  return false;
}

void UdpLink::handle_datagram(const RxHandler& handler, const uint8_t* data, size_t len,
                              const RxBuffer& b, uint16_t ip_id_guess, const uint8_t* dst_ip,
                              const Gid& dgid) {
  const sockaddr_storage& from = b.from;
  if (len < wire::kBthBytes + wire::kIcrcBytes) {
    ++counters_.rx_drop_malformed;
    return;
  }
  if (!icrc_ok(data, len, from, dst_ip, ip_id_guess)) {
    ++counters_.rx_drop_bad_icrc;
    return;
  }
  wire::TransportPacket& parsed = rx_parsed_;
  if (const std::optional<wire::ParseError> e =
          wire::parse_transport_into({data, len - wire::kIcrcBytes}, parsed)) {
    if (*e == wire::ParseError::kNotRoce)
      ++counters_.rx_drop_not_roce;
    else
      ++counters_.rx_drop_malformed;
    return;
  }
  const bool ce = (b.traffic_class & 3) == static_cast<uint8_t>(wire::Ecn::kCe);
  ++counters_.rx_packets;
  counters_.rx_bytes += len + ip_udp_header_bytes();
  if (ce) ++counters_.rx_ce_marked;
  wire::RxPacket rx;
  rx.hdr = &parsed.hdr;
  rx.payload = parsed.payload;
  rx.sgid = gid_of(from);
  rx.dgid = dgid;
  rx.udp_src_port = port_of(from);
  rx.ce = ce;
  rx.traffic_class = b.traffic_class;
  rx.hop_limit = b.hop_limit;
  handler(rx);
}

}  // namespace uroce::link
