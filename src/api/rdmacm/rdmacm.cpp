// The drop-in librdmacm.so.1 (docs/cm.md): rdma_cm ids over the connection manager of each uroce
// device, reached through the drop-in libibverbs' private uroce_private_cm. Event channels are
// semaphore eventfds, so a program can poll them, block on them or set them non-blocking.
//
// Locking: g_mu guards the library's tables (devices, ids' connection records, channel queues).
// The CM's event handler runs on the CM's event thread and takes g_mu. The CM's calls, made under
// g_mu, wait for a progress pass in flight (they send their MADs before returning); a pass never
// waits for g_mu. Verbs calls that wait for the pass (creating, modifying or destroying a QP) are
// made without g_mu all the same.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include "api/cm/cm_service.h"
#include "wire/mad.h"

#define UROCE_RDMACM_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" uroce::cm::CmService* uroce_private_cm(ibv_context* context);

namespace {

using uroce::Gid;
namespace cm = uroce::cm;
namespace wire = uroce::wire;

// Bounds: events queued on one channel (past it: dropped and counted, as the CM's own queue),
// and the private data rdma_cm leaves the application in each message.
constexpr size_t kMaxChannelEvents = 1024;
// Multicast groups one id may have joined at once (the device bounds attachments again:
// ibv_device_attr::max_mcast_grp and friends).
constexpr size_t kMaxJoinsPerId = 16;
// A multicast datagram's destination QPN (IBA 9.6.1.1), which MULTICAST_JOIN reports.
constexpr uint32_t kMulticastQpn = 0xffffff;
constexpr size_t kReqUserPrivate = wire::kReqPrivateBytes - wire::kCmaHeaderBytes;  // 56
constexpr uint8_t kDefaultAckTimeout = 14;  // QP local ACK timeout: 4.096 us * 2^14
constexpr uint8_t kMinRnrTimer = 12;
constexpr uint32_t kRdmaUdpQkey = 0x01234567;
// A CONNECT_RESPONSE the library turns into ESTABLISHED (or hands on when the id has no QP).
constexpr int kInternalConnectResponse = -1;

struct Channel;
struct Id;

struct DeviceEntry {
  ibv_context* ctx = nullptr;
  cm::CmService* cm = nullptr;
  sockaddr_storage addr{};
  Gid gid{};
  uint8_t mtu = IBV_MTU_1024;
  uint8_t max_responder_resources = 1;  // the device's max_qp_rd_atom
  uint8_t max_initiator_depth = 1;      // its max_qp_init_rd_atom
  // The device's protection domain, every id's `pd` once it has a device (as rdma-core's
  // ucma_get_device): rdma_create_qp's when the program passes none, and the one UCX's rdmacm
  // component creates its placeholder UD QPs on.
  ibv_pd* pd = nullptr;
  // The XRC domain XRC_RECV QPs and XRC SRQs get when the program names none (as rdma-core's
  // ucma_get_xrcd): opened on first use, guarded by g_mu.
  ibv_xrcd* xrcd = nullptr;
};

struct Pending {
  Id* id = nullptr;  // null: the id was destroyed; skipped
  Id* listen = nullptr;
  int type = 0;  // rdma_cm_event_type or kInternalConnectResponse
  int status = 0;
  std::vector<uint8_t> private_data;
  std::optional<wire::CmRep> rep;
  cm::Ece ece;      // kInternalConnectResponse: the REP's
  bool ud = false;  // an RDMA_PS_UDP id's ESTABLISHED: the SIDR_REP's QP and Q_Key
  uint32_t ud_qpn = 0, ud_qkey = 0;
  uint64_t join = 0;  // MULTICAST_JOIN: the Id::Join's serial (0: not a multicast event)
};

struct Channel {
  rdma_event_channel pub{};  // first: the program's pointer is this
  std::deque<Pending> queue;
  uint64_t dropped = 0;
  // Threads inside rdma_get_cm_event on this channel. rping and other programs destroy the
  // channel while a thread of theirs waits in it, and exit: with the kernel's rdma_cm that thread
  // sleeps on, as the channel's file outlives close() while a GET_EVENT is in it. So a channel
  // destroyed with readers in it stays (its fd open, its queue empty) until the last one leaves,
  // and a reader woken in a destroyed channel waits on.
  uint32_t readers = 0;
  bool destroyed = false;
};

struct Event {
  rdma_cm_event pub{};  // first
  std::vector<uint8_t> private_data;
};

enum class IdState : uint8_t {
  kIdle,
  kBound,
  kAddrResolved,
  kRouteResolved,
  kListening,
  kConnecting,
  kRequest,
  kAccepting,
  kConnected,
  kDisconnected
};

struct Id {
  rdma_cm_id pub{};  // first
  int device = -1;   // index in g_devices; -1 until bound or resolved
  Channel* channel = nullptr;
  bool sync = false;  // created without a channel: calls wait for their events
  IdState state = IdState::kIdle;
  bool bound = false;
  bool active = false;
  std::optional<cm::ConnId> conn;
  bool sidr = false;  // passive RDMA_PS_UDP id: `conn` is a SIDR_REQ, answered by accept/reject
  std::vector<std::pair<int, cm::ListenerId>> listeners;  // (device, listener)
  std::optional<wire::CmReq> req;                         // passive: the REQ being answered
  std::optional<wire::CmRep> rep;                         // active: the REP answered
  // Our starting PSN, chosen when the id is made (as the kernel's seq_num), so that
  // rdma_init_qp_attr gives a QP moved to RTS before rdma_accept or rdma_connect (an external QP,
  // pyverbs' test_rdmacm_async_traffic_external_qp) the PSN the REP or REQ will carry.
  uint32_t psn = 0;
  uint8_t responder_resources = 1, initiator_depth = 1, retry_count = 7, rnr_retry_count = 7;
  uint8_t tos = 0;
  uint8_t ack_timeout = kDefaultAckTimeout;
  bool own_cqs = false;
  ibv_sa_path_rec path{};
  // rdma_create_ep on a passive id: rdma_get_request gives each new id a QP like this.
  std::optional<ibv_qp_init_attr> ep_qp_attr;
  ibv_pd* ep_pd = nullptr;
  // Events handed to the program and not acked yet: rdma_destroy_id waits for them, as
  // rdma-core's does, so a thread still handling one never sees the id freed under it.
  uint32_t events_out = 0;  // guarded by g_mu
  // ECE (docs/cm.md, "ECE"): what rdma_connect/rdma_accept send (rdma_set_local_ece, or the QP's
  // provider's once rdma_create_qp made one: none from uroce's) and what the peer's REQ or REP
  // carried (rdma_get_remote_ece).
  ibv_ece local_ece{};
  ibv_ece remote_ece{};
  // Multicast groups joined (rdma_join_multicast), at most kMaxJoinsPerId; guarded by g_mu.
  struct Join {
    sockaddr_storage addr{};
    Gid gid{};  // ::ffff:a.b.c.d, as the kernel's rdma_cm maps an IPv4 group for RoCEv2
    void* context = nullptr;
    bool send_only = false;  // RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: the QP is not attached
    uint64_t serial = 0;
  };
  std::vector<Join> joins;
};

std::mutex g_mu;
std::condition_variable g_acked;  // an event was acked (Id::events_out)
bool g_initialized = false;
int g_init_error = 0;
std::vector<DeviceEntry> g_devices;
std::map<std::pair<int, cm::ConnId>, Id*> g_conns;
std::map<std::pair<int, cm::ListenerId>, Id*> g_listeners;
std::vector<Id*> g_ids;
std::vector<Channel*> g_channels;  // every live channel, to forget a destroyed id's events
std::mt19937 g_random{std::random_device{}()};
uint64_t g_join_serial = 0;  // guarded by g_mu

Id* from(rdma_cm_id* id) {
  return reinterpret_cast<Id*>(id);
}

int fail(int err) {
  errno = err;
  return -1;
}

// ---- addresses ------------------------------------------------------------------------------

socklen_t addr_len(const sockaddr* a) {
  return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t port_of(const sockaddr* a) {
  if (a->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
  if (a->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
  return 0;
}

void set_port(sockaddr* a, uint16_t port) {
  if (a->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
  if (a->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
}

bool is_wildcard(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (a->sa_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return true;
}

bool is_loopback(const sockaddr* a) {
  if (a->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return false;
}

// The RoCE GID of an IP address: IPv4 as ::ffff:a.b.c.d.
Gid gid_of(const sockaddr* a) {
  Gid g{};
  if (a->sa_family == AF_INET) {
    g[10] = g[11] = 0xff;
    std::memcpy(&g[12], &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, 4);
  } else if (a->sa_family == AF_INET6) {
    std::memcpy(g.data(), &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, 16);
  }
  return g;
}

bool same_ip(const sockaddr* a, const sockaddr* b) {
  return a->sa_family == b->sa_family && gid_of(a) == gid_of(b);
}

// The address of a GID: IPv4 for ::ffff:a.b.c.d.
sockaddr_storage addr_of(const Gid& g, uint16_t port) {
  sockaddr_storage s{};
  static constexpr uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(g.data(), kV4Prefix, 12) == 0) {
    auto* in = reinterpret_cast<sockaddr_in*>(&s);
    in->sin_family = AF_INET;
    std::memcpy(&in->sin_addr, &g[12], 4);
    in->sin_port = htons(port);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&s);
    in6->sin6_family = AF_INET6;
    std::memcpy(&in6->sin6_addr, g.data(), 16);
    in6->sin6_port = htons(port);
  }
  return s;
}

uint64_t service_id(const Id* id, uint16_t port) {
  return wire::rdma_service_id(static_cast<wire::RdmaPortSpace>(id->pub.ps & 0xff), port);
}

// ---- channels and events ----------------------------------------------------------------------

// With g_mu held.
Channel* new_channel() {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (fd < 0) return nullptr;
  auto* c = new Channel;
  c->pub.fd = fd;
  g_channels.push_back(c);
  return c;
}

// With g_mu held.
void delete_channel(Channel* c) {
  std::erase(g_channels, c);
  c->queue.clear();
  c->destroyed = true;
  if (c->readers > 0) return;  // the last reader to leave deletes it
  close(c->pub.fd);
  delete c;
}

// With g_mu held: the live channel the program's pointer names, or null for one it destroyed
// (its memory may be gone: the pointer is compared, never followed), as rdma-core's calls on the
// closed file of a destroyed channel fail with EBADF. rping's event thread makes such a call when
// it loses the race with its main thread, which destroys the channel and exits after the ack.
Channel* live_channel(rdma_event_channel* channel) {
  auto* c = reinterpret_cast<Channel*>(channel);
  return std::find(g_channels.begin(), g_channels.end(), c) != g_channels.end() ? c : nullptr;
}

// With g_mu held: a thread leaves rdma_get_cm_event.
void leave_channel(Channel* c) {
  if (--c->readers > 0 || !c->destroyed) return;
  close(c->pub.fd);
  delete c;
}

// With g_mu held.
void push(Channel* c, Pending p) {
  if (c->queue.size() >= kMaxChannelEvents) {
    ++c->dropped;
    return;
  }
  c->queue.push_back(std::move(p));
  uint64_t one = 1;
  if (write(c->pub.fd, &one, sizeof one) != sizeof one) c->queue.pop_back();
}

void forget_conn(Id* id) {
  if (id->conn && id->device >= 0) g_conns.erase({id->device, *id->conn});
  id->conn.reset();
}

// The handler of the CM `from` (on its event thread; see the locking note on top).
void on_cm_event(const cm::CmService* from, cm::CmEvent&& e) {
  std::lock_guard lock(g_mu);
  int dev = -1;
  for (size_t i = 0; i < g_devices.size(); ++i)
    if (g_devices[i].cm == from) dev = static_cast<int>(i);
  if (dev < 0) return;  // before init_devices published its table: nothing here to tell
  const bool sidr_request = e.type == cm::CmEventType::kSidrRequest;
  if (e.type == cm::CmEventType::kConnectRequest || sidr_request) {
    auto it = g_listeners.find({dev, e.listener});
    if (it == g_listeners.end() || (!e.req && !sidr_request)) return;  // stopped listening
    Id* listen = it->second;
    auto cma = wire::parse_cma_header(e.private_data);
    auto* child = new Id;
    child->psn = g_random() & 0xffffff;  // g_mu is held
    child->pub.verbs = g_devices[dev].ctx;
    child->pub.pd = g_devices[dev].pd;
    child->pub.context = listen->pub.context;
    child->pub.ps = listen->pub.ps;
    child->pub.port_num = 1;
    child->pub.qp_type = listen->pub.qp_type;
    child->device = dev;
    child->sync = listen->sync;
    child->channel = listen->sync ? new_channel() : listen->channel;
    if (child->channel == nullptr) {
      delete child;
      return;
    }
    child->pub.channel = &child->channel->pub;
    child->state = IdState::kRequest;
    child->conn = e.conn;
    child->sidr = sidr_request;
    if (e.req) child->req = *e.req;
    child->remote_ece = {e.ece.vendor_id, e.ece.options, 0};
    child->ep_qp_attr = listen->ep_qp_attr;
    child->ep_pd = listen->ep_pd;
    child->tos = listen->tos;
    sockaddr_storage src = g_devices[dev].addr;
    set_port(reinterpret_cast<sockaddr*>(&src), port_of(&listen->pub.route.addr.src_addr));
    std::memcpy(&child->pub.route.addr.src_storage, &src, sizeof src);
    sockaddr_storage dst = addr_of(e.peer, cma.ok() ? cma->src_port : 0);
    if (cma.ok() && cma->ip_version == 4) {
      auto* in = reinterpret_cast<sockaddr_in*>(&dst);
      in->sin_family = AF_INET;
      auto ip = cma->src_ipv4();
      std::memcpy(&in->sin_addr, ip.data(), 4);
    }
    std::memcpy(&child->pub.route.addr.dst_storage, &dst, sizeof dst);
    g_conns[{dev, e.conn}] = child;
    g_ids.push_back(child);
    Pending p;
    p.id = child;
    p.listen = listen;
    p.type = RDMA_CM_EVENT_CONNECT_REQUEST;
    if (e.private_data.size() > wire::kCmaHeaderBytes)
      p.private_data.assign(e.private_data.begin() + wire::kCmaHeaderBytes, e.private_data.end());
    push(listen->channel, std::move(p));
    return;
  }
  auto it = g_conns.find({dev, e.conn});
  if (it == g_conns.end()) return;
  Id* id = it->second;
  Pending p;
  p.id = id;
  p.status = 0;
  switch (e.type) {
    case cm::CmEventType::kConnectResponse:
      p.type = kInternalConnectResponse;
      p.rep = e.rep;
      p.ece = e.ece;
      p.private_data = std::move(e.private_data);
      break;
    case cm::CmEventType::kEstablished:
      if (id->active) return;  // reported when the library sent the RTU
      p.type = RDMA_CM_EVENT_ESTABLISHED;
      break;
    case cm::CmEventType::kRejected:
      p.type = RDMA_CM_EVENT_REJECTED;
      p.status = e.status;
      p.private_data = std::move(e.private_data);
      forget_conn(id);
      break;
    case cm::CmEventType::kUnreachable:
      p.type = RDMA_CM_EVENT_UNREACHABLE;
      p.status = -ETIMEDOUT;
      forget_conn(id);
      break;
    case cm::CmEventType::kDisconnected:
      p.type = RDMA_CM_EVENT_DISCONNECTED;
      break;
    case cm::CmEventType::kTimewaitExit:
      p.type = RDMA_CM_EVENT_TIMEWAIT_EXIT;
      forget_conn(id);
      break;
    case cm::CmEventType::kSidrResolved:
      // As the kernel: a valid SIDR_REP is ESTABLISHED with the remote QP, anything else
      // UNREACHABLE with the SIDR status.
      forget_conn(id);
      if (e.status != 0) {
        p.type = RDMA_CM_EVENT_UNREACHABLE;
        p.status = e.status;
        break;
      }
      p.type = RDMA_CM_EVENT_ESTABLISHED;
      p.ud = true;
      p.ud_qpn = e.qpn;
      p.ud_qkey = e.qkey;
      p.private_data = std::move(e.private_data);
      id->state = IdState::kConnected;
      break;
    default:
      return;
  }
  push(id->channel, std::move(p));
}

// A process that exits with connections up: each gets its DREQ (or REJ) before the CM goes with
// the process, as the kernel's CM would send it for a hardware NIC (on the wire when destroy()
// returns), and its listeners stop (later REQs get REJ 8). Then the CMs let go of on_cm_event:
// their threads run on through exit, past the destruction of this library's tables (registered
// before this handler, so destroyed after it returns).
void disconnect_all_at_exit() {
  {
    std::lock_guard lock(g_mu);
    for (Id* id : g_ids) {
      for (auto& [d, lid] : id->listeners) g_devices[d].cm->stop_listening(lid);
      id->listeners.clear();
      if (!id->conn || id->device < 0) continue;
      g_devices[id->device].cm->destroy(*id->conn);
      forget_conn(id);
    }
    g_listeners.clear();
  }
  // Waits for a handler running on a CM's event thread to return (CmPort::set_event_handler).
  for (DeviceEntry& d : g_devices) d.cm->set_event_handler({});
}

// ---- devices ----------------------------------------------------------------------------------

// Opens every uroce device once (as rdma-core's librdmacm does) and attaches to its CM.
int init_devices() {
  {
    std::lock_guard lock(g_mu);
    if (g_initialized) return g_init_error;
  }
  std::vector<DeviceEntry> found;
  int num = 0;
  ibv_device** list = ibv_get_device_list(&num);
  if (list == nullptr) return errno ? errno : ENODEV;
  for (int i = 0; i < num; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) continue;
    DeviceEntry d;
    d.ctx = ctx;
    d.cm = uroce_private_cm(ctx);
    ibv_gid gid;
    ibv_port_attr port;
    ibv_device_attr dev_attr;
    if (d.cm == nullptr || ibv_query_gid(ctx, 1, 0, &gid) || ibv_query_port(ctx, 1, &port) ||
        ibv_query_device(ctx, &dev_attr)) {
      ibv_close_device(ctx);  // its address is served by another process, or not this host's
      continue;
    }
    d.pd = ibv_alloc_pd(ctx);
    if (d.pd == nullptr) {
      ibv_close_device(ctx);
      continue;
    }
    std::memcpy(d.gid.data(), gid.raw, 16);
    d.addr = addr_of(d.gid, 0);
    d.mtu = static_cast<uint8_t>(port.active_mtu);
    d.max_responder_resources = static_cast<uint8_t>(std::clamp(dev_attr.max_qp_rd_atom, 1, 255));
    d.max_initiator_depth = static_cast<uint8_t>(std::clamp(dev_attr.max_qp_init_rd_atom, 1, 255));
    found.push_back(d);
  }
  ibv_free_device_list(list);
  // Before taking g_mu, which the handler takes on the CM's event thread (set_event_handler waits
  // for a running handler). The CMs are libibverbs' per device, so a thread that loses the race
  // below installs the same handlers again.
  for (DeviceEntry& d : found) {
    cm::CmService* cm = d.cm;
    cm->set_event_handler([cm](cm::CmEvent&& e) { on_cm_event(cm, std::move(e)); });
  }
  std::lock_guard lock(g_mu);
  if (g_initialized) {  // another thread got there first
    for (DeviceEntry& d : found) {
      ibv_dealloc_pd(d.pd);
      ibv_close_device(d.ctx);
    }
    return g_init_error;
  }
  g_devices = std::move(found);
  g_initialized = true;
  g_init_error = g_devices.empty() ? ENODEV : 0;
  std::atexit(disconnect_all_at_exit);
  return g_init_error;
}

// The device that owns `a`, or -1.
int device_owning(const sockaddr* a) {
  for (size_t i = 0; i < g_devices.size(); ++i)
    if (same_ip(reinterpret_cast<const sockaddr*>(&g_devices[i].addr), a))
      return static_cast<int>(i);
  return -1;
}

// The device to reach `dst` from: the one with the source address the kernel's routing table
// picks for it, else the first of the same family.
int device_for(const sockaddr* dst) {
  int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    sockaddr_storage probe{};
    std::memcpy(&probe, dst, addr_len(dst));
    set_port(reinterpret_cast<sockaddr*>(&probe), 4791);
    sockaddr_storage src{};
    socklen_t len = sizeof src;
    if (connect(fd, reinterpret_cast<sockaddr*>(&probe), addr_len(dst)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&src), &len) == 0) {
      close(fd);
      std::lock_guard lock(g_mu);
      int d = device_owning(reinterpret_cast<sockaddr*>(&src));
      if (d >= 0) return d;
    } else {
      close(fd);
    }
  }
  std::lock_guard lock(g_mu);
  if (int d = device_owning(dst); d >= 0) return d;
  for (size_t i = 0; i < g_devices.size(); ++i)
    if (g_devices[i].addr.ss_family == dst->sa_family) return static_cast<int>(i);
  return -1;
}

// With g_mu held: an unused port for `ps` (rdma_cm's ephemeral range is the kernel's).
uint16_t ephemeral_port(const Id* self) {
  std::uniform_int_distribution<int> pick(32768, 60999);
  for (int tries = 0; tries < 1000; ++tries) {
    uint16_t port = static_cast<uint16_t>(pick(g_random));
    bool used = false;
    for (const Id* o : g_ids)
      if (o != self && o->bound && o->pub.ps == self->pub.ps &&
          port_of(&o->pub.route.addr.src_addr) == port)
        used = true;
    if (!used) return port;
  }
  return 0;
}

// ---- QP attributes, as the kernel's rdma_cm computes them ---------------------------------------

int qp_attr_for(Id* id, ibv_qp_attr* attr, int* mask) {
  const ibv_qp_state want = attr->qp_state;
  std::memset(attr, 0, sizeof *attr);
  attr->qp_state = want;
  if (id->device < 0) return EINVAL;
  const bool ud = id->pub.qp_type == IBV_QPT_UD;
  switch (want) {
    case IBV_QPS_INIT:
      attr->pkey_index = 0;
      attr->port_num = 1;
      *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (ud) {
        attr->qkey = kRdmaUdpQkey;
        *mask |= IBV_QP_QKEY;
      } else {
        attr->qp_access_flags =
            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        *mask |= IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR: {
      if (ud) {
        *mask = IBV_QP_STATE;
        return 0;
      }
      uint32_t remote_qpn = 0, remote_psn = 0;
      uint8_t mtu = g_devices[id->device].mtu;
      Gid peer = gid_of(&id->pub.route.addr.dst_addr);
      uint8_t responder = id->responder_resources;
      if (id->req) {
        remote_qpn = id->req->local_qpn;
        remote_psn = id->req->starting_psn;
        mtu = std::min<uint8_t>(mtu, id->req->path_mtu ? id->req->path_mtu : mtu);
        std::copy(id->req->primary.local_gid.begin(), id->req->primary.local_gid.end(),
                  peer.begin());
      } else if (id->rep) {
        remote_qpn = id->rep->local_qpn;
        remote_psn = id->rep->starting_psn;
      } else {
        return EINVAL;  // not connected yet
      }
      attr->path_mtu = static_cast<ibv_mtu>(mtu);
      attr->dest_qp_num = remote_qpn;
      attr->rq_psn = remote_psn;
      attr->max_dest_rd_atomic = responder;
      attr->min_rnr_timer = kMinRnrTimer;
      attr->ah_attr.is_global = 1;
      std::memcpy(attr->ah_attr.grh.dgid.raw, peer.data(), 16);
      attr->ah_attr.grh.sgid_index = 0;
      attr->ah_attr.grh.hop_limit = 64;
      attr->ah_attr.grh.traffic_class = id->tos;
      attr->ah_attr.port_num = 1;
      attr->ah_attr.dlid = 0;
      *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      // An XRC initiator answers nothing: no responder attributes (Linux's qp_state_table).
      if (id->pub.qp_type != IBV_QPT_XRC_SEND)
        *mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      return 0;
    }
    case IBV_QPS_RTS:
      attr->sq_psn = id->psn;
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      if (ud) return 0;
      attr->timeout = id->ack_timeout;
      *mask |= IBV_QP_TIMEOUT;
      // An XRC target requests nothing: no requester attributes (Linux's qp_state_table).
      if (id->pub.qp_type == IBV_QPT_XRC_RECV) return 0;
      attr->retry_cnt = id->retry_count;
      attr->rnr_retry = id->rnr_retry_count;
      attr->max_rd_atomic = id->initiator_depth;
      *mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      return 0;
    default:
      return EINVAL;
  }
}

int modify_qp(Id* id, ibv_qp_state state) {
  if (id->pub.qp == nullptr) return 0;
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = state;
  if (state == IBV_QPS_ERR) {
    mask = IBV_QP_STATE;
  } else if (int err = qp_attr_for(id, &attr, &mask)) {
    return err;
  }
  return ibv_modify_qp(id->pub.qp, &attr, mask);
}

// ---- waiting (ids made without a channel) -------------------------------------------------------

// Waits for the id's next event; 0 when it is `expected`, else an errno like rdma-core's. As
// rdma-core's ucma_complete, the event stays in `id->event` (programs read the peer's private
// data there: rdma_xclient its XRC SRQ number) until the id's next wait or its destruction.
int wait_for(Id* id, rdma_cm_event_type expected) {
  if (id->pub.event) rdma_ack_cm_event(id->pub.event);
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(&id->channel->pub, &e)) return errno;
  const rdma_cm_event_type got = e->event;
  const int status = e->status;
  if (got == expected) return 0;
  if (got == RDMA_CM_EVENT_REJECTED) return ECONNREFUSED;
  if (got == RDMA_CM_EVENT_UNREACHABLE) return status < 0 ? -status : ETIMEDOUT;
  return EIO;
}

// rdma-core's check of a connection's RDMA READ depths: RDMA_MAX_RESP_RES and
// RDMA_MAX_INIT_DEPTH (255) mean the device's maximum; another value past it is EINVAL.
int resolve_depths(const Id* id, const rdma_conn_param& param, uint8_t* responder,
                   uint8_t* initiator) {
  const DeviceEntry& d = g_devices[id->device];
  if (param.responder_resources != RDMA_MAX_RESP_RES &&
      param.responder_resources > d.max_responder_resources)
    return EINVAL;
  if (param.initiator_depth != RDMA_MAX_INIT_DEPTH && param.initiator_depth > d.max_initiator_depth)
    return EINVAL;
  *responder = param.responder_resources == RDMA_MAX_RESP_RES ? d.max_responder_resources
                                                              : param.responder_resources;
  *initiator =
      param.initiator_depth == RDMA_MAX_INIT_DEPTH ? d.max_initiator_depth : param.initiator_depth;
  return 0;
}

uint32_t random_psn() {
  std::lock_guard lock(g_mu);
  return g_random() & 0xffffff;
}

}  // namespace

// ---- the API ----------------------------------------------------------------------------------

UROCE_RDMACM_EXPORT rdma_event_channel* rdma_create_event_channel() {
  if (int err = init_devices()) {
    errno = err;
    return nullptr;
  }
  std::lock_guard lock(g_mu);
  Channel* c = new_channel();
  if (c == nullptr) return nullptr;
  return &c->pub;
}

UROCE_RDMACM_EXPORT void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel == nullptr) return;
  std::lock_guard lock(g_mu);
  if (Channel* c = live_channel(channel)) delete_channel(c);  // a second destroy frees nothing
}

UROCE_RDMACM_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** out, void* context,
                                       rdma_port_space ps) {
  if (out == nullptr) return fail(EINVAL);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_IB && ps != RDMA_PS_UDP)
    return fail(EPROTONOSUPPORT);  // RDMA_PS_IPOIB: an IB-only port space
  if (int err = init_devices()) return fail(err);
  auto* id = new Id;
  id->psn = random_psn();
  id->pub.context = context;
  id->pub.ps = ps;
  id->pub.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  // One critical section: the channel found live is still live when the id joins g_ids.
  std::lock_guard lock(g_mu);
  id->sync = channel == nullptr;
  id->channel = channel ? live_channel(channel) : new_channel();
  if (id->channel == nullptr) {
    delete id;
    return channel ? fail(EBADF) : -1;  // new_channel(): eventfd's errno
  }
  id->pub.channel = &id->channel->pub;
  g_ids.push_back(id);
  *out = &id->pub;
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_bind_addr(rdma_cm_id* cm_id, sockaddr* addr) {
  if (cm_id == nullptr || addr == nullptr) return fail(EINVAL);
  if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) return fail(EAFNOSUPPORT);
  Id* id = from(cm_id);
  std::lock_guard lock(g_mu);
  if (id->bound) return fail(EINVAL);
  int dev = -1;
  if (!is_wildcard(addr)) {
    dev = device_owning(addr);
    // A loopback address no device has is a wildcard, as the kernel's rdma_cm treats it
    // (cma_any_addr): bound to no device, listening on all. libfabric's verbs provider binds
    // "localhost" and then takes the devices' own addresses.
    if (dev < 0 && !is_loopback(addr)) return fail(ENODEV);  // no RDMA device has it
  }
  uint16_t port = port_of(addr);
  for (const Id* o : g_ids) {
    if (o == id || !o->bound || o->pub.ps != id->pub.ps || port == 0 ||
        port_of(&o->pub.route.addr.src_addr) != port)
      continue;
    if (is_wildcard(&o->pub.route.addr.src_addr) || is_wildcard(addr) ||
        same_ip(&o->pub.route.addr.src_addr, addr))
      return fail(EADDRINUSE);
  }
  std::memcpy(&id->pub.route.addr.src_storage, addr, addr_len(addr));
  if (port == 0) {
    port = ephemeral_port(id);
    if (port == 0) return fail(EADDRINUSE);
    set_port(&id->pub.route.addr.src_addr, port);
  }
  id->bound = true;
  id->state = IdState::kBound;
  if (dev >= 0) {
    id->device = dev;
    id->pub.verbs = g_devices[dev].ctx;
    id->pub.pd = g_devices[dev].pd;
    id->pub.port_num = 1;
  }
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_resolve_addr(rdma_cm_id* cm_id, sockaddr* src, sockaddr* dst,
                                          int /*timeout_ms*/) {
  if (cm_id == nullptr || dst == nullptr) return fail(EINVAL);
  if (dst->sa_family != AF_INET && dst->sa_family != AF_INET6) return fail(EAFNOSUPPORT);
  Id* id = from(cm_id);
  if (src && !id->bound && rdma_bind_addr(cm_id, src)) return -1;
  int dev = id->device >= 0 ? id->device : device_for(dst);
  if (dev < 0) return fail(EADDRNOTAVAIL);
  {
    std::lock_guard lock(g_mu);
    if (g_devices[dev].addr.ss_family != dst->sa_family) return fail(EAFNOSUPPORT);
    uint16_t port = id->bound ? port_of(&id->pub.route.addr.src_addr) : ephemeral_port(id);
    sockaddr_storage s = g_devices[dev].addr;
    set_port(reinterpret_cast<sockaddr*>(&s), port);
    std::memcpy(&id->pub.route.addr.src_storage, &s, sizeof s);
    std::memcpy(&id->pub.route.addr.dst_storage, dst, addr_len(dst));
    id->bound = true;
    id->device = dev;
    id->pub.verbs = g_devices[dev].ctx;
    id->pub.pd = g_devices[dev].pd;
    id->pub.port_num = 1;
    id->state = IdState::kAddrResolved;
    Pending p;
    p.id = id;
    p.type = RDMA_CM_EVENT_ADDR_RESOLVED;
    push(id->channel, std::move(p));
  }
  if (!id->sync) return 0;
  int err = wait_for(id, RDMA_CM_EVENT_ADDR_RESOLVED);
  return err ? fail(err) : 0;
}

UROCE_RDMACM_EXPORT int rdma_resolve_route(rdma_cm_id* cm_id, int /*timeout_ms*/) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  {
    std::lock_guard lock(g_mu);
    if (id->state != IdState::kAddrResolved || id->device < 0) return fail(EINVAL);
    // One path: RoCE needs no subnet administrator, the GIDs are the addresses.
    ibv_sa_path_rec& path = id->path;
    path = {};
    const Gid s = gid_of(&id->pub.route.addr.src_addr), d = gid_of(&id->pub.route.addr.dst_addr);
    std::memcpy(path.sgid.raw, s.data(), 16);
    std::memcpy(path.dgid.raw, d.data(), 16);
    path.slid = path.dlid = htons(0xffff);
    path.hop_limit = 64;
    path.traffic_class = id->tos;
    path.reversible = 1;
    path.numb_path = 1;
    path.pkey = htons(0xffff);
    path.mtu_selector = 2;
    path.mtu = g_devices[id->device].mtu;
    path.packet_life_time = 16;
    id->pub.route.path_rec = &id->path;
    id->pub.route.num_paths = 1;
    id->state = IdState::kRouteResolved;
    Pending p;
    p.id = id;
    p.type = RDMA_CM_EVENT_ROUTE_RESOLVED;
    push(id->channel, std::move(p));
  }
  if (!id->sync) return 0;
  int err = wait_for(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
  return err ? fail(err) : 0;
}

UROCE_RDMACM_EXPORT int rdma_listen(rdma_cm_id* cm_id, int /*backlog*/) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  std::lock_guard lock(g_mu);
  if (!id->bound || id->state == IdState::kListening) return fail(EINVAL);
  const uint64_t sid = service_id(id, port_of(&id->pub.route.addr.src_addr));
  for (size_t i = 0; i < g_devices.size(); ++i) {
    const int dev = static_cast<int>(i);
    if (id->device >= 0 && id->device != dev) continue;
    if (g_devices[i].addr.ss_family != id->pub.route.addr.src_addr.sa_family) continue;
    auto l = g_devices[i].cm->listen(sid);
    if (!l.ok()) {
      for (auto& [d, lid] : id->listeners) {
        g_devices[d].cm->stop_listening(lid);
        g_listeners.erase({d, lid});
      }
      id->listeners.clear();
      return fail(l.error());
    }
    id->listeners.emplace_back(dev, *l);
    g_listeners[{dev, *l}] = id;
  }
  if (id->listeners.empty()) return fail(ENODEV);
  id->state = IdState::kListening;
  return 0;
}

namespace {

void destroy_own_cqs(Id* id) {
  if (!id->own_cqs) return;
  if (id->pub.send_cq) ibv_destroy_cq(id->pub.send_cq);
  if (id->pub.recv_cq) ibv_destroy_cq(id->pub.recv_cq);
  if (id->pub.send_cq_channel) ibv_destroy_comp_channel(id->pub.send_cq_channel);
  if (id->pub.recv_cq_channel) ibv_destroy_comp_channel(id->pub.recv_cq_channel);
  id->pub.send_cq = id->pub.recv_cq = nullptr;
  id->pub.send_cq_channel = id->pub.recv_cq_channel = nullptr;
  id->own_cqs = false;
}

// rdma-core makes the CQs (with completion channels) a program does not pass, once per id.
int make_cqs(Id* id, uint32_t send_entries, uint32_t recv_entries) {
  if (id->pub.send_cq != nullptr) return 0;
  id->pub.send_cq_channel = ibv_create_comp_channel(id->pub.verbs);
  id->pub.recv_cq_channel = ibv_create_comp_channel(id->pub.verbs);
  if (!id->pub.send_cq_channel || !id->pub.recv_cq_channel) return errno;
  id->pub.send_cq =
      ibv_create_cq(id->pub.verbs, std::max(1u, send_entries), id, id->pub.send_cq_channel, 0);
  id->pub.recv_cq =
      ibv_create_cq(id->pub.verbs, std::max(1u, recv_entries), id, id->pub.recv_cq_channel, 0);
  if (!id->pub.send_cq || !id->pub.recv_cq) return errno;
  id->own_cqs = true;
  return 0;
}

// The device's own XRC domain (DeviceEntry::xrcd), opened on first use; null with errno set.
ibv_xrcd* device_xrcd(int dev) {
  std::lock_guard lock(g_mu);
  DeviceEntry& d = g_devices[dev];
  if (d.xrcd == nullptr) {
    ibv_xrcd_init_attr a{};
    a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    a.fd = -1;
    a.oflags = O_CREAT;
    d.xrcd = ibv_open_xrcd(d.ctx, &a);
  }
  return d.xrcd;
}

// As rdma-core's librdmacm (init_ece): a QP made on the id brings its provider's ECE, which
// replaces rdma_set_local_ece's; one made for a REQ that carried ECE is told the peer's options
// (or, from another vendor, none). uroce's provider has no ECE (ibv_query_ece: EOPNOTSUPP, as
// rxe), so an id with a QP sends none.
int take_qp_ece(Id* id, ibv_qp* qp) {
  ibv_ece ece{};
  if (int err = ibv_query_ece(qp, &ece); err && err != EOPNOTSUPP) return err;
  id->local_ece = {ece.vendor_id, ece.options, 0};
  if (id->remote_ece.vendor_id == 0) return 0;
  ibv_ece want = id->remote_ece.vendor_id == id->local_ece.vendor_id
                     ? id->remote_ece
                     : ibv_ece{id->local_ece.vendor_id, 0, 0};
  if (int err = ibv_set_ece(qp, &want); err && err != EOPNOTSUPP) return err;
  return 0;
}

}  // namespace

UROCE_RDMACM_EXPORT int rdma_create_qp_ex(rdma_cm_id* cm_id, ibv_qp_init_attr_ex* attr) {
  if (cm_id == nullptr || attr == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  if (id->device < 0 || id->pub.verbs == nullptr || id->pub.qp != nullptr) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr) {
    attr->pd = id->pub.pd ? id->pub.pd : g_devices[id->device].pd;
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (attr->pd->context != id->pub.verbs) return fail(EINVAL);
  if (attr->qp_type == IBV_QPT_XRC_RECV &&
      (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || attr->xrcd == nullptr)) {
    attr->xrcd = device_xrcd(id->device);
    if (attr->xrcd == nullptr) return -1;
    attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
  }
  if (attr->send_cq == nullptr || attr->recv_cq == nullptr) {
    if (int err = make_cqs(id, attr->cap.max_send_wr, attr->cap.max_recv_wr)) return fail(err);
    if (attr->send_cq == nullptr) attr->send_cq = id->pub.send_cq;
    if (attr->recv_cq == nullptr) attr->recv_cq = id->pub.recv_cq;
  }
  if (attr->srq == nullptr && attr->qp_type != IBV_QPT_XRC_SEND) attr->srq = id->pub.srq;
  ibv_qp* qp = ibv_create_qp_ex(id->pub.verbs, attr);
  if (qp == nullptr) return -1;
  id->pub.qp = qp;
  id->pub.qp_type = attr->qp_type;
  int err = modify_qp(id, IBV_QPS_INIT);
  if (!err && attr->qp_type == IBV_QPT_UD) {
    err = modify_qp(id, IBV_QPS_RTR);
    if (!err) err = modify_qp(id, IBV_QPS_RTS);
  }
  if (!err) err = take_qp_ece(id, qp);
  if (err) {
    ibv_destroy_qp(qp);
    id->pub.qp = nullptr;
    return fail(err);
  }
  id->pub.pd = attr->pd;
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_create_qp(rdma_cm_id* cm_id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (cm_id == nullptr || attr == nullptr) return fail(EINVAL);
  ibv_qp_init_attr_ex ex{};
  ex.qp_context = attr->qp_context;
  ex.send_cq = attr->send_cq;
  ex.recv_cq = attr->recv_cq;
  ex.srq = attr->srq;
  ex.cap = attr->cap;
  ex.qp_type = attr->qp_type;
  ex.sq_sig_all = attr->sq_sig_all;
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  if (rdma_create_qp_ex(cm_id, &ex)) return -1;
  attr->send_cq = ex.send_cq;
  attr->recv_cq = ex.recv_cq;
  attr->srq = ex.srq;
  attr->cap = ex.cap;
  return 0;
}

// As rdma-core: an SRQ on the id (id->srq), which rdma_post_recv and the QP rdma_create_qp makes
// next use; an XRC SRQ (RDMA_PS_IB ids of XRC_RECV QPs, or srq_type XRC) gets the device's XRC
// domain and the id's receive CQ when the program names neither.
UROCE_RDMACM_EXPORT int rdma_create_srq_ex(rdma_cm_id* cm_id, ibv_srq_init_attr_ex* attr) {
  if (cm_id == nullptr || attr == nullptr || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
    return fail(EINVAL);
  Id* id = from(cm_id);
  if (id->device < 0 || id->pub.verbs == nullptr || id->pub.srq != nullptr) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || attr->pd == nullptr) {
    attr->pd = id->pub.pd ? id->pub.pd : g_devices[id->device].pd;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  if (attr->srq_type == IBV_SRQT_XRC) {
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || attr->xrcd == nullptr) {
      attr->xrcd = device_xrcd(id->device);
      if (attr->xrcd == nullptr) return -1;
    }
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || attr->cq == nullptr) {
      if (int err = make_cqs(id, 1, attr->attr.max_wr)) return fail(err);
      attr->cq = id->pub.recv_cq;
    }
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  }
  if (attr->srq_context == nullptr) attr->srq_context = id;
  ibv_srq* srq = ibv_create_srq_ex(id->pub.verbs, attr);
  if (srq == nullptr) return -1;
  id->pub.srq = srq;
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_create_srq(rdma_cm_id* cm_id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (cm_id == nullptr || attr == nullptr) return fail(EINVAL);
  ibv_srq_init_attr_ex ex{};
  ex.srq_context = attr->srq_context;
  ex.attr = attr->attr;
  ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  ex.srq_type = cm_id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  ex.pd = pd;
  if (rdma_create_srq_ex(cm_id, &ex)) return -1;
  attr->srq_context = ex.srq_context;
  attr->attr = ex.attr;
  return 0;
}

UROCE_RDMACM_EXPORT void rdma_destroy_srq(rdma_cm_id* cm_id) {
  if (cm_id == nullptr || cm_id->srq == nullptr) return;
  Id* id = from(cm_id);
  ibv_destroy_srq(id->pub.srq);
  id->pub.srq = nullptr;
  if (id->pub.qp == nullptr) destroy_own_cqs(id);  // an XRC SRQ's CQ outlived the QP
}

UROCE_RDMACM_EXPORT void rdma_destroy_qp(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return;
  Id* id = from(cm_id);
  if (id->pub.qp) ibv_destroy_qp(id->pub.qp);
  id->pub.qp = nullptr;
  // An SRQ on the id may still complete into the receive CQ: rdma_destroy_srq frees them then.
  if (id->pub.srq == nullptr) destroy_own_cqs(id);
}

UROCE_RDMACM_EXPORT int rdma_init_qp_attr(rdma_cm_id* cm_id, ibv_qp_attr* attr, int* mask) {
  if (cm_id == nullptr || attr == nullptr || mask == nullptr) return fail(EINVAL);
  std::lock_guard lock(g_mu);
  int err = qp_attr_for(from(cm_id), attr, mask);
  return err ? fail(err) : 0;
}

namespace {

// The cma_hdr rdma_cm puts before the private data of a REQ or SIDR_REQ.
size_t write_cma_for(const Id* id, std::span<uint8_t> out) {
  const sockaddr* src = &id->pub.route.addr.src_addr;
  const sockaddr* dst = &id->pub.route.addr.dst_addr;
  wire::CmaHeader h;
  h.ip_version = src->sa_family == AF_INET6 ? 6 : 4;
  h.src_port = port_of(src);
  const Gid s = gid_of(src), d = gid_of(dst);
  std::copy(s.begin(), s.end(), h.src.begin());
  std::copy(d.begin(), d.end(), h.dst.begin());
  if (h.ip_version == 4) std::fill_n(h.src.begin(), 12, 0), std::fill_n(h.dst.begin(), 12, 0);
  wire::write_cma_header(h, out);
  return wire::kCmaHeaderBytes;
}

// rdma_connect on an RDMA_PS_UDP id: a SIDR_REQ; ESTABLISHED comes with the remote QP.
int connect_ud(Id* id, const rdma_conn_param* param) {
  constexpr size_t kUserPrivate = wire::kSidrReqPrivateBytes - wire::kCmaHeaderBytes;
  if (param && param->private_data_len > kUserPrivate) return fail(EINVAL);
  {
    std::lock_guard lock(g_mu);
    if (id->state != IdState::kRouteResolved) return fail(EINVAL);
    std::array<uint8_t, wire::kSidrReqPrivateBytes> pdata{};
    size_t len = write_cma_for(id, pdata);
    if (param && param->private_data_len) {
      std::memcpy(pdata.data() + len, param->private_data, param->private_data_len);
      len += param->private_data_len;
    }
    const sockaddr* dst = &id->pub.route.addr.dst_addr;
    auto conn = g_devices[id->device].cm->sidr_resolve(gid_of(dst), service_id(id, port_of(dst)),
                                                       std::span<const uint8_t>(pdata.data(), len));
    if (!conn.ok()) return fail(conn.error());
    id->conn = *conn;
    id->active = true;
    id->state = IdState::kConnecting;
    g_conns[{id->device, *conn}] = id;
  }
  if (!id->sync) return 0;
  int err = wait_for(id, RDMA_CM_EVENT_ESTABLISHED);
  return err ? fail(err) : 0;
}

}  // namespace

UROCE_RDMACM_EXPORT int rdma_connect(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  if (id->pub.ps == RDMA_PS_UDP) return connect_ud(id, param);
  if (param && param->private_data_len > kReqUserPrivate) return fail(EINVAL);
  {
    std::lock_guard lock(g_mu);
    if (id->state != IdState::kRouteResolved) return fail(EINVAL);
    const sockaddr* src = &id->pub.route.addr.src_addr;
    const sockaddr* dst = &id->pub.route.addr.dst_addr;
    const uint32_t psn = id->psn;
    if (param) {
      if (int err = resolve_depths(id, *param, &id->responder_resources, &id->initiator_depth))
        return fail(err);
      id->retry_count = std::min<uint8_t>(param->retry_count, 7);
      id->rnr_retry_count = std::min<uint8_t>(param->rnr_retry_count, 7);
    }
    std::array<uint8_t, wire::kReqPrivateBytes> pdata{};
    wire::CmaHeader h;
    h.ip_version = src->sa_family == AF_INET6 ? 6 : 4;
    h.src_port = port_of(src);
    const Gid s = gid_of(src), d = gid_of(dst);
    std::copy(s.begin(), s.end(), h.src.begin());
    std::copy(d.begin(), d.end(), h.dst.begin());
    if (h.ip_version == 4) std::fill_n(h.src.begin(), 12, 0), std::fill_n(h.dst.begin(), 12, 0);
    wire::write_cma_header(h, pdata);
    size_t len = wire::kCmaHeaderBytes;
    if (param && param->private_data_len) {
      std::memcpy(pdata.data() + len, param->private_data, param->private_data_len);
      len += param->private_data_len;
    }
    cm::ConnectParams p;
    p.peer = d;
    p.service_id = service_id(id, port_of(dst));
    p.qpn = id->pub.qp ? id->pub.qp->qp_num : (param ? param->qp_num : 0);
    p.starting_psn = psn;
    p.responder_resources = id->responder_resources;
    p.initiator_depth = id->initiator_depth;
    p.retry_count = id->retry_count;
    p.rnr_retry_count = id->rnr_retry_count;
    p.path_mtu = g_devices[id->device].mtu;
    p.srq = id->pub.srq != nullptr;
    if (id->pub.qp_type == IBV_QPT_XRC_SEND) {  // as Linux's CM: extended transport, type XRC
      p.transport = wire::CmTransport::kExtended;
      p.extended_transport = wire::kExtendedTransportXrc;
    }
    std::copy(s.begin(), s.end(), p.primary.local_gid.begin());
    std::copy(d.begin(), d.end(), p.primary.remote_gid.begin());
    p.primary.hop_limit = 64;
    p.primary.traffic_class = id->tos;
    p.primary.local_ack_timeout = id->ack_timeout;
    p.ece = {id->local_ece.vendor_id, id->local_ece.options};
    p.private_data = std::span<const uint8_t>(pdata.data(), len);
    auto conn = g_devices[id->device].cm->connect(p);
    if (!conn.ok()) return fail(conn.error());
    id->conn = *conn;
    id->active = true;
    id->state = IdState::kConnecting;
    g_conns[{id->device, *conn}] = id;
  }
  if (!id->sync) return 0;
  int err = wait_for(id, RDMA_CM_EVENT_ESTABLISHED);
  return err ? fail(err) : 0;
}

UROCE_RDMACM_EXPORT int rdma_accept(rdma_cm_id* cm_id, rdma_conn_param* param) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  if (id->sidr) {
    // A SIDR_REP with our UD QP; the id has no connection after it (no ESTABLISHED here).
    if (param && param->private_data_len > wire::kSidrRepPrivateBytes) return fail(EINVAL);
    std::lock_guard lock(g_mu);
    if (!id->conn || id->state != IdState::kRequest) return fail(EINVAL);
    const uint32_t qpn = id->pub.qp ? id->pub.qp->qp_num : (param ? param->qp_num : 0);
    std::span<const uint8_t> pd;
    if (param && param->private_data_len)
      pd = {static_cast<const uint8_t*>(param->private_data), param->private_data_len};
    if (int err = g_devices[id->device].cm->sidr_reply(*id->conn, qpn, kRdmaUdpQkey, pd))
      return fail(err);
    forget_conn(id);
    id->state = IdState::kConnected;
    return 0;
  }
  if (param && param->private_data_len > wire::kRepPrivateBytes) return fail(EINVAL);
  if (!id->req || !id->conn || id->state != IdState::kRequest) return fail(EINVAL);
  if (param) {
    uint8_t responder = 0, initiator = 0;
    if (int err = resolve_depths(id, *param, &responder, &initiator)) return fail(err);
    id->responder_resources = std::min(responder, id->req->initiator_depth);
    id->initiator_depth = std::min(initiator, id->req->responder_resources);
    id->rnr_retry_count = std::min<uint8_t>(param->rnr_retry_count, 7);
  } else {
    id->responder_resources = id->req->initiator_depth;
    id->initiator_depth = id->req->responder_resources;
  }
  id->retry_count = id->req->retry_count;
  if (int err = modify_qp(id, IBV_QPS_RTR)) return fail(err);
  if (int err = modify_qp(id, IBV_QPS_RTS)) return fail(err);
  cm::AcceptParams a;
  a.qpn = id->pub.qp ? id->pub.qp->qp_num : (param ? param->qp_num : 0);
  a.starting_psn = id->psn;
  a.responder_resources = id->responder_resources;
  a.initiator_depth = id->initiator_depth;
  a.rnr_retry_count = id->rnr_retry_count;
  a.srq = id->pub.srq != nullptr;
  // As rdma-core: the REQ's vendor ID back, with this side's options.
  a.ece = {id->remote_ece.vendor_id, id->local_ece.options};
  if (param && param->private_data_len)
    a.private_data = {static_cast<const uint8_t*>(param->private_data), param->private_data_len};
  {
    std::lock_guard lock(g_mu);
    if (int err = g_devices[id->device].cm->accept(*id->conn, a)) return fail(err);
    id->state = IdState::kAccepting;
  }
  if (!id->sync) return 0;
  int err = wait_for(id, RDMA_CM_EVENT_ESTABLISHED);
  return err ? fail(err) : 0;
}

UROCE_RDMACM_EXPORT int rdma_reject(rdma_cm_id* cm_id, const void* private_data,
                                    uint8_t private_data_len) {
  if (cm_id == nullptr || private_data_len > wire::kRejPrivateBytes) return fail(EINVAL);
  Id* id = from(cm_id);
  std::lock_guard lock(g_mu);
  if (!id->conn || id->device < 0) return fail(EINVAL);
  std::span<const uint8_t> pd;
  if (private_data_len) pd = {static_cast<const uint8_t*>(private_data), private_data_len};
  cm::CmService* cm = g_devices[id->device].cm;
  // The REJ is on the wire when the CM's call returns (CmService), so a process that exits next
  // (pyverbs' passive side leaves with os._exit) does not take it along.
  if (int err = id->sidr ? cm->sidr_reject(*id->conn, pd) : cm->reject(*id->conn, pd))
    return fail(err);
  forget_conn(id);
  id->state = IdState::kDisconnected;
  return 0;
}

// As rdma-core: a connection request refused for its ECE options, REJ reason 35 (vendor option
// not supported). Only a connection (not a SIDR request) can be rejected so.
UROCE_RDMACM_EXPORT int rdma_reject_ece(rdma_cm_id* cm_id, const void* private_data,
                                        uint8_t private_data_len) {
  if (cm_id == nullptr || private_data_len > wire::kRejPrivateBytes) return fail(EINVAL);
  Id* id = from(cm_id);
  std::lock_guard lock(g_mu);
  if (!id->conn || id->device < 0 || id->sidr) return fail(EINVAL);
  std::span<const uint8_t> pd;
  if (private_data_len) pd = {static_cast<const uint8_t*>(private_data), private_data_len};
  if (int err = g_devices[id->device].cm->reject_with_reason(
          *id->conn, wire::rej_reason::kVendorOptionNotSupported, pd))
    return fail(err);
  forget_conn(id);
  id->state = IdState::kDisconnected;
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_establish(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  std::lock_guard lock(g_mu);
  if (!id->conn || id->device < 0) return fail(EINVAL);
  if (int err = g_devices[id->device].cm->establish(*id->conn, {})) return fail(err);
  id->state = IdState::kConnected;
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_disconnect(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  if (id->pub.qp) modify_qp(id, IBV_QPS_ERR);
  std::lock_guard lock(g_mu);
  if (!id->conn || id->device < 0) return fail(EINVAL);
  // As the kernel's rdma_disconnect: a connection already being torn down is not an error.
  g_devices[id->device].cm->disconnect(*id->conn, {});
  id->state = IdState::kDisconnected;
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** out) {
  if (channel == nullptr || out == nullptr) return fail(EINVAL);
  Channel* c = nullptr;
  {
    std::lock_guard lock(g_mu);
    c = live_channel(channel);
    if (c == nullptr) return fail(EBADF);
    ++c->readers;
  }
  for (;;) {
    uint64_t count = 0;
    if (read(c->pub.fd, &count, sizeof count) != sizeof count) {  // EAGAIN, EINTR
      const int err = errno;
      std::lock_guard lock(g_mu);
      leave_channel(c);
      return fail(err);
    }
    Pending p;
    {
      std::lock_guard lock(g_mu);
      // Empty: the event this count stood for was taken by another reader, or dropped with its
      // id or with the channel (then the reader waits on, see Channel).
      if (c->queue.empty()) continue;
      p = std::move(c->queue.front());
      c->queue.pop_front();
      if (p.id == nullptr) continue;  // its id was destroyed
      ++p.id->events_out;
    }
    Id* id = p.id;
    auto* e = new Event;
    e->pub.id = &id->pub;
    e->pub.listen_id = p.listen ? &p.listen->pub : nullptr;
    e->pub.status = p.status;
    e->private_data = std::move(p.private_data);
    if (p.type == kInternalConnectResponse) {
      // rdma-core's librdmacm: move the QP to RTR and RTS from the REP and send the RTU, then
      // report ESTABLISHED; an id without a QP gets CONNECT_RESPONSE and calls rdma_establish.
      id->rep = p.rep;
      if (id->rep) {
        id->responder_resources = std::min(id->responder_resources, id->rep->initiator_depth);
        id->initiator_depth = std::min(id->initiator_depth, id->rep->responder_resources);
      }
      if (id->pub.qp == nullptr) {
        id->remote_ece = {p.ece.vendor_id, p.ece.options, 0};
        p.type = RDMA_CM_EVENT_CONNECT_RESPONSE;
      } else {
        // As rdma-core (ucma_process_conn_resp_ece): a REP may echo our vendor ID or carry none;
        // another vendor's is a broken handshake and fails the connection.
        int err = p.ece.vendor_id != 0 && p.ece.vendor_id != id->local_ece.vendor_id ? EINVAL : 0;
        id->remote_ece.vendor_id = p.ece.vendor_id;
        if (!err) err = modify_qp(id, IBV_QPS_RTR);
        if (!err) err = modify_qp(id, IBV_QPS_RTS);
        std::lock_guard lock(g_mu);
        if (!id->conn) {
          delete e;
          --id->events_out;
          g_acked.notify_all();
          continue;  // rejected meanwhile
        }
        if (err) {
          g_devices[id->device].cm->reject(*id->conn, {});
          forget_conn(id);
          p.type = RDMA_CM_EVENT_CONNECT_ERROR;
          e->pub.status = -err;
        } else {
          g_devices[id->device].cm->establish(*id->conn, {});
          id->state = IdState::kConnected;
          p.type = RDMA_CM_EVENT_ESTABLISHED;
        }
      }
    } else if (p.join != 0) {
      // As rdma-core's librdmacm: the id's QP (unless the join was send-only) is attached to
      // the group when the program takes the event; a failed attach turns it into
      // MULTICAST_ERROR with status -1 and errno set.
      std::optional<Id::Join> join;
      {
        std::lock_guard lock(g_mu);
        for (const Id::Join& j : id->joins)
          if (j.serial == p.join) join = j;
        if (!join) {  // left meanwhile
          delete e;
          --id->events_out;
          g_acked.notify_all();
          continue;
        }
      }
      int err = 0;
      if (id->pub.qp != nullptr && !join->send_only) {
        ibv_gid group;
        std::memcpy(group.raw, join->gid.data(), sizeof group.raw);
        err = ibv_attach_mcast(id->pub.qp, &group, 0);
      }
      p.type = err ? RDMA_CM_EVENT_MULTICAST_ERROR : RDMA_CM_EVENT_MULTICAST_JOIN;
      e->pub.status = err ? -1 : 0;
      rdma_ud_param& ud = e->pub.param.ud;
      ud.private_data = join->context;
      ud.qp_num = kMulticastQpn;
      ud.qkey = kRdmaUdpQkey;
      ud.ah_attr.is_global = 1;
      std::memcpy(ud.ah_attr.grh.dgid.raw, join->gid.data(), 16);
      ud.ah_attr.grh.sgid_index = 0;
      ud.ah_attr.grh.hop_limit = 64;  // the kernel's IPV6_DEFAULT_HOPLIMIT for RoCE groups
      ud.ah_attr.grh.traffic_class = id->tos;
      ud.ah_attr.port_num = 1;
      if (err) errno = err;
    } else if (p.type == RDMA_CM_EVENT_ESTABLISHED) {
      id->state = IdState::kConnected;
    } else if (p.type == RDMA_CM_EVENT_DISCONNECTED) {
      // The QP is left as it is, as rdma-core does: a program may have destroyed it already.
      id->state = IdState::kDisconnected;
    }
    e->pub.event = static_cast<rdma_cm_event_type>(p.type);
    if (!e->private_data.empty()) {
      e->pub.param.conn.private_data = e->private_data.data();
      e->pub.param.conn.private_data_len =
          static_cast<uint8_t>(std::min<size_t>(e->private_data.size(), 255));
    }
    if (p.ud) {
      // rdma_ud_param shares rdma_conn_param's private-data fields, set above.
      rdma_ud_param& ud = e->pub.param.ud;
      ud.qp_num = p.ud_qpn;
      ud.qkey = p.ud_qkey;
      ud.ah_attr.is_global = 1;
      const Gid peer = gid_of(&id->pub.route.addr.dst_addr);
      std::memcpy(ud.ah_attr.grh.dgid.raw, peer.data(), 16);
      ud.ah_attr.grh.sgid_index = 0;
      ud.ah_attr.grh.hop_limit = 64;
      ud.ah_attr.grh.traffic_class = id->tos;
      ud.ah_attr.port_num = 1;
    } else if (p.type == RDMA_CM_EVENT_CONNECT_REQUEST && id->req) {
      e->pub.param.conn.responder_resources = id->req->responder_resources;
      e->pub.param.conn.initiator_depth = id->req->initiator_depth;
      e->pub.param.conn.retry_count = id->req->retry_count;
      e->pub.param.conn.rnr_retry_count = id->req->rnr_retry_count;
      e->pub.param.conn.srq = id->req->srq;
      e->pub.param.conn.qp_num = id->req->local_qpn;
      // rdma_create_ep's passive ids: each request's id gets a QP like the listener's.
      if (id->ep_qp_attr && id->pub.qp == nullptr) {
        ibv_qp_init_attr a = *id->ep_qp_attr;
        rdma_create_qp(&id->pub, id->ep_pd, &a);
      }
    } else if (id->rep &&
               (p.type == RDMA_CM_EVENT_ESTABLISHED || p.type == RDMA_CM_EVENT_CONNECT_RESPONSE)) {
      e->pub.param.conn.responder_resources = id->rep->responder_resources;
      e->pub.param.conn.initiator_depth = id->rep->initiator_depth;
      e->pub.param.conn.rnr_retry_count = id->rep->rnr_retry_count;
      e->pub.param.conn.srq = id->rep->srq;
      e->pub.param.conn.qp_num = id->rep->local_qpn;
    }
    id->pub.event = &e->pub;
    *out = &e->pub;
    std::lock_guard lock(g_mu);
    leave_channel(c);
    return 0;
  }
}

UROCE_RDMACM_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) return fail(EINVAL);
  auto* e = reinterpret_cast<Event*>(event);
  if (e->pub.id) {
    if (e->pub.id->event == event) e->pub.id->event = nullptr;
    std::lock_guard lock(g_mu);
    --from(e->pub.id)->events_out;
    g_acked.notify_all();
  }
  delete e;
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_destroy_id(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  // A synchronous id's last event is the library's to ack (wait_for, rdma_get_request).
  if (id->sync && id->pub.event) rdma_ack_cm_event(id->pub.event);
  std::unique_lock lock(g_mu);
  g_acked.wait(lock, [id] { return id->events_out == 0; });
  if (id->conn && id->device >= 0) g_devices[id->device].cm->destroy(*id->conn);
  forget_conn(id);
  for (auto& [d, lid] : id->listeners) {
    g_devices[d].cm->stop_listening(lid);
    g_listeners.erase({d, lid});
  }
  // Events still queued for it are skipped by rdma_get_cm_event; requests it was listening for
  // that nobody fetched are rejected.
  auto scrub = [&](Channel* c) {
    for (Pending& p : c->queue) {
      if (p.id == id) p.id = nullptr;
      if (p.listen == id) {
        p.listen = nullptr;
        if (p.id && p.id->conn) {
          g_devices[p.id->device].cm->reject(*p.id->conn, {});
          forget_conn(p.id);
        }
      }
    }
  };
  for (Channel* c : g_channels) scrub(c);
  std::erase(g_ids, id);
  if (id->sync) delete_channel(id->channel);
  delete id;
  return 0;
}

// Moves the id's future events and those still queued for it (a listener's requests too) to
// `channel`; a NULL channel makes the id synchronous on a channel of its own, as rdma-core's.
// It waits until the program has acked the id's events, as rdma-core's does.
UROCE_RDMACM_EXPORT int rdma_migrate_id(rdma_cm_id* cm_id, rdma_event_channel* channel) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  // A synchronous id's last event is the library's (wait_for): acked first, as rdma-core does.
  if (id->sync && id->pub.event) rdma_ack_cm_event(id->pub.event);
  std::unique_lock lock(g_mu);
  g_acked.wait(lock, [id] { return id->events_out == 0; });
  Channel* old = id->channel;
  Channel* to = channel ? live_channel(channel) : new_channel();
  if (to == nullptr) return fail(channel ? EBADF : ENOMEM);
  if (to != old) {
    // Moved entries stay behind as skipped ones, so the old channel's eventfd count still
    // matches its queue.
    for (Pending& p : old->queue) {
      if (p.id != id && p.listen != id) continue;
      push(to, p);
      p.id = nullptr;
    }
  }
  const bool was_sync = id->sync;
  id->channel = to;
  id->sync = channel == nullptr;
  id->pub.channel = &to->pub;
  if (was_sync && to != old) delete_channel(old);
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** out) {
  if (listen == nullptr || out == nullptr) return fail(EINVAL);
  Id* l = from(listen);
  if (!l->sync) return fail(EINVAL);
  for (;;) {
    rdma_cm_event* e = nullptr;
    if (rdma_get_cm_event(&l->channel->pub, &e)) return -1;
    if (e->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      rdma_ack_cm_event(e);
      continue;
    }
    // As rdma-core: the request stays in the new id's `event` until its next call or
    // rdma_destroy_id (the id is synchronous, as its listener).
    *out = e->id;
    return 0;
  }
}

// ECE as rdma-core's librdmacm: local options only on an id without a QP (whose provider's
// would be used instead), a vendor ID and no comp_mask; the remote ones are what the peer's REQ
// (on a CONNECT_REQUEST's id) or REP (after CONNECT_RESPONSE) carried.
UROCE_RDMACM_EXPORT int rdma_set_local_ece(rdma_cm_id* cm_id, ibv_ece* ece) {
  if (cm_id == nullptr || cm_id->qp != nullptr || ece == nullptr || ece->vendor_id == 0 ||
      ece->comp_mask != 0)
    return fail(EINVAL);
  from(cm_id)->local_ece = *ece;
  return 0;
}

UROCE_RDMACM_EXPORT int rdma_get_remote_ece(rdma_cm_id* cm_id, ibv_ece* ece) {
  if (cm_id == nullptr || cm_id->qp != nullptr || ece == nullptr) return fail(EINVAL);
  *ece = from(cm_id)->remote_ece;
  ece->comp_mask = 0;
  return 0;
}

UROCE_RDMACM_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  if (int err = init_devices()) {
    if (num_devices) *num_devices = 0;
    errno = err;
    return nullptr;
  }
  std::lock_guard lock(g_mu);
  auto** list = static_cast<ibv_context**>(calloc(g_devices.size() + 1, sizeof(ibv_context*)));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < g_devices.size(); ++i) list[i] = g_devices[i].ctx;
  if (num_devices) *num_devices = static_cast<int>(g_devices.size());
  return list;
}

UROCE_RDMACM_EXPORT void rdma_free_devices(ibv_context** list) {
  free(list);
}

UROCE_RDMACM_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
  static const char* const kNames[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
      "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
      "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
      "RDMA_CM_EVENT_REJECTED",        "RDMA_CM_EVENT_ESTABLISHED",
      "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
      "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
  const auto i = static_cast<size_t>(event);
  return i < std::size(kNames) ? kNames[i] : "UNKNOWN EVENT";
}

UROCE_RDMACM_EXPORT int rdma_set_option(rdma_cm_id* cm_id, int level, int optname, void* optval,
                                        size_t optlen) {
  if (cm_id == nullptr || optval == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  if (level != RDMA_OPTION_ID) return fail(ENOSYS);  // RDMA_OPTION_IB_PATH: not on RoCE here
  switch (optname) {
    case RDMA_OPTION_ID_TOS:
      if (optlen != sizeof(uint8_t)) return fail(EINVAL);
      id->tos = *static_cast<uint8_t*>(optval);
      return 0;
    case RDMA_OPTION_ID_REUSEADDR:
    case RDMA_OPTION_ID_AFONLY:
      return optlen == sizeof(int) ? 0 : fail(EINVAL);
    case RDMA_OPTION_ID_ACK_TIMEOUT:
      if (optlen != sizeof(uint8_t)) return fail(EINVAL);
      id->ack_timeout = std::min<uint8_t>(*static_cast<uint8_t*>(optval), 31);
      return 0;
    default:
      return fail(ENOSYS);
  }
}

UROCE_RDMACM_EXPORT int rdma_notify(rdma_cm_id* cm_id, ibv_event_type) {
  if (cm_id == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  std::lock_guard lock(g_mu);
  if (id->conn && id->device >= 0 && !id->active)
    g_devices[id->device].cm->notify_established(*id->conn);
  return 0;
}

UROCE_RDMACM_EXPORT __be16 rdma_get_src_port(rdma_cm_id* cm_id) {
  return cm_id ? htons(port_of(&cm_id->route.addr.src_addr)) : 0;
}

UROCE_RDMACM_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* cm_id) {
  return cm_id ? htons(port_of(&cm_id->route.addr.dst_addr)) : 0;
}

namespace {

bool copy_addr(const sockaddr* from, socklen_t len, sockaddr** to, socklen_t* to_len) {
  if (from == nullptr || len == 0) return true;
  *to = static_cast<sockaddr*>(calloc(1, len));
  if (*to == nullptr) return false;
  std::memcpy(*to, from, len);
  *to_len = len;
  return true;
}

// rdma_getaddrinfo with neither node nor service: the answer is the hints' own addresses, as
// rdma-core's (libfabric's verbs provider asks this way).
int addrinfo_from_hints(const rdma_addrinfo* hints, rdma_addrinfo** res) {
  if (hints == nullptr || (hints->ai_src_addr == nullptr && hints->ai_dst_addr == nullptr))
    return fail(EINVAL);
  auto* r = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (r == nullptr) return fail(ENOMEM);
  r->ai_flags = hints->ai_flags;
  const sockaddr* any = hints->ai_src_addr ? hints->ai_src_addr : hints->ai_dst_addr;
  r->ai_family = hints->ai_family ? hints->ai_family : any->sa_family;
  r->ai_qp_type = hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
  r->ai_port_space = hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  if (!copy_addr(hints->ai_src_addr, hints->ai_src_len, &r->ai_src_addr, &r->ai_src_len) ||
      !copy_addr(hints->ai_dst_addr, hints->ai_dst_len, &r->ai_dst_addr, &r->ai_dst_len)) {
    rdma_freeaddrinfo(r);
    return fail(ENOMEM);
  }
  *res = r;
  return 0;
}

}  // namespace

UROCE_RDMACM_EXPORT int rdma_getaddrinfo(const char* node, const char* service,
                                         const rdma_addrinfo* hints, rdma_addrinfo** res) {
  if (res == nullptr) return fail(EINVAL);
  if (node == nullptr && service == nullptr) return addrinfo_from_hints(hints, res);
  addrinfo h{};
  h.ai_socktype = SOCK_STREAM;
  h.ai_family = hints && hints->ai_family ? hints->ai_family : AF_UNSPEC;
  const bool passive = hints && (hints->ai_flags & RAI_PASSIVE);
  if (passive) h.ai_flags |= AI_PASSIVE;
  if (hints && (hints->ai_flags & RAI_NUMERICHOST)) h.ai_flags |= AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  if (int rc = getaddrinfo(node, service, &h, &ai)) {
    errno = rc == EAI_SYSTEM ? errno : ENOENT;
    return rc == EAI_NONAME ? fail(ENOENT) : -1;
  }
  auto* r = static_cast<rdma_addrinfo*>(calloc(1, sizeof(rdma_addrinfo)));
  if (r == nullptr) {
    freeaddrinfo(ai);
    return fail(ENOMEM);
  }
  r->ai_flags = hints ? hints->ai_flags : 0;
  r->ai_family = ai->ai_family;
  r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
  r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
  auto* copy = static_cast<sockaddr*>(calloc(1, ai->ai_addrlen));
  if (copy) std::memcpy(copy, ai->ai_addr, ai->ai_addrlen);
  if (passive) {
    r->ai_src_addr = copy;
    r->ai_src_len = ai->ai_addrlen;
  } else {
    r->ai_dst_addr = copy;
    r->ai_dst_len = ai->ai_addrlen;
    if (hints && hints->ai_src_addr && hints->ai_src_len) {
      r->ai_src_addr = static_cast<sockaddr*>(calloc(1, hints->ai_src_len));
      if (r->ai_src_addr) {
        std::memcpy(r->ai_src_addr, hints->ai_src_addr, hints->ai_src_len);
        r->ai_src_len = hints->ai_src_len;
      }
    }
  }
  freeaddrinfo(ai);
  *res = r;
  return 0;
}

UROCE_RDMACM_EXPORT void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* next = res->ai_next;
    free(res->ai_src_addr);
    free(res->ai_dst_addr);
    free(res->ai_src_canonname);
    free(res->ai_dst_canonname);
    free(res->ai_route);
    free(res->ai_connect);
    free(res);
    res = next;
  }
}

UROCE_RDMACM_EXPORT int rdma_create_ep(rdma_cm_id** out, rdma_addrinfo* res, ibv_pd* pd,
                                       ibv_qp_init_attr* qp_init_attr) {
  if (out == nullptr || res == nullptr) return fail(EINVAL);
  rdma_cm_id* cm_id = nullptr;
  if (rdma_create_id(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space)))
    return -1;
  Id* id = from(cm_id);
  id->pub.qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  // As rdma-core: the QP's type is the address's, whatever the attributes said.
  if (qp_init_attr) qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  int rc = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = res->ai_src_addr ? rdma_bind_addr(cm_id, res->ai_src_addr) : fail(EINVAL);
    if (!rc && qp_init_attr) {
      id->ep_qp_attr = *qp_init_attr;
      id->ep_pd = pd;
    }
  } else {
    rc = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (!rc) rc = rdma_resolve_route(cm_id, 2000);
    if (!rc && qp_init_attr) rc = rdma_create_qp(cm_id, pd, qp_init_attr);
  }
  if (rc) {
    const int err = errno;
    rdma_destroy_id(cm_id);
    return fail(err);
  }
  *out = cm_id;
  return 0;
}

UROCE_RDMACM_EXPORT void rdma_destroy_ep(rdma_cm_id* cm_id) {
  if (cm_id == nullptr) return;
  rdma_destroy_qp(cm_id);
  rdma_destroy_srq(cm_id);
  rdma_destroy_id(cm_id);
}

// ---- multicast ---------------------------------------------------------------------------------

namespace {

// rdma_join_multicast(_ex): an IPv4 group on an RDMA_PS_UDP id with a device. A RoCE join
// needs no SA (the kernel's cma_iboe_join_multicast maps the group and answers at once), so the
// MULTICAST_JOIN event is queued here; the QP is attached when the program takes it.
int join_multicast(Id* id, const sockaddr* addr, uint32_t join_flags, void* context) {
  if (addr->sa_family == AF_INET6) return fail(EOPNOTSUPP);  // Linux: no IPv6 RoCEv2 groups
  if (addr->sa_family != AF_INET) return fail(EAFNOSUPPORT);
  const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
  if (!IN_MULTICAST(ntohl(in->sin_addr.s_addr))) return fail(EINVAL);
  if (id->pub.ps != RDMA_PS_UDP) return fail(EINVAL);
  {
    std::lock_guard lock(g_mu);
    if (id->device < 0) return fail(EINVAL);  // neither bound to a device nor resolved
    if (g_devices[id->device].addr.ss_family != AF_INET) return fail(EINVAL);
    for (const Id::Join& j : id->joins)
      if (same_ip(reinterpret_cast<const sockaddr*>(&j.addr), addr)) return fail(EADDRINUSE);
    if (id->joins.size() >= kMaxJoinsPerId) return fail(ENOMEM);
    Id::Join j;
    std::memcpy(&j.addr, addr, sizeof(sockaddr_in));
    j.gid = gid_of(addr);
    j.context = context;
    j.send_only = join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
    j.serial = ++g_join_serial;
    id->joins.push_back(j);
    Pending p;
    p.id = id;
    p.type = RDMA_CM_EVENT_MULTICAST_JOIN;
    p.join = j.serial;
    push(id->channel, std::move(p));
  }
  if (!id->sync) return 0;
  const int err = wait_for(id, RDMA_CM_EVENT_MULTICAST_JOIN);
  return err ? fail(err) : 0;
}

}  // namespace

UROCE_RDMACM_EXPORT int rdma_join_multicast(rdma_cm_id* cm_id, sockaddr* addr, void* context) {
  if (cm_id == nullptr || addr == nullptr) return fail(EINVAL);
  return join_multicast(from(cm_id), addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

UROCE_RDMACM_EXPORT int rdma_join_multicast_ex(rdma_cm_id* cm_id, rdma_cm_join_mc_attr_ex* attr,
                                               void* context) {
  if (cm_id == nullptr || attr == nullptr) return fail(EINVAL);
  // As rdma-core: both the address and the flags must be given, and the flags known.
  if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
      !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
      (attr->comp_mask & ~uint32_t{RDMA_CM_JOIN_MC_ATTR_RESERVED - 1}) != 0 ||
      attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED || attr->addr == nullptr)
    return fail(EINVAL);
  return join_multicast(from(cm_id), attr->addr, attr->join_flags, context);
}

// Detaches the id's QP (unless the join was send-only) and forgets the join; its MULTICAST_JOIN,
// if not taken yet, is never reported. EADDRNOTAVAIL for a group the id has not joined.
UROCE_RDMACM_EXPORT int rdma_leave_multicast(rdma_cm_id* cm_id, sockaddr* addr) {
  if (cm_id == nullptr || addr == nullptr) return fail(EINVAL);
  Id* id = from(cm_id);
  Id::Join left;
  {
    std::lock_guard lock(g_mu);
    auto it = std::find_if(id->joins.begin(), id->joins.end(), [&](const Id::Join& j) {
      return same_ip(reinterpret_cast<const sockaddr*>(&j.addr), addr);
    });
    if (it == id->joins.end()) return fail(EADDRNOTAVAIL);
    left = *it;
    id->joins.erase(it);
    for (Channel* c : g_channels)
      for (Pending& p : c->queue)
        if (p.id == id && p.join == left.serial) p.id = nullptr;
  }
  if (id->pub.qp != nullptr && !left.send_only) {
    ibv_gid group;
    std::memcpy(group.raw, left.gid.data(), sizeof group.raw);
    ibv_detach_mcast(id->pub.qp, &group, 0);  // EINVAL if the JOIN was never taken: nothing to undo
  }
  return 0;
}
