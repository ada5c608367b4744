#include "verbs/mr.h"

#include <cerrno>

#include "common/check.h"
#include "verbs/device.h"

namespace uroce::verbs {

// ---- KeyTable ---------------------------------------------------------------------------------

namespace {

// [addr, addr+length) inside the entry's [iova, iova+length), without overflow.
bool covers(const KeyTable::Entry& e, uint64_t addr, uint64_t length) {
  return addr >= e.iova && addr - e.iova <= e.length && length <= e.length - (addr - e.iova);
}

}  // namespace

KeyTable::KeyTable(uint32_t capacity, uint32_t salt)
    // Slot 0 is never handed out (key 0 is never valid), and keys have 24 bits of index.
    : slots_(std::min<uint32_t>(capacity, (1u << 24) - 2) + 1), salt_(salt) {}

// Keys of one slot differ by generation; the lkey and rkey of one MR differ in the low bit. The
// salt makes keys differ between devices and from plain sequence numbers.
uint8_t KeyTable::tag(uint8_t generation, bool remote) const {
  return static_cast<uint8_t>((generation * 2 + (remote ? 1 : 0)) ^ salt_);
}

Result<uint32_t> KeyTable::take_slot() {
  const uint32_t n = static_cast<uint32_t>(slots_.size());
  // Next-fit over the slots: a freed slot is reused last, so a dead key's slot changes tag as
  // rarely as possible.
  for (uint32_t tries = 1; tries < n; ++tries) {
    uint32_t i = next_;
    next_ = next_ + 1 >= n ? 1 : next_ + 1;
    Slot& s = slots_[i];
    if (s.live) continue;
    const uint8_t generation = static_cast<uint8_t>(s.generation + 1);
    s = Slot{};
    s.generation = generation;
    s.live = true;
    ++live_;
    return i;
  }
  return Err(ENOMEM);
}

Result<std::pair<uint32_t, uint32_t>> KeyTable::add(const Entry& e) {
  std::lock_guard lock(mu_);
  auto i = take_slot();
  if (!i) return Err(i.error());
  Slot& s = slots_[*i];
  s.e = e;
  return std::pair{*i << 8 | tag(s.generation, false), *i << 8 | tag(s.generation, true)};
}

Result<uint32_t> KeyTable::add_window(const void* pd, MwType type) {
  std::lock_guard lock(mu_);
  auto i = take_slot();
  if (!i) return Err(i.error());
  Slot& s = slots_[*i];
  s.e.pd = pd;
  s.kind = type == MwType::kType1 ? Kind::kWindow1 : Kind::kWindow2;
  return *i << 8 | tag(s.generation, true);
}

void KeyTable::unbind(Slot& window) {
  if (window.window_rkey == 0) return;
  Slot& mr = slots_[window.bound_mr];
  UROCE_CHECK(mr.live && mr.windows > 0);
  --mr.windows;
  window.window_rkey = 0;
  window.bound_qpn = window.bound_mr = 0;
  window.e = Entry{window.e.pd};
}

void KeyTable::remove(uint32_t key) {
  std::lock_guard lock(mu_);
  const uint32_t i = key >> 8;
  UROCE_CHECK(i > 0 && i < slots_.size() && slots_[i].live);
  Slot& s = slots_[i];
  if (s.kind != Kind::kMr) {
    unbind(s);
  } else if (s.windows > 0) {
    // Bounded by the table; only an MR destroyed with windows still bound pays it.
    for (Slot& w : slots_)
      if (w.live && w.kind != Kind::kMr && w.window_rkey != 0 && w.bound_mr == i) unbind(w);
  }
  s.live = false;
  s.e = {};
  --live_;
}

int KeyTable::update(uint32_t lkey, const Entry& e) {
  std::lock_guard lock(mu_);
  const uint32_t i = lkey >> 8;
  UROCE_CHECK(i > 0 && i < slots_.size() && slots_[i].live && slots_[i].kind == Kind::kMr);
  Slot& s = slots_[i];
  if (s.windows > 0) return EBUSY;
  s.e = e;
  return 0;
}

uint32_t KeyTable::windows_bound(uint32_t lkey) const {
  std::lock_guard lock(mu_);
  const uint32_t i = lkey >> 8;
  return i > 0 && i < slots_.size() && slots_[i].live ? slots_[i].windows : 0;
}

WcStatus KeyTable::bind(const void* pd, const MwBindInfo& b, uint32_t qpn) {
  std::lock_guard lock(mu_);
  const uint32_t i = b.mw_rkey >> 8, m = b.mr_lkey >> 8;
  if (i == 0 || i >= slots_.size()) return WcStatus::kMwBindErr;
  Slot& w = slots_[i];
  // The window: live, of this QP's PD, keeping its index (IBA 10.6.7.2.1).
  if (!w.live || w.kind == Kind::kMr || w.e.pd != pd || (b.new_rkey >> 8) != i)
    return WcStatus::kMwBindErr;
  // A type 2 window binds only when free: LOCAL_INV or a SEND with Invalidate frees it.
  if (w.kind == Kind::kWindow2 && w.window_rkey != 0) return WcStatus::kMwBindErr;
  if (b.access & ~kMwAccessMask) return WcStatus::kMwBindErr;
  if (w.kind == Kind::kWindow1 && b.length == 0) {  // unbind (ibv_bind_mw(3))
    unbind(w);
    return WcStatus::kSuccess;
  }
  // The MR: of this PD, allowing binds, covering the range, and locally writable if the window
  // lets peers write (C10-73 in spirit: a window grants no more than its MR could).
  if (m == 0 || m >= slots_.size()) return WcStatus::kMwBindErr;
  const Slot& mr = slots_[m];
  if (!mr.live || mr.kind != Kind::kMr || (b.mr_lkey & 0xff) != tag(mr.generation, false) ||
      mr.e.pd != pd || !(mr.e.access & transport::kAccessMwBind))
    return WcStatus::kMwBindErr;
  if (!covers(mr.e, b.addr, b.length)) return WcStatus::kMwBindErr;
  if ((b.access & (transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic)) &&
      !(mr.e.access & transport::kAccessLocalWrite))
    return WcStatus::kMwBindErr;
  unbind(w);  // a type 1 window may be bound again in place
  w.e = Entry{pd, mr.e.host + (b.addr - mr.e.iova), b.addr, b.length, b.access};
  w.window_rkey = b.new_rkey;
  w.bound_qpn = qpn;
  w.bound_mr = m;
  ++slots_[m].windows;
  return WcStatus::kSuccess;
}

bool KeyTable::invalidate(const void* pd, uint32_t rkey, uint32_t qpn, bool remote) {
  std::lock_guard lock(mu_);
  const uint32_t i = rkey >> 8;
  if (i == 0 || i >= slots_.size()) return false;
  Slot& w = slots_[i];
  if (!w.live || w.kind != Kind::kWindow2 || w.window_rkey == 0 || w.window_rkey != rkey ||
      w.e.pd != pd)
    return false;
  // A peer may invalidate only through the QP the window is bound to (type 2B).
  if (remote && w.bound_qpn != qpn) return false;
  unbind(w);
  return true;
}

uint32_t KeyTable::in_use() const {
  std::lock_guard lock(mu_);
  return live_;
}

// Every rule of IBA 10.6.3 (C10-17 .. C10-23) in one place, under one lock.
Result<uint8_t*, KeyError> KeyTable::check(bool remote, uint32_t key, const void* pd, uint64_t addr,
                                           uint32_t length, uint32_t access, uint32_t qpn) const {
  std::lock_guard lock(mu_);
  uint32_t i = key >> 8;
  if (i == 0 || i >= slots_.size()) return Err(KeyError::kNoSuchKey);
  const Slot& s = slots_[i];
  if (!s.live) return Err(KeyError::kNoSuchKey);
  if (s.kind == Kind::kMr) {
    // A key whose tag does not match is a dead key of an earlier registration of this slot, or
    // a guess; both are "no such key".
    if ((key & 0xff) != tag(s.generation, remote)) return Err(KeyError::kNoSuchKey);
  } else {
    // A window: only its R_Key of the current binding (an earlier one is invalidated).
    if (!remote || s.window_rkey == 0 || key != s.window_rkey) return Err(KeyError::kNoSuchKey);
    if (s.kind == Kind::kWindow2 && s.bound_qpn != qpn) return Err(KeyError::kWrongPd);
  }
  if (s.e.pd != pd) return Err(KeyError::kWrongPd);  // the QP's PD must be the MR's
  if (!covers(s.e, addr, length)) return Err(KeyError::kOutOfBounds);
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

int ProtectionDomain::check_mr_args(void* addr, size_t length, uint64_t iova, uint32_t access) {
  if (access & ~kMrAccessMask) return EINVAL;
  // ibv_reg_mr(3): "If IBV_ACCESS_REMOTE_WRITE or IBV_ACCESS_REMOTE_ATOMIC is set, then
  // IBV_ACCESS_LOCAL_WRITE must be set too" (IBA 10.6.3).
  if ((access & (transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic)) &&
      !(access & transport::kAccessLocalWrite))
    return EINVAL;
  if (length == 0 || addr == nullptr) return EINVAL;
  const auto host = reinterpret_cast<uintptr_t>(addr);
  if (host + length < host || iova + length < iova) return EINVAL;
  if (length > device().attr().max_mr_size) return EINVAL;
  return 0;
}

Result<std::unique_ptr<MemoryRegion>> ProtectionDomain::reg_mr(void* addr, size_t length,
                                                               uint64_t iova, uint32_t access) {
  if (int rc = check_mr_args(addr, length, iova, access)) return Err(rc);
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
                                                    uint32_t access, uint32_t qpn) {
  if (length == 0) return static_cast<uint8_t*>(nullptr);
  return device().keys_.check(true, rkey, this, addr, length, access, qpn);
}

bool ProtectionDomain::invalidate(uint32_t rkey, uint32_t qpn, bool remote) {
  return device().keys_.invalidate(this, rkey, qpn, remote);
}

WcStatus ProtectionDomain::bind_mw(const MwBindInfo& bind, uint32_t qpn) {
  return device().keys_.bind(this, bind, qpn);
}

Result<std::unique_ptr<MemoryWindow>> ProtectionDomain::alloc_mw(MwType type) {
  if (type != MwType::kType1 && type != MwType::kType2) return Err(EINVAL);
  if (!device().acquire(Device::kMw)) return Err(ENOMEM);
  auto rkey = device().keys_.add_window(this, type);
  if (!rkey) {
    device().release(Device::kMw);
    return Err(rkey.error());
  }
  users_.fetch_add(1);
  return std::unique_ptr<MemoryWindow>(new MemoryWindow(*this, type, *rkey));
}

// ---- MemoryRegion -----------------------------------------------------------------------------

MemoryRegion::MemoryRegion(ProtectionDomain& pd, void* addr, size_t length, uint64_t iova,
                           uint32_t access, uint32_t lkey, uint32_t rkey)
    : pd_(&pd),
      addr_(addr),
      length_(length),
      iova_(iova),
      access_(access),
      lkey_(lkey),
      rkey_(rkey) {}

uint32_t MemoryRegion::windows_bound() const {
  return pd_->device().keys_.windows_bound(lkey_);
}

int MemoryRegion::rereg(ProtectionDomain& pd, void* addr, size_t length, uint64_t iova,
                        uint32_t access) {
  if (&pd.context() != &pd_->context()) return EINVAL;
  if (int rc = pd.check_mr_args(addr, length, iova, access)) return rc;
  Device& dev = pd_->device();
  if (int rc = dev.keys_.update(lkey_, {&pd, static_cast<uint8_t*>(addr), iova, length, access}))
    return rc;
  // As in ~MemoryRegion: the barrier outlasts any access checked against the old entry.
  { std::unique_lock barrier(dev.quiesce_); }
  if (&pd != pd_) {
    pd.users_.fetch_add(1);
    pd_->users_.fetch_sub(1);
    pd_ = &pd;
  }
  addr_ = addr;
  length_ = length;
  iova_ = iova;
  access_ = access;
  return 0;
}

MemoryRegion::~MemoryRegion() {
  Device& dev = pd_->device();
  // The keys die first, so no new access passes the check; then the barrier waits for every
  // progress pass or post call in flight, which may hold a pointer checked a moment earlier.
  dev.keys_.remove(lkey_);
  { std::unique_lock barrier(dev.quiesce_); }
  dev.release(Device::kMr);
  pd_->users_.fetch_sub(1);
}

// ---- MemoryWindow -----------------------------------------------------------------------------

MemoryWindow::~MemoryWindow() {
  Device& dev = pd_.device();
  // As ~MemoryRegion: the key dies, then the barrier outlasts any access checked before it.
  dev.keys_.remove(rkey_);
  { std::unique_lock barrier(dev.quiesce_); }
  dev.release(Device::kMw);
  pd_.users_.fetch_sub(1);
}

}  // namespace uroce::verbs
