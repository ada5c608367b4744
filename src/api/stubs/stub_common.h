#pragma once
// Helpers for the stand-in provider libraries: every entry point fails the way rdma-core does
// for a device a provider does not drive (errno EOPNOTSUPP, NULL or -1), and never crashes.
#include <cerrno>

#define UROCE_STUB_EXPORT extern "C" __attribute__((visibility("default")))

namespace uroce::stubs {
inline int fail_int() {
  errno = EOPNOTSUPP;
  return -1;
}
// Verbs-style calls return the error number instead of setting errno.
inline int fail_errno_value() {
  return EOPNOTSUPP;
}
template <typename T>
T* fail_ptr() {
  errno = EOPNOTSUPP;
  return nullptr;
}
}  // namespace uroce::stubs
