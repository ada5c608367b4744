// Responder resources: the READ/atomic slots bounded by max_dest_rd_atomic.
#include "transport/responder_resources.h"

#include <algorithm>

namespace uroce::transport {

void ResponderResources::reset(uint32_t max_dest_rd_atomic) {
  resize(max_dest_rd_atomic);
  clock_ = 0;
}

void ResponderResources::resize(uint32_t max_dest_rd_atomic) {
  resources_.assign(std::max<uint32_t>(1, max_dest_rd_atomic), Resource{});
}

ResponderResources::Resource* ResponderResources::take(uint64_t& responses_dropped) {
  Resource* best = nullptr;
  for (Resource& r : resources_) {
    if (r.queued) continue;
    if (best == nullptr || r.kind == Resource::Kind::kFree ||
        (best->kind != Resource::Kind::kFree && r.age < best->age))
      best = &r;
    if (best->kind == Resource::Kind::kFree) break;
  }
  if (best == nullptr) {
    // Every resource has a response queued. One that is only replaying an answer already sent
    // whole belongs to a request the requester has since completed (it keeps at most
    // max_rd_atomic outstanding and completes them in order), so the oldest such replay gives
    // way to the new request, as a NIC reuses its oldest resource. Without this, a requester that
    // timed out and resent its READs would be NAKed for the new READ it posts once the original
    // answers arrive. A resource still sending its first answer is never taken.
    for (Resource& r : resources_)
      if (r.answered && (best == nullptr || r.age < best->age)) best = &r;
    if (best == nullptr) return nullptr;
    ++best->generation;  // its queued replay is skipped when it reaches the head
    best->queued = false;
    ++responses_dropped;
  }
  best->age = ++clock_;
  best->answered = false;
  return best;
}

ResponderResources::Resource* ResponderResources::find_read(Psn psn, uint32_t npsn) {
  Resource* r = nullptr;
  for (Resource& c : resources_) {
    const int32_t d = psn.distance_from(c.first_psn);
    if (c.kind == Resource::Kind::kRead && d >= 0 && static_cast<uint32_t>(d) < c.npsn &&
        static_cast<uint32_t>(d) + npsn <= c.npsn)
      r = &c;
  }
  return r;
}

ResponderResources::Resource* ResponderResources::find_atomic(Psn psn) {
  for (Resource& c : resources_)
    if (c.kind == Resource::Kind::kAtomic && c.first_psn == psn) return &c;
  return nullptr;
}

}  // namespace uroce::transport
