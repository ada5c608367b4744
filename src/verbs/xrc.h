#pragma once
// XRC (IBA annex A14): XRC domains, XRC SRQs and the target QPs that serve them. The transport
// half is transport/README.md "XRC"; this is the verbs half (ibv_open_xrcd, ibv_create_srq_ex
// with IBV_SRQT_XRC, ibv_create_qp_ex with IBV_QPT_XRC_RECV).
//
// An XRC domain groups XRC SRQs and target QPs: a request arriving at a target QP names, in its
// XRCETH, an SRQ of the target's domain, and the receive WQE, the CQ of the receive completion and
// the memory keys (the SRQ's PD) all come from that SRQ. A number that names no SRQ of the domain
// (no SRQ, or one of another domain) is NAKed by the transport.
//
// Bounds: DeviceAttr::max_xrcd domains per device; DeviceAttr::max_xrcd_target_qps target QPs per
// domain; XRC SRQs count against max_srq, target QPs against max_qp and the domain's hidden PD
// (which parents its target QPs, since annex A14 gives them none) against max_pd.
//
// Lifetimes: a domain with SRQs or target QPs cannot be destroyed (users() > 0: the ABI answers
// EBUSY); an XRC SRQ holds its PD, CQ and domain. XRC initiator QPs (kXrcSend) are ordinary QPs
// of a PD with a send CQ only (ProtectionDomain::create_qp).
//
// Threading: find() and create/destroy of SRQs take the domain's lock; pop() takes the SRQ's.
// Lock order (device.h): QueuePair -> the domain's directory -> the SRQ -> CQ. An SRQ leaves
// the directory under the device's quiesce lock held exclusively, so no progress pass holds a
// pointer to it.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "common/result.h"
#include "transport/qp.h"
#include "verbs/attrs.h"
#include "verbs/qp.h"

namespace uroce::verbs {

class CompletionQueue;
class Context;
class ProtectionDomain;
class XrcSharedReceiveQueue;

class XrcDomain : public transport::XrcSrqDirectory {
 public:
  ~XrcDomain() override;
  XrcDomain(const XrcDomain&) = delete;
  XrcDomain& operator=(const XrcDomain&) = delete;

  Context& context() { return ctx_; }
  // XRC SRQs and target QPs alive in this domain (ibv_close_xrcd says EBUSY while > 0).
  uint32_t users() const;
  uint32_t target_qps() const { return target_qps_.load(); }

  // ibv_create_srq_ex with IBV_SRQT_XRC: receive completions go to `cq`, memory keys are `pd`'s.
  // EINVAL for a PD or CQ of another context or sizes create_srq refuses; ENOMEM past max_srq.
  Result<std::unique_ptr<XrcSharedReceiveQueue>> create_srq(ProtectionDomain& pd,
                                                            CompletionQueue& cq,
                                                            const SrqAttr& attr);
  // ibv_create_qp_ex with IBV_QPT_XRC_RECV: a target QP of this domain (CQs and SRQ in `attr`
  // are ignored, as rdma-core's kernel does). EINVAL for another QP type; ENOMEM past
  // max_xrcd_target_qps or max_qp.
  Result<std::unique_ptr<QueuePair>> create_qp(const QpInitAttr& attr);

  // transport::XrcSrqDirectory: the SRQ of this domain numbered `srqn`, or null.
  transport::XrcSrq* find(uint32_t srqn) override;

 private:
  friend class Context;
  friend class ProtectionDomain;
  friend class QueuePair;
  friend class XrcSharedReceiveQueue;
  XrcDomain(Context& ctx, std::unique_ptr<ProtectionDomain> target_pd);

  Context& ctx_;
  // Parents the target QPs; no memory is ever registered in it.
  std::unique_ptr<ProtectionDomain> target_pd_;
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, XrcSharedReceiveQueue*> srqs_;  // bounded by max_srq
  std::atomic<uint32_t> target_qps_{0};                        // <= max_xrcd_target_qps
};

// An XRC SRQ: a shared receive queue of an XRC domain, with the CQ its receive completions go to
// and a number (srq_num(), ibv_get_srq_num) that initiators name in SendWr::remote_srqn.
class XrcSharedReceiveQueue : public SharedReceiveQueue, public transport::XrcSrq {
 public:
  ~XrcSharedReceiveQueue() override;

  uint32_t srq_num() const { return srqn_; }
  XrcDomain& xrcd() { return xrcd_; }
  CompletionQueue& completion_queue() { return cq_; }

  // transport::XrcSrq, called by target QPs under their lock.
  std::optional<transport::RecvWqe> pop() override;
  transport::CompletionSink& cq() override;
  transport::MemoryAccess& memory() override;

 private:
  friend class XrcDomain;
  XrcSharedReceiveQueue(XrcDomain& xrcd, ProtectionDomain& pd, CompletionQueue& cq,
                        const SrqAttr& attr, uint32_t srqn);
  XrcDomain& xrcd_;
  CompletionQueue& cq_;
  const uint32_t srqn_;
};

}  // namespace uroce::verbs
