#pragma once
// One side of a bench: a NIC on one address (api::open_nic: a UDP link, a verbs device on it), one
// RC QP, one CQ and one registered buffer, driven by the calling thread. The bench calls pump() in
// every wait loop, so a process needs one core, not two: on a 2-core machine the client and the
// server each get one.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api/nic.h"
#include "api/uroce.h"
#include "core/oob.h"

namespace uroce::tools {

struct NodeOptions {
  std::string address;        // IPv4 or IPv6 literal; the device's GID
  uint32_t mtu = 1024;        // path MTU in bytes: 256 .. 4096
  uint32_t depth = 128;       // send queue depth (outstanding work requests)
  uint32_t recv_depth = 128;  // receive queue depth
  uint64_t buffer_bytes = 4096;
  uint8_t timeout = 14;  // local ACK timeout exponent (IBA 9.7.6.1.3)
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;  // 7 = infinite (IBA 9.7.5.2.8)
  uint8_t max_rd_atomic = 16;
  std::string pcap_path;       // empty: no capture
  std::string link = "udp";    // udp | raw (link/factory.h)
  bool roce_v1 = false;        // raw link: RoCE v1 frames
  int vlan_id = -1;            // raw link: 802.1Q VLAN ID; -1: untagged
  bool raw_unbatched = false;  // raw link: a system call per frame (RawLinkOptions::mmsg off)
  bool xdp_zero_copy = false;  // xdp link: bind the socket with XDP_ZEROCOPY
  bool xdp_generic = false;    // xdp link: attach the program in generic (skb) mode
  // Per-QP switches (verbs::QpInitAttr): DCQCN off by default; selective repeat needs both ends.
  CongestionConfig congestion;
  LossRecovery loss_recovery = LossRecovery::kGoBackN;
  WriteSegments write_segments = WriteSegments::kPerPacket;
  uint32_t max_psn_window = 0;  // 0: the transport's default
};

Nanos monotonic_ns();

class Node {
 public:
  // Errors are errno values; `error` gets a sentence for the user.
  static std::unique_ptr<Node> open(const NodeOptions& options, std::string& error);
  ~Node();

  ConnInfo local_info() const;
  // RESET -> INIT -> RTR -> RTS towards `remote` (IBA 10.3.1). 0 or an errno.
  int connect(const ConnInfo& remote);

  std::span<uint8_t> buffer() { return {buf_.get(), opt_.buffer_bytes}; }
  const ConnInfo& remote() const { return remote_; }

  // Work requests on [offset, offset + length) of the local buffer; remote offsets are relative
  // to the peer's buffer. 0, or the errno post_send returned.
  int post_write(uint64_t wr_id, uint64_t offset, uint32_t length, uint64_t remote_offset,
                 bool signaled = true);
  int post_read(uint64_t wr_id, uint64_t offset, uint32_t length, uint64_t remote_offset,
                bool signaled = true);
  int post_send(uint64_t wr_id, uint64_t offset, uint32_t length, bool signaled = true);
  int post_recv(uint64_t wr_id, uint64_t offset, uint32_t length);
  int post_fetch_add(uint64_t wr_id, uint64_t offset, uint64_t remote_offset, uint64_t add,
                     bool signaled = true);

  // One pass of the NIC; returns the next time it has work (kNever when idle).
  Nanos pump() { return nic_->engine().pump(); }
  // pump() and then, once the NIC has been idle a while, sleep in poll() on the link and
  // `extra_fd` for at most `max_wait_ns` (or until its next timer): api::ProgressEngine's policy.
  void pump_or_wait(int extra_fd, Nanos max_wait_ns) {
    nic_->engine().pump_or_wait(extra_fd, max_wait_ns);
  }
  size_t poll_cq(std::span<Completion> out) { return cq_->poll(out); }

  std::vector<Counter> device_counters() const { return nic_->counters(); }
  std::vector<Counter> qp_counters() const { return qp_->counters(); }
  const std::string& device_name() const { return nic_->device().name(); }
  std::string gid_string() const;

 private:
  explicit Node(const NodeOptions& options) : opt_(options) {}
  // Posts `wr` with one SGE over [offset, offset + length) of the buffer (none for length 0),
  // asking for a completion or not.
  int post_one_sge(SendWr wr, uint64_t offset, uint32_t length, bool signaled);
  NodeOptions opt_;
  // Link (with the pcap tap when capturing), device and an engine without a thread: this
  // process's one thread drives.
  std::unique_ptr<api::Nic> nic_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<ProtectionDomain> pd_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<uint8_t[]> buf_;
  std::unique_ptr<MemoryRegion> mr_;
  ConnInfo remote_;
  uint32_t psn_ = 0;
};

std::string gid_to_string(const Gid& gid);

}  // namespace uroce::tools
