#pragma once
// Per-context state behind ibv_context: the verbs::Context on the device's runtime, and the maps
// that turn verbs objects named by events back into the ibv_* objects the program knows.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "api/ibverbs/abi.h"
#include "api/ibverbs/runtime.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"

namespace uroce::abi {

class ContextState {
 public:
  // Null and *err set on failure. If the device's runtime cannot start (its address is already
  // served by another process, say), the context still opens for queries, as ibv_devinfo needs,
  // and every verb that needs the NIC fails with that error (open_error()).
  static ContextState* create(Context* ctx, int* err);
  static void destroy(ContextState* s);

  // There is no kernel command channel, but programs dup() and fstat() ibv_context.cmd_fd to
  // share a context (ibv_import_device; pyverbs' import tests), so it is a real fd of its own:
  // an empty memfd, whose inode names this context. ibv_import_device answers EOPNOTSUPP, as
  // on rxe, whose kernel driver has no import either.
  int cmd_fd() const { return cmd_fd_; }
  int async_fd() const;
  // 0 when the NIC is running; else the errno that stopped it, said once on stderr (the tools
  // only print "Couldn't allocate PD").
  int open_error();
  verbs::Context* verbs() { return vctx_.get(); }
  Runtime* runtime() { return runtime_.get(); }

  // Every object made on this context, by the verbs object it wraps: to turn verbs objects named
  // by events back into ibv_* objects, and to destroy what a program leaves behind when it closes
  // the context (the kernel does that for a hardware NIC; perftest relies on it).
  // Destruction order: a parent domain before the PD it contains, a thread domain after the
  // parent domains that name it.
  // An XRC domain after the XRC SRQs and target QPs in it.
  enum class Kind : uint8_t {
    kQp,
    kAh,
    kSrq,
    kXrcd,
    kMw,
    kMr,
    kDm,
    kCq,
    kParentDomain,
    kPd,
    kTd,
    kChannel
  };
  void add(const void* impl, void* abi_object, Kind kind);
  void remove(const void* impl);
  void* lookup(const void* impl) const;
  // Destroys every object still registered, children first (ibv_close_device).
  void destroy_all();

 private:
  ContextState() = default;
  ~ContextState();

  int open_error_ = 0;
  std::atomic<bool> open_error_reported_{false};
  const DeviceConfig* config_ = nullptr;
  int idle_fd_ = -1;  // the async fd of a query-only context: never readable
  int cmd_fd_ = -1;
  std::shared_ptr<Runtime> runtime_;
  std::unique_ptr<verbs::Context> vctx_;
  mutable std::mutex mu_;
  struct Entry {
    void* abi;
    Kind kind;
  };
  std::unordered_map<const void*, Entry> objects_;
};

}  // namespace uroce::abi
