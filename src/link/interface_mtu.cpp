#include "link/interface_mtu.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace uroce::link {
namespace {

bool serves(const ifaddrs& i, const Gid& gid, bool ipv4) {
  if (i.ifa_addr->sa_family == AF_INET && ipv4 && i.ifa_netmask) {
    // Within the interface's subnet: 127.0.0.2 is served by lo though only 127.0.0.1/8 is
    // assigned to it.
    uint32_t want;
    std::memcpy(&want, gid.data() + 12, 4);
    const uint32_t have = reinterpret_cast<const sockaddr_in*>(i.ifa_addr)->sin_addr.s_addr;
    const uint32_t mask = reinterpret_cast<const sockaddr_in*>(i.ifa_netmask)->sin_addr.s_addr;
    return (want & mask) == (have & mask);
  }
  if (i.ifa_addr->sa_family == AF_INET6 && !ipv4)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i.ifa_addr)->sin6_addr, gid.data(),
                       16) == 0;
  return false;
}

int interface_mtu(const char* name) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq req{};
  std::snprintf(req.ifr_name, sizeof req.ifr_name, "%s", name);
  const int mtu = ioctl(fd, SIOCGIFMTU, &req) == 0 ? req.ifr_mtu : 0;
  close(fd);
  return mtu;
}

}  // namespace

uint32_t roce_mtu_for(const Gid& gid) {
  const bool ipv4 = gid_is_ipv4(gid);
  int if_mtu = 0;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return kDefaultRoceMtu;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (i->ifa_addr && serves(*i, gid, ipv4)) {
      if_mtu = interface_mtu(i->ifa_name);
      break;
    }
  }
  freeifaddrs(list);
  if (if_mtu == 0) return kDefaultRoceMtu;
  const int overhead = (ipv4 ? 20 : 40) + 8 + 12 + 16 + 4;
  for (int mtu = 4096; mtu >= 256; mtu /= 2)
    if (mtu + overhead <= if_mtu) return static_cast<uint32_t>(mtu);
  return 256;
}

}  // namespace uroce::link
