#pragma once
// Protection domains, memory regions and the device's key table.
//
// Keys (IBA 10.6.2): a key is a 24-bit table index and an 8-bit tag. Every registration draws a
// fresh generation for its slot, and the lkey and rkey of one MR carry different tags, so the two
// keys differ, a deregistered key stays dead when its slot is reused (for 128 reuses), and keys are
// not simply sequential. The table has a fixed number of slots (DeviceAttr::max_mr); slot 0 is
// never used, so key 0 is never valid.
//
// Memory windows (IBA 10.6.7) take slots of the same table. A window has no L_Key; its R_Key is
// valid only while it is bound, and only with the exact key the bind gave it (the low byte of a
// type 2 window's key is the consumer's, ibv_inc_rkey). A window bound to an MR keeps the MR's
// memory: ibv_dereg_mr says EBUSY while one is (MemoryRegion::windows_bound()).
//
// Deregistration is synchronous: once ~MemoryRegion returns, no access through its keys happens,
// even one the progress engine had already validated (the device's quiesce barrier waits for the
// progress pass and any post call in flight). The transport must not keep a pointer returned by
// MemoryAccess beyond the call (receive/transmit/post) that obtained it.
//
// On-demand MRs (IBV_ACCESS_ON_DEMAND; implicit: the whole address space, reg_mr(nullptr,
// SIZE_MAX)) take the same key, PD, bounds and rights checks, and then the pages themselves: the
// check faults the range in with the access it needs (madvise MADV_POPULATE_READ/WRITE, what a
// NIC's page-fault handler does), and a range that is unmapped, or mapped without that right,
// fails the check with kAccessDenied (remote access error NAK, local protection error
// completion) instead of faulting the process later. They follow the mapping: memory unmapped
// after registration fails, memory mapped again there is used. Other MRs skip the probe (uroce
// does not pin them; their memory must stay mapped while registered).
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "common/result.h"
#include "transport/types.h"
#include "verbs/attrs.h"
#include "verbs/device_mutex.h"

namespace uroce::verbs {

class Context;
class Device;
class MemoryRegion;
class MemoryWindow;
class QueuePair;
class AddressHandle;
class SharedReceiveQueue;
class DeviceMemory;

using transport::KeyError;
using transport::MwBindInfo;
using transport::WcStatus;

enum class MwType : uint8_t { kType1 = 1, kType2 = 2 };  // ibv_mw_type's values

class KeyTable {
 public:
  struct Entry {
    const void* pd = nullptr;
    uint8_t* host = nullptr;  // host address of iova
    uint64_t iova = 0;
    uint64_t length = 0;
    uint32_t access = 0;
    bool on_demand = false;  // probe the pages on every access (above)
  };
  explicit KeyTable(uint32_t capacity, uint32_t salt);
  // Before any use (DeviceConfig::single_threaded).
  void set_single_threaded(bool single) { mu_.set_single_threaded(single); }

  // Returns {lkey, rkey}, or ENOMEM when every slot is in use.
  Result<std::pair<uint32_t, uint32_t>> add(const Entry& e);
  // A memory window of `pd`, unbound: its R_Key (which names it; not valid until a bind), or
  // ENOMEM.
  Result<uint32_t> add_window(const void* pd, MwType type);
  // Frees an MR's slot (by its lkey) or a window's (by any R_Key it had). An MR's windows are
  // unbound with it.
  void remove(uint32_t key);
  // Re-registration: the MR of `lkey` takes `e` and keeps its keys. EBUSY while windows are
  // bound to it (they would outlive the memory or rights they were checked against).
  int update(uint32_t lkey, const Entry& e);
  // Checks a key against a PD, range and access (IBA 10.6.3); a type 2 window's R_Key also
  // against the QP it is bound to.
  Result<uint8_t*, KeyError> check(bool remote, uint32_t key, const void* pd, uint64_t addr,
                                   uint32_t length, uint32_t access, uint32_t qpn = 0) const;
  // BIND_MW (IBA 10.6.7.2) by QP `qpn` of `pd`: kSuccess or kMwBindErr.
  WcStatus bind(const void* pd, const MwBindInfo& b, uint32_t qpn);
  // LOCAL_INV or SEND with Invalidate of a bound type 2 window (IBA 10.6.7.2.4).
  bool invalidate(const void* pd, uint32_t rkey, uint32_t qpn, bool remote);
  uint32_t windows_bound(uint32_t lkey) const;  // windows bound to the MR of `lkey`
  // ibv_advise_mr's check of one SGE: the live on-demand MR of `lkey` in `pd` covering the range
  // with `access`: its host address, or ENOENT (rdma-core: not a prefetchable MR).
  Result<uint8_t*> on_demand_range(uint32_t lkey, const void* pd, uint64_t addr, uint32_t length,
                                   uint32_t access) const;
  uint32_t in_use() const;

 private:
  enum class Kind : uint8_t { kMr, kWindow1, kWindow2 };
  struct Slot {
    Entry e;  // a window's: the bound range, its host address and rights
    uint8_t generation = 0;
    bool live = false;
    Kind kind = Kind::kMr;
    uint32_t window_rkey = 0;  // window: the R_Key it is bound with; 0 while unbound
    uint32_t bound_qpn = 0;    // type 2 window: the QP it was bound through
    uint32_t bound_mr = 0;     // window: the MR's slot
    uint32_t windows = 0;      // MR: windows bound to it
  };
  // A thread's copy of the slot it checked last, valid while the table's version is the one it
  // was copied at: every change to the table takes a new version under mu_ (a number no table
  // has had), so a check that finds its copy current reads nothing shared but the version and
  // takes no lock. Deregistration still waits for passes in flight (the quiesce barrier above).
  struct Snapshot {
    const KeyTable* table = nullptr;
    uint64_t version = 0;
    uint32_t index = 0;
    Slot slot;
  };
  static thread_local Snapshot snapshot_;
  struct NewVersion;  // takes a new version when a changing call leaves its critical section
  uint8_t tag(uint8_t generation, bool remote) const {
    return static_cast<uint8_t>((generation * 2 + (remote ? 1 : 0)) ^ salt_);
  }
  // The checks of check() on one slot, except the on-demand page probe. Inlined into check(),
  // which runs for every packet that names a key.
  [[gnu::always_inline]] Result<uint8_t*, KeyError> check_slot(const Slot& s, bool remote,
                                                               uint32_t key, const void* pd,
                                                               uint64_t addr, uint32_t length,
                                                               uint32_t access, uint32_t qpn) const;
  Result<uint32_t> take_slot();  // a free slot's index, made live with a new generation
  void unbind(Slot& window);
  mutable DeviceMutex mu_;
  std::atomic<uint64_t> version_;
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
  // reg_mr's argument checks: 0 or EINVAL.
  int check_mr_args(void* addr, size_t length, uint64_t iova, uint32_t access);
  // The access checks alone (unknown bits, remote write or atomic without local write).
  static int check_mr_access(uint32_t access);
  Result<std::unique_ptr<QueuePair>> create_qp(const QpInitAttr& attr);
  Result<std::unique_ptr<AddressHandle>> create_ah(const AhAttr& attr);
  Result<std::unique_ptr<SharedReceiveQueue>> create_srq(const SrqAttr& attr);
  // ibv_reg_dm_mr: `length` bytes of `dm` from `offset`, zero-based (remote addresses are offsets
  // into the MR). EINVAL without kAccessZeroBased, for a range outside the DM or bad access bits;
  // length 0 is allowed (the kernel and mlx5 allow it).
  Result<std::unique_ptr<MemoryRegion>> reg_dm_mr(DeviceMemory& dm, uint64_t offset, size_t length,
                                                  uint32_t access);
  // ibv_advise_mr: prefetch hints for on-demand MRs. EINVAL for an unknown advice or flag, a null
  // list or more than kMaxAdviseSge entries; ENOENT for an SGE outside an on-demand MR of this PD
  // (or PREFETCH_WRITE to one without LOCAL_WRITE). With kAdviseFlush the pages are faulted in
  // before it returns, EFAULT if they cannot be; without it that is best effort.
  int advise_mr(uint32_t advice, uint32_t flags, std::span<const transport::Sge> sges);
  // ibv_alloc_mw: EINVAL for an unknown type, ENOMEM past DeviceAttr::max_mw.
  Result<std::unique_ptr<MemoryWindow>> alloc_mw(MwType type);

  // Objects created in this PD and not yet destroyed (ibv_dealloc_pd says EBUSY while > 0).
  uint32_t users() const;

  // transport::MemoryAccess
  Result<uint8_t*, KeyError> local(uint32_t lkey, uint64_t addr, uint32_t length,
                                   uint32_t access) override;
  Result<uint8_t*, KeyError> remote(uint32_t rkey, uint64_t addr, uint32_t length, uint32_t access,
                                    uint32_t qpn) override;
  // Only bound type 2 windows are invalidatable: MR keys are not (uroce has no fast-register
  // MRs), nor are type 1 windows (IBA 10.6.7).
  bool invalidate(uint32_t rkey, uint32_t qpn, bool remote) override;
  WcStatus bind_mw(const MwBindInfo& bind, uint32_t qpn) override;

 private:
  friend class Context;
  friend class MemoryRegion;
  friend class MemoryWindow;
  friend class QueuePair;
  friend class AddressHandle;
  friend class SharedReceiveQueue;
  friend class XrcDomain;
  explicit ProtectionDomain(Context& ctx);
  // Registers a range whose arguments the caller has checked: a key pair and the MR.
  Result<std::unique_ptr<MemoryRegion>> add_mr(void* addr, size_t length, uint64_t iova,
                                               uint32_t access);
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
  ProtectionDomain& pd() { return *pd_; }
  // Windows bound to this MR now: ibv_dereg_mr refuses (EBUSY) while there are any; destroying
  // it anyway (the C++ API) unbinds them.
  uint32_t windows_bound() const;
  // ibv_rereg_mr: the MR now lies in `pd` (of the same context), over [addr, addr+length) at
  // `iova`, with `access`, and keeps its keys, as on rdma-core's devices (callers hand the keys
  // out before and use them after). 0, or EINVAL (reg_mr's checks, a PD of another context),
  // EBUSY (windows bound); on an error nothing changed. Like deregistration it is synchronous:
  // once it returns, no access uses the old translation, PD or rights.
  int rereg(ProtectionDomain& pd, void* addr, size_t length, uint64_t iova, uint32_t access);

 private:
  friend class ProtectionDomain;
  MemoryRegion(ProtectionDomain& pd, void* addr, size_t length, uint64_t iova, uint32_t access,
               uint32_t lkey, uint32_t rkey);
  ProtectionDomain* pd_;  // changes with rereg
  void* addr_;
  size_t length_;
  uint64_t iova_;
  uint32_t access_;
  uint32_t lkey_, rkey_;
  DeviceMemory* dm_ = nullptr;  // the DM this MR registers (reg_dm_mr)
};

// Device memory (ibv_alloc_dm): memory of the device that programs reach only through
// copy_to/copy_from (ibv_memcpy_to_dm / ibv_memcpy_from_dm) and MRs (reg_dm_mr). uroce's device
// is software, so it lives in host memory: what it offers is the API, not a latency advantage.
// The bytes allocated per device are bounded by DeviceAttr::max_dm_size.
class DeviceMemory {
 public:
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  size_t length() const { return length_; }
  // 0, EFAULT for a range past the end, EINVAL for an offset or length that is not a multiple
  // of kCopyAlignment (as rdma-core's mlx5 provider, whose hardware needs it; pyverbs tests it).
  static constexpr uint64_t kCopyAlignment = 4;
  int copy_to(uint64_t offset, const void* src, size_t length);
  int copy_from(void* dst, uint64_t offset, size_t length) const;
  // MRs registered on it (ibv_free_dm says EBUSY while > 0).
  uint32_t users() const { return users_.load(); }
  Context& context() { return ctx_; }

 private:
  friend class Context;
  friend class ProtectionDomain;
  friend class MemoryRegion;
  DeviceMemory(Context& ctx, uint8_t* bytes, size_t length);
  Context& ctx_;
  uint8_t* bytes_;
  size_t length_;
  std::atomic<uint32_t> users_{0};
};

// A memory window (ibv_mw): allocated unbound; BIND_MW work requests (ibv_post_send, or
// ibv_bind_mw for type 1) bind it, LOCAL_INV or a peer's SEND with Invalidate unbind a type 2
// window. Destroying it deallocates it, bound or not (synchronously, as ~MemoryRegion).
class MemoryWindow {
 public:
  ~MemoryWindow();
  MemoryWindow(const MemoryWindow&) = delete;
  MemoryWindow& operator=(const MemoryWindow&) = delete;

  uint32_t rkey() const { return rkey_; }  // as allocated: its index for every later key
  MwType type() const { return type_; }
  ProtectionDomain& pd() { return pd_; }

 private:
  friend class ProtectionDomain;
  MemoryWindow(ProtectionDomain& pd, MwType type, uint32_t rkey)
      : pd_(pd), type_(type), rkey_(rkey) {}
  ProtectionDomain& pd_;
  MwType type_;
  uint32_t rkey_;
};

// The R_Key a window's next bind gives it: the same index, the next key byte (ibv_inc_rkey).
inline uint32_t next_window_key(uint32_t rkey) {
  return (rkey & 0xffffff00) | ((rkey + 1) & 0xff);
}

// ibv_access_flags the verbs layer adds to the transport's.
inline constexpr uint32_t kAccessZeroBased = 1u << 5;  // IBV_ACCESS_ZERO_BASED
inline constexpr uint32_t kAccessOnDemand = 1u << 6;   // IBV_ACCESS_ON_DEMAND
// IBV_ACCESS_HUGETLB: "the memory is backed by huge pages", a hint that lets hardware map it in
// fewer translations. uroce reads process memory directly, so it accepts and ignores it (the
// kernel accepts it on any MR; pyverbs' huge-page ODP tests pass it).
inline constexpr uint32_t kAccessHugeTlb = 1u << 7;
// Access bits reg_mr accepts (ibv_access_flags up to MW_BIND, ON_DEMAND and HUGETLB).
inline constexpr uint32_t kMrAccessMask =
    transport::kAccessLocalWrite | transport::kAccessRemoteWrite | transport::kAccessRemoteRead |
    transport::kAccessRemoteAtomic | transport::kAccessMwBind | kAccessOnDemand | kAccessHugeTlb;
// ibv_advise_mr_advice / flags.
inline constexpr uint32_t kAdvisePrefetch = 0, kAdvisePrefetchWrite = 1, kAdvisePrefetchNoFault = 2;
inline constexpr uint32_t kAdviseFlush = 1;
inline constexpr size_t kMaxAdviseSge = 64;
// Whether this process can offer on-demand MRs: the kernel has MADV_POPULATE_READ/WRITE (5.14).
bool on_demand_supported();
// Rights a window may grant (ibv_mw_bind_info::mw_access_flags; zero-based windows are not
// offered).
inline constexpr uint32_t kMwAccessMask =
    transport::kAccessRemoteWrite | transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;

}  // namespace uroce::verbs
