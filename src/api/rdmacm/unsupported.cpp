// The librdmacm calls uroce does not implement yet (docs/cm.md lists them): multicast. Each fails
// with -1 and errno EOPNOTSUPP, as the stand-in this library replaced did, so a program reports a
// clean error.
#if __has_include(<rdma/rdma_cma.h>)
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#else
// Without librdmacm-dev: the same C types, declared here (the library's ABI does not depend on
// the layouts, which this file never reads).
#include <infiniband/verbs.h>
#include <linux/types.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
struct rdma_addrinfo;
struct rdma_cm_event;
struct rdma_cm_id;
struct rdma_cm_join_mc_attr_ex;
struct rdma_conn_param;
struct rdma_event_channel;
enum rdma_cm_event_type : unsigned {};
enum rdma_port_space : unsigned {};
#endif

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "api/stubs/stub_common.h"

using uroce::stubs::fail_int;

UROCE_STUB_EXPORT int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_leave_multicast(rdma_cm_id*, sockaddr*) {
  return fail_int();
}
