#pragma once
// Protection domains, memory regions and the device's key table.
//
// Keys (IBA 10.6.2): a key is a 24-bit table index and an 8-bit tag. Every registration draws a
// fresh generation for its slot, and the lkey and rkey of one MR carry different tags, so the two
// keys differ, a deregistered key stays dead when its slot is reused (for 128 reuses), and keys are
// not simply sequential. The table has a fixed number of slots (DeviceAttr::max_mr); slot 0 is
// never used, so key 0 is never valid.
//
// Deregistration is synchronous: once ~MemoryRegion returns, no access through its keys happens,
// even one the progress engine had already validated (the device's quiesce barrier waits for the
// progress pass and any post call in flight). The transport must not keep a pointer returned by
// MemoryAccess beyond the call (receive/transmit/post) that obtained it.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "common/result.h"
#include "transport/types.h"
#include "verbs/attrs.h"

namespace uroce::verbs {

class Context;
class Device;
class MemoryRegion;
class QueuePair;
class AddressHandle;
class SharedReceiveQueue;

using transport::KeyError;

class KeyTable {
 public:
  struct Entry {
    const void* pd = nullptr;
    uint8_t* host = nullptr;  // host address of iova
    uint64_t iova = 0;
    uint64_t length = 0;
    uint32_t access = 0;
  };
  explicit KeyTable(uint32_t capacity, uint32_t salt);

  // Returns {lkey, rkey}, or ENOMEM when every slot is in use.
  Result<std::pair<uint32_t, uint32_t>> add(const Entry& e);
  void remove(uint32_t lkey);
  // Checks a key against a PD, range and access (IBA 10.6.3).
  Result<uint8_t*, KeyError> check(bool remote, uint32_t key, const void* pd, uint64_t addr,
                                   uint32_t length, uint32_t access) const;
  uint32_t in_use() const;

 private:
  struct Slot {
    Entry e;
    uint8_t generation = 0;
    bool live = false;
  };
  uint8_t tag(uint8_t generation, bool remote) const;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  uint32_t next_ = 1;
  uint32_t live_ = 0;
  const uint32_t salt_;
};

// A protection domain. It is the transport's MemoryAccess for every QP created in it.
// Threading: reg_mr/create_* from application threads; local()/remote() from whoever holds the
// QP's lock (post calls, the progress engine).
class ProtectionDomain : public transport::MemoryAccess {
 public:
  ~ProtectionDomain() override;
  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;

  Context& context() { return ctx_; }
  Device& device();

  // ibv_reg_mr_iova2: registers [addr, addr+length) so that remote and local addresses name it as
  // [iova, iova+length). EINVAL for unknown access bits, REMOTE_WRITE or REMOTE_ATOMIC without
  // LOCAL_WRITE, length 0 or a range that wraps; ENOMEM when the key table is full.
  Result<std::unique_ptr<MemoryRegion>> reg_mr(void* addr, size_t length, uint64_t iova,
                                               uint32_t access);
  // ibv_reg_mr: iova = addr.
  Result<std::unique_ptr<MemoryRegion>> reg_mr(void* addr, size_t length, uint32_t access) {
    return reg_mr(addr, length, reinterpret_cast<uint64_t>(addr), access);
  }
  Result<std::unique_ptr<QueuePair>> create_qp(const QpInitAttr& attr);
  Result<std::unique_ptr<AddressHandle>> create_ah(const AhAttr& attr);
  Result<std::unique_ptr<SharedReceiveQueue>> create_srq(const SrqAttr& attr);
  // Memory windows are not implemented: EOPNOTSUPP (DeviceAttr::max_mw is 0).
  int alloc_mw() { return EOPNOTSUPP; }

  // Objects created in this PD and not yet destroyed (ibv_dealloc_pd says EBUSY while > 0).
  uint32_t users() const;

  // transport::MemoryAccess
  Result<uint8_t*, KeyError> local(uint32_t lkey, uint64_t addr, uint32_t length,
                                   uint32_t access) override;
  Result<uint8_t*, KeyError> remote(uint32_t rkey, uint64_t addr, uint32_t length,
                                    uint32_t access) override;
  // MR keys are not invalidatable (only memory windows and fast-register MRs are, IBA 10.6.7),
  // and uroce has neither, so this always refuses.
  bool invalidate(uint32_t rkey) override;

 private:
  friend class Context;
  friend class MemoryRegion;
  friend class QueuePair;
  friend class AddressHandle;
  friend class SharedReceiveQueue;
  explicit ProtectionDomain(Context& ctx);
  Context& ctx_;
  std::atomic<uint32_t> users_{0};
};

// A registered memory region (ibv_mr). Destroying it deregisters it (see above).
class MemoryRegion {
 public:
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  uint32_t lkey() const { return lkey_; }
  uint32_t rkey() const { return rkey_; }
  void* addr() const { return addr_; }
  size_t length() const { return length_; }
  uint64_t iova() const { return iova_; }
  uint32_t access() const { return access_; }
  ProtectionDomain& pd() { return pd_; }

 private:
  friend class ProtectionDomain;
  MemoryRegion(ProtectionDomain& pd, void* addr, size_t length, uint64_t iova, uint32_t access,
               uint32_t lkey, uint32_t rkey);
  ProtectionDomain& pd_;
  void* addr_;
  size_t length_;
  uint64_t iova_;
  uint32_t access_;
  uint32_t lkey_, rkey_;
};

// Access bits reg_mr accepts (ibv_access_flags up to MW_BIND; MW_BIND is accepted and has no
// effect, since there are no memory windows to bind).
inline constexpr uint32_t kMrAccessMask =
    transport::kAccessLocalWrite | transport::kAccessRemoteWrite | transport::kAccessRemoteRead |
    transport::kAccessRemoteAtomic | transport::kAccessMwBind;

}  // namespace uroce::verbs
