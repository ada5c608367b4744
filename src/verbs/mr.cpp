#include "verbs/mr.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/check.h"
#include "verbs/device.h"

namespace uroce::verbs {

// ---- KeyTable ---------------------------------------------------------------------------------

namespace {

// Versions are unique across every table of the process, so a thread's snapshot of a destroyed
// table can never match a new one at the same address.
uint64_t fresh_key_table_version() {
  static std::atomic<uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) + 1;
}

// [addr, addr+length) inside the entry's [iova, iova+length), without overflow.
bool covers(const KeyTable::Entry& e, uint64_t addr, uint64_t length) {
  return addr >= e.iova && addr - e.iova <= e.length && length <= e.length - (addr - e.iova);
}

// The entry's host address of `addr`. In integers: an implicit on-demand MR's host base is 0.
uint8_t* host_at(const KeyTable::Entry& e, uint64_t addr) {
  return reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(e.host) + (addr - e.iova));
}

constexpr uint32_t kWriteRights =
    transport::kAccessLocalWrite | transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic;

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

uintptr_t page_size() {
  static const uintptr_t size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// Faults the pages of [p, p+length) in for reading or writing, as a NIC's page-fault handler
// would: false if any is unmapped or mapped without that right. The kernel answers instead of a
// SIGSEGV (ENOMEM for a hole, EINVAL/EFAULT for a mapping without the right).
bool fault_in(const uint8_t* p, uint64_t length, bool write) {
  const uintptr_t page = page_size();
  const uintptr_t first = reinterpret_cast<uintptr_t>(p);
  if (first + length < first || first + length > UINTPTR_MAX - page) return false;
  const uintptr_t start = first & ~(page - 1);
  const uintptr_t end = (first + length + page - 1) & ~(page - 1);
  return madvise(reinterpret_cast<void*>(start), end - start,
                 write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0;
}

// ibv_reg_mr(3)'s implicit on-demand MR: no address, SIZE_MAX bytes, the whole address space.
bool is_implicit(const void* addr, size_t length, uint32_t access) {
  return (access & kAccessOnDemand) && addr == nullptr && length == SIZE_MAX;
}

// The key table's view of an MR (reg_mr, rereg): an implicit MR covers every iova.
KeyTable::Entry key_entry(const void* pd, void* addr, size_t length, uint64_t iova,
                          uint32_t access) {
  const bool implicit = is_implicit(addr, length, access);
  return {pd,     static_cast<uint8_t*>(addr),    iova, implicit ? UINT64_MAX : length,
          access, (access & kAccessOnDemand) != 0};
}

}  // namespace

bool on_demand_supported() {
  static const bool supported = [] {
    void* p =
        mmap(nullptr, page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    const bool ok = fault_in(static_cast<uint8_t*>(p), 1, true);
    munmap(p, page_size());
    return ok;
  }();
  return supported;
}

KeyTable::KeyTable(uint32_t capacity, uint32_t salt)
    // Slot 0 is never handed out (key 0 is never valid), and keys have 24 bits of index.
    : version_(fresh_key_table_version()),
      slots_(std::min<uint32_t>(capacity, (1u << 24) - 2) + 1),
      salt_(salt) {}

thread_local KeyTable::Snapshot KeyTable::snapshot_;

struct KeyTable::NewVersion {
  explicit NewVersion(KeyTable& t) : table(t) {}
  ~NewVersion() { table.version_.store(fresh_key_table_version(), std::memory_order_release); }
  KeyTable& table;
};

// Keys of one slot differ by generation; the lkey and rkey of one MR differ in the low bit. The
// salt makes keys differ between devices and from plain sequence numbers.
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
  NewVersion changed(*this);
  auto i = take_slot();
  if (!i) return Err(i.error());
  Slot& s = slots_[*i];
  s.e = e;
  return std::pair{*i << 8 | tag(s.generation, false), *i << 8 | tag(s.generation, true)};
}

Result<uint32_t> KeyTable::add_window(const void* pd, MwType type) {
  std::lock_guard lock(mu_);
  NewVersion changed(*this);
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
  NewVersion changed(*this);
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
  NewVersion changed(*this);
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
  NewVersion changed(*this);
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
  w.e = Entry{pd, host_at(mr.e, b.addr), b.addr, b.length, b.access, mr.e.on_demand};
  w.window_rkey = b.new_rkey;
  w.bound_qpn = qpn;
  w.bound_mr = m;
  ++slots_[m].windows;
  return WcStatus::kSuccess;
}

bool KeyTable::invalidate(const void* pd, uint32_t rkey, uint32_t qpn, bool remote) {
  std::lock_guard lock(mu_);
  NewVersion changed(*this);
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

// Every rule of IBA 10.6.3 (C10-17 .. C10-23) in one place, on one slot.
inline Result<uint8_t*, KeyError> KeyTable::check_slot(const Slot& s, bool remote, uint32_t key,
                                                       const void* pd, uint64_t addr,
                                                       uint32_t length, uint32_t access,
                                                       uint32_t qpn) const {
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
  return host_at(s.e, addr);
}

Result<uint8_t*, KeyError> KeyTable::check(bool remote, uint32_t key, const void* pd, uint64_t addr,
                                           uint32_t length, uint32_t access, uint32_t qpn) const {
  const uint32_t i = key >> 8;
  Snapshot& snap = snapshot_;
  if (snap.table == this && snap.index == i && !snap.slot.e.on_demand &&
      snap.version == version_.load(std::memory_order_acquire))
    return check_slot(snap.slot, remote, key, pd, addr, length, access, qpn);
  std::unique_lock lock(mu_);
  if (i == 0 || i >= slots_.size()) return Err(KeyError::kNoSuchKey);
  const Slot& s = slots_[i];
  snap.table = this;
  snap.version = version_.load(std::memory_order_relaxed);  // changes only under mu_
  snap.index = i;
  snap.slot = s;
  auto host = check_slot(s, remote, key, pd, addr, length, access, qpn);
  if (!host || !s.e.on_demand) return host;
  // The pages are the process's business, not the table's: probe them outside the lock.
  lock.unlock();
  if (!fault_in(*host, length, (access & kWriteRights) != 0)) return Err(KeyError::kAccessDenied);
  return host;
}

Result<uint8_t*> KeyTable::on_demand_range(uint32_t lkey, const void* pd, uint64_t addr,
                                           uint32_t length, uint32_t access) const {
  std::lock_guard lock(mu_);
  const uint32_t i = lkey >> 8;
  if (i == 0 || i >= slots_.size()) return Err(ENOENT);
  const Slot& s = slots_[i];
  if (!s.live || s.kind != Kind::kMr || (lkey & 0xff) != tag(s.generation, false) || s.e.pd != pd ||
      !s.e.on_demand || !covers(s.e, addr, length) || (s.e.access & access) != access)
    return Err(ENOENT);
  return host_at(s.e, addr);
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

int ProtectionDomain::check_mr_access(uint32_t access) {
  if (access & ~kMrAccessMask) return EINVAL;
  // ibv_reg_mr(3): "If IBV_ACCESS_REMOTE_WRITE or IBV_ACCESS_REMOTE_ATOMIC is set, then
  // IBV_ACCESS_LOCAL_WRITE must be set too" (IBA 10.6.3).
  if ((access & (transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic)) &&
      !(access & transport::kAccessLocalWrite))
    return EINVAL;
  return 0;
}

int ProtectionDomain::check_mr_args(void* addr, size_t length, uint64_t iova, uint32_t access) {
  if (int rc = check_mr_access(access)) return rc;
  const bool on_demand = (access & kAccessOnDemand) != 0;
  if (on_demand && !on_demand_supported()) return EOPNOTSUPP;
  // Implicit on-demand (ibv_reg_mr(3)): the whole address space, addresses are host addresses.
  if (is_implicit(addr, length, access)) return iova != 0 ? EINVAL : 0;
  if (length == 0 || addr == nullptr) return EINVAL;
  const auto host = reinterpret_cast<uintptr_t>(addr);
  if (host + length < host || iova + length < iova) return EINVAL;
  if (length > device().attr().max_mr_size) return EINVAL;
  return 0;
}

Result<std::unique_ptr<MemoryRegion>> ProtectionDomain::reg_mr(void* addr, size_t length,
                                                               uint64_t iova, uint32_t access) {
  if (int rc = check_mr_args(addr, length, iova, access)) return Err(rc);
  return add_mr(addr, length, iova, access);
}

Result<std::unique_ptr<MemoryRegion>> ProtectionDomain::add_mr(void* addr, size_t length,
                                                               uint64_t iova, uint32_t access) {
  if (!device().acquire(Device::kMr)) return Err(ENOMEM);
  const KeyTable::Entry e = key_entry(this, addr, length, iova, access);
  auto keys = device().keys_.add(e);
  if (!keys) {
    device().release(Device::kMr);
    return Err(keys.error());
  }
  users_.fetch_add(1);
  return std::unique_ptr<MemoryRegion>(
      new MemoryRegion(*this, addr, length, iova, access, keys->first, keys->second));
}

Result<std::unique_ptr<MemoryRegion>> ProtectionDomain::reg_dm_mr(DeviceMemory& dm, uint64_t offset,
                                                                  size_t length, uint32_t access) {
  // DM MRs are zero-based (ibv_reg_dm_mr(3)) and never on demand.
  if (!(access & kAccessZeroBased) || (access & kAccessOnDemand)) return Err(EINVAL);
  if (&dm.ctx_ != &ctx_) return Err(EINVAL);
  // Length 0 is accepted, as the kernel and mlx5 accept it (pyverbs registers one): its key
  // names an empty range, so any access of a byte or more fails the bounds check.
  if (offset > dm.length_ || length > dm.length_ - offset) return Err(EINVAL);
  const uint32_t mr_access = access & ~kAccessZeroBased;
  if (int rc = check_mr_access(mr_access)) return Err(rc);
  auto mr = add_mr(dm.bytes_ + offset, length, 0, mr_access);
  if (!mr) return mr;
  (*mr)->dm_ = &dm;
  dm.users_.fetch_add(1);
  return mr;
}

int ProtectionDomain::advise_mr(uint32_t advice, uint32_t flags,
                                std::span<const transport::Sge> sges) {
  if (advice > kAdvisePrefetchNoFault || (flags & ~kAdviseFlush) != 0) return EINVAL;
  if (sges.size() > kMaxAdviseSge) return EINVAL;
  if (!on_demand_supported()) return EOPNOTSUPP;
  const bool write = advice == kAdvisePrefetchWrite;
  uint8_t* hosts[kMaxAdviseSge];
  for (size_t i = 0; i < sges.size(); ++i) {
    auto host = device().keys_.on_demand_range(sges[i].lkey, this, sges[i].addr, sges[i].length,
                                               write ? uint32_t{transport::kAccessLocalWrite} : 0u);
    if (!host) return host.error();
    hosts[i] = *host;
  }
  if (advice == kAdvisePrefetchNoFault) return 0;  // would only map pages already present
  for (size_t i = 0; i < sges.size(); ++i) {
    if (sges[i].length != 0 && !fault_in(hosts[i], sges[i].length, write) && (flags & kAdviseFlush))
      return EFAULT;
  }
  return 0;
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
  // A device-memory MR's range belongs to its DM (ibv_reg_dm_mr); moving it elsewhere is not
  // a rereg rdma-core's devices offer either.
  if (dm_) return EOPNOTSUPP;
  if (int rc = pd.check_mr_args(addr, length, iova, access)) return rc;
  Device& dev = pd_->device();
  if (int rc = dev.keys_.update(lkey_, key_entry(&pd, addr, length, iova, access))) return rc;
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
  if (dm_) dm_->users_.fetch_sub(1);
  pd_->users_.fetch_sub(1);
}

// ---- DeviceMemory -----------------------------------------------------------------------------

DeviceMemory::DeviceMemory(Context& ctx, uint8_t* bytes, size_t length)
    : ctx_(ctx), bytes_(bytes), length_(length) {}

DeviceMemory::~DeviceMemory() {
  UROCE_CHECK(users_.load() == 0);
  std::free(bytes_);
  ctx_.dev_.dm_bytes_.fetch_sub(length_);
  ctx_.users_.fetch_sub(1);
}

int DeviceMemory::copy_to(uint64_t offset, const void* src, size_t length) {
  if (offset > length_ || length > length_ - offset) return EFAULT;
  if ((offset | length) % kCopyAlignment != 0) return EINVAL;
  if (length != 0) std::memcpy(bytes_ + offset, src, length);
  return 0;
}

int DeviceMemory::copy_from(void* dst, uint64_t offset, size_t length) const {
  if (offset > length_ || length > length_ - offset) return EFAULT;
  if ((offset | length) % kCopyAlignment != 0) return EINVAL;
  if (length != 0) std::memcpy(dst, bytes_ + offset, length);
  return 0;
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
