#pragma once
// Responder resources (IBA 9.7.7.2.1): one per READ or atomic the responder is answering, at most
// max_dest_rd_atomic of them (0 is taken as 1). A READ's resource holds what its responses are
// built from; an atomic's holds the result, replayed for duplicates until the resource is reused.
#include <cstdint>
#include <vector>

#include "transport/qp_context.h"

namespace uroce::transport {

class ResponderResources {
 public:
  struct Resource {
    enum class Kind : uint8_t { kFree, kRead, kAtomic } kind = Kind::kFree;
    // The request PSNs this resource answers for, fixed when it is taken: a duplicate READ may
    // replay part of them but never changes them, so later duplicates still find it.
    Psn first_psn;
    uint32_t npsn = 0;
    uint32_t msn = 0;
    uint64_t original = 0;  // atomic result, replayed for duplicates
    uint64_t age = 0;
    bool queued = false;      // has an entry in the response queue
    bool answered = false;    // its first response went out whole: what is queued is a replay
    uint32_t generation = 0;  // bumped when the slot is taken over; stale queue entries skip
    // The READ response being sent: the whole READ, or the tail a duplicate asked for.
    Psn reply_psn;
    uint32_t reply_npsn = 0;
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint32_t length = 0;
    uint32_t sent = 0;      // READ response packets sent so far
    uint32_t xrc_srqn = 0;  // XRC target: the SRQ whose PD the READ's R_Key belongs to
  };

  // Fresh resources, as on a new QP.
  void reset(uint32_t max_dest_rd_atomic);
  // Fresh resources for a new max_dest_rd_atomic; the age clock carries on.
  void resize(uint32_t max_dest_rd_atomic);

  // A resource for a new READ/atomic: a free one, else the oldest without a queued response,
  // else the oldest that is only replaying an answer already sent whole (its queued entry goes
  // stale and `responses_dropped` counts it). nullptr if every resource is still answering.
  Resource* take(uint64_t& responses_dropped);
  // The resource of the READ whose PSNs cover [psn, psn + npsn), if one still does (the last
  // such resource in slot order).
  Resource* find_read(Psn psn, uint32_t npsn);
  // The resource of the atomic at `psn`, if it is still kept.
  Resource* find_atomic(Psn psn);

  uint32_t index_of(const Resource& r) const {
    return static_cast<uint32_t>(&r - resources_.data());
  }
  Resource& at(uint32_t index) { return resources_[index]; }
  const Resource& at(uint32_t index) const { return resources_[index]; }

 private:
  std::vector<Resource> resources_;
  uint64_t clock_ = 0;  // ages resources in the order they were taken
};

}  // namespace uroce::transport
