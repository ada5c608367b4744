// Extension point: a connection manager replaces this stand-in (docs/architecture.md says where
// the MAD codec, the GSI QP and the CM state machine go).
// Stand-in librdmacm.so.1. Connection management (rdma_cm, perftest -R / -z) is not supported
// by uroce yet: every call fails with EOPNOTSUPP, so tools report a clean error instead of
// failing to start because the real librdmacm cannot bind to the drop-in libibverbs.
#include <cstdint>

#include "api/stubs/stub_common.h"

using uroce::stubs::fail_int;
using uroce::stubs::fail_ptr;

UROCE_STUB_EXPORT int rdma_accept(void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_ack_cm_event(void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_bind_addr(void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_connect(void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT void* rdma_create_event_channel() {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT void rdma_destroy_event_channel(void*) {}
UROCE_STUB_EXPORT int rdma_create_id(void*, void**, void*, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_destroy_id(void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_create_qp(void*, void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_create_qp_ex(void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT void rdma_destroy_qp(void*) {}
UROCE_STUB_EXPORT int rdma_disconnect(void*) {
  return fail_int();
}
UROCE_STUB_EXPORT const char* rdma_event_str(int) {
  return "UNSUPPORTED";
}
UROCE_STUB_EXPORT void rdma_freeaddrinfo(void*) {}
UROCE_STUB_EXPORT int rdma_get_cm_event(void*, void**) {
  return fail_int();
}
UROCE_STUB_EXPORT uint16_t rdma_get_src_port(void*) {
  return 0;
}
UROCE_STUB_EXPORT uint16_t rdma_get_dst_port(void*) {
  return 0;
}
UROCE_STUB_EXPORT int rdma_getaddrinfo(const char*, const char*, const void*, void**) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_listen(void*, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_reject(void*, const void*, uint8_t) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_resolve_addr(void*, void*, void*, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_resolve_route(void*, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_set_option(void*, int, int, void*, unsigned long) {
  return fail_int();
}
UROCE_STUB_EXPORT void** rdma_get_devices(int* num) {
  if (num) *num = 0;
  return fail_ptr<void*>();
}
UROCE_STUB_EXPORT void rdma_free_devices(void**) {}
UROCE_STUB_EXPORT void* rdma_get_local_addr(void*) {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT void* rdma_get_peer_addr(void*) {
  return fail_ptr<void>();
}
UROCE_STUB_EXPORT int rdma_init_qp_attr(void*, void*, int*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_notify(void*, int) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_join_multicast(void*, void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_leave_multicast(void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_migrate_id(void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT int rdma_create_ep(void**, void*, void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT void rdma_destroy_ep(void*) {}
UROCE_STUB_EXPORT int rdma_create_srq(void*, void*, void*) {
  return fail_int();
}
UROCE_STUB_EXPORT void rdma_destroy_srq(void*) {}
