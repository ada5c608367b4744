#include "link/xdp_link.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/xsk.h>

#include <cerrno>
#include <cstring>

#include "link/clock.h"
#include "link/xdp/steer_object.h"

namespace uroce::link {
namespace {

// Aligned UMEM frames of one page: the largest an aligned UMEM allows. A frame longer than this
// (a 4096-byte path MTU on an interface MTU above about 4 KB) cannot be sent: a counted drop.
constexpr uint32_t kFrameBytes = 4096;
constexpr uint64_t kFrameMask = ~uint64_t{kFrameBytes - 1};

bool power_of_two(uint32_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace

struct XdpLink::Rings {
  xsk_ring_cons rx{};
  xsk_ring_prod tx{};
  xsk_ring_prod fill{};
  xsk_ring_cons comp{};
  bpf_link* attachment = nullptr;  // owns the program's place on the interface
  int generic_link_fd = -1;        // the same, for a program attached in generic mode
};

XdpLink::XdpLink(const XdpLinkOptions& options) : options_(options) {}

Result<std::unique_ptr<XdpLink>, int> XdpLink::open(const XdpLinkOptions& options,
                                                    std::string* error) {
  std::unique_ptr<XdpLink> link(new XdpLink(options));
  std::string step;
  if (int err = link->setup(step)) {
    if (error) *error = step;
    return Err(err);
  }
  return link;
}

XdpLink::~XdpLink() {
  if (xsk_) xsk_socket__delete(xsk_);
  if (umem_) xsk_umem__delete(umem_);
  // Destroying the link detaches the program; a process that dies has the kernel do the same.
  if (rings_ && rings_->attachment) bpf_link__destroy(rings_->attachment);
  if (rings_ && rings_->generic_link_fd >= 0) close(rings_->generic_link_fd);
  if (bpf_) bpf_object__close(bpf_);
  if (umem_area_) munmap(umem_area_, umem_bytes_);
  if (guard_fd_ >= 0) close(guard_fd_);
}

int XdpLink::setup(std::string& step) {
  const RawLinkOptions& f = options_.frames;
  rings_ = std::make_unique<Rings>();
  step = "options";
  if (!parse_gid_address(f.address, gid_)) return EINVAL;
  if (f.vlan_id && *f.vlan_id > 0xfff) return EINVAL;
  if (f.rx_batch == 0 || f.tx_batch == 0 || !power_of_two(options_.ring_entries)) return EINVAL;
  const uint32_t rx_frames = options_.umem_frames / 2;
  const uint32_t tx_frames = options_.umem_frames - rx_frames;
  // Every frame fits on its ring at once, so a ring is never full while a frame is free.
  if (rx_frames == 0 || rx_frames > options_.ring_entries || tx_frames > options_.ring_entries ||
      f.tx_batch > tx_frames)
    return EINVAL;
  step = "interface";
  ifname_ = f.interface.empty() ? interface_holding(gid_) : f.interface;
  if (ifname_.empty() || ifname_.size() >= IFNAMSIZ) return EINVAL;
  ifindex_ = static_cast<int>(if_nametoindex(ifname_.c_str()));
  if (ifindex_ == 0) return ENODEV;

  step = "UDP port 4791 guard socket";
  if (int err = bind_roce_guard_socket(gid_, ifindex_, guard_fd_)) return err;
  step = "interface MAC and MTU";
  if (int err = read_interface_identity(guard_fd_, ifname_, mac_, if_mtu_)) return err;

  step = "UMEM";
  umem_bytes_ = size_t{options_.umem_frames} * kFrameBytes;
  void* area = mmap(nullptr, umem_bytes_, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (area == MAP_FAILED) return errno;
  umem_area_ = static_cast<uint8_t*>(area);
  xsk_umem_config ucfg{};
  ucfg.fill_size = options_.ring_entries;
  ucfg.comp_size = options_.ring_entries;
  ucfg.frame_size = kFrameBytes;
  ucfg.frame_headroom = 0;
  if (int r =
          xsk_umem__create(&umem_, umem_area_, umem_bytes_, &rings_->fill, &rings_->comp, &ucfg))
    return -r;

  step = "loading the XDP program";
  bpf_ = bpf_object__open_mem(xdp::kSteerObject, xdp::kSteerObjectBytes, nullptr);
  if (!bpf_) return errno ? errno : EINVAL;
  if (int r = bpf_object__load(bpf_)) return -r;
  bpf_program* prog = bpf_object__find_program_by_name(bpf_, "uroce_steer");
  bpf_map* map = bpf_object__find_map_by_name(bpf_, "uroce_xsks");
  if (!prog || !map) return ENOENT;
  prog_fd_ = bpf_program__fd(prog);
  // A BPF link: the kernel picks driver mode when the interface has it, generic mode otherwise,
  // and detaches the program when the link's last descriptor closes, even if this process dies.
  step = "attaching the XDP program to " + ifname_;
  if (options_.generic_mode) {
    // libbpf's attach_xdp takes no mode flags; a BPF link created with them does the same.
    LIBBPF_OPTS(bpf_link_create_opts, link_opts, .flags = XDP_FLAGS_SKB_MODE);
    rings_->generic_link_fd = bpf_link_create(prog_fd_, ifindex_, BPF_XDP, &link_opts);
    if (rings_->generic_link_fd < 0) return errno ? errno : EBUSY;
  } else {
    rings_->attachment = bpf_program__attach_xdp(prog, ifindex_);
    if (!rings_->attachment) return errno ? errno : EBUSY;
  }
  uint32_t drv_id = 0;
  if (bpf_xdp_query_id(ifindex_, XDP_FLAGS_DRV_MODE, &drv_id) == 0)
    stats_.driver_mode = drv_id != 0;

  step = "AF_XDP socket on " + ifname_ + " queue " + std::to_string(options_.queue);
  xsk_socket_config scfg{};
  scfg.rx_size = options_.ring_entries;
  scfg.tx_size = options_.ring_entries;
  scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;  // ours is attached above
  scfg.bind_flags =
      static_cast<uint16_t>(XDP_USE_NEED_WAKEUP | (options_.zero_copy ? XDP_ZEROCOPY : XDP_COPY));
  if (int r = xsk_socket__create(&xsk_, ifname_.c_str(), options_.queue, umem_, &rings_->rx,
                                 &rings_->tx, &scfg))
    return -r;
  xsk_fd_ = xsk_socket__fd(xsk_);
  step = "XSKMAP entry";
  if (int r = xsk_socket__update_xskmap(xsk_, bpf_map__fd(map))) return -r;

  if (options_.busy_poll) {
    // Best effort: kernels before 5.11 lack these, and a driver without NAPI ignores them.
    const int one = 1, budget = static_cast<int>(f.rx_batch), usecs = 20;
#ifdef SO_PREFER_BUSY_POLL
    setsockopt(xsk_fd_, SOL_SOCKET, SO_PREFER_BUSY_POLL, &one, sizeof one);
#endif
#ifdef SO_BUSY_POLL_BUDGET
    setsockopt(xsk_fd_, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget, sizeof budget);
#endif
    setsockopt(xsk_fd_, SOL_SOCKET, SO_BUSY_POLL, &usecs, sizeof usecs);
    (void)one;
    (void)budget;
  }

  // The first half of the UMEM receives (all of it on the fill ring), the second half sends.
  step = "fill ring";
  uint32_t idx = 0;
  if (xsk_ring_prod__reserve(&rings_->fill, rx_frames, &idx) != rx_frames) return ENOSPC;
  for (uint32_t i = 0; i < rx_frames; ++i)
    *xsk_ring_prod__fill_addr(&rings_->fill, idx + i) = uint64_t{i} * kFrameBytes;
  xsk_ring_prod__submit(&rings_->fill, rx_frames);
  free_tx_.reserve(tx_frames);
  for (uint32_t i = options_.umem_frames; i > rx_frames; --i)
    free_tx_.push_back(uint64_t{i - 1} * kFrameBytes);
  pending_.reserve(f.tx_batch);
  refill_.reserve(options_.ring_entries);
  neighbours_ = std::make_unique<NeighbourTable>(ifindex_, f.neighbour_cache_entries);
  step.clear();
  return 0;
}

bool XdpLink::reaches_roce_v1(const Gid& dgid) const {
  return routes_on_link(ifindex_, dgid).value_or(true);
}

void XdpLink::reclaim_completions() {
  uint32_t idx = 0;
  const uint32_t n = xsk_ring_cons__peek(&rings_->comp, options_.ring_entries, &idx);
  for (uint32_t i = 0; i < n; ++i)
    free_tx_.push_back(*xsk_ring_cons__comp_addr(&rings_->comp, idx + i) & kFrameMask);
  if (n) xsk_ring_cons__release(&rings_->comp, n);
}

void XdpLink::transmit(const wire::TxPacket& pkt) {
  if (pkt.dest == nullptr) {
    ++counters_.tx_errors;
    return;
  }
  const RawLinkOptions& f = options_.frames;
  auto mac = neighbours_->lookup(pkt.dest->dgid, monotonic_ns());
  if (!mac) {
    ++counters_.tx_errors;
    ++stats_.frames.tx_no_neighbour;
    return;
  }
  if (free_tx_.empty()) reclaim_completions();
  if (free_tx_.empty()) {
    flush();
    reclaim_completions();
  }
  if (free_tx_.empty()) {
    ++counters_.tx_errors;
    ++stats_.tx_ring_full;
    return;
  }
  const uint64_t addr = free_tx_.back();
  const uint32_t n = RawLink::build_frame(pkt, gid_, mac_, *mac, f.vlan_id, f.roce_v1, f.ecn,
                                          {umem_area_ + addr, kFrameBytes});
  const uint32_t l2 = wire::kEthBytes + (f.vlan_id ? wire::kVlanBytes : 0);
  if (n == 0) {
    ++counters_.tx_errors;
    return;
  }
  if (n - l2 > if_mtu_) {
    ++counters_.tx_errors;
    ++stats_.frames.tx_too_big;
    return;
  }
  free_tx_.pop_back();
  pending_.push_back({addr, n, n - l2, f.roce_v1 || pkt.dest->roce_v1});
  if (pending_.size() >= f.tx_batch) flush();
}

void XdpLink::flush() {
  if (pending_.empty()) return;
  const auto n = static_cast<uint32_t>(pending_.size());
  uint32_t idx = 0;
  // Cannot fail: the TX ring has room for every send frame (setup), and only those are pending.
  if (xsk_ring_prod__reserve(&rings_->tx, n, &idx) != n) {
    for (const Pending& p : pending_) free_tx_.push_back(p.addr);
    counters_.tx_errors += n;
    stats_.tx_ring_full += n;
    pending_.clear();
    return;
  }
  for (uint32_t i = 0; i < n; ++i) {
    xdp_desc* d = xsk_ring_prod__tx_desc(&rings_->tx, idx + i);
    d->addr = pending_[i].addr;
    d->len = pending_[i].len;
    d->options = 0;
    ++counters_.tx_packets;
    counters_.tx_bytes += pending_[i].network_bytes;
    ++(pending_[i].v1 ? stats_.frames.tx_v1 : stats_.frames.tx_v2);
  }
  xsk_ring_prod__submit(&rings_->tx, n);
  pending_.clear();
  kick_tx();
  reclaim_completions();
}

void XdpLink::kick_tx() {
  // In copy mode the kernel sends from the TX ring only inside this call, a bounded number of
  // frames at a time (EAGAIN: more are left), so kick until the ring is drained or it stops
  // making progress; frames left go with the next kick.
  const int max_kicks = static_cast<int>(options_.frames.tx_batch / 16) + 4;
  for (int i = 0; i < max_kicks && xsk_ring_prod__needs_wakeup(&rings_->tx); ++i) {
    ++stats_.tx_kicks;
    if (sendto(xsk_fd_, nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) return;
    if (errno != EAGAIN && errno != EBUSY && errno != EINTR) return;
  }
}

size_t XdpLink::poll(const RxHandler& handler, size_t budget) {
  reclaim_completions();
  const auto want = static_cast<uint32_t>(std::min<size_t>(budget, options_.frames.rx_batch));
  uint32_t n = 0, idx = 0;
  if (want > 0) n = xsk_ring_cons__peek(&rings_->rx, want, &idx);
  for (uint32_t i = 0; i < n; ++i) {
    const xdp_desc* d = xsk_ring_cons__rx_desc(&rings_->rx, idx + i);
    RawLink::receive_frame({umem_area_ + d->addr, d->len}, gid_, counters_, &stats_.frames,
                           handler);
    refill_.push_back(d->addr & kFrameMask);
  }
  if (n) xsk_ring_cons__release(&rings_->rx, n);
  stats_.rx_frames += n;
  // Give the frames back for the kernel to fill again.
  if (!refill_.empty()) {
    const auto k = static_cast<uint32_t>(refill_.size());
    if (xsk_ring_prod__reserve(&rings_->fill, k, &idx) == k) {
      for (uint32_t i = 0; i < k; ++i)
        *xsk_ring_prod__fill_addr(&rings_->fill, idx + i) = refill_[i];
      xsk_ring_prod__submit(&rings_->fill, k);
      refill_.clear();
    }
  }
  if (n == 0 && xsk_ring_prod__needs_wakeup(&rings_->fill)) {
    ++stats_.rx_kicks;
    recvfrom(xsk_fd_, nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
  }
  return n;
}

}  // namespace uroce::link
