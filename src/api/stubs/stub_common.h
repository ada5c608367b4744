#pragma once
// Helpers for the stand-in provider libraries: every entry point fails the way rdma-core does
// for a device a provider does not drive (EOPNOTSUPP, as a return value or in errno), and never
// crashes.
#include <cerrno>

#define UROCE_STUB_EXPORT extern "C" __attribute__((visibility("default")))

namespace uroce::stubs {
// librdmacm and rsocket style: -1 with errno.
inline int fail_int() {
  errno = EOPNOTSUPP;
  return -1;
}
// The same for the ssize_t / off_t / size_t calls (rsocket, mlx5dv_devx_get_event).
template <typename T>
T fail_minus_one() {
  errno = EOPNOTSUPP;
  return static_cast<T>(-1);
}
// Verbs-style calls (mlx5dv_*, efadv_* returning int) return the error number instead of -1.
// errno is set as well, for callers that print it whatever the convention.
inline int fail_errno_value() {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}
template <typename T>
T* fail_ptr() {
  errno = EOPNOTSUPP;
  return nullptr;
}
}  // namespace uroce::stubs
