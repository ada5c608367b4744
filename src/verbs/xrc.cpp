#include "verbs/xrc.h"

#include <cerrno>
#include <shared_mutex>

#include "common/check.h"
#include "verbs/cq.h"
#include "verbs/device.h"

namespace uroce::verbs {

// ---- XrcDomain ---------------------------------------------------------------------------------

Result<std::unique_ptr<XrcDomain>> Context::open_xrcd() {
  if (!dev_.acquire(Device::kXrcd)) return Err(ENOMEM);
  auto pd = alloc_pd();
  if (!pd) {
    dev_.release(Device::kXrcd);
    return Err(pd.error());
  }
  users_.fetch_add(1);
  return std::unique_ptr<XrcDomain>(new XrcDomain(*this, std::move(*pd)));
}

XrcDomain::XrcDomain(Context& ctx, std::unique_ptr<ProtectionDomain> target_pd)
    : ctx_(ctx), target_pd_(std::move(target_pd)) {}

XrcDomain::~XrcDomain() {
  UROCE_CHECK(users() == 0);
  target_pd_.reset();
  ctx_.users_.fetch_sub(1);
  ctx_.device().release(Device::kXrcd);
}

uint32_t XrcDomain::users() const {
  std::lock_guard lock(mu_);
  return static_cast<uint32_t>(srqs_.size()) + target_qps_.load();
}

Result<std::unique_ptr<QueuePair>> XrcDomain::create_qp(const QpInitAttr& attr) {
  if (attr.qp_type != QpType::kXrcRecv) return Err(EINVAL);
  QpInitAttr init = attr;
  init.xrcd = this;
  return target_pd_->create_qp(init);
}

transport::XrcSrq* XrcDomain::find(uint32_t srqn) {
  std::lock_guard lock(mu_);
  auto it = srqs_.find(srqn);
  return it == srqs_.end() ? nullptr : it->second;
}

Result<std::unique_ptr<XrcSharedReceiveQueue>> XrcDomain::create_srq(ProtectionDomain& pd,
                                                                     CompletionQueue& cq,
                                                                     const SrqAttr& attr) {
  Device& dev = ctx_.device();
  const DeviceAttr& d = dev.attr();
  if (&pd.context() != &ctx_ || &cq.context() != &ctx_) return Err(EINVAL);
  if (attr.max_wr == 0 || attr.max_wr > d.max_srq_wr || attr.max_sge == 0 ||
      attr.max_sge > d.max_srq_sge)
    return Err(EINVAL);
  if (!dev.acquire(Device::kSrq)) return Err(ENOMEM);
  if (!dev.totals_.take_recv_wqes(attr.max_wr)) {
    dev.release(Device::kSrq);
    return Err(ENOMEM);
  }

  std::lock_guard lock(mu_);
  // Numbers are handed out device-wide in sequence, 24 bits wide (the XRCETH's field), skipping 0
  // and any still in use in this domain: the domain holds at most max_srq SRQs, so one of
  // max_srq + 2 consecutive candidates is free.
  uint32_t srqn = 0;
  for (uint32_t tries = 0; tries <= d.max_srq + 1; ++tries) {
    const uint32_t candidate = dev.next_srqn_.fetch_add(1) & 0xffffff;
    if (candidate != 0 && !srqs_.contains(candidate)) {
      srqn = candidate;
      break;
    }
  }
  UROCE_CHECK(srqn != 0);
  pd.users_.fetch_add(1);
  cq.users_.fetch_add(1);
  std::unique_ptr<XrcSharedReceiveQueue> srq(new XrcSharedReceiveQueue(*this, pd, cq, attr, srqn));
  srq->recv_wqes_charged_ = attr.max_wr;  // given back by ~SharedReceiveQueue
  srqs_.emplace(srqn, srq.get());
  return srq;
}

// ---- XrcSharedReceiveQueue ---------------------------------------------------------------------

XrcSharedReceiveQueue::XrcSharedReceiveQueue(XrcDomain& xrcd, ProtectionDomain& pd,
                                             CompletionQueue& cq, const SrqAttr& attr,
                                             uint32_t srqn)
    : SharedReceiveQueue(pd, attr), xrcd_(xrcd), cq_(cq), srqn_(srqn) {}

XrcSharedReceiveQueue::~XrcSharedReceiveQueue() {
  {
    // Exclusive: no progress pass, post or modify is inside a target QP that may have found this
    // SRQ, and none finds it after this.
    std::unique_lock barrier(pd_.device().quiesce_);
    std::lock_guard lock(xrcd_.mu_);
    xrcd_.srqs_.erase(srqn_);
  }
  cq_.users_.fetch_sub(1);
  // ~SharedReceiveQueue gives back the PD's count and the device's kSrq.
}

std::optional<transport::RecvWqe> XrcSharedReceiveQueue::pop() {
  std::lock_guard lock(mu_);
  return rq_.pop();
}

transport::CompletionSink& XrcSharedReceiveQueue::cq() {
  return cq_;
}

transport::MemoryAccess& XrcSharedReceiveQueue::memory() {
  return pd_;
}

}  // namespace uroce::verbs
