#include "api/nic.h"

#include <cstring>

namespace uroce::api {

Nic::~Nic() {
  engine_.reset();  // stops the thread before the device it drives
  device_.reset();  // before the link it uses
  link_.reset();
}

Result<std::unique_ptr<Nic>> open_nic(const NicOptions& options, std::string* error) {
  auto link = link::open_link(options.link, error);
  if (!link) return Err(link.error());
  std::unique_ptr<Nic> nic(new Nic());
  nic->link_ = std::move(*link);
  nic->qp_defaults_ = options.qp_defaults;
  nic->device_ = std::make_unique<verbs::Device>(*nic->link_, options.device);
  nic->engine_ = std::make_unique<ProgressEngine>(*nic->device_, options.progress);
  if (options.start_engine) {
    if (int err = nic->engine_->start()) {
      if (error) *error = std::string("cannot start the progress engine: ") + std::strerror(err);
      return Err(err);
    }
  }
  return nic;
}

}  // namespace uroce::api
