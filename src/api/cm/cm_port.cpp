#include "api/cm/cm_port.h"

#include <signal.h>

#include <vector>

namespace uroce::cm {

CmPort::CmPort(verbs::Device& device, CmConfig config, std::function<void()> wake,
               std::function<void()> pass, std::function<Nanos()> clock)
    : device_(device),
      ca_guid_(config.local_ca_guid),
      wake_(std::move(wake)),
      pass_(std::move(pass)),
      clock_(std::move(clock)),
      cm_(device.gid(), config),
      max_handoff_(config.max_events) {
  device_.attach_management_agent(this);
}

CmPort::~CmPort() {
  device_.attach_management_agent(nullptr);  // waits out a pass in flight: no more events
  {
    std::lock_guard lock(events_mu_);
    stopping_ = true;
  }
  events_cv_.notify_all();
  if (events_thread_.joinable()) events_thread_.join();
}

void CmPort::receive(const Gid& peer, std::span<const uint8_t> mad, Nanos now) {
  std::lock_guard lock(mu_);
  cm_.receive(peer, mad, now);
  changed_.store(true, std::memory_order_release);
}

Nanos CmPort::transmit(Nanos now, const SendMad& send) {
  std::vector<CmEvent> events;
  // Every pass comes here: when nothing happened since the last look and no timer is due, skip
  // the lock and the scan of the records. A change made after this read kicks the engine for
  // another pass.
  if (!changed_.load(std::memory_order_acquire)) {
    const Nanos due = next_deadline_.load(std::memory_order_relaxed);
    if (now < due) return due;
  }
  Nanos next = kNever;
  {
    std::lock_guard lock(mu_);
    cm_.advance(now);
    while (auto m = cm_.pop_outgoing()) send(m->peer, m->bytes);
    while (auto e = cm_.pop_event()) events.push_back(std::move(*e));
    next = cm_.next_deadline();
    next_deadline_.store(next, std::memory_order_relaxed);
    changed_.store(false, std::memory_order_release);
  }
  // Not the handler itself: it may take a lock that a consumer holds while its call waits for
  // this pass (librdmacm's), so it runs on the event thread.
  if (!events.empty()) {
    std::lock_guard lock(events_mu_);
    for (CmEvent& e : events) {
      if (!thread_started_ || handoff_.size() >= max_handoff_) {
        events_unhandled_.fetch_add(1, std::memory_order_relaxed);
      } else {
        handoff_.push_back(std::move(e));
      }
    }
    events_cv_.notify_one();
  }
  return next;
}

void CmPort::deliver_events() {
  std::unique_lock lock(events_mu_);
  for (;;) {
    events_cv_.wait(lock, [&] { return stopping_ || !handoff_.empty(); });
    if (stopping_) return;
    std::deque<CmEvent> batch;
    batch.swap(handoff_);
    lock.unlock();
    {
      std::lock_guard handler_lock(handler_mu_);
      for (CmEvent& e : batch) {
        if (handler_) {
          handler_(std::move(e));
        } else {
          events_unhandled_.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
    lock.lock();
  }
}

void CmPort::set_event_handler(EventHandler handler) {
  if (handler) {
    std::lock_guard lock(events_mu_);
    if (!thread_started_ && !stopping_) {
      // Signals stay with the program's threads, as the progress engine's thread leaves them.
      sigset_t all, old;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old);  // the new thread inherits this mask
      events_thread_ = std::thread([this] { deliver_events(); });
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      thread_started_ = true;
    }
  }
  std::lock_guard lock(handler_mu_);
  handler_ = std::move(handler);
}

uint64_t CmPort::events_unhandled() const {
  return events_unhandled_.load(std::memory_order_relaxed);
}

template <typename F>
auto CmPort::locked(F&& call) {
  bool queued = false;
  auto result = [&] {
    std::lock_guard lock(mu_);
    changed_ = true;
    auto r = call(clock_());
    queued = cm_.has_outgoing();
    return r;
  }();
  // What the call queued (REQ, REP, RTU, REJ, DREQ, SIDR) leaves now, in a pass on this thread,
  // not when the engine next wakes: a program that exits right after (rping's client after
  // rdma_disconnect, pyverbs' passive side after rdma_reject) must not take it along, as a
  // kernel's CM would send it anyway. The pass hands events to the event thread, so this waits
  // only for a pass in flight, never for a handler, and callers may hold a lock the handler takes.
  if (queued && pass_) pass_();
  // The engine's thread may sleep on a deadline older than the CM's new one (a retry timer).
  if (wake_) wake_();
  return result;
}

Result<ListenerId> CmPort::listen(uint64_t service_id) {
  auto id = locked([&](Nanos) { return cm_.listen(service_id); });
  if (!id) return id;
  // On a shared address, the REQs for the service must come to this process (link.h); another
  // process listening on it there is EADDRINUSE, as a second listen on one port is.
  if (int err = device_.link().claim_service(service_id)) {
    locked([&](Nanos) { return cm_.stop_listening(*id); });
    return Err(err);
  }
  std::lock_guard lock(mu_);
  listened_[*id] = service_id;
  return id;
}
int CmPort::stop_listening(ListenerId id) {
  const int err = locked([&](Nanos) { return cm_.stop_listening(id); });
  std::optional<uint64_t> service;
  {
    std::lock_guard lock(mu_);
    if (auto it = listened_.find(id); it != listened_.end()) {
      service = it->second;
      listened_.erase(it);
    }
  }
  if (service) device_.link().release_service(*service);
  return err;
}
Result<ConnId> CmPort::connect(const ConnectParams& p) {
  return locked([&](Nanos now) { return cm_.connect(p, now); });
}
int CmPort::accept(ConnId id, const AcceptParams& p) {
  return locked([&](Nanos now) { return cm_.accept(id, p, now); });
}
int CmPort::establish(ConnId id, std::span<const uint8_t> private_data) {
  return locked([&](Nanos now) { return cm_.establish(id, private_data, now); });
}
int CmPort::reject(ConnId id, std::span<const uint8_t> private_data) {
  return locked([&](Nanos now) { return cm_.reject(id, private_data, now); });
}
int CmPort::reject_with_reason(ConnId id, uint16_t reason, std::span<const uint8_t> private_data) {
  return locked([&](Nanos now) { return cm_.reject(id, private_data, now, reason); });
}
int CmPort::disconnect(ConnId id, std::span<const uint8_t> private_data) {
  return locked([&](Nanos now) { return cm_.disconnect(id, private_data, now); });
}
int CmPort::notify_established(ConnId id) {
  return locked([&](Nanos now) { return cm_.notify_established(id, now); });
}
int CmPort::destroy(ConnId id) {
  return locked([&](Nanos now) { return cm_.destroy(id, now); });
}
Result<ConnId> CmPort::sidr_resolve(const Gid& peer, uint64_t service_id,
                                    std::span<const uint8_t> private_data) {
  return locked([&](Nanos now) { return cm_.sidr_resolve(peer, service_id, private_data, now); });
}
int CmPort::sidr_reply(ConnId id, uint32_t qpn, uint32_t qkey,
                       std::span<const uint8_t> private_data) {
  return locked([&](Nanos now) { return cm_.sidr_reply(id, qpn, qkey, private_data, now); });
}
int CmPort::sidr_reject(ConnId id, std::span<const uint8_t> private_data) {
  return locked([&](Nanos now) { return cm_.sidr_reject(id, private_data, now); });
}
CmCounters CmPort::counters() const {
  std::lock_guard lock(mu_);
  return cm_.counters();
}

}  // namespace uroce::cm
