#include "link/neighbour.h"

#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace uroce::link {
namespace {

constexpr uint16_t kUsableStates =
    NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;

void add_attr(nlmsghdr* h, uint16_t type, const void* data, size_t len) {
  auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<uint8_t*>(h) + NLMSG_ALIGN(h->nlmsg_len));
  a->rta_type = type;
  a->rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
  std::memcpy(RTA_DATA(a), data, len);
  h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + RTA_ALIGN(a->rta_len);
}

}  // namespace

size_t NeighbourTable::GidHash::operator()(const Gid& g) const {
  uint64_t a, b;
  std::memcpy(&a, g.data(), 8);
  std::memcpy(&b, g.data() + 8, 8);
  return static_cast<size_t>(a * 0x9e3779b97f4a7c15ull ^ b);
}

NeighbourTable::NeighbourTable(int ifindex, size_t capacity)
    : ifindex_(ifindex), capacity_(capacity == 0 ? 1 : capacity) {
  cache_.reserve(capacity_);
}

NeighbourTable::~NeighbourTable() {
  if (nl_fd_ >= 0) close(nl_fd_);
}

int NeighbourTable::netlink() {
  if (nl_fd_ < 0) nl_fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  return nl_fd_;
}

void NeighbourTable::insert(const Gid& peer, const Mac& mac, Nanos now) {
  if (cache_.size() >= capacity_ && !cache_.count(peer)) {
    // Bounded: more peers than room means a large segment; start over rather than track age.
    stats_.evictions += cache_.size();
    cache_.clear();
  }
  cache_[peer] = {mac, now};
}

std::optional<Mac> NeighbourTable::lookup(const Gid& peer, Nanos now) {
  ++stats_.lookups;
  auto it = cache_.find(peer);
  if (it != cache_.end() && now - it->second.at < kEntryLifetimeNs) return it->second.mac;
  if (!dumped_ || now - last_dump_ >= kMinDumpIntervalNs) {
    dump(now);
    it = cache_.find(peer);
    if (it != cache_.end() && it->second.at == now) return it->second.mac;
    ++stats_.misses;
    request_resolution(peer);
    return std::nullopt;
  }
  ++stats_.misses;
  // A stale entry is still the best answer until the next dump may run.
  if (it != cache_.end()) return it->second.mac;
  return std::nullopt;
}

void NeighbourTable::dump(Nanos now) {
  dumped_ = true;
  last_dump_ = now;
  const int fd = netlink();
  if (fd < 0) return;
  ++stats_.dumps;
  struct {
    nlmsghdr h;
    ndmsg nd;
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(ndmsg));
  req.h.nlmsg_type = RTM_GETNEIGH;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.h.nlmsg_seq = ++seq_;
  req.nd.ndm_family = AF_UNSPEC;
  req.nd.ndm_ifindex = ifindex_;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd, &req, req.h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    return;
  alignas(nlmsghdr) static thread_local uint8_t buf[32768];
  // The kernel's NLMSG_* / RTA_* macros cast through char* and compare a signed length with
  // unsigned fields; the buffer is aligned for nlmsghdr and every length is checked by NLMSG_OK /
  // RTA_OK, so clang's -Wcast-align and -Wsign-compare on their expansions say nothing here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wsign-compare"
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_seq != seq_) continue;
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) return;
      if (h->nlmsg_type != RTM_NEWNEIGH) continue;
      const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
      if (nd->ndm_ifindex != ifindex_ || !(nd->ndm_state & kUsableStates)) continue;
      std::optional<Gid> dst;
      std::optional<Mac> mac;
      int alen = static_cast<int>(RTM_PAYLOAD(h));
      for (auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<uint8_t*>(const_cast<ndmsg*>(nd)) +
                                               NLMSG_ALIGN(sizeof(ndmsg)));
           RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
        const auto* d = static_cast<const uint8_t*>(RTA_DATA(a));
        const size_t dl = RTA_PAYLOAD(a);
        if (a->rta_type == NDA_DST && dl == 4) {
          dst = gid_from_ipv4({d[0], d[1], d[2], d[3]});
        } else if (a->rta_type == NDA_DST && dl == 16) {
          Gid g;
          std::memcpy(g.data(), d, 16);
          dst = g;
        } else if (a->rta_type == NDA_LLADDR && dl == 6) {
          Mac m;
          std::memcpy(m.data(), d, 6);
          mac = m;
        }
      }
      if (dst && mac) insert(*dst, *mac, now);
    }
  }
#pragma GCC diagnostic pop
}

std::optional<bool> routes_on_link(int ifindex, const Gid& peer) {
  const bool v4 = gid_is_ipv4(peer);
  if (!v4 && peer[0] == 0xfe && (peer[1] & 0xc0) == 0x80) return true;  // fe80::/10
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return std::nullopt;
  struct {
    nlmsghdr h;
    rtmsg rt;
    uint8_t attrs[64];
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
  req.h.nlmsg_type = RTM_GETROUTE;
  req.h.nlmsg_flags = NLM_F_REQUEST;
  req.h.nlmsg_seq = 1;
  req.rt.rtm_family = v4 ? AF_INET : AF_INET6;
  req.rt.rtm_dst_len = v4 ? 32 : 128;
  // No output interface in the request: with one, IPv4 assumes on-link whatever the table says.
  add_attr(&req.h, RTA_DST, v4 ? peer.data() + 12 : peer.data(), v4 ? 4 : 16);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::optional<bool> answer;
  alignas(nlmsghdr) uint8_t buf[4096];
  if (sendto(fd, &req, req.h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) >=
      0) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    // As in dump(): the macros' casts and signed comparisons are checked by NLMSG_OK / RTA_OK.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wsign-compare"
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); n > 0 && NLMSG_OK(h, len) && !answer;
         h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_ERROR) {
        answer = false;  // no route (ENETUNREACH): not on any segment of ours
        break;
      }
      if (h->nlmsg_type != RTM_NEWROUTE) continue;
      const auto* rt = static_cast<const rtmsg*>(NLMSG_DATA(h));
      bool gateway = false;
      int oif = 0;
      int alen = static_cast<int>(RTM_PAYLOAD(h));
      for (auto* a = RTM_RTA(rt); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
        if (a->rta_type == RTA_GATEWAY || a->rta_type == RTA_VIA) gateway = true;
        if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) == sizeof(int))
          std::memcpy(&oif, RTA_DATA(a), sizeof(int));
      }
      // RTN_LOCAL (the address is this host's own) is not a peer on the wire either.
      answer = rt->rtm_type == RTN_UNICAST && !gateway && oif == ifindex;
    }
#pragma GCC diagnostic pop
  }
  close(fd);
  return answer;
}

void NeighbourTable::request_resolution(const Gid& peer) {
  const int fd = netlink();
  if (fd < 0) return;
  ++stats_.resolve_requests;
  struct {
    nlmsghdr h;
    ndmsg nd;
    uint8_t attrs[64];
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(ndmsg));
  req.h.nlmsg_type = RTM_NEWNEIGH;
  // No NLM_F_ACK: the answer (ARP) comes later, and the next dump finds it.
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE;
  req.h.nlmsg_seq = ++seq_;
  const bool v4 = gid_is_ipv4(peer);
  req.nd.ndm_family = v4 ? AF_INET : AF_INET6;
  req.nd.ndm_ifindex = ifindex_;
  req.nd.ndm_state = NUD_NONE;
  req.nd.ndm_flags = NTF_USE;  // "use" the entry: the kernel starts resolving it
  if (v4) {
    add_attr(&req.h, NDA_DST, peer.data() + 12, 4);
  } else {
    add_attr(&req.h, NDA_DST, peer.data(), 16);
  }
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  (void)sendto(fd, &req, req.h.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel);
}

}  // namespace uroce::link
