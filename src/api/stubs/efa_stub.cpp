// Stand-in libefa.so.1: perftest calls it only for Amazon EFA devices (vendor id 0x1d0f).
#include <cstddef>
#include <cstdint>

#include "api/stubs/stub_common.h"

using uroce::stubs::fail_errno_value;
using uroce::stubs::fail_ptr;

UROCE_STUB_EXPORT void* efadv_create_driver_qp(void*, void*, uint32_t) {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT void* efadv_create_qp_ex(void*, void*, void*, uint32_t) {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT int efadv_query_device(void*, void*, uint32_t) {
  return fail_errno_value();
}
