#include "api/ibverbs/runtime.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/env.h"
#include "api/ibverbs/config.h"

namespace uroce::abi {
namespace {

using api::count_from_env;
using api::ns_from_env;

std::mutex runtimes_mu;
std::map<const Device*, std::weak_ptr<Runtime>> runtimes;
// Runtimes a forked child found from its parent and replaced (acquire()): their engine thread did
// not survive the fork, so their destructor, which joins it, must never run here.
std::vector<std::shared_ptr<Runtime>>* inherited_runtimes = nullptr;

// How long the progress thread keeps polling after the last packet before it sleeps in ppoll,
// while no application thread of the process polls (the engine never spins beside one): long
// enough that a request arriving after the program's own pause (the next READ of ib_read_lat,
// whose target program does nothing) finds it awake, short enough not to burn a core when idle.
// UROCE_SPIN_US overrides (0: always sleep).
constexpr uint64_t kDefaultSpinUs = 50;
// How long after an application's empty poll the sleeping progress thread leaves packets to the
// application (ProgressOptions::app_driving_ns). UROCE_APP_DRIVING_US overrides.
constexpr uint64_t kDefaultAppDrivingUs = 200;
// The longest the thread then sleeps while the application keeps polling
// (ProgressOptions::app_driving_max_ns): so much later, at worst, it takes over from a program
// that stops polling without arming a CQ, far below the transport's ACK timeouts.
// UROCE_APP_DRIVING_MAX_US overrides (at most UROCE_APP_DRIVING_US: no growth).
constexpr uint64_t kDefaultAppDrivingMaxUs = 3200;
// A post into a QP with this many request packets unacknowledged leaves its transmission to the
// program's next poll (ProgressOptions::post_batch_packets; 0 disables). UROCE_POST_BATCH
// overrides.
constexpr uint64_t kDefaultPostBatchPackets = 64;
constexpr uint64_t kMaxPostBatchPackets = 1u << 20;

// UROCE_LINK=udp|raw|xdp: the link every device of this process opens (docs/links.md). `raw` and
// `xdp` (root, an Ethernet interface holding the address) can send RoCE v1, the GID table's
// index 1. Anything else is EINVAL at open, said once on stderr.
Result<api::LinkKind> link_kind_from_env() {
  const char* s = std::getenv("UROCE_LINK");
  if (s == nullptr || *s == '\0') return api::LinkKind::kUdp;
  if (auto kind = api::parse_link_kind(s)) return *kind;
  static std::once_flag said;
  std::call_once(said, [s] { std::fprintf(stderr, "uroce: UROCE_LINK: unknown link '%s'\n", s); });
  return Err(EINVAL);
}

// UROCE_VLAN=ID (0..4095): on the raw link, tag every frame with this 802.1Q VLAN ID (0: a
// priority tag only), its PCP from the path's service level (docs/links.md). Unset: untagged. A
// bad value fails the open (EINVAL, said once on stderr), like a bad UROCE_LINK.
Result<std::optional<uint16_t>> vlan_from_env() {
  const char* s = std::getenv("UROCE_VLAN");
  if (s == nullptr || *s == '\0') return std::optional<uint16_t>{};
  char* end = nullptr;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (end && *end == '\0' && v <= 0xfff) return std::optional<uint16_t>{static_cast<uint16_t>(v)};
  static std::once_flag said;
  std::call_once(said, [s] { std::fprintf(stderr, "uroce: UROCE_VLAN: bad VLAN ID '%s'\n", s); });
  return Err(EINVAL);
}

// UROCE_SHARED_ADDRESS=1: the UDP link shares its address with the other processes that set it
// (link/shared_address.h, docs/udp-link.md): two processes with one device address each. Root.
bool shared_address_from_env() {
  const char* s = std::getenv("UROCE_SHARED_ADDRESS");
  return s != nullptr && std::strcmp(s, "1") == 0;
}

// UROCE_STATS=FILE: each process appends its devices' counters to FILE when it lets go of a
// device or exits, one "<device>/<pid>.<counter> <value>" line per counter (`uroce stat FILE`
// prints them side by side). The counters otherwise live only inside the program's process.
const char* stats_path() {
  const char* p = std::getenv("UROCE_STATS");
  return p && *p ? p : nullptr;
}

void dump_live_runtimes_at_exit() {
  std::lock_guard lock(runtimes_mu);
  for (auto& [device, weak] : runtimes) {
    if (auto rt = weak.lock()) rt->write_stats();
  }
}

}  // namespace

void Runtime::settle() {
  // Bounded: a device that always has work due (a flood arriving) must not hold the caller.
  constexpr int kMaxSettlePasses = 64;
  api::ProgressEngine& engine = nic_->engine();
  for (int i = 0; i < kMaxSettlePasses; ++i) {
    if (engine.pump() > api::ProgressEngine::now_ns()) return;
  }
}

void Runtime::write_stats() {
  const char* path = stats_path();
  if (path == nullptr || stats_written_.exchange(true)) return;
  std::string text;
  const std::string side = name_ + "/" + std::to_string(::getpid());
  // The device's, the progress engine's and the link's (api::Nic::counters()).
  for (const auto& c : nic_->counters())
    text += side + "." + std::string(c.name) + " " + std::to_string(c.value) + "\n";
  // One append-mode write per process and device: concurrent processes do not interleave lines.
  int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    std::fprintf(stderr, "uroce: UROCE_STATS: cannot write %s\n", path);
  if (fd >= 0) ::close(fd);
}

verbs::DeviceConfig Runtime::verbs_config(const Device& d) {
  verbs::DeviceConfig c;
  c.name = d.config->name;
  ibv_device_attr a;
  fill_device_attr(d, &a);
  c.attr.node_guid = be64toh(d.guid);
  c.attr.sys_image_guid = c.attr.node_guid;
  c.attr.vendor_id = a.vendor_id;
  c.attr.max_qp = static_cast<uint32_t>(a.max_qp);
  c.attr.max_qp_wr = static_cast<uint32_t>(a.max_qp_wr);
  c.attr.max_sge = static_cast<uint32_t>(a.max_sge);
  c.attr.max_sge_rd = static_cast<uint32_t>(a.max_sge_rd);
  c.attr.max_cq = static_cast<uint32_t>(a.max_cq);
  c.attr.max_cqe = static_cast<uint32_t>(a.max_cqe);
  c.attr.max_mr = static_cast<uint32_t>(a.max_mr);
  c.attr.max_mw = static_cast<uint32_t>(a.max_mw);
  c.attr.max_pd = static_cast<uint32_t>(a.max_pd);
  c.attr.max_qp_rd_atom = static_cast<uint32_t>(a.max_qp_rd_atom);
  c.attr.max_res_rd_atom = static_cast<uint32_t>(a.max_res_rd_atom);
  c.attr.max_qp_init_rd_atom = static_cast<uint32_t>(a.max_qp_init_rd_atom);
  c.attr.max_ah = static_cast<uint32_t>(a.max_ah);
  c.attr.max_srq = static_cast<uint32_t>(a.max_srq);
  c.attr.max_srq_wr = static_cast<uint32_t>(a.max_srq_wr);
  c.attr.max_srq_sge = static_cast<uint32_t>(a.max_srq_sge);
  c.attr.max_mcast_grp = static_cast<uint32_t>(a.max_mcast_grp);
  c.attr.max_mcast_qp_attach = static_cast<uint32_t>(a.max_mcast_qp_attach);
  c.attr.max_total_mcast_qp_attach = static_cast<uint32_t>(a.max_total_mcast_qp_attach);
  c.attr.max_inline_data = Limits::kMaxInline;
  c.attr.max_dm_size = Limits::kMaxDmSize;
  ibv_port_attr p;
  fill_port_attr(d, &p);
  c.port.active_mtu = static_cast<verbs::Mtu>(p.active_mtu);
  c.port.max_mtu = static_cast<verbs::Mtu>(p.max_mtu);
  c.port.gid_tbl_len = p.gid_tbl_len;
  c.port.max_msg_sz = p.max_msg_sz;
  return c;
}

Result<std::shared_ptr<Runtime>> Runtime::acquire(Device* device) {
  std::lock_guard lock(runtimes_mu);
  if (auto it = runtimes.find(device); it != runtimes.end()) {
    if (auto rt = it->second.lock()) {
      // A process forked from one that had the device open finds the parent's runtime: its
      // socket, whose packets the parent's thread still takes, and no thread of its own, so a
      // program that waits for a completion event waits for ever (pyverbs' rdmacm tests fork
      // their players from a runner that keeps the device open). On a shared address the child
      // can be a process of its own, with its own socket and slot. Alone on an address it cannot
      // (the parent holds the address): it is told so, rather than left to lose packets to the
      // parent and wait for events no thread of its own will signal.
      if (rt->pid_ == getpid()) return rt;
      if (!shared_address_from_env()) {
        std::fprintf(stderr,
                     "uroce: %s is open in process %d, which this one was forked from; "
                     "UROCE_SHARED_ADDRESS=1 (docs/udp-link.md) lets both use its address\n",
                     device->config->name.c_str(), static_cast<int>(rt->pid_));
        return Err(EADDRINUSE);
      }
      if (inherited_runtimes == nullptr)
        inherited_runtimes = new std::vector<std::shared_ptr<Runtime>>();  // never freed
      inherited_runtimes->push_back(std::move(rt));
    }
  }
  std::shared_ptr<Runtime> rt(new Runtime());
  rt->pid_ = getpid();
  api::NicOptions o;
  auto kind = link_kind_from_env();
  if (!kind) return Err(kind.error());
  o.link.kind = *kind;
  o.link.address = device->config->address;
  auto vlan = vlan_from_env();
  if (!vlan) return Err(vlan.error());
  o.link.raw.vlan_id = *vlan;
  o.device = verbs_config(*device);
  // Application threads post and poll between passes (drive()), so a pass sends first: a reply
  // posted after a poll leaves at once and carries the ACK of what it answers in the same send.
  o.device.transmit_before_receive = true;
  // Application threads drive the NIC themselves when they post or find a CQ empty (drive()), so
  // the thread only has to cover the time they do not: beside a polling thread it sleeps as soon
  // as traffic stops instead of competing with it for a core (kDefaultSpinUs above).
  o.progress.spin_ns = ns_from_env("UROCE_SPIN_US", kDefaultSpinUs);
  o.progress.yield_ns = 0;
  o.progress.app_driving_ns = ns_from_env("UROCE_APP_DRIVING_US", kDefaultAppDrivingUs);
  o.progress.app_driving_max_ns = ns_from_env("UROCE_APP_DRIVING_MAX_US", kDefaultAppDrivingMaxUs);
  o.progress.post_batch_packets = static_cast<uint32_t>(
      count_from_env("UROCE_POST_BATCH", kDefaultPostBatchPackets, kMaxPostBatchPackets));
  o.progress.block_signals = true;
  o.qp_defaults = qp_transport_options();
  o.start_engine = true;
  o.link.udp.shared_address = shared_address_from_env();
  std::string why;
  auto nic = api::open_nic(o, &why);
  if (!nic.ok()) {
    // Quiet otherwise: a device whose address another process holds is a normal sight (librdmacm
    // opens every device); a share that fails is a setup problem the user must see.
    if (o.link.udp.shared_address) std::fprintf(stderr, "uroce: %s\n", why.c_str());
    return Err(nic.error());
  }
  rt->nic_ = std::move(*nic);
  rt->name_ = device->config->name;
  runtimes[device] = rt;
  static std::once_flag at_exit_registered;
  if (stats_path())
    std::call_once(at_exit_registered, [] { std::atexit(dump_live_runtimes_at_exit); });
  return rt;
}

Runtime::~Runtime() {
  if (nic_) write_stats();
}

}  // namespace uroce::abi
