#include "verbs/mr.h"

#include <cerrno>

#include "common/check.h"
#include "verbs/device.h"

namespace uroce::verbs {

// ---- KeyTable ---------------------------------------------------------------------------------

KeyTable::KeyTable(uint32_t capacity, uint32_t salt)
    // Slot 0 is never handed out (key 0 is never valid), and keys have 24 bits of index.
    : slots_(std::min<uint32_t>(capacity, (1u << 24) - 2) + 1), salt_(salt) {}

// Keys of one slot differ by generation; the lkey and rkey of one MR differ in the low bit. The
// salt makes keys differ between devices and from plain sequence numbers.
uint8_t KeyTable::tag(uint8_t generation, bool remote) const {
  return static_cast<uint8_t>((generation * 2 + (remote ? 1 : 0)) ^ salt_);
}

Result<std::pair<uint32_t, uint32_t>> KeyTable::add(const Entry& e) {
  std::lock_guard lock(mu_);
  const uint32_t n = static_cast<uint32_t>(slots_.size());
  // Next-fit over the slots: a freed slot is reused last, so a dead key's slot changes tag as
  // rarely as possible.
  for (uint32_t tries = 1; tries < n; ++tries) {
    uint32_t i = next_;
    next_ = next_ + 1 >= n ? 1 : next_ + 1;
    Slot& s = slots_[i];
    if (s.live) continue;
    s.e = e;
    s.live = true;
    ++s.generation;
    ++live_;
    return std::pair{i << 8 | tag(s.generation, false), i << 8 | tag(s.generation, true)};
  }
  return Err(ENOMEM);
}

void KeyTable::remove(uint32_t lkey) {
  std::lock_guard lock(mu_);
  uint32_t i = lkey >> 8;
  UROCE_CHECK(i > 0 && i < slots_.size() && slots_[i].live);
  slots_[i].live = false;
  slots_[i].e = {};
  --live_;
}

uint32_t KeyTable::in_use() const {
  std::lock_guard lock(mu_);
  return live_;
}

// Every rule of IBA 10.6.3 (C10-17 .. C10-23) in one place, under one lock.
Result<uint8_t*, KeyError> KeyTable::check(bool remote, uint32_t key, const void* pd, uint64_t addr,
                                           uint32_t length, uint32_t access) const {
  std::lock_guard lock(mu_);
  uint32_t i = key >> 8;
  if (i == 0 || i >= slots_.size()) return Err(KeyError::kNoSuchKey);
  const Slot& s = slots_[i];
  // A key whose tag does not match is a dead key of an earlier registration of this slot, or a
  // guess; both are "no such key".
  if (!s.live || (key & 0xff) != tag(s.generation, remote)) return Err(KeyError::kNoSuchKey);
  if (s.e.pd != pd) return Err(KeyError::kWrongPd);  // the QP's PD must be the MR's
  // Bounds: [addr, addr+length) inside [iova, iova+length), without overflow.
  if (addr < s.e.iova || addr - s.e.iova > s.e.length || length > s.e.length - (addr - s.e.iova))
    return Err(KeyError::kOutOfBounds);
  // Access rights: every requested right must be granted; local read always is (IBA 10.6.3).
  if ((s.e.access & access) != access) return Err(KeyError::kAccessDenied);
  return s.e.host + (addr - s.e.iova);
}

// ---- ProtectionDomain -------------------------------------------------------------------------

ProtectionDomain::ProtectionDomain(Context& ctx) : ctx_(ctx) {}

ProtectionDomain::~ProtectionDomain() {
  UROCE_CHECK(users_.load() == 0);
  ctx_.users_.fetch_sub(1);
  ctx_.dev_.release(Device::kPd);
}

Device& ProtectionDomain::device() {
  return ctx_.device();
}

uint32_t ProtectionDomain::users() const {
  return users_.load();
}

Result<std::unique_ptr<MemoryRegion>> ProtectionDomain::reg_mr(void* addr, size_t length,
                                                               uint64_t iova, uint32_t access) {
  if (access & ~kMrAccessMask) return Err(EINVAL);
  // ibv_reg_mr(3): "If IBV_ACCESS_REMOTE_WRITE or IBV_ACCESS_REMOTE_ATOMIC is set, then
  // IBV_ACCESS_LOCAL_WRITE must be set too" (IBA 10.6.3).
  if ((access & (transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic)) &&
      !(access & transport::kAccessLocalWrite))
    return Err(EINVAL);
  if (length == 0 || addr == nullptr) return Err(EINVAL);
  const auto host = reinterpret_cast<uintptr_t>(addr);
  if (host + length < host || iova + length < iova) return Err(EINVAL);
  if (length > device().attr().max_mr_size) return Err(EINVAL);
  if (!device().acquire(Device::kMr)) return Err(ENOMEM);
  KeyTable::Entry e{this, static_cast<uint8_t*>(addr), iova, length, access};
  auto keys = device().keys_.add(e);
  if (!keys) {
    device().release(Device::kMr);
    return Err(keys.error());
  }
  users_.fetch_add(1);
  return std::unique_ptr<MemoryRegion>(
      new MemoryRegion(*this, addr, length, iova, access, keys->first, keys->second));
}

Result<uint8_t*, KeyError> ProtectionDomain::local(uint32_t lkey, uint64_t addr, uint32_t length,
                                                   uint32_t access) {
  if (length == 0) return static_cast<uint8_t*>(nullptr);
  return device().keys_.check(false, lkey, this, addr, length, access);
}

Result<uint8_t*, KeyError> ProtectionDomain::remote(uint32_t rkey, uint64_t addr, uint32_t length,
                                                    uint32_t access) {
  if (length == 0) return static_cast<uint8_t*>(nullptr);
  return device().keys_.check(true, rkey, this, addr, length, access);
}

bool ProtectionDomain::invalidate(uint32_t) {
  return false;
}

// ---- MemoryRegion -----------------------------------------------------------------------------

MemoryRegion::MemoryRegion(ProtectionDomain& pd, void* addr, size_t length, uint64_t iova,
                           uint32_t access, uint32_t lkey, uint32_t rkey)
    : pd_(pd),
      addr_(addr),
      length_(length),
      iova_(iova),
      access_(access),
      lkey_(lkey),
      rkey_(rkey) {}

MemoryRegion::~MemoryRegion() {
  Device& dev = pd_.device();
  // The keys die first, so no new access passes the check; then the barrier waits for every
  // progress pass or post call in flight, which may hold a pointer checked a moment earlier.
  dev.keys_.remove(lkey_);
  { std::unique_lock barrier(dev.quiesce_); }
  dev.release(Device::kMr);
  pd_.users_.fetch_sub(1);
}

}  // namespace uroce::verbs
