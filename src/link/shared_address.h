#pragma once
// One device address shared by several processes (UdpLinkOptions::shared_address,
// UROCE_SHARED_ADDRESS=1; docs/udp-link.md "One address, several processes").
//
// Every member binds UDP 4791 of the address with SO_REUSEPORT, so their sockets form one
// reuseport group, and an SK_REUSEPORT eBPF program (share/share.bpf.c) picks each datagram's
// socket by what it names (share/steer_decision.h): the destination QPN's slot, the slot in a CM
// reply's communication ID, or, for a REQ or SIDR_REQ, the slot that registered its service ID.
// Two maps hold the state, found by name (the members share no parent): a REUSEPORT_SOCKARRAY
// with one socket per slot (a slot is claimed by inserting the socket where none is, and frees
// itself when the socket closes, however the process ends) and a hash of service IDs to slots.
// Loading the program and finding the maps need CAP_BPF and CAP_SYS_ADMIN (root).
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"

namespace uroce::link {

class AddressShare {
 public:
  // Joins `fd`, a UDP socket bound to `local` with SO_REUSEPORT, to the address's steering:
  // finds the address's maps or creates them (the first member), claims the lowest free slot,
  // forgets services a former owner of that slot left behind and attaches the program. Errors:
  // ENOSPC with every slot taken, EPERM without the privileges, EPROTONOSUPPORT in a build
  // without libbpf (UROCE_XDP=OFF), else the bpf() call's. `why` gets a sentence for a user.
  static Result<std::unique_ptr<AddressShare>, int> join(int fd, const sockaddr_storage& local,
                                                         std::string* why);
  ~AddressShare();  // unregisters this member's services; the slot frees when the socket closes
  AddressShare(const AddressShare&) = delete;
  AddressShare& operator=(const AddressShare&) = delete;

  uint32_t slot() const { return slot_; }
  // Sends REQs and SIDR_REQs for `service_id` to this member. EADDRINUSE when a live member has
  // it, ENOSPC past UROCE_SHARE_MAX_SERVICES at the address. Thread-safe (bpf() calls only).
  int add_service(uint64_t service_id);
  void remove_service(uint64_t service_id);

 private:
  AddressShare(int slots_fd, int services_fd, uint32_t slot)
      : slots_fd_(slots_fd), services_fd_(services_fd), slot_(slot) {}
  int slots_fd_;
  int services_fd_;
  uint32_t slot_;
  std::mutex mu_;
  std::vector<uint64_t> services_;  // registered here, at most UROCE_SHARE_MAX_SERVICES
};

}  // namespace uroce::link
