// AddressShare: the members of a shared address find each other through two named BPF maps.
#include "link/shared_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "link/share/steer_decision.h"

#ifdef UROCE_HAVE_XDP
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "link/share/share_object.h"
#endif

namespace uroce::link {

#ifdef UROCE_HAVE_XDP
namespace {

// What tells one shared address from another on the host: the network namespace, the address
// and the port. The lock's name holds it whole; map names (15 characters at most) a hash of it.
std::string address_key(const sockaddr_storage& local) {
  struct stat ns {};
  const unsigned long long netns = ::stat("/proc/self/ns/net", &ns) == 0 ? ns.st_ino : 0;
  char text[INET6_ADDRSTRLEN] = "";
  uint16_t port = 0;
  if (local.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(local);
    ::inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  } else {
    const auto& a = reinterpret_cast<const sockaddr_in&>(local);
    ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  }
  return std::to_string(netns) + "/" + text + "/" + std::to_string(port);
}

std::string map_name(char kind, const std::string& key) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : key) h = (h ^ c) * 16777619u;
  char name[16];
  std::snprintf(name, sizeof name, "ur%c_%08x", kind, h);
  return name;
}

// Held while a member finds or creates the maps and claims its slot, so that two members
// starting together do not create two sets. An abstract unix socket: bound by one process at a
// time, and released by the kernel however that process ends.
class AddressLock {
 public:
  explicit AddressLock(const std::string& key) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string name = "uroce-share/" + key;
    const size_t len = std::min(name.size(), sizeof a.sun_path - 1);
    std::memcpy(a.sun_path + 1, name.data(), len);  // sun_path[0] = 0: abstract
    const auto size = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len);
    // Another member holds it for a few bpf() calls; 10 s covers a stopped or traced one.
    for (int tries = 0; tries < 5000; ++tries) {
      if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), size) == 0) {
        held_ = true;
        return;
      }
      if (errno != EADDRINUSE) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ~AddressLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  AddressLock(const AddressLock&) = delete;
  AddressLock& operator=(const AddressLock&) = delete;
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

// The map named `name`, or -1 (a map of the address exists while any member's socket or program
// holds it).
int find_map(const std::string& name) {
  uint32_t id = 0;
  while (::bpf_map_get_next_id(id, &id) == 0) {
    const int fd = ::bpf_map_get_fd_by_id(id);
    if (fd < 0) continue;  // gone meanwhile
    bpf_map_info info{};
    uint32_t len = sizeof info;
    if (::bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && name == info.name) return fd;
    ::close(fd);
  }
  return -1;
}

int find_or_create(bpf_map_type type, const std::string& name, uint32_t key_size,
                   uint32_t value_size, uint32_t entries) {
  if (int fd = find_map(name); fd >= 0) return fd;
  const int fd = ::bpf_map_create(type, name.c_str(), key_size, value_size, entries, nullptr);
  return fd >= 0 ? fd : -errno;
}

// Whether a member's socket sits in `slot` (the lookup gives its cookie, or ENOENT).
bool slot_live(int slots_fd, uint32_t slot) {
  uint64_t cookie = 0;
  return ::bpf_map_lookup_elem(slots_fd, &slot, &cookie) == 0;
}

}  // namespace

Result<std::unique_ptr<AddressShare>, int> AddressShare::join(int fd, const sockaddr_storage& local,
                                                              std::string* why) {
  auto fail = [why](int err,
                    const std::string& what) -> Result<std::unique_ptr<AddressShare>, int> {
    if (why) *why = what;
    return Err(err);
  };
  const std::string key = address_key(local);
  AddressLock lock(key);
  if (!lock.held()) return fail(EBUSY, "cannot take the shared address's lock " + key);
  const int slots_fd = find_or_create(BPF_MAP_TYPE_REUSEPORT_SOCKARRAY, map_name('s', key),
                                      sizeof(uint32_t), sizeof(uint64_t), UROCE_SHARE_MAX_SLOTS);
  if (slots_fd < 0)
    return fail(-slots_fd, "cannot create the shared address's socket map (needs root)");
  const int services_fd = find_or_create(BPF_MAP_TYPE_HASH, map_name('v', key), sizeof(uint64_t),
                                         sizeof(uint32_t), UROCE_SHARE_MAX_SERVICES);
  if (services_fd < 0) {
    ::close(slots_fd);
    return fail(-services_fd, "cannot create the shared address's service map");
  }
  std::unique_ptr<AddressShare> share;
  const uint64_t socket_fd = static_cast<uint64_t>(fd);
  for (uint32_t slot = 0; slot < UROCE_SHARE_MAX_SLOTS && !share; ++slot)
    if (::bpf_map_update_elem(slots_fd, &slot, &socket_fd, BPF_NOEXIST) == 0)
      share.reset(new AddressShare(slots_fd, services_fd, slot));
  if (!share) {
    const int err = errno == EEXIST ? ENOSPC : errno;
    ::close(slots_fd);
    ::close(services_fd);
    return fail(err, "no free slot at the shared address (at most " +
                         std::to_string(UROCE_SHARE_MAX_SLOTS) + " processes)");
  }
  // A member that died left its services behind; the slot is ours now.
  uint64_t service = 0, next = 0;
  std::vector<uint64_t> stale;
  for (bool first = true;
       ::bpf_map_get_next_key(services_fd, first ? nullptr : &service, &next) == 0; first = false) {
    service = next;
    uint32_t owner = 0;
    if (::bpf_map_lookup_elem(services_fd, &service, &owner) == 0 && owner == share->slot_)
      stale.push_back(service);
  }
  for (uint64_t s : stale) ::bpf_map_delete_elem(services_fd, &s);

  bpf_object* object =
      ::bpf_object__open_mem(share::kShareObject, share::kShareObjectBytes, nullptr);
  if (!object) return fail(errno ? errno : EINVAL, "cannot open the steering program");
  bpf_map* slots = ::bpf_object__find_map_by_name(object, "uroce_slots");
  bpf_map* services = ::bpf_object__find_map_by_name(object, "uroce_services");
  bpf_program* program = ::bpf_object__find_program_by_name(object, "uroce_share");
  int err = 0;
  if (!slots || !services || !program)
    err = ENOENT;
  else if (int r = ::bpf_map__reuse_fd(slots, slots_fd); r != 0)
    err = -r;
  else if (int r2 = ::bpf_map__reuse_fd(services, services_fd); r2 != 0)
    err = -r2;
  else if (int r3 = ::bpf_object__load(object); r3 != 0)
    err = -r3;
  if (err == 0) {
    // The group has one program; each member attaching the same one replaces it harmlessly.
    const int prog_fd = ::bpf_program__fd(program);
    if (::setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &prog_fd, sizeof prog_fd) != 0)
      err = errno;
  }
  ::bpf_object__close(object);  // the group holds the program, the program the maps
  if (err != 0) return fail(err, "cannot load or attach the steering program");
  return share;
}

AddressShare::~AddressShare() {
  std::lock_guard lock(mu_);
  for (uint64_t s : services_) ::bpf_map_delete_elem(services_fd_, &s);
  ::close(slots_fd_);
  ::close(services_fd_);
}

int AddressShare::add_service(uint64_t service_id) {
  std::lock_guard lock(mu_);
  if (std::find(services_.begin(), services_.end(), service_id) != services_.end())
    return EADDRINUSE;
  if (services_.size() >= UROCE_SHARE_MAX_SERVICES) return ENOSPC;
  if (::bpf_map_update_elem(services_fd_, &service_id, &slot_, BPF_NOEXIST) != 0) {
    if (errno != EEXIST) return errno == E2BIG ? ENOSPC : errno;
    // Taken: by a live member, or left by one that died (its slot is empty or reclaimed by a
    // process that has not listened on it).
    uint32_t owner = 0;
    if (::bpf_map_lookup_elem(services_fd_, &service_id, &owner) == 0 && owner != slot_ &&
        slot_live(slots_fd_, owner))
      return EADDRINUSE;
    if (::bpf_map_update_elem(services_fd_, &service_id, &slot_, BPF_ANY) != 0) return errno;
  }
  services_.push_back(service_id);
  return 0;
}

void AddressShare::remove_service(uint64_t service_id) {
  std::lock_guard lock(mu_);
  auto it = std::find(services_.begin(), services_.end(), service_id);
  if (it == services_.end()) return;
  services_.erase(it);
  uint32_t owner = 0;
  if (::bpf_map_lookup_elem(services_fd_, &service_id, &owner) == 0 && owner == slot_)
    ::bpf_map_delete_elem(services_fd_, &service_id);
}

#else  // a build without libbpf (UROCE_XDP=OFF)

Result<std::unique_ptr<AddressShare>, int> AddressShare::join(int, const sockaddr_storage&,
                                                              std::string* why) {
  if (why) *why = "sharing an address needs a build with libbpf (UROCE_XDP=ON)";
  return Err(EPROTONOSUPPORT);
}
AddressShare::~AddressShare() {
  (void)slots_fd_;
  (void)services_fd_;
}
int AddressShare::add_service(uint64_t) {
  return EPROTONOSUPPORT;
}
void AddressShare::remove_service(uint64_t) {}

#endif

}  // namespace uroce::link
