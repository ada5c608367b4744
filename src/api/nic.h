#pragma once
// One way to open a NIC: a link chosen by configuration (link/factory.h), a verbs::Device on it,
// and the ProgressEngine that moves it, owned together and torn down in the order they need
// (engine, device, link). The libibverbs ABI and the `uroce` command line both open theirs here,
// each with its own tuning in NicOptions; the simulator builds devices on fabric links instead.
//
//   api::NicOptions o;
//   o.link.address = "127.0.0.1";
//   o.start_engine = true;  // a progress thread; false: the caller pumps (engine().pump())
//   auto nic = api::open_nic(o);
//   if (!nic) ...  // an errno
//   auto ctx = (*nic)->device().open();
//
// Every Nic has a connection manager on its GSI QP (cm(), docs/cm.md): a peer's REQ for a service
// nobody listens on gets REJ invalid service ID, as from a hardware NIC.
//
// Objects opened on the device (contexts and their children) must be destroyed before the Nic.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/cm/cm_port.h"
#include "api/progress_engine.h"
#include "api/uroce.h"
#include "common/result.h"
#include "link/factory.h"
#include "link/interface_mtu.h"
#include "verbs/device.h"
#include "wire/packet.h"

namespace uroce::api {

using link::link_kind_name;
using link::LinkKind;
using link::LinkOptions;
using link::parse_link_kind;

// The RoCE path MTU an address's interface carries (link/interface_mtu.h).
using link::kDefaultRoceMtu;
using link::roce_mtu_for;
// The UDP port RoCEv2 packets go to (IBA annex A17.2).
inline constexpr uint16_t kRoceV2Port = wire::kRoceV2Port;

struct NicOptions {
  LinkOptions link;  // kind, local address, the kind's tuning, pcap capture
  // The device's name, limits, port attributes (active_mtu: the largest path MTU a QP may use)
  // and transmit_before_receive (a real-time caller wants posts sent before the next receive).
  verbs::DeviceConfig device;
  ProgressOptions progress;
  bool start_engine = false;  // start the engine's thread before returning
  // Congestion control, loss recovery and WRITE segmentation for the QPs its users create: the
  // ABI fills it from the environment (UROCE_CC, ...), the CLI from its flags; each applies it to
  // every QpInitAttr with apply_qp_defaults() (ibv_qp_init_attr has no field for these).
  QpTransportOptions qp_defaults;
};

class Nic {
 public:
  ~Nic();
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;

  verbs::Device& device() { return *device_; }
  const verbs::Device& device() const { return *device_; }
  ProgressEngine& engine() { return *engine_; }
  link::Link& link() { return *link_; }
  const link::Link& link() const { return *link_; }
  const QpTransportOptions& qp_defaults() const { return qp_defaults_; }
  cm::CmPort& cm() { return *cm_; }
  // The device's counters, then who ran the progress passes and what woke the engine's thread
  // (engine_*), then how many packets each system call of a UDP link carried (link_*_calls):
  // what `uroce bench --stats` and the drop-in's UROCE_STATS report, so that the two paths can
  // be compared count for count (docs/performance.md, "The drop-in path").
  std::vector<verbs::Counter> counters() const;

 private:
  friend Result<std::unique_ptr<Nic>> open_nic(const NicOptions&, std::string*);
  Nic() = default;
  // Declared in construction order; ~Nic() releases them in reverse.
  std::unique_ptr<link::Link> link_;
  std::unique_ptr<verbs::Device> device_;
  std::unique_ptr<ProgressEngine> engine_;
  std::unique_ptr<cm::CmPort> cm_;
  QpTransportOptions qp_defaults_;
};

// Opens the link, builds the device and the engine, and starts the engine's thread if asked.
// Errors are errno values: open_link's (link/factory.h), or the engine's start(). `error`, when
// given, gets a sentence for a user.
Result<std::unique_ptr<Nic>> open_nic(const NicOptions& options, std::string* error = nullptr);

}  // namespace uroce::api
