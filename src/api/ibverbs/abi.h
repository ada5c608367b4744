#pragma once
// Internal layout of the objects the drop-in libibverbs hands to programs. Each public rdma-core
// structure (built from Debian's libibverbs-dev headers) is the first member of a small
// standard-layout wrapper, so a pointer the program passes back converts to the wrapper with
// from(); C++ state lives behind a pointer in the wrapper.
//
// Nothing here is exported: the version script (libibverbs.map) exports only ibv_* entry points.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <type_traits>

#include "api/ibverbs/config.h"
#include "verbs/attrs.h"
#include "verbs/event.h"

// Marks an exported entry point. Names and version nodes come from libibverbs.map.
#define UROCE_IBV_EXPORT extern "C" __attribute__((visibility("default")))

namespace uroce::abi {

// What uroce reports through ibv_query_device / ibv_query_port. One place, so the answers and
// the checks in create_* agree.
struct Limits {
  static constexpr int kMaxQp = 1024;
  static constexpr int kMaxQpWr = 16384;
  static constexpr int kMaxSge = 16;  // transport::kMaxSge
  static constexpr int kMaxCq = 1024;
  // As rxe (RXE_MAX_CQE); a CQ's storage grows as it fills (verbs/cq.h).
  static constexpr int kMaxCqe = 1 << 20;
  static constexpr int kMaxMr = 4096;
  static constexpr int kMaxMw = 4096;
  static constexpr int kMaxPd = 1024;
  static constexpr int kMaxRdAtom = 16;
  static constexpr int kMaxSrq = 1024;
  static constexpr int kMaxSrqWr = 16384;
  static constexpr int kMaxAh = 4096;
  static constexpr int kMaxInline = 256;
  // Multicast: groups, QPs per group, attachments in all (verbs::DeviceAttr).
  static constexpr int kMaxMcastGrp = 32;
  static constexpr int kMaxMcastQpAttach = 16;
  static constexpr int kMaxTotalMcastQpAttach = 128;
  static constexpr uint64_t kMaxDmSize = 256 * 1024;        // ibv_alloc_dm, per device
  static constexpr uint32_t kMaxMsgSize = 0x80000000u;      // 2^31, IBA 9.4 (o9-6)
  static constexpr int kGidTableLen = verbs::kGidTableLen;  // 0 RoCEv2, 1 RoCE v1 (attrs.h)
  static constexpr int kPkeyTableLen = 1;
  static constexpr uint16_t kDefaultPkey = 0xffff;
};

// A device from the configuration. Lives until the process exits (contexts may outlive the list
// that named them), and the registry holding them is bounded (device.cpp).
struct Device {
  ibv_device dev;  // first: ibv_device* <-> Device*
  DeviceConfig* config;
  __be64 guid;
  ibv_mtu active_mtu;
};
static_assert(std::is_standard_layout_v<Device>);

struct ContextState;  // device.cpp
struct Context {
  verbs_context vctx;  // first; its last member is the ibv_context programs see
  Device* device;
  ContextState* state;
};
static_assert(std::is_standard_layout_v<Context>);

struct CompChannel {
  ibv_comp_channel channel;
  verbs::CompletionChannel* impl;
};
static_assert(std::is_standard_layout_v<CompChannel>);

inline Device* from(ibv_device* d) {
  return reinterpret_cast<Device*>(d);
}
inline Context* from(ibv_context* c) {
  verbs_context* v = verbs_get_ctx(c);
  return v ? reinterpret_cast<Context*>(v) : nullptr;
}
// For contexts this library made (abi_compat is always set): no check, never null.
inline Context* ctx_of(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<uint8_t*>(c) -
                                    offsetof(verbs_context, context));
}
inline CompChannel* from(ibv_comp_channel* c) {
  return reinterpret_cast<CompChannel*>(c);
}

// Sets errno and returns null: how rdma-core reports failure from a pointer-returning verb.
template <typename T = void>
T* fail(int err) {
  errno = err;
  return nullptr;
}

// device.cpp
void fill_device_attr(const Device& d, ibv_device_attr* attr);
void fill_port_attr(const Device& d, ibv_port_attr* attr);
// Installs the verbs_context and ibv_context_ops entry points (objects.cpp).
void install_ops(verbs_context* vctx);
// memory.cpp: ibv_advise_mr and device memory; the ODP caps and max_dm_size of query_device_ex.
void install_memory_ops(verbs_context* vctx);
void fill_memory_caps(ibv_device_attr_ex* attr);

}  // namespace uroce::abi
