#pragma once
// The wrappers behind ibv_pd, ibv_mr, ibv_cq, ibv_qp, ibv_srq and ibv_ah: the public structure
// first (programs read its fields: qp_num, lkey, rkey, ...), then the verbs object it stands for.
// The ABI layer owns each verbs object through the raw pointer and deletes it on destroy.
#include <atomic>
#include <type_traits>

#include "api/ibverbs/abi.h"
#include "verbs/cq.h"
#include "verbs/mr.h"
#include "verbs/qp.h"

namespace uroce::abi {

class Runtime;
struct ParentDomain;  // parent_domain.cpp
struct WrBatch;       // qp_ex.cpp

struct Pd {
  ibv_pd pd;
  // A parent domain shares the verbs PD of the PD it contains: objects made through either are
  // in the same protection domain.
  verbs::ProtectionDomain* impl;
  ParentDomain* parent_domain;  // null for a PD from ibv_alloc_pd
  // ABI objects that name this ibv_pd and keep it from ibv_dealloc_pd (EBUSY): parent domains
  // containing it, and objects created through it when it is a parent domain (retain_pd).
  std::atomic<uint32_t> abi_users;
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
  ibv_pd* parent_domain;          // IBV_CQ_INIT_ATTR_MASK_PD, retained; else null
};
struct Qp {
  ibv_qp_ex ex;  // qp_base first: ibv_qp* <-> Qp*
  verbs::QueuePair* impl;
  Runtime* runtime;
  WrBatch* batch;  // the ibv_wr_* state, for QPs created with send_ops_flags; else null
};
struct Srq {
  ibv_srq srq;
  verbs::SharedReceiveQueue* impl;  // an XRC SRQ's is a verbs::XrcSharedReceiveQueue
  uint32_t srq_num;                 // XRC SRQs (ibv_get_srq_num); 0 for the others
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

// objects.cpp: the transport's form of one ibv_send_wr on `qp` (UD addressing included); the
// one conversion ibv_post_send and ibv_wr_complete share. `sges` (transport::kMaxSge entries)
// must outlive the use of `out`. 0 or EINVAL.
int convert_send_wr(const ibv_qp& qp, const ibv_send_wr& wr, transport::Sge* sges,
                    transport::SendWr* out);

// objects.cpp: the ibv_qp of a new verbs QP, which it takes over (deleted if wrapping fails);
// `pd` is null for an XRC target. Reports the capacities granted in attr->cap.
ibv_qp* wrap_qp(ibv_context* context, ibv_pd* pd, verbs::QueuePair* impl, ibv_qp_init_attr* attr);

// xrc.cpp: XRC domains and XRC SRQs (ibv_open_xrcd, ibv_create_srq_ex, ibv_get_srq_num) and
// target QPs (ibv_create_qp_ex with IBV_QPT_XRC_RECV, which create_qp_ex hands over).
void install_xrc_ops(verbs_context* vctx);
ibv_qp* create_xrc_target_qp(ibv_context* context, ibv_qp_init_attr_ex* attr);
int close_xrcd(ibv_xrcd* xrcd);

// qp_ex.cpp: the ibv_wr_* API.
// EOPNOTSUPP unless every operation in `send_ops_flags` is one uroce does on `type`.
int check_send_ops(ibv_qp_type type, uint64_t send_ops_flags);
// Installs the builders `send_ops_flags` asks for and the setters on q->ex, and the batch they
// fill. `serialize`: ibv_wr_start .. ibv_wr_complete holds a per-QP lock (no thread domain).
int attach_wr_batch(Qp* q, uint64_t send_ops_flags, bool serialize);
void detach_wr_batch(Qp* q);

// parent_domain.cpp: thread and parent domains.
void install_domain_ops(verbs_context* vctx);
bool is_parent_domain(ibv_pd* pd);
// The thread domain of a parent domain, or null (no TD, or a plain PD).
ibv_td* thread_domain_of(ibv_pd* pd);
// An object was created through / destroyed from `pd` (counts only for parent domains).
void retain_pd(ibv_pd* pd);
void release_pd(ibv_pd* pd);
// ibv_dealloc_pd of a parent domain: EBUSY while objects use it.
int dealloc_parent_domain(Pd* p);
// ibv_dealloc_td (verbs_context op): EBUSY while a parent domain names it.
int dealloc_td(ibv_td* td);

}  // namespace uroce::abi
