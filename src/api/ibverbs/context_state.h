#pragma once
// Per-context state behind ibv_context: the async event pipe and the uroce device runtime.
#include <atomic>
#include <cstdint>

#include "api/ibverbs/abi.h"

namespace uroce::abi {

class ContextState {
 public:
  // Null and *err set on failure.
  static ContextState* create(Context* ctx, int* err);
  static void destroy(ContextState* s);

  int cmd_fd() const { return -1; }  // no kernel command channel
  int async_read_fd() const { return async_fds_[0]; }
  // Nonblocking; false (and counted) if the pipe is full.
  bool post_async(const ibv_async_event& event);
  uint64_t async_dropped() const { return async_dropped_.load(); }

 private:
  ContextState() = default;
  ~ContextState();

  Context* ctx_ = nullptr;
  int async_fds_[2] = {-1, -1};
  std::atomic<uint64_t> async_dropped_{0};
};

}  // namespace uroce::abi
