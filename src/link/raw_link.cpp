#include "link/raw_link.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/bytes.h"
#include "link/clock.h"
#include "link/ip_packet_io.h"

namespace uroce::link {
namespace {

// A full socket buffer at flush(): how many times, and how long each, to wait for room.
constexpr int kEagainRetries = 4;
constexpr int kEagainWaitMs = 1;

// Classic BPF: accept EtherType 0x8915 (RoCE v1), and IPv4 (no fragment) or IPv6 carrying UDP to
// port 4791; refuse everything else, which the kernel alone then handles. The socket sees frames
// with any 802.1Q tag already taken off by the kernel (it is in the packet's metadata).
constexpr sock_filter kRoceFilter[] = {
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),                              // 0: EtherType
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire::kEthertypeRoceV1, 13, 0),  // 1: -> accept
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire::kEthertypeIpv6, 8, 0),     // 2: -> 11
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire::kEthertypeIpv4, 0, 12),    // 3: else refuse
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 23),                              // 4: IPv4 protocol
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 17, 0, 10),                      // 5: UDP, else refuse
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 20),                              // 6: flags, offset
    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x1fff, 8, 0),                  // 7: a fragment: refuse
    BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 14),                             // 8: X = IPv4 IHL * 4
    BPF_STMT(BPF_LD | BPF_H | BPF_IND, 14 + 2),                          // 9: UDP destination
    BPF_STMT(BPF_JMP | BPF_JA, 3),                                       // 10: -> 14
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 14 + 6),                          // 11: IPv6 next header
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 17, 0, 3),                       // 12: UDP, else refuse
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 14 + 40 + 2),                     // 13: UDP destination
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, wire::kRoceV2Port, 0, 1),        // 14: 4791?
    BPF_STMT(BPF_RET | BPF_K, 0x40000),                                  // 15: accept
    BPF_STMT(BPF_RET | BPF_K, 0),                                        // 16: refuse
};

}  // namespace

bool parse_gid_address(const std::string& text, Gid& gid) {
  in_addr a4{};
  in6_addr a6{};
  if (inet_pton(AF_INET, text.c_str(), &a4) == 1) {
    std::array<uint8_t, 4> b;
    std::memcpy(b.data(), &a4, 4);
    gid = gid_from_ipv4(b);
    return true;
  }
  if (inet_pton(AF_INET6, text.c_str(), &a6) == 1) {
    std::memcpy(gid.data(), &a6, 16);
    return true;
  }
  return false;
}

// The interface that has exactly `gid` assigned, or "".
std::string interface_holding(const Gid& gid) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::string name;
  for (ifaddrs* i = list; i && name.empty(); i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    if (i->ifa_addr->sa_family == AF_INET && gid_is_ipv4(gid)) {
      if (std::memcmp(&reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, gid.data() + 12,
                      4) == 0)
        name = i->ifa_name;
    } else if (i->ifa_addr->sa_family == AF_INET6 && !gid_is_ipv4(gid)) {
      if (std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, gid.data(),
                      16) == 0)
        name = i->ifa_name;
    }
  }
  freeifaddrs(list);
  return name;
}

int bind_roce_guard_socket(const Gid& gid, int ifindex, int& fd) {
  const bool v4 = gid_is_ipv4(gid);
  fd = socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return errno;
  const int tiny = 1;  // the kernel rounds it up to its minimum
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tiny, sizeof tiny);
  sockaddr_storage ss{};
  socklen_t sl;
  if (v4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(wire::kRoceV2Port);
    std::memcpy(&sin->sin_addr, gid.data() + 12, 4);
    sl = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(wire::kRoceV2Port);
    std::memcpy(&sin6->sin6_addr, gid.data(), 16);
    if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80) sin6->sin6_scope_id = ifindex;
    sl = sizeof(sockaddr_in6);
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), sl) != 0) return errno;
  return 0;
}

int read_interface_identity(int fd, const std::string& ifname, Mac& mac, uint32_t& mtu) {
  ifreq req{};
  if (ifname.size() >= IFNAMSIZ) return EINVAL;
  std::memcpy(req.ifr_name, ifname.c_str(), ifname.size() + 1);
  if (ioctl(fd, SIOCGIFHWADDR, &req) != 0) return errno;
  std::memcpy(mac.data(), req.ifr_hwaddr.sa_data, 6);
  if (ioctl(fd, SIOCGIFMTU, &req) == 0 && req.ifr_mtu > 0) mtu = static_cast<uint32_t>(req.ifr_mtu);
  return 0;
}

Result<std::unique_ptr<RawLink>, int> RawLink::open(const RawLinkOptions& options) {
  std::unique_ptr<RawLink> link(new RawLink(options));
  if (int err = link->setup()) return Err(err);
  return link;
}

RawLink::~RawLink() {
  if (fd_ >= 0) close(fd_);
  if (guard_fd_ >= 0) close(guard_fd_);
}

int RawLink::setup() {
  if (!parse_gid_address(options_.address, gid_)) return EINVAL;
  if (options_.vlan_id && *options_.vlan_id > 0xfff) return EINVAL;
  ifname_ = options_.interface.empty() ? interface_holding(gid_) : options_.interface;
  if (ifname_.empty() || ifname_.size() >= IFNAMSIZ) return EINVAL;
  ifindex_ = static_cast<int>(if_nametoindex(ifname_.c_str()));
  if (ifindex_ == 0) return ENODEV;

  // The guard: address:4791 held, so the kernel does not answer RoCEv2 frames with ICMP.
  if (int err = bind_roce_guard_socket(gid_, ifindex_, guard_fd_)) return err;

  // Protocol 0 until the filter is on, so no unfiltered frame is queued in between.
  fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return errno;
  const sock_fprog prog{static_cast<unsigned short>(std::size(kRoceFilter)),
                        const_cast<sock_filter*>(kRoceFilter)};
  if (setsockopt(fd_, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) return errno;
  const int one = 1;
  // Not fatal before Linux 4.20: own frames then fail the destination check and are counted.
  setsockopt(fd_, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  for (int opt : {SO_RCVBUFFORCE, SO_SNDBUFFORCE})
    setsockopt(fd_, SOL_SOCKET, opt, &options_.socket_buffer_bytes,
               sizeof options_.socket_buffer_bytes);
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_protocol = htons(ETH_P_ALL);
  ll.sll_ifindex = ifindex_;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&ll), sizeof ll) != 0) return errno;

  if (int err = read_interface_identity(fd_, ifname_, mac_, if_mtu_)) return err;

  neighbours_ = std::make_unique<NeighbourTable>(ifindex_, options_.neighbour_cache_entries);
  if (options_.tx_batch == 0 || options_.rx_batch == 0) return EINVAL;
  tx_buf_.resize(options_.tx_batch * kSlotBytes);
  rx_buf_.resize(options_.rx_batch * kSlotBytes);
  tx_msgs_.resize(options_.tx_batch);
  tx_iov_.resize(options_.tx_batch);
  rx_msgs_.resize(options_.rx_batch);
  rx_iov_.resize(options_.rx_batch);
  for (uint32_t i = 0; i < options_.rx_batch; ++i) {
    rx_iov_[i] = {rx_buf_.data() + i * kSlotBytes, kSlotBytes};
    rx_msgs_[i].msg_hdr = {};
    rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[i];
    rx_msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  for (uint32_t i = 0; i < options_.tx_batch; ++i) {
    tx_msgs_[i].msg_hdr = {};
    tx_msgs_[i].msg_hdr.msg_iov = &tx_iov_[i];
    tx_msgs_[i].msg_hdr.msg_iovlen = 1;
  }
  tx_queued_.reserve(options_.tx_batch);
  return 0;
}

bool RawLink::reaches_roce_v1(const Gid& dgid) const {
  return routes_on_link(ifindex_, dgid).value_or(true);
}

uint8_t RawLink::priority_code_point(const wire::AddressVector& av) {
  return av.service_level != 0 ? av.service_level & 7 : av.traffic_class >> 5;
}

uint32_t RawLink::build_frame(const wire::TxPacket& pkt, const Gid& local, const Mac& src_mac,
                              const Mac& dst_mac, std::optional<uint16_t> vlan_id, bool roce_v1,
                              bool ecn, std::span<uint8_t> out) {
  if (pkt.dest == nullptr || pkt.header_len > pkt.header.size() ||
      pkt.payload_parts > wire::kMaxGather || pkt.pad > 3)
    return 0;
  const wire::AddressVector& av = *pkt.dest;
  const bool v1 = roce_v1 || av.roce_v1;
  wire::Ethernet eth;
  eth.dst = dst_mac;
  eth.src = src_mac;
  if (vlan_id) eth.vlan_tci = static_cast<uint16_t>(priority_code_point(av) << 13 | *vlan_id);
  const bool v4 = gid_is_ipv4(local);
  eth.ethertype = v1 ? wire::kEthertypeRoceV1 : v4 ? wire::kEthertypeIpv4 : wire::kEthertypeIpv6;
  const uint32_t l2 = wire::kEthBytes + (vlan_id ? wire::kVlanBytes : 0);
  if (out.size() < l2) return 0;
  wire::write_ethernet(eth, out);
  const std::span<uint8_t> l3 = out.subspan(l2);
  if (!v1) {
    const uint32_t n = build_ip_packet(pkt, local, l3);
    if (n == 0) return 0;
    if (!ecn) wire::set_ecn(l3.first(n), wire::Ecn::kNotEct);
    // IPv6 forbids a zero UDP checksum, and a frame on a wire meets receivers that check it.
    if (!v4) wire::fill_ipv6_udp_checksum(l3.first(n));
    return l2 + n;
  }
  const uint32_t n = build_v1_packet(pkt, local, l3);
  return n == 0 ? 0 : l2 + n;
}

void RawLink::transmit(const wire::TxPacket& pkt) {
  if (pkt.dest == nullptr) {
    ++counters_.tx_errors;
    return;
  }
  auto mac = neighbours_->lookup(pkt.dest->dgid, monotonic_ns());
  if (!mac) {
    ++counters_.tx_errors;
    ++stats_.tx_no_neighbour;
    return;
  }
  const bool v1 = options_.roce_v1 || pkt.dest->roce_v1;
  const size_t slot = tx_queued_.size();
  const std::span<uint8_t> frame(tx_buf_.data() + slot * kSlotBytes, kSlotBytes);
  const uint32_t n =
      build_frame(pkt, gid_, mac_, *mac, options_.vlan_id, options_.roce_v1, options_.ecn, frame);
  const uint32_t l2 = wire::kEthBytes + (options_.vlan_id ? wire::kVlanBytes : 0);
  if (n == 0) {
    ++counters_.tx_errors;
    return;
  }
  if (n - l2 > if_mtu_) {
    ++counters_.tx_errors;
    ++stats_.tx_too_big;
    return;
  }
  tx_iov_[slot] = {frame.data(), n};
  tx_queued_.push_back({n - l2, v1});
  if (tx_queued_.size() == options_.tx_batch) flush();
}

void RawLink::flush() {
  const size_t n = tx_queued_.size();
  size_t done = 0;
  int waits = 0;
  while (done < n) {
    int r;
    ++stats_.tx_syscalls;
    if (options_.mmsg) {
      r = ::sendmmsg(fd_, &tx_msgs_[done], static_cast<unsigned>(n - done), 0);
    } else {
      r = ::send(fd_, tx_iov_[done].iov_base, tx_iov_[done].iov_len, 0) >= 0 ? 1 : -1;
    }
    if (r > 0) {
      for (size_t i = done; i < done + static_cast<size_t>(r); ++i) {
        ++counters_.tx_packets;
        counters_.tx_bytes += tx_queued_[i].network_bytes;
        ++(tx_queued_[i].v1 ? stats_.tx_v1 : stats_.tx_v2);
      }
      done += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    // A full socket buffer: the frame was not taken; wait briefly for room, a bounded number of
    // times, before dropping it. ENOBUFS is different: the frame was taken and dropped on its way
    // out (a full qdisc, an nftables egress rule), as a NIC loses a frame on the wire; sending it
    // again would hide the loss from the transport, which recovers it.
    if (r < 0 && errno == EAGAIN && waits < kEagainRetries) {
      ++waits;
      ++stats_.tx_eagain_waits;
      pollfd pfd{fd_, POLLOUT, 0};
      ::poll(&pfd, 1, kEagainWaitMs);
      continue;
    }
    ++counters_.tx_errors;  // this frame failed for good: retransmission recovers it
    ++done;
  }
  tx_queued_.clear();
}

void RawLink::receive_frame(std::span<const uint8_t> frame, const Gid& local,
                            LinkCounters& counters, RawLinkStats* stats, const RxHandler& handler) {
  wire::Ethernet eth;
  const uint32_t off = wire::read_ethernet(frame, eth);
  if (off == 0) {
    ++counters.rx_drop_malformed;
    return;
  }
  const std::span<const uint8_t> l3 = frame.subspan(off);
  if (eth.ethertype == wire::kEthertypeIpv4 || eth.ethertype == wire::kEthertypeIpv6) {
    // The IP packet without any Ethernet minimum-size padding, so bytes count as link.h says.
    size_t ip_len = l3.size();
    if (eth.ethertype == wire::kEthertypeIpv4 && l3.size() >= wire::kIpv4Bytes)
      ip_len = std::min<size_t>(ip_len, load_be16(&l3[2]));
    else if (eth.ethertype == wire::kEthertypeIpv6 && l3.size() >= wire::kIpv6Bytes)
      ip_len = std::min<size_t>(ip_len, wire::kIpv6Bytes + size_t{load_be16(&l3[4])});
    if (receive_ip_packet(l3.first(ip_len), local, counters, handler) == RxVerdict::kDelivered &&
        stats)
      ++stats->rx_v2;
    return;
  }
  if (eth.ethertype != wire::kEthertypeRoceV1) {
    ++counters.rx_drop_not_roce;
    return;
  }
  if (receive_v1_packet(l3, local, counters, handler) == RxVerdict::kDelivered && stats)
    ++stats->rx_v1;
}

size_t RawLink::poll(const RxHandler& handler, size_t budget) {
  const size_t want = std::min<size_t>(budget, options_.rx_batch);
  size_t got = 0;
  if (options_.mmsg) {
    if (want == 0) return 0;
    ++stats_.rx_syscalls;
    const int r = ::recvmmsg(fd_, rx_msgs_.data(), static_cast<unsigned>(want),
                             MSG_DONTWAIT | MSG_TRUNC, nullptr);
    if (r <= 0) return 0;
    got = static_cast<size_t>(r);
    for (size_t i = 0; i < got; ++i) rx_iov_[i].iov_len = rx_msgs_[i].msg_len;
  } else {
    // One recv() per frame until the socket is empty or the budget is spent.
    while (got < want) {
      ++stats_.rx_syscalls;
      const ssize_t n =
          recv(fd_, rx_buf_.data() + got * kSlotBytes, kSlotBytes, MSG_DONTWAIT | MSG_TRUNC);
      if (n < 0) break;
      rx_iov_[got++].iov_len = static_cast<size_t>(n);
    }
  }
  for (size_t i = 0; i < got; ++i) {
    const size_t n = rx_iov_[i].iov_len;
    rx_iov_[i].iov_len = kSlotBytes;
    if (n > kSlotBytes) {
      ++counters_.rx_drop_malformed;  // longer than any RoCE frame (MSG_TRUNC: the real length)
      continue;
    }
    receive_frame({rx_buf_.data() + i * kSlotBytes, n}, gid_, counters_, &stats_, handler);
  }
  return got;
}

}  // namespace uroce::link
