// ECE and multicast through the drop-in librdmacm (docs/cm.md), in one process on one device:
// rdma_set_local_ece / rdma_get_remote_ece behave as rdma-core's librdmacm on a device without
// ECE (the options are checked and kept, no peer reports any), and rdma_join_multicast /
// rdma_leave_multicast fail with EOPNOTSUPP (uroce's devices do not join multicast groups).
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #cond, errno); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

int main(int argc, char** argv) {
  CHECK(argc == 2);  // the device's IPv4 address
  struct rdma_event_channel* channel = rdma_create_event_channel();
  CHECK(channel != NULL);
  struct rdma_cm_id* id = NULL;
  CHECK(rdma_create_id(channel, &id, NULL, RDMA_PS_UDP) == 0);
  struct sockaddr_in addr = {.sin_family = AF_INET};
  CHECK(inet_pton(AF_INET, argv[1], &addr.sin_addr) == 1);
  CHECK(rdma_bind_addr(id, (struct sockaddr*)&addr) == 0);

  // rdma_set_local_ece: a vendor ID, no comp_mask, an id without a QP.
  struct ibv_ece ece = {0};
  errno = 0;
  CHECK(rdma_set_local_ece(id, &ece) == -1 && errno == EINVAL);
  ece.vendor_id = 0x15b3;
  ece.options = 5;
  ece.comp_mask = 1;
  errno = 0;
  CHECK(rdma_set_local_ece(id, &ece) == -1 && errno == EINVAL);
  ece.comp_mask = 0;
  CHECK(rdma_set_local_ece(id, &ece) == 0);
  errno = 0;
  CHECK(rdma_set_local_ece(id, NULL) == -1 && errno == EINVAL);
  // No peer reports ECE: vendor ID 0, no options.
  struct ibv_ece remote;
  memset(&remote, 0xff, sizeof remote);
  CHECK(rdma_get_remote_ece(id, &remote) == 0);
  CHECK(remote.vendor_id == 0 && remote.options == 0 && remote.comp_mask == 0);
  errno = 0;
  CHECK(rdma_get_remote_ece(id, NULL) == -1 && errno == EINVAL);

  // With a QP on the id its provider's ECE would apply: both calls refuse (as rdma-core).
  struct ibv_qp_init_attr qp_attr = {.cap = {1, 1, 1, 1, 0}, .qp_type = IBV_QPT_UD};
  CHECK(rdma_create_qp(id, NULL, &qp_attr) == 0);
  errno = 0;
  CHECK(rdma_set_local_ece(id, &ece) == -1 && errno == EINVAL);
  errno = 0;
  CHECK(rdma_get_remote_ece(id, &remote) == -1 && errno == EINVAL);

  // Multicast: not built; a clear EOPNOTSUPP, no event.
  struct sockaddr_in group = {.sin_family = AF_INET};
  CHECK(inet_pton(AF_INET, "239.1.1.1", &group.sin_addr) == 1);
  errno = 0;
  CHECK(rdma_join_multicast(id, (struct sockaddr*)&group, NULL) == -1 && errno == EOPNOTSUPP);
  errno = 0;
  CHECK(rdma_leave_multicast(id, (struct sockaddr*)&group) == -1 && errno == EOPNOTSUPP);

  rdma_destroy_qp(id);
  CHECK(rdma_destroy_id(id) == 0);
  rdma_destroy_event_channel(channel);
  puts("PASS");
  return 0;
}
