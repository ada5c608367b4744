#pragma once
// The wrappers behind ibv_pd, ibv_mr, ibv_cq, ibv_qp, ibv_srq and ibv_ah.
#include <atomic>
#include <cstdint>

#include "api/ibverbs/abi.h"

namespace uroce::abi {

struct Cq {
  ibv_cq_ex ex;  // first; ibv_cq is its prefix (ibv_cq_ex_to_cq)
  // 0: not armed, 1: next completion, 2: next solicited completion (ibv_req_notify_cq).
  std::atomic<int> armed;
  std::atomic<uint64_t> events_dropped;
  void* impl;
};
static_assert(std::is_standard_layout_v<Cq>);

inline Cq* from(ibv_cq* c) {
  return reinterpret_cast<Cq*>(c);
}

}  // namespace uroce::abi
