// Stand-in libefa.so.1: perftest calls it only for Amazon EFA devices (vendor id 0x1d0f). Every
// entry point answers as rdma-core 44 does for a device that is not EFA: int calls return
// EOPNOTSUPP, pointer calls return NULL with errno EOPNOTSUPP.
#include <infiniband/efadv.h>

#include <cstdint>

#include "api/stubs/stub_common.h"

using uroce::stubs::fail_errno_value;
using uroce::stubs::fail_ptr;

UROCE_STUB_EXPORT efadv_cq* efadv_cq_from_ibv_cq_ex(ibv_cq_ex*) {
  return fail_ptr<efadv_cq>();
}
UROCE_STUB_EXPORT ibv_cq_ex* efadv_create_cq(ibv_context*, ibv_cq_init_attr_ex*,
                                             efadv_cq_init_attr*, uint32_t) {
  return fail_ptr<ibv_cq_ex>();
}
UROCE_STUB_EXPORT ibv_qp* efadv_create_driver_qp(ibv_pd*, ibv_qp_init_attr*, uint32_t) {
  return fail_ptr<ibv_qp>();
}
UROCE_STUB_EXPORT ibv_qp* efadv_create_qp_ex(ibv_context*, ibv_qp_init_attr_ex*,
                                             efadv_qp_init_attr*, uint32_t) {
  return fail_ptr<ibv_qp>();
}
UROCE_STUB_EXPORT int efadv_query_ah(ibv_ah*, efadv_ah_attr*, uint32_t) {
  return fail_errno_value();
}
UROCE_STUB_EXPORT int efadv_query_device(ibv_context*, efadv_device_attr*, uint32_t) {
  return fail_errno_value();
}
