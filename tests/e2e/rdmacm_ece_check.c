// ECE and multicast through the drop-in librdmacm (docs/cm.md), in one process on one device:
// rdma_set_local_ece / rdma_get_remote_ece behave as rdma-core's librdmacm (the arguments
// checked; an id with a QP refuses both); ECE on the wire: a connection from this device to itself
// between two ids without QPs (as a program that manages its own QPs runs rdma-core's ECE
// handshake) carries the active side's vendor ID and options in the REQ and the passive side's
// answer in the REP, and rdma_reject_ece is REJECTED with status 35; rdma_join_multicast /
// rdma_leave_multicast on a UD id: the join event, a datagram to the group that comes back to
// the attached QP, the errors, the device's multicast limits.
#include <arpa/inet.h>
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ECE_PORT 7471

#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "FAIL %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #cond, errno); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

static struct rdma_cm_event* next_event(struct rdma_event_channel* channel,
                                        enum rdma_cm_event_type want) {
  struct rdma_cm_event* event = NULL;
  CHECK(rdma_get_cm_event(channel, &event) == 0);
  if (event->event != want)
    fprintf(stderr, "event %s (status %d), expected %s\n", rdma_event_str(event->event),
            event->status, rdma_event_str(want));
  CHECK(event->event == want);
  return event;
}

// Connects an active id to the listener on this very device (ids without QPs: the QP numbers are
// the program's) and returns the passive side's new id, its CONNECT_REQUEST acknowledged.
static struct rdma_cm_id* connect_to_self(struct rdma_event_channel* channel,
                                          struct rdma_cm_id* active,
                                          struct sockaddr_in* listen_addr,
                                          const struct ibv_ece* local) {
  CHECK(rdma_resolve_addr(active, NULL, (struct sockaddr*)listen_addr, 2000) == 0);
  rdma_ack_cm_event(next_event(channel, RDMA_CM_EVENT_ADDR_RESOLVED));
  CHECK(rdma_resolve_route(active, 2000) == 0);
  rdma_ack_cm_event(next_event(channel, RDMA_CM_EVENT_ROUTE_RESOLVED));
  if (local) CHECK(rdma_set_local_ece(active, (struct ibv_ece*)local) == 0);
  struct rdma_conn_param param = {.qp_num = 0x1234, .responder_resources = 1, .initiator_depth = 1};
  CHECK(rdma_connect(active, &param) == 0);
  struct rdma_cm_event* request = next_event(channel, RDMA_CM_EVENT_CONNECT_REQUEST);
  struct rdma_cm_id* passive = request->id;
  CHECK(request->param.conn.qp_num == 0x1234);
  rdma_ack_cm_event(request);
  return passive;
}

static void ece_on_the_wire(struct rdma_event_channel* channel, const char* address) {
  struct rdma_cm_id *listener = NULL, *active = NULL;
  CHECK(rdma_create_id(channel, &listener, NULL, RDMA_PS_TCP) == 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(ECE_PORT)};
  CHECK(inet_pton(AF_INET, address, &addr.sin_addr) == 1);
  CHECK(rdma_bind_addr(listener, (struct sockaddr*)&addr) == 0);
  CHECK(rdma_listen(listener, 4) == 0);

  // The REQ carries the active side's ECE; the passive side answers with the vendor ID echoed and
  // its own options (as rdma-core's rdma_accept), which the active side reads after the REP.
  CHECK(rdma_create_id(channel, &active, NULL, RDMA_PS_TCP) == 0);
  const struct ibv_ece mine = {.vendor_id = 0x15b3, .options = 0x10000007};
  struct rdma_cm_id* passive = connect_to_self(channel, active, &addr, &mine);
  struct ibv_ece seen;
  memset(&seen, 0xff, sizeof seen);
  CHECK(rdma_get_remote_ece(passive, &seen) == 0);
  CHECK(seen.vendor_id == 0x15b3 && seen.options == 0x10000007 && seen.comp_mask == 0);
  const struct ibv_ece answer = {.vendor_id = 0x15b3, .options = 0x5};
  CHECK(rdma_set_local_ece(passive, (struct ibv_ece*)&answer) == 0);
  struct rdma_conn_param accept_param = {
      .qp_num = 0x5678, .responder_resources = 1, .initiator_depth = 1};
  CHECK(rdma_accept(passive, &accept_param) == 0);
  struct rdma_cm_event* response = next_event(channel, RDMA_CM_EVENT_CONNECT_RESPONSE);
  CHECK(response->id == active && response->param.conn.qp_num == 0x5678);
  rdma_ack_cm_event(response);
  memset(&seen, 0xff, sizeof seen);
  CHECK(rdma_get_remote_ece(active, &seen) == 0);
  CHECK(seen.vendor_id == 0x15b3 && seen.options == 0x5 && seen.comp_mask == 0);
  CHECK(rdma_establish(active) == 0);
  struct rdma_cm_event* established = next_event(channel, RDMA_CM_EVENT_ESTABLISHED);
  CHECK(established->id == passive);
  rdma_ack_cm_event(established);
  CHECK(rdma_disconnect(active) == 0);
  for (int i = 0; i < 2; ++i) rdma_ack_cm_event(next_event(channel, RDMA_CM_EVENT_DISCONNECTED));
  CHECK(rdma_destroy_id(active) == 0);
  CHECK(rdma_destroy_id(passive) == 0);

  // No ECE set: nothing on the wire, nothing reported.
  CHECK(rdma_create_id(channel, &active, NULL, RDMA_PS_TCP) == 0);
  passive = connect_to_self(channel, active, &addr, NULL);
  memset(&seen, 0xff, sizeof seen);
  CHECK(rdma_get_remote_ece(passive, &seen) == 0);
  CHECK(seen.vendor_id == 0 && seen.options == 0 && seen.comp_mask == 0);

  // The passive side refuses the options: REJ reason 35 (vendor option not supported).
  CHECK(rdma_reject_ece(passive, NULL, 0) == 0);
  struct rdma_cm_event* rejected = next_event(channel, RDMA_CM_EVENT_REJECTED);
  CHECK(rejected->id == active && rejected->status == 35);
  rdma_ack_cm_event(rejected);
  CHECK(rdma_destroy_id(active) == 0);
  CHECK(rdma_destroy_id(passive) == 0);
  CHECK(rdma_destroy_id(listener) == 0);
}

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
  // Nothing received yet: vendor ID 0, no options.
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

  // Multicast: the join is reported at once (a RoCE join needs no SA), with the group as the
  // kernel's rdma_cm maps an IPv4 group for RoCEv2, QPN 0xFFFFFF and RDMA_UDP_QKEY; the id's QP
  // is attached when the event is taken.
  struct sockaddr_in group = {.sin_family = AF_INET};
  CHECK(inet_pton(AF_INET, "239.1.1.1", &group.sin_addr) == 1);
  int join_context = 0;
  CHECK(rdma_join_multicast(id, (struct sockaddr*)&group, &join_context) == 0);
  errno = 0;
  CHECK(rdma_join_multicast(id, (struct sockaddr*)&group, NULL) == -1 && errno == EADDRINUSE);
  struct sockaddr_in unicast = {.sin_family = AF_INET};
  CHECK(inet_pton(AF_INET, "10.1.1.1", &unicast.sin_addr) == 1);
  errno = 0;
  CHECK(rdma_join_multicast(id, (struct sockaddr*)&unicast, NULL) == -1 && errno == EINVAL);
  struct sockaddr_in6 group6 = {.sin6_family = AF_INET6};
  CHECK(inet_pton(AF_INET6, "ff0e::1", &group6.sin6_addr) == 1);
  errno = 0;
  CHECK(rdma_join_multicast(id, (struct sockaddr*)&group6, NULL) == -1 && errno == EOPNOTSUPP);
  struct rdma_cm_join_mc_attr_ex ex = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS,
                                       .addr = (struct sockaddr*)&unicast};
  errno = 0;
  CHECK(rdma_join_multicast_ex(id, &ex, NULL) == -1 && errno == EINVAL);  // no join flags

  struct rdma_cm_event* event = NULL;
  CHECK(rdma_get_cm_event(channel, &event) == 0);
  CHECK(event->event == RDMA_CM_EVENT_MULTICAST_JOIN && event->status == 0 && event->id == id);
  const struct rdma_ud_param* ud = &event->param.ud;
  CHECK(ud->qp_num == 0xffffff && ud->qkey == RDMA_UDP_QKEY && ud->private_data == &join_context);
  static const uint8_t kMappedGroup[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 1, 1};
  CHECK(ud->ah_attr.is_global && memcmp(ud->ah_attr.grh.dgid.raw, kMappedGroup, 16) == 0);

  // A datagram to the group from this very QP comes back to it (it is attached), once.
  struct ibv_pd* pd = id->qp->pd;
  struct ibv_ah* ah = ibv_create_ah(pd, (struct ibv_ah_attr*)&ud->ah_attr);
  CHECK(ah != NULL);
  static uint8_t buf[2 * 128];
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  CHECK(mr != NULL);
  memcpy(buf + 128, "multicast to myself", 20);
  struct ibv_sge rsge = {(uintptr_t)buf, 128, mr->lkey},
                 ssge = {(uintptr_t)buf + 128, 20, mr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = &rsge, .num_sge = 1}, *bad_rwr;
  CHECK(ibv_post_recv(id->qp, &rwr, &bad_rwr) == 0);
  struct ibv_send_wr swr = {.wr_id = 2,
                            .sg_list = &ssge,
                            .num_sge = 1,
                            .opcode = IBV_WR_SEND,
                            .send_flags = IBV_SEND_SIGNALED},
                     *bad_swr;
  swr.wr.ud.ah = ah;
  swr.wr.ud.remote_qpn = ud->qp_num;
  swr.wr.ud.remote_qkey = ud->qkey;
  CHECK(ibv_post_send(id->qp, &swr, &bad_swr) == 0);
  int recvs = 0;
  struct ibv_wc wc;
  for (int i = 0; i < 5000 && recvs == 0; ++i) {
    while (ibv_poll_cq(id->send_cq, 1, &wc) == 1) CHECK(wc.status == IBV_WC_SUCCESS);
    while (ibv_poll_cq(id->recv_cq, 1, &wc) == 1) {
      CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == 40 + 20);
      // An IPv4 packet's header sits in the last 20 bytes of the GRH (as rxe writes it): the
      // destination address is the group's.
      CHECK((wc.wc_flags & IBV_WC_GRH) && memcmp(buf + 36, kMappedGroup + 12, 4) == 0);
      CHECK(memcmp(buf + 40, "multicast to myself", 20) == 0);
      ++recvs;
    }
    if (recvs == 0) usleep(1000);
  }
  CHECK(recvs == 1);
  rdma_ack_cm_event(event);

  // Leaving detaches the QP; a group not joined is EADDRNOTAVAIL.
  CHECK(rdma_leave_multicast(id, (struct sockaddr*)&group) == 0);
  errno = 0;
  CHECK(rdma_leave_multicast(id, (struct sockaddr*)&group) == -1 && errno == EADDRNOTAVAIL);
  union ibv_gid mgid;
  memcpy(mgid.raw, kMappedGroup, 16);
  CHECK(ibv_detach_mcast(id->qp, &mgid, 0) == EINVAL);  // not attached any more
  struct ibv_device_attr attr;
  CHECK(ibv_query_device(id->verbs, &attr) == 0);
  CHECK(attr.max_mcast_grp == 32 && attr.max_mcast_qp_attach == 16 &&
        attr.max_total_mcast_qp_attach == 128);
  CHECK(ibv_dereg_mr(mr) == 0);
  CHECK(ibv_destroy_ah(ah) == 0);

  rdma_destroy_qp(id);
  CHECK(rdma_destroy_id(id) == 0);
  ece_on_the_wire(channel, argv[1]);
  rdma_destroy_event_channel(channel);
  puts("PASS");
  return 0;
}
