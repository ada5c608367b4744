#pragma once
// A device's connection manager in real time: the sans-I/O ConnectionManager behind a lock,
// attached to the device as its GSI management agent (verbs/gsi.h), so MADs to QPN 1 reach it
// and its timers and answers go out in the device's progress passes. A MAD a consumer call
// causes goes out in a pass on the calling thread before the call returns; events reach the
// handler on a thread of the port's own, outside every pass. api::Nic owns one per device
// (docs/cm.md).
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "api/cm/cm_service.h"
#include "api/cm/connection_manager.h"
#include "verbs/device.h"
#include "verbs/gsi.h"

namespace uroce::cm {

class CmPort final : public CmService, public verbs::ManagementAgent {
 public:
  // `wake` asks whatever drives the device for a pass soon (ProgressEngine::kick), `pass` runs
  // one on the calling thread (ProgressEngine::pump); `clock` gives the time the consumer calls
  // are stamped with.
  CmPort(verbs::Device& device, CmConfig config, std::function<void()> wake,
         std::function<void()> pass, std::function<Nanos()> clock);
  ~CmPort() override;  // detaches from the device, stops the event thread
  CmPort(const CmPort&) = delete;
  CmPort& operator=(const CmPort&) = delete;

  // ---- verbs::ManagementAgent (inside the device's pass) ----
  void receive(const Gid& peer, std::span<const uint8_t> mad, Nanos now) override;
  Nanos transmit(Nanos now, const SendMad& send) override;

  // ---- CmService ----
  Gid local_gid() const override { return cm_.local_gid(); }
  uint64_t ca_guid() const override { return ca_guid_; }
  void set_event_handler(EventHandler handler) override;
  Result<ListenerId> listen(uint64_t service_id) override;
  int stop_listening(ListenerId id) override;
  Result<ConnId> connect(const ConnectParams& p) override;
  int accept(ConnId id, const AcceptParams& p) override;
  int establish(ConnId id, std::span<const uint8_t> private_data) override;
  int reject(ConnId id, std::span<const uint8_t> private_data) override;
  int reject_with_reason(ConnId id, uint16_t reason,
                         std::span<const uint8_t> private_data) override;
  int disconnect(ConnId id, std::span<const uint8_t> private_data) override;
  int notify_established(ConnId id) override;
  int destroy(ConnId id) override;
  Result<ConnId> sidr_resolve(const Gid& peer, uint64_t service_id,
                              std::span<const uint8_t> private_data) override;
  int sidr_reply(ConnId id, uint32_t qpn, uint32_t qkey,
                 std::span<const uint8_t> private_data) override;
  int sidr_reject(ConnId id, std::span<const uint8_t> private_data) override;
  CmCounters counters() const override;
  uint64_t events_unhandled() const;

 private:
  // Runs `call` on the CM under the lock; then a pass on the calling thread sends what it queued,
  // and the engine is woken to take up the CM's new deadline.
  template <typename F>
  auto locked(F&& call);
  // The event thread: hands what transmit() queued to the handler, in order.
  void deliver_events();

  verbs::Device& device_;
  const uint64_t ca_guid_;
  std::function<void()> wake_;
  std::function<void()> pass_;
  std::function<Nanos()> clock_;
  mutable std::mutex mu_;  // the CM; never held while the handler runs
  ConnectionManager cm_;
  // Read without mu_ by transmit()'s early return, which runs on every progress pass: a pass with
  // no MAD, no consumer call and no timer due takes no lock. Written under mu_.
  std::atomic<bool> changed_{true};      // a MAD or a consumer call since the last transmit()
  std::atomic<Nanos> next_deadline_{0};  // cm_.next_deadline() as of then
  mutable std::mutex handler_mu_;        // the handler; held while it runs, so replacing it waits
  EventHandler handler_;
  std::atomic<uint64_t> events_unhandled_{0};  // no handler, or the hand-off queue full
  // Events on their way from the passes to the event thread: at most CmConfig::max_events (past
  // it dropped and counted in events_unhandled_, as the CM's own queue counts its drops). The
  // thread starts with the first handler; until then events are counted, not kept.
  std::mutex events_mu_;
  std::condition_variable events_cv_;
  std::deque<CmEvent> handoff_;
  const size_t max_handoff_;
  bool stopping_ = false;        // guarded by events_mu_
  bool thread_started_ = false;  // guarded by events_mu_
  std::thread events_thread_;
  // The service ID of each listener (guarded by mu_; at most CmConfig::max_listeners), released
  // at the link when it stops.
  std::unordered_map<ListenerId, uint64_t> listened_;
};

}  // namespace uroce::cm
