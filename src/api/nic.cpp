#include "api/nic.h"

#include <unistd.h>

#include <cstring>

#include "link/udp_link.h"

namespace uroce::api {

Nic::~Nic() {
  engine_.reset();  // stops the thread before the device it drives
  cm_.reset();      // detaches from the device
  device_.reset();  // before the link it uses
  link_.reset();
}

std::vector<verbs::Counter> Nic::counters() const {
  std::vector<verbs::Counter> all = device_->counters();
  const ProgressStats p = engine_->stats();
  all.insert(all.end(), {
                            {"engine_passes", p.passes},
                            {"engine_inline_passes", p.inline_passes},
                            {"engine_sleeps", p.sleeps},
                            {"engine_wakeups_by_kick", p.wakeups_by_kick},
                            {"engine_wakeups_by_packet", p.wakeups_by_packet},
                            {"engine_wakeups_by_timeout", p.wakeups_by_timeout},
                            {"engine_kicks_sent", p.kicks_sent},
                            {"engine_posts_batched", p.posts_batched},
                        });
  // Read between passes or after the run: the link's own counters are not atomic.
  if (const auto* udp = dynamic_cast<const link::UdpLink*>(link_.get())) {
    const link::UdpLinkStats& u = udp->stats();
    all.insert(all.end(), {
                              {"link_tx_calls", u.tx_syscalls},
                              {"link_tx_gso_sends", u.tx_gso_sends},
                              {"link_rx_calls", u.rx_syscalls},
                              {"link_rx_empty_calls", u.rx_empty_syscalls},
                              {"link_rx_gro_blobs", u.rx_gro_blobs},
                              {"link_rx_single_calls", u.rx_single_syscalls},
                              {"link_tx_socket_defaults", u.tx_socket_defaults},
                          });
  }
  return all;
}

Result<std::unique_ptr<Nic>> open_nic(const NicOptions& options, std::string* error) {
  auto link = link::open_link(options.link, error);
  if (!link) return Err(link.error());
  std::unique_ptr<Nic> nic(new Nic());
  nic->link_ = std::move(*link);
  nic->qp_defaults_ = options.qp_defaults;
  nic->device_ = std::make_unique<verbs::Device>(*nic->link_, options.device);
  nic->engine_ = std::make_unique<ProgressEngine>(*nic->device_, options.progress);
  cm::CmConfig cm_config;
  cm_config.local_ca_guid = nic->device_->attr().node_guid;
  // Communication IDs differ between runs, so a peer can tell a restarted process's REQ from a
  // repeat of the old one (stale connections, docs/cm.md).
  cm_config.first_comm_id =
      static_cast<uint32_t>(ProgressEngine::now_ns() ^ (uint64_t{uint32_t(::getpid())} << 12)) | 1;
  cm_config.comm_id_slot = nic->link_->shared_slot();
  ProgressEngine* engine = nic->engine_.get();
  nic->cm_ = std::make_unique<cm::CmPort>(
      *nic->device_, cm_config, [engine] { engine->kick(); }, [engine] { engine->pump(); },
      &ProgressEngine::now_ns);
  if (options.start_engine) {
    if (int err = nic->engine_->start()) {
      if (error) *error = std::string("cannot start the progress engine: ") + std::strerror(err);
      return Err(err);
    }
  }
  return nic;
}

}  // namespace uroce::api
