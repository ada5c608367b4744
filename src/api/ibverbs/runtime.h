#pragma once
// The NIC behind one configured device in this process (api::open_nic): a UDP link bound to the
// device's address, the verbs::Device on it, and a progress thread that keeps the device moving
// while the program is busy elsewhere (perftest's passive side sits in a TCP read while RDMA WRITEs
// land).
//
// One Runtime per device per process, shared by every context opened on it and created on first
// use (so ibv_devinfo never binds a socket). The last context to let go stops the thread.
//
// Threading: kick() from any thread; device() objects follow verbs/device.h's rules.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "api/ibverbs/abi.h"
#include "api/nic.h"
#include "verbs/device.h"
#include "verbs/qp.h"

namespace uroce::abi {

class Runtime {
 public:
  // The device's runtime, started if needed. Errors are errno values (EADDRINUSE when another
  // process already serves this address, EADDRNOTAVAIL for an address this host does not have).
  static Result<std::shared_ptr<Runtime>> acquire(Device* device);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  verbs::Device& device() { return nic_->device(); }
  // The device's connection manager, for the librdmacm drop-in (uroce_private_cm).
  cm::CmService& cm() { return nic_->cm(); }
  // Every QP this process creates on the device gets these (UROCE_CC, ...: config.h).
  const QpTransportOptions& qp_defaults() const { return nic_->qp_defaults(); }
  // After work was posted, or when a poll found nothing: runs one progress pass on the calling
  // thread if no other thread is in one, else makes sure the progress thread looks again. Doing
  // the NIC's work on the thread that is waiting for it keeps the data path free of thread
  // wake-ups, which cost milliseconds on a loaded machine (a scheduler tick).
  // Returns whether the pass kept ACKs for the next one (ProgressEngine::drive).
  bool drive(bool app_polls = false) { return nic_->engine().drive(app_polls); }
  void receive_kept() { nic_->engine().receive_kept(); }
  // After work was posted to `qp`: drive(), unless its pipe is full and a program thread polls.
  void posted(const verbs::QueuePair& qp) { nic_->engine().posted(qp.packets_in_flight_at_post()); }
  // The program armed a CQ for events: it may block, so the thread takes packets again.
  void app_stopped_polling() { nic_->engine().app_stopped_polling(); }
  void app_polled() { nic_->engine().app_polled(); }
  // Full passes on the calling thread (after any pass in progress elsewhere) until the device has
  // nothing due now (a bounded number): for a control call whose answer depends on what
  // the NIC has done with work already handed to it. Work that waits on the wire (an RC message's
  // ACK) stays pending.
  void settle();
  // Wakes the progress thread (cheap when it is already awake).
  void kick() { nic_->engine().kick(); }

  // With UROCE_STATS=FILE set, appends the device's counters to FILE, once per runtime (called
  // when the last context lets go and at exit).
  void write_stats();

  // The verbs::DeviceConfig this ABI reports (limits shared with ibv_query_device).
  static verbs::DeviceConfig verbs_config(const Device& d);

 private:
  Runtime() = default;

  std::unique_ptr<api::Nic> nic_;  // link, device and progress engine
  pid_t pid_ = 0;                  // the process that opened it (acquire() after a fork)
  std::string name_;               // the device's configured name
  std::atomic<bool> stats_written_{false};
};

}  // namespace uroce::abi
