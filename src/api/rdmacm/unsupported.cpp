// The librdmacm calls uroce does not implement yet (docs/cm.md lists them): rsockets and
// multicast. Each fails with -1 (NULL for pointers)
// and errno EOPNOTSUPP, as the stand-in this library replaced did, so a program reports a clean
// error.
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
using uroce::stubs::fail_minus_one;
using uroce::stubs::fail_ptr;

UROCE_STUB_EXPORT int raccept(int, sockaddr*, socklen_t*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rbind(int, const sockaddr*, socklen_t) {
  return fail_int();
}
UROCE_STUB_EXPORT int rclose(int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rconnect(int, const sockaddr*, socklen_t) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_leave_multicast(rdma_cm_id*, sockaddr*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rfcntl(int, int, ...) {
  return fail_int();
}
UROCE_STUB_EXPORT int rgetpeername(int, sockaddr*, socklen_t*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rgetsockname(int, sockaddr*, socklen_t*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rgetsockopt(int, int, int, void*, socklen_t*) {
  return fail_int();
}
UROCE_STUB_EXPORT off_t riomap(int, void*, size_t, int, int, off_t) {
  return fail_minus_one<off_t>();
}
UROCE_STUB_EXPORT int riounmap(int, void*, size_t) {
  return fail_int();
}
UROCE_STUB_EXPORT size_t riowrite(int, const void*, size_t, off_t, int) {
  return fail_minus_one<size_t>();
}
UROCE_STUB_EXPORT int rlisten(int, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rpoll(pollfd*, nfds_t, int) {
  return fail_int();
}
UROCE_STUB_EXPORT ssize_t rread(int, void*, size_t) {
  return fail_minus_one<ssize_t>();
}
UROCE_STUB_EXPORT ssize_t rreadv(int, const iovec*, int) {
  return fail_minus_one<ssize_t>();
}
UROCE_STUB_EXPORT ssize_t rrecv(int, void*, size_t, int) {
  return fail_minus_one<ssize_t>();
}
UROCE_STUB_EXPORT ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) {
  return fail_minus_one<ssize_t>();
}
UROCE_STUB_EXPORT ssize_t rrecvmsg(int, msghdr*, int) {
  return fail_minus_one<ssize_t>();
}
UROCE_STUB_EXPORT int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) {
  return fail_int();
}
UROCE_STUB_EXPORT ssize_t rsend(int, const void*, size_t, int) {
  return fail_minus_one<ssize_t>();
}
UROCE_STUB_EXPORT ssize_t rsendmsg(int, const msghdr*, int) {
  return fail_minus_one<ssize_t>();
}
UROCE_STUB_EXPORT ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return fail_minus_one<ssize_t>();
}
UROCE_STUB_EXPORT int rsetsockopt(int, int, int, const void*, socklen_t) {
  return fail_int();
}
UROCE_STUB_EXPORT int rshutdown(int, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rsocket(int, int, int) {
  return fail_int();
}
UROCE_STUB_EXPORT ssize_t rwrite(int, const void*, size_t) {
  return fail_minus_one<ssize_t>();
}
UROCE_STUB_EXPORT ssize_t rwritev(int, const iovec*, int) {
  return fail_minus_one<ssize_t>();
}
