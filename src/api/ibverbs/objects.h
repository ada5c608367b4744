#pragma once
// The wrappers behind ibv_pd, ibv_mr, ibv_cq, ibv_qp, ibv_srq and ibv_ah: the public structure
// first (programs read its fields: qp_num, lkey, rkey, ...), then the verbs object it stands for.
// The ABI layer owns each verbs object through the raw pointer and deletes it on destroy.
#include <type_traits>

#include "api/ibverbs/abi.h"
#include "verbs/cq.h"
#include "verbs/mr.h"
#include "verbs/qp.h"

namespace uroce::abi {

class Runtime;

struct Pd {
  ibv_pd pd;
  verbs::ProtectionDomain* impl;
};
struct Mr {
  ibv_mr mr;
  verbs::MemoryRegion* impl;
};
struct Mw {
  ibv_mw mw;
  verbs::MemoryWindow* impl;
};
struct Cq {
  ibv_cq_ex ex;  // ibv_cq is its prefix (ibv_cq_ex_to_cq)
  verbs::CompletionQueue* impl;
  Runtime* runtime;
  transport::Completion current;  // the ibv_start_poll / ibv_next_poll entry being read
  uint8_t grh_sl;                 // wc.sl of a receive with a GRH area (objects.cpp, to_ibv)
};
struct Qp {
  ibv_qp_ex ex;  // qp_base first: ibv_qp* <-> Qp*
  verbs::QueuePair* impl;
  Runtime* runtime;
};
struct Srq {
  ibv_srq srq;
  verbs::SharedReceiveQueue* impl;
};
struct Ah {
  ibv_ah ah;
  verbs::AddressHandle* impl;
};
static_assert(std::is_standard_layout_v<Pd> && std::is_standard_layout_v<Mr> &&
              std::is_standard_layout_v<Mw> && std::is_standard_layout_v<Cq> &&
              std::is_standard_layout_v<Qp> && std::is_standard_layout_v<Srq> &&
              std::is_standard_layout_v<Ah>);

inline Pd* from(ibv_pd* p) {
  return reinterpret_cast<Pd*>(p);
}
inline Mr* from(ibv_mr* m) {
  return reinterpret_cast<Mr*>(m);
}
inline Mw* from(ibv_mw* m) {
  return reinterpret_cast<Mw*>(m);
}
inline Cq* from(ibv_cq* c) {
  return reinterpret_cast<Cq*>(c);
}
inline Qp* from(ibv_qp* q) {
  return reinterpret_cast<Qp*>(q);
}
inline Srq* from(ibv_srq* s) {
  return reinterpret_cast<Srq*>(s);
}
inline Ah* from(ibv_ah* a) {
  return reinterpret_cast<Ah*>(a);
}
inline ibv_cq* cq_of(Cq* c) {
  return ibv_cq_ex_to_cq(&c->ex);
}
inline ibv_qp* qp_of(Qp* q) {
  return &q->ex.qp_base;
}

}  // namespace uroce::abi
