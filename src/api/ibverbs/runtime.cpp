#include "api/ibverbs/runtime.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>

namespace uroce::abi {
namespace {

std::mutex runtimes_mu;
std::map<const Device*, std::weak_ptr<Runtime>> runtimes;

Nanos now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000u + static_cast<Nanos>(ts.tv_nsec);
}

// How long the progress thread keeps polling after the last packet before it sleeps in ppoll:
// long enough to catch the reply of a ping-pong without a wake-up, short enough not to burn a
// core when idle. UROCE_SPIN_US overrides (0: always sleep).
constexpr uint64_t kDefaultSpinUs = 0;
constexpr uint64_t kMaxSpinUs = 1'000'000;

uint64_t spin_ns_from_env() {
  uint64_t us = kDefaultSpinUs;
  if (const char* s = std::getenv("UROCE_SPIN_US"); s && *s) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (end && *end == '\0') us = v < kMaxSpinUs ? v : kMaxSpinUs;
  }
  return us * 1000;
}

}  // namespace

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
  c.attr.max_pd = static_cast<uint32_t>(a.max_pd);
  c.attr.max_qp_rd_atom = static_cast<uint32_t>(a.max_qp_rd_atom);
  c.attr.max_res_rd_atom = static_cast<uint32_t>(a.max_res_rd_atom);
  c.attr.max_qp_init_rd_atom = static_cast<uint32_t>(a.max_qp_init_rd_atom);
  c.attr.max_ah = static_cast<uint32_t>(a.max_ah);
  c.attr.max_srq = static_cast<uint32_t>(a.max_srq);
  c.attr.max_srq_wr = static_cast<uint32_t>(a.max_srq_wr);
  c.attr.max_srq_sge = static_cast<uint32_t>(a.max_srq_sge);
  c.attr.max_inline_data = Limits::kMaxInline;
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
    if (auto rt = it->second.lock()) return rt;
  }
  std::shared_ptr<Runtime> rt(new Runtime());
  link::UdpLinkOptions opts;
  opts.address = device->config->address;
  auto link = link::UdpLink::open(opts);
  if (!link.ok()) return Err(link.error());
  rt->link_ = std::move(*link);
  rt->dev_ = std::make_unique<verbs::Device>(*rt->link_, verbs_config(*device));
  rt->kick_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (rt->kick_fd_ < 0) return Err(errno);
  rt->spin_ns_ = spin_ns_from_env();
  // The thread blocks every signal, so a signal meant for the program (qperf's SIGALRM) goes to
  // one of its own threads and interrupts its blocking ibv_get_cq_event with EINTR.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rt->thread_ = std::thread([r = rt.get()] { r->loop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  runtimes[device] = rt;
  return rt;
}

Runtime::~Runtime() {
  stop_.store(true);
  uint64_t one = 1;
  if (kick_fd_ >= 0) (void)!write(kick_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  if (kick_fd_ >= 0) close(kick_fd_);
  dev_.reset();  // before the link it uses
}

void Runtime::drive() {
  if (progress_mu_.try_lock()) {
    Nanos now = now_ns();
    Nanos next = dev_->progress(now);
    progress_mu_.unlock();
    // Work left (budget spent), or a timer earlier than the one the sleeping progress thread
    // waits for: it carries on from here.
    if (next <= now || next < sleep_until_.load()) kick();
    return;
  }
  kick();
}

void Runtime::kick() {
  // Pairs with the sleeping_ store in loop(): either the thread's last pass saw our post, or we
  // see it asleep and wake it.
  if (!sleeping_.load()) return;
  uint64_t one = 1;
  (void)!write(kick_fd_, &one, sizeof one);
}

void Runtime::loop() {
  Nanos last_busy = now_ns();
  uint64_t seen = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    std::unique_lock lock(progress_mu_);
    Nanos now = now_ns();
    Nanos next = dev_->progress(now);
    const link::LinkCounters& c = link_->counters();
    uint64_t moved = c.rx_packets + c.tx_packets;
    if (moved != seen) {
      seen = moved;
      last_busy = now;
    }
    if (next <= now || now - last_busy < spin_ns_) continue;

    sleeping_.store(true);
    now = now_ns();
    next = dev_->progress(now);  // catches a post that raced with the store above
    lock.unlock();
    if (next <= now) {
      sleeping_.store(false);
      continue;
    }
    sleep_until_.store(next);
    pollfd fds[2] = {{link_->wait_fd(), POLLIN, 0}, {kick_fd_, POLLIN, 0}};
    timespec ts{};
    timespec* timeout = nullptr;
    if (next != kNever) {
      Nanos wait = next - now;
      ts.tv_sec = static_cast<time_t>(wait / 1'000'000'000u);
      ts.tv_nsec = static_cast<long>(wait % 1'000'000'000u);
      timeout = &ts;
    }
    ppoll(fds, 2, timeout, nullptr);
    sleeping_.store(false);
    sleep_until_.store(0);
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      (void)!read(kick_fd_, &v, sizeof v);
    }
    last_busy = now_ns();
  }
}

}  // namespace uroce::abi
