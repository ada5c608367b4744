// Extension point: a connection manager replaces this stand-in (docs/architecture.md says where
// the MAD codec, the GSI QP and the CM state machine go).
// Stand-in librdmacm.so.1. Connection management (rdma_cm, perftest -R / -z) and rsockets are
// not supported by uroce yet: every call fails (-1, or NULL for pointers, with errno EOPNOTSUPP;
// rdma_create_event_channel ENODEV), so tools report a clean error instead of failing to start
// because the real librdmacm cannot bind to the drop-in libibverbs.
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
UROCE_STUB_EXPORT int rdma_accept(rdma_cm_id*, rdma_conn_param*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_ack_cm_event(rdma_cm_event*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_bind_addr(rdma_cm_id*, sockaddr*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_connect(rdma_cm_id*, rdma_conn_param*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_create_ep(rdma_cm_id**, rdma_addrinfo*, ibv_pd*, ibv_qp_init_attr*) {
  return fail_int();
}
// ENODEV, as the real librdmacm answers on a host without a device it drives: UCX (1.13) opens
// its rdmacm connection manager at every start and logs an ERROR for any other errno.
UROCE_STUB_EXPORT rdma_event_channel* rdma_create_event_channel() {
  errno = ENODEV;
  return nullptr;
}
UROCE_STUB_EXPORT int rdma_create_id(rdma_event_channel*, rdma_cm_id**, void*, rdma_port_space) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_create_qp(rdma_cm_id*, ibv_pd*, ibv_qp_init_attr*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_create_qp_ex(rdma_cm_id*, ibv_qp_init_attr_ex*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_create_srq(rdma_cm_id*, ibv_pd*, ibv_srq_init_attr*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_create_srq_ex(rdma_cm_id*, ibv_srq_init_attr_ex*) {
  return fail_int();
}
UROCE_STUB_EXPORT void rdma_destroy_ep(rdma_cm_id*) {}
UROCE_STUB_EXPORT void rdma_destroy_event_channel(rdma_event_channel*) {}
UROCE_STUB_EXPORT int rdma_destroy_id(rdma_cm_id*) {
  return fail_int();
}
UROCE_STUB_EXPORT void rdma_destroy_qp(rdma_cm_id*) {}
UROCE_STUB_EXPORT void rdma_destroy_srq(rdma_cm_id*) {}
UROCE_STUB_EXPORT int rdma_disconnect(rdma_cm_id*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_establish(rdma_cm_id*) {
  return fail_int();
}
UROCE_STUB_EXPORT const char* rdma_event_str(rdma_cm_event_type) {
  return "UNSUPPORTED";
}
UROCE_STUB_EXPORT void rdma_free_devices(ibv_context**) {}
UROCE_STUB_EXPORT void rdma_freeaddrinfo(rdma_addrinfo*) {}
UROCE_STUB_EXPORT int rdma_get_cm_event(rdma_event_channel*, rdma_cm_event**) {
  return fail_int();
}
UROCE_STUB_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  if (num_devices) *num_devices = 0;
  return fail_ptr<ibv_context*>();
}
UROCE_STUB_EXPORT __be16 rdma_get_dst_port(rdma_cm_id*) {
  return 0;
}
UROCE_STUB_EXPORT int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_get_request(rdma_cm_id*, rdma_cm_id**) {
  return fail_int();
}
UROCE_STUB_EXPORT __be16 rdma_get_src_port(rdma_cm_id*) {
  return 0;
}
UROCE_STUB_EXPORT int rdma_getaddrinfo(const char*, const char*, const rdma_addrinfo*,
                                       rdma_addrinfo**) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_init_qp_attr(rdma_cm_id*, ibv_qp_attr*, int*) {
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
UROCE_STUB_EXPORT int rdma_listen(rdma_cm_id*, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_migrate_id(rdma_cm_id*, rdma_event_channel*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_notify(rdma_cm_id*, ibv_event_type) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_reject(rdma_cm_id*, const void*, uint8_t) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_reject_ece(rdma_cm_id*, const void*, uint8_t) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_resolve_addr(rdma_cm_id*, sockaddr*, sockaddr*, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_resolve_route(rdma_cm_id*, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_set_option(rdma_cm_id*, int, int, void*, size_t) {
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
