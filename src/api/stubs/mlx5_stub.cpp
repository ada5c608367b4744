// Stand-in libmlx5.so.1. perftest links it and calls it only for Mellanox devices (vendor id
// 0x02c9), which uroce never claims to be: mlx5dv_is_supported-style probes see "not supported".
#include <cstddef>
#include <cstdint>

#include "api/stubs/stub_common.h"

using uroce::stubs::fail_errno_value;
using uroce::stubs::fail_ptr;

UROCE_STUB_EXPORT int mlx5dv_query_device(void*, void*) {
  return fail_errno_value();
}
UROCE_STUB_EXPORT int mlx5dv_init_obj(void*, uint64_t) {
  return fail_errno_value();
}
UROCE_STUB_EXPORT void* mlx5dv_create_qp(void*, void*, void*) {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT int mlx5dv_devx_general_cmd(void*, const void*, size_t, void*, size_t) {
  return fail_errno_value();
}
UROCE_STUB_EXPORT void* mlx5dv_open_device(void*, void*) {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT void* mlx5dv_create_mkey(void*) {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT int mlx5dv_destroy_mkey(void*) {
  return fail_errno_value();
}
UROCE_STUB_EXPORT void* mlx5dv_qp_ex_from_ibv_qp_ex(void*) {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT int mlx5dv_crypto_login(void*, void*) {
  return fail_errno_value();
}
UROCE_STUB_EXPORT void* mlx5dv_dek_create(void*, void*) {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT int mlx5dv_dek_destroy(void*) {
  return fail_errno_value();
}
