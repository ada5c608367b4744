// rsockets (docs/cm.md, "rsockets"): the socket-like API librdmacm carries, over uroce's rdma_cm.
// Stream sockets are RC QPs connected with rdma_connect/rdma_accept; every message is a SEND
// WITH IMMEDIATE into one of the peer's fixed-size receive slots, with credit-based flow control
// (rsocket_credits.h). Datagram sockets are UD QPs; a destination's QP is found with SIDR
// (RDMA_PS_UDP) and each datagram carries the sender's address, so replies need no lookup.
//
// The descriptor an application holds is the fd of the socket's own rdma_cm event channel: a real
// fd, unique while the socket lives (as rdma-core's). Each socket has a mutex; calls that wait
// release it while they sleep in poll() on the completion channel and the event channel.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "api/env.h"
#include "api/rdmacm/rsocket_credits.h"

#define UROCE_RSOCKET_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using uroce::rsocket::encode_imm;
using uroce::rsocket::imm_credits;
using uroce::rsocket::imm_type;
using uroce::rsocket::MessageType;
using uroce::rsocket::StreamCredits;

// Bounds. Message size: the payload of one stream message (one receive slot). Windows from
// SO_RCVBUF / RDMA_RQSIZE are clamped to [kMinWindow, kMaxWindow]. At most kMaxSockets rsockets
// in a process, kMaxBacklog connection requests waiting for raccept, kMaxIomaps riomap windows a
// side, kMaxDestinations cached datagram destinations.
constexpr uint32_t kMessageBytes = 16384;
constexpr uint32_t kDefaultWindow = 32;
constexpr uint32_t kMinWindow = 2;
constexpr uint32_t kMaxWindow = 256;
constexpr uint32_t kMaxIomaps = 8;
constexpr size_t kMaxSockets = 4096;
constexpr size_t kMaxBacklog = 128;
constexpr size_t kMaxDestinations = 64;
// Datagram receive slots as rdma-core's rsockets size them: one per 2 KiB of receive buffer (128
// KiB unless set: 64 slots; SO_RCVBUF doubled, as Linux and rdma-core take it), at most
// RDMA_RQSIZE, within [kMinDgramSlots, kMaxDgramSlots]. A program that asks for a deep buffer gets
// it: udpong asks for 512 KiB (384 slots), and a burst of 100 of its datagrams overran 64 slots
// whenever the receiver was not scheduled in time (docs/cm.md, "udpong").
constexpr uint32_t kDgramBufferPerSlot = 2048;
constexpr uint32_t kDefaultDgramBuffer = 128 * 1024;
constexpr uint32_t kMinDgramSlots = 16;
constexpr uint32_t kMaxDgramSlots = 384;
constexpr uint32_t kDgramSendSlots = 64;
// What rgetsockopt reports for SO_RCVBUF / SO_SNDBUF, as rdma-core's rsockets: 128 KiB each unless
// set; a set value doubled (as Linux does); a send buffer under 2 KiB (rdma-core's RS_SNDLOWAT) is
// reported as 4 KiB.
constexpr uint32_t kDefaultReportedBuffer = 128 * 1024;
constexpr uint32_t kSendLowWater = 2048;
constexpr uint32_t kGrhBytes = 40;
constexpr uint32_t kRdmaUdpQkey = 0x01234567;
constexpr int kResolveTimeoutMs = 2000;
constexpr int kCloseDrainMs = 2000;
constexpr uint64_t kRecvTag = 1ull << 63;
constexpr uint64_t kWriteTag = 1ull << 62;  // a send slot held by an RDMA WRITE (riowrite)

// rconnect's private data and raccept's: who we are and our receive window.
struct ConnectHeader {
  char magic[4];           // "URS1"
  uint32_t window;         // network order: data slots the peer may fill
  uint32_t message_bytes;  // network order: the slot size
};
constexpr char kMagic[4] = {'U', 'R', 'S', '1'};

// riomap's announcement, the payload of an iomap message (network order).
struct IomapMessage {
  uint64_t offset;
  uint64_t addr;
  uint64_t length;
  uint32_t rkey;
  uint32_t pad;
};

// The header of every datagram: the sender's address (as rsocket's peers name it).
struct DgramHeader {
  uint16_t family;  // AF_INET or AF_INET6, network order
  uint16_t port;    // network order
  uint8_t addr[16];
};

// The sender's address a datagram's header names (IPv4 as the last 4 of 16 bytes).
sockaddr_storage sender_address(const DgramHeader& h) {
  sockaddr_storage a{};
  if (ntohs(h.family) == AF_INET6) {
    auto& a6 = reinterpret_cast<sockaddr_in6&>(a);
    a6.sin6_family = AF_INET6;
    a6.sin6_port = h.port;
    memcpy(&a6.sin6_addr, h.addr, 16);
  } else {
    auto& a4 = reinterpret_cast<sockaddr_in&>(a);
    a4.sin_family = AF_INET;
    a4.sin_port = h.port;
    memcpy(&a4.sin_addr, h.addr + 12, 4);
  }
  return a;
}
constexpr uint32_t kDgramHeaderBytes = sizeof(DgramHeader);

enum class State { kInit, kBound, kListening, kConnecting, kConnected, kClosed };

struct RecvReady {
  uint32_t slot;
  uint32_t length;
  uint32_t consumed;
};

struct RemoteIomap {
  uint64_t offset, addr, length;
  uint32_t rkey;
};

struct LocalIomap {
  ibv_mr* mr;
  uint64_t offset;
};

struct Destination {
  sockaddr_storage addr;
  ibv_ah* ah;
  uint32_t qpn;
};

struct PendingConnection {
  rdma_cm_id* id;
  uint32_t window;
  uint32_t message_bytes;
};

struct RSocket {
  std::mutex mu;
  int type = SOCK_STREAM;
  int family = AF_INET;
  int fd = -1;
  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  State state = State::kInit;
  bool nonblocking = false;
  int so_error = 0;
  bool fin_sent = false, fin_received = false, peer_gone = false, shut_rd = false, shut_wr = false,
       reset = false;
  // options
  int rcvbuf = 0, sndbuf = 0, keepalive = 0, keepidle = 0, nodelay = 0, reuseaddr = 0;
  uint32_t sq_size = 0, rq_size = 0, inline_size = 0, iomap_size = 0;
  linger linger_opt{};
  // verbs resources
  ibv_context* verbs = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* cc = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<uint8_t> recv_mem, send_mem, ctrl_mem;
  ibv_mr *recv_mr = nullptr, *send_mr = nullptr, *ctrl_mr = nullptr;
  uint32_t recv_slots = 0, send_slots = 0, slot_bytes = 0, sq_depth = 0, sq_outstanding = 0;
  std::vector<uint32_t> free_send;
  std::deque<RecvReady> ready;
  std::optional<StreamCredits> credits;
  uint32_t peer_message_bytes = kMessageBytes;
  // riomap
  std::vector<LocalIomap> local_maps;
  std::vector<RemoteIomap> remote_maps;
  uint64_t next_iomap_offset = 0;
  // listening
  std::deque<PendingConnection> backlog;
  size_t backlog_max = 1;
  // datagram
  std::deque<Destination> destinations;
  std::optional<sockaddr_storage> connected_to;
  sockaddr_storage bound{};
  bool has_bound = false;
};

std::mutex g_table_mu;
std::map<int, std::shared_ptr<RSocket>> g_sockets;

int fail(int err) {
  errno = err;
  return -1;
}

std::shared_ptr<RSocket> lookup(int fd) {
  std::lock_guard lock(g_table_mu);
  auto it = g_sockets.find(fd);
  return it == g_sockets.end() ? nullptr : it->second;
}

socklen_t addr_len(int family) {
  return family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t now_ms() {
  return now_ns() / 1'000'000;
}

// How long a wait polls the socket's CQ before it arms it and sleeps, as rdma-core's rsockets
// polls for its polling_time: data or credits that arrive within it are taken by the waiting
// thread's own polls (which run the NIC's work, docs/ibverbs.md) instead of through the progress
// thread and a completion-channel wake-up, a context switch each way. UROCE_RSOCKET_SPIN_US
// overrides (0: sleep at once).
constexpr uint64_t kDefaultSpinUs = 50;

int64_t spin_ns() {
  static const int64_t ns =
      static_cast<int64_t>(uroce::api::ns_from_env("UROCE_RSOCKET_SPIN_US", kDefaultSpinUs));
  return ns;
}

uint32_t window_of(const RSocket& s) {
  uint32_t w = kDefaultWindow;
  if (s.rq_size)
    w = s.rq_size;
  else if (s.rcvbuf > 0)
    w = uint32_t(s.rcvbuf) / kMessageBytes;
  return std::clamp(w, kMinWindow, kMaxWindow);
}

uint32_t dgram_recv_slots(const RSocket& s) {
  const uint64_t buffer = s.rcvbuf > 0 ? uint64_t(s.rcvbuf) * 2 : kDefaultDgramBuffer;
  uint64_t slots = buffer / kDgramBufferPerSlot;
  if (s.rq_size) slots = std::min<uint64_t>(slots, s.rq_size);
  return uint32_t(std::clamp<uint64_t>(slots, kMinDgramSlots, kMaxDgramSlots));
}

// SO_RCVBUF / SO_SNDBUF as rgetsockopt reports them: the value set, doubled, or the default.
int reported_buffer(int set) {
  if (set <= 0) return int(kDefaultReportedBuffer);
  return int(std::min<int64_t>(int64_t(set) * 2, std::numeric_limits<int>::max()));
}

uint32_t iomaps_of(const RSocket& s) {
  return std::min<uint32_t>(s.iomap_size ? s.iomap_size : kMaxIomaps, kMaxIomaps);
}

void set_nonblock_fd(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// ---- verbs resources -------------------------------------------------------------------------

void free_resources(RSocket& s) {
  if (s.qp) {
    if (s.id && s.id->qp == s.qp)
      rdma_destroy_qp(s.id);
    else
      ibv_destroy_qp(s.qp);
    s.qp = nullptr;
  }
  for (auto& d : s.destinations) ibv_destroy_ah(d.ah);
  s.destinations.clear();
  for (auto& m : s.local_maps) ibv_dereg_mr(m.mr);
  s.local_maps.clear();
  if (s.recv_mr) ibv_dereg_mr(s.recv_mr);
  if (s.send_mr) ibv_dereg_mr(s.send_mr);
  if (s.ctrl_mr) ibv_dereg_mr(s.ctrl_mr);
  s.recv_mr = s.send_mr = s.ctrl_mr = nullptr;
  if (s.cq) ibv_destroy_cq(s.cq);
  s.cq = nullptr;
  if (s.cc) ibv_destroy_comp_channel(s.cc);
  s.cc = nullptr;
  if (s.pd) ibv_dealloc_pd(s.pd);
  s.pd = nullptr;
}

int post_recv_slot(RSocket& s, uint32_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(s.recv_mem.data()) + uint64_t(slot) * s.slot_bytes;
  sge.length = s.slot_bytes;
  sge.lkey = s.recv_mr->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = kRecvTag | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(s.qp, &wr, &bad);
}

// PD, CQ with its completion channel, buffers; the QP itself comes from rdma_create_qp (stream)
// or the verbs (datagram).
int alloc_common(RSocket& s, ibv_context* verbs, uint32_t recv_slots, uint32_t send_slots,
                 uint32_t slot_bytes) {
  s.verbs = verbs;
  s.pd = ibv_alloc_pd(verbs);
  if (!s.pd) return errno ? errno : ENOMEM;
  s.cc = ibv_create_comp_channel(verbs);
  if (!s.cc) return errno ? errno : ENOMEM;
  set_nonblock_fd(s.cc->fd);
  s.recv_slots = recv_slots;
  s.send_slots = send_slots;
  s.slot_bytes = slot_bytes;
  s.sq_depth = send_slots + recv_slots + 4;
  s.cq = ibv_create_cq(verbs, int(s.sq_depth + recv_slots), nullptr, s.cc, 0);
  if (!s.cq) return errno ? errno : ENOMEM;
  s.recv_mem.assign(size_t(recv_slots) * slot_bytes, 0);
  s.send_mem.assign(size_t(send_slots) * slot_bytes, 0);
  s.ctrl_mem.assign(kMaxIomaps * sizeof(IomapMessage) + 64, 0);
  s.recv_mr = ibv_reg_mr(s.pd, s.recv_mem.data(), s.recv_mem.size(), IBV_ACCESS_LOCAL_WRITE);
  s.send_mr = ibv_reg_mr(s.pd, s.send_mem.data(), s.send_mem.size(), IBV_ACCESS_LOCAL_WRITE);
  s.ctrl_mr = ibv_reg_mr(s.pd, s.ctrl_mem.data(), s.ctrl_mem.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!s.recv_mr || !s.send_mr || !s.ctrl_mr) return errno ? errno : ENOMEM;
  s.free_send.clear();
  for (uint32_t i = send_slots; i > 0; --i) s.free_send.push_back(i - 1);
  return 0;
}

int create_stream_qp(RSocket& s, rdma_cm_id* id) {
  const uint32_t window = window_of(s);
  const uint32_t slots = StreamCredits::receive_slots(window, iomaps_of(s));
  if (int err = alloc_common(s, id->verbs, slots, window, kMessageBytes)) return err;
  ibv_qp_init_attr attr{};
  attr.send_cq = s.cq;
  attr.recv_cq = s.cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = s.sq_depth;
  attr.cap.max_recv_wr = slots;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.sq_sig_all = 1;
  if (rdma_create_qp(id, s.pd, &attr)) return errno ? errno : ENOMEM;
  s.qp = id->qp;
  for (uint32_t i = 0; i < slots; ++i)
    if (int err = post_recv_slot(s, i)) return err;
  return 0;
}

ConnectHeader header_of(const RSocket& s) {
  ConnectHeader h{};
  memcpy(h.magic, kMagic, 4);
  h.window = htonl(window_of(s));
  h.message_bytes = htonl(kMessageBytes);
  return h;
}

// The peer's header; false when it is not an rsocket's.
bool read_header(const void* data, uint8_t len, uint32_t* window, uint32_t* message_bytes) {
  if (!data || len < sizeof(ConnectHeader)) return false;
  ConnectHeader h;
  memcpy(&h, data, sizeof h);
  if (memcmp(h.magic, kMagic, 4) != 0) return false;
  *window = ntohl(h.window);
  *message_bytes = ntohl(h.message_bytes);
  return *window >= 1 && *window <= kMaxWindow && *message_bytes >= 64 &&
         *message_bytes <= kMessageBytes;
}

// ---- posting ---------------------------------------------------------------------------------

int post_send(RSocket& s, ibv_send_wr& wr) {
  ibv_send_wr* bad = nullptr;
  wr.send_flags |= IBV_SEND_SIGNALED;
  if (int err = ibv_post_send(s.qp, &wr, &bad)) return err;
  ++s.sq_outstanding;
  return 0;
}

bool sq_room(const RSocket& s) {
  return s.sq_outstanding < s.sq_depth;
}

// A message with no payload (credit-only, FIN): no send slot.
int post_control(RSocket& s, MessageType type) {
  ibv_send_wr wr{};
  wr.wr_id = UINT32_MAX;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(encode_imm(type, s.credits->take_owed()));
  wr.num_sge = 0;
  return post_send(s, wr);
}

void maybe_send_credits(RSocket& s) {
  if (s.state != State::kConnected || s.reset || !s.credits) return;
  if (s.credits->credit_update_due(!s.ready.empty()) && sq_room(s))
    post_control(s, MessageType::kCredit);
}

// ---- progress --------------------------------------------------------------------------------

void on_stream_completion(RSocket& s, const ibv_wc& wc) {
  if (wc.wr_id & kRecvTag) {
    const uint32_t slot = uint32_t(wc.wr_id & 0xffffffff);
    if (wc.status != IBV_WC_SUCCESS) {
      if (!s.peer_gone && !s.fin_received) s.reset = true;
      return;
    }
    const uint32_t imm = ntohl(wc.imm_data);
    if (!s.credits->on_credits(imm_credits(imm))) s.reset = true;
    switch (imm_type(imm)) {
      case MessageType::kData:
        if (wc.byte_len == 0) {
          post_recv_slot(s, slot);
          s.credits->on_slot_reposted();
        } else {
          s.ready.push_back({slot, wc.byte_len, 0});
        }
        break;
      case MessageType::kCredit:
        post_recv_slot(s, slot);
        break;
      case MessageType::kFin:
        s.fin_received = true;
        post_recv_slot(s, slot);
        break;
      case MessageType::kIomap: {
        IomapMessage m;
        if (wc.byte_len == sizeof m && s.remote_maps.size() < kMaxIomaps) {
          memcpy(&m, s.recv_mem.data() + uint64_t(slot) * s.slot_bytes, sizeof m);
          s.remote_maps.push_back(
              {be64toh(m.offset), be64toh(m.addr), be64toh(m.length), ntohl(m.rkey)});
        }
        post_recv_slot(s, slot);
        break;
      }
    }
    return;
  }
  if (s.sq_outstanding) --s.sq_outstanding;
  if (wc.wr_id != UINT32_MAX && (wc.wr_id & 0xffffffff) < s.send_slots)
    s.free_send.push_back(uint32_t(wc.wr_id & 0xffffffff));
  if (wc.status != IBV_WC_SUCCESS && !s.peer_gone) s.reset = true;
}

void on_dgram_completion(RSocket& s, const ibv_wc& wc);

// Hands the CQ's completions to the socket; returns how many.
int take_completions(RSocket& s) {
  ibv_wc wc[16];
  int handled = 0;
  for (;;) {
    int n = ibv_poll_cq(s.cq, 16, wc);
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      if (s.type == SOCK_STREAM)
        on_stream_completion(s, wc[i]);
      else
        on_dgram_completion(s, wc[i]);
    }
    handled += n;
    if (n < 16) break;  // drained: another (empty) poll would only yield the CPU
  }
  return handled;
}

// take_completions() after reading the completion channel's events; returns how many.
int drain_cq(RSocket& s) {
  if (!s.cq) return 0;
  // Consume completion-channel events so its fd is quiet until the next armed completion.
  ibv_cq* ev_cq;
  void* ev_ctx;
  while (ibv_get_cq_event(s.cc, &ev_cq, &ev_ctx) == 0) ibv_ack_cq_events(ev_cq, 1);
  return take_completions(s);
}

void drain_cm(RSocket& s) {
  if (!s.channel) return;
  rdma_cm_event* e = nullptr;
  while (rdma_get_cm_event(s.channel, &e) == 0) {
    const rdma_cm_event_type type = e->event;
    rdma_cm_id* id = e->id;
    uint32_t window = 0, message_bytes = 0;
    bool header_ok = false;
    int status = e->status;
    if ((type == RDMA_CM_EVENT_ESTABLISHED && s.state == State::kConnecting) ||
        type == RDMA_CM_EVENT_CONNECT_REQUEST)
      header_ok = read_header(e->param.conn.private_data, e->param.conn.private_data_len, &window,
                              &message_bytes);
    rdma_ack_cm_event(e);
    switch (type) {
      case RDMA_CM_EVENT_CONNECT_REQUEST:
        if (header_ok && s.state == State::kListening && s.backlog.size() < s.backlog_max) {
          s.backlog.push_back({id, window, message_bytes});
        } else {
          rdma_reject(id, nullptr, 0);
          rdma_destroy_id(id);
        }
        break;
      case RDMA_CM_EVENT_ESTABLISHED:
        if (s.state == State::kConnecting) {
          if (!header_ok) {
            s.so_error = ECONNREFUSED;
            s.state = State::kClosed;
            rdma_disconnect(s.id);
            break;
          }
          s.credits.emplace(window, window_of(s));
          s.peer_message_bytes = message_bytes;
          s.state = State::kConnected;
        }
        break;
      case RDMA_CM_EVENT_REJECTED:
        if (s.state == State::kConnecting) {
          s.so_error = ECONNREFUSED;
          s.state = State::kClosed;
        }
        break;
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_CONNECT_ERROR:
      case RDMA_CM_EVENT_ADDR_ERROR:
      case RDMA_CM_EVENT_ROUTE_ERROR:
        if (s.state == State::kConnecting) {
          s.so_error = status == -ETIMEDOUT ? ETIMEDOUT : ECONNREFUSED;
          s.state = State::kClosed;
        } else {
          s.reset = true;
        }
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
        drain_cq(s);
        s.peer_gone = true;
        break;
      default:
        break;
    }
  }
}

void progress(RSocket& s) {
  drain_cq(s);
  drain_cm(s);
  if (s.type == SOCK_STREAM) maybe_send_credits(s);
}

// Sleeps until the socket's CQ or CM channel has news, or the deadline (-1: none). Called with
// the socket's lock held; releases it while sleeping.
void wait_news(RSocket& s, std::unique_lock<std::mutex>& lock, int timeout_ms) {
  if (s.cq && timeout_ms != 0) {
    // Each empty poll of the drop-in yields the CPU, and the lock is let go between polls so the
    // socket's other threads get in. The CQ is not armed meanwhile, so the channel has no event
    // to read: the polls alone, without drain_cq's system calls on the channel's fd.
    const int64_t until =
        now_ns() +
        std::min<int64_t>(spin_ns(), timeout_ms > 0 ? timeout_ms * 1'000'000LL : INT64_MAX);
    while (now_ns() < until) {
      if (take_completions(s) > 0) return;
      lock.unlock();
      lock.lock();
    }
  }
  pollfd fds[2];
  int n = 0;
  if (s.cq) {
    ibv_req_notify_cq(s.cq, 0);
    // Completions that arrived before the arm: the caller looks again instead of sleeping.
    if (drain_cq(s) > 0) return;
    fds[n++] = {s.cc->fd, POLLIN, 0};
  }
  if (s.channel) fds[n++] = {s.channel->fd, POLLIN, 0};
  lock.unlock();
  poll(fds, nfds_t(n), timeout_ms);
  lock.lock();
}

// ---- socket lifecycle ------------------------------------------------------------------------

int new_socket(int family, int type, rdma_port_space ps, std::shared_ptr<RSocket>* out) {
  auto s = std::make_shared<RSocket>();
  s->type = type;
  s->family = family;
  s->channel = rdma_create_event_channel();
  if (!s->channel) return errno ? errno : ENOMEM;
  set_nonblock_fd(s->channel->fd);
  if (rdma_create_id(s->channel, &s->id, s.get(), ps)) {
    int err = errno;
    rdma_destroy_event_channel(s->channel);
    return err;
  }
  s->fd = s->channel->fd;
  std::lock_guard lock(g_table_mu);
  if (g_sockets.size() >= kMaxSockets) {
    rdma_destroy_id(s->id);
    rdma_destroy_event_channel(s->channel);
    return EMFILE;
  }
  g_sockets[s->fd] = s;
  *out = s;
  return 0;
}

void destroy_socket(RSocket& s) {
  for (PendingConnection& p : s.backlog) {
    rdma_reject(p.id, nullptr, 0);
    rdma_destroy_id(p.id);
  }
  s.backlog.clear();
  free_resources(s);
  if (s.id) rdma_destroy_id(s.id);
  s.id = nullptr;
  if (s.channel) rdma_destroy_event_channel(s.channel);
  s.channel = nullptr;
}

bool blocking(const RSocket& s, int flags) {
  return !s.nonblocking && !(flags & MSG_DONTWAIT);
}

// ---- stream data -----------------------------------------------------------------------------

int stream_writable(RSocket& s) {
  return s.state == State::kConnected && !s.reset && !s.peer_gone && !s.shut_wr;
}

ssize_t stream_send(RSocket& s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                    int flags) {
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  size_t sent = 0;
  int vi = 0;
  size_t voff = 0;
  while (sent < total) {
    // Polling the CQ costs a pass of the NIC's work (and a yield when empty): only when the
    // send cannot go ahead as things stand.
    if (!stream_writable(s) || !s.credits->can_send_data() || s.free_send.empty() || !sq_room(s))
      progress(s);
    if (s.state == State::kConnecting && blocking(s, flags)) {
      wait_news(s, lock, -1);
      continue;
    }
    if (!stream_writable(s)) {
      if (sent) break;
      if (s.state != State::kConnected)
        return fail(s.state == State::kConnecting ? EAGAIN : ENOTCONN);
      return fail(s.reset ? ECONNRESET : EPIPE);
    }
    if (!s.credits->can_send_data() || s.free_send.empty() || !sq_room(s)) {
      if (sent && !blocking(s, flags)) break;
      if (!blocking(s, flags)) return fail(EAGAIN);
      wait_news(s, lock, -1);
      continue;
    }
    const uint32_t slot = s.free_send.back();
    s.free_send.pop_back();
    uint8_t* dst = s.send_mem.data() + uint64_t(slot) * s.slot_bytes;
    const size_t chunk = std::min<size_t>(total - sent, s.peer_message_bytes);
    size_t copied = 0;
    while (copied < chunk) {
      const size_t n = std::min(chunk - copied, iov[vi].iov_len - voff);
      memcpy(dst + copied, static_cast<const uint8_t*>(iov[vi].iov_base) + voff, n);
      copied += n;
      voff += n;
      if (voff == iov[vi].iov_len) {
        ++vi;
        voff = 0;
      }
    }
    ibv_sge sge{reinterpret_cast<uintptr_t>(dst), uint32_t(chunk), s.send_mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = slot;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(encode_imm(MessageType::kData, s.credits->take_owed()));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (int err = post_send(s, wr)) {
      s.free_send.push_back(slot);
      if (sent) break;
      return fail(err);
    }
    s.credits->on_data_sent();
    sent += chunk;
  }
  return ssize_t(sent);
}

bool stream_readable(const RSocket& s) {
  return !s.ready.empty() || s.fin_received || s.peer_gone || s.reset || s.shut_rd;
}

ssize_t stream_recv(RSocket& s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                    int flags) {
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (total == 0) return 0;
  size_t got = 0;
  int vi = 0;
  size_t voff = 0;
  for (;;) {
    // As in stream_send: the CQ only when nothing is queued to read.
    if (s.ready.empty()) progress(s);
    if (s.state == State::kConnecting) {
      if (!blocking(s, flags)) return fail(EAGAIN);
      wait_news(s, lock, -1);
      continue;
    }
    if (s.state != State::kConnected) return fail(ENOTCONN);
    while (got < total && !s.ready.empty()) {
      RecvReady& r = s.ready.front();
      const uint8_t* src = s.recv_mem.data() + uint64_t(r.slot) * s.slot_bytes + r.consumed;
      const size_t n = std::min<size_t>({r.length - r.consumed, iov[vi].iov_len - voff});
      memcpy(static_cast<uint8_t*>(iov[vi].iov_base) + voff, src, n);
      got += n;
      voff += n;
      if (voff == iov[vi].iov_len) {
        ++vi;
        voff = 0;
      }
      if (flags & MSG_PEEK) break;
      r.consumed += uint32_t(n);
      if (r.consumed == r.length) {
        const uint32_t slot = r.slot;
        s.ready.pop_front();
        post_recv_slot(s, slot);
        s.credits->on_slot_reposted();
      }
    }
    maybe_send_credits(s);
    if (got == total || (got && !(flags & MSG_WAITALL))) return ssize_t(got);
    if (got && (flags & MSG_PEEK)) return ssize_t(got);
    if (s.fin_received || s.peer_gone || s.shut_rd) return ssize_t(got);
    if (s.reset) {
      if (got) return ssize_t(got);
      return fail(ECONNRESET);
    }
    if (!blocking(s, flags)) {
      if (got) return ssize_t(got);
      return fail(EAGAIN);
    }
    wait_news(s, lock, -1);
  }
}

void send_fin(RSocket& s) {
  if (s.fin_sent || s.state != State::kConnected || s.reset || s.peer_gone) return;
  if (sq_room(s) && post_control(s, MessageType::kFin) == 0) s.fin_sent = true;
}

// ---- datagram --------------------------------------------------------------------------------

int ensure_dgram_qp(RSocket& s) {
  if (s.qp) return 0;
  ibv_context* verbs = s.id->verbs;
  int ndev = 0;
  ibv_context** devs = nullptr;
  if (!verbs) {
    devs = rdma_get_devices(&ndev);
    if (!devs || ndev == 0) {
      if (devs) rdma_free_devices(devs);
      return ENODEV;
    }
    verbs = devs[0];
  }
  ibv_port_attr port{};
  ibv_query_port(verbs, 1, &port);
  const uint32_t mtu = 128u << std::min<int>(port.active_mtu ? port.active_mtu : 1, 5);
  const uint32_t recv_slots = dgram_recv_slots(s);
  int err = alloc_common(s, verbs, recv_slots, kDgramSendSlots, mtu + kGrhBytes);
  if (devs) rdma_free_devices(devs);
  if (err) return err;
  ibv_qp_init_attr attr{};
  attr.send_cq = s.cq;
  attr.recv_cq = s.cq;
  attr.qp_type = IBV_QPT_UD;
  attr.cap.max_send_wr = s.sq_depth;
  attr.cap.max_recv_wr = recv_slots;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.sq_sig_all = 1;
  s.qp = ibv_create_qp(s.pd, &attr);
  if (!s.qp) return errno ? errno : ENOMEM;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = kRdmaUdpQkey;
  if (ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
    return errno ? errno : EINVAL;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  if (ibv_modify_qp(s.qp, &a, IBV_QP_STATE)) return errno ? errno : EINVAL;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  if (ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN)) return errno ? errno : EINVAL;
  for (uint32_t i = 0; i < recv_slots; ++i)
    if (int e = post_recv_slot(s, i)) return e;
  return 0;
}

bool same_addr(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    auto& x = reinterpret_cast<const sockaddr_in&>(a);
    auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  auto& x = reinterpret_cast<const sockaddr_in6&>(a);
  auto& y = reinterpret_cast<const sockaddr_in6&>(b);
  return x.sin6_port == y.sin6_port && memcmp(&x.sin6_addr, &y.sin6_addr, 16) == 0;
}

void remember_destination(RSocket& s, const sockaddr_storage& addr, ibv_ah* ah, uint32_t qpn) {
  for (auto it = s.destinations.begin(); it != s.destinations.end(); ++it) {
    if (same_addr(it->addr, addr)) {
      ibv_destroy_ah(it->ah);
      s.destinations.erase(it);
      break;
    }
  }
  if (s.destinations.size() >= kMaxDestinations) {
    ibv_destroy_ah(s.destinations.front().ah);
    s.destinations.pop_front();
  }
  s.destinations.push_back({addr, ah, qpn});
}

void on_dgram_completion(RSocket& s, const ibv_wc& wc) {
  if (wc.wr_id & kRecvTag) {
    const uint32_t slot = uint32_t(wc.wr_id & 0xffffffff);
    if (wc.status != IBV_WC_SUCCESS) return;
    if (wc.byte_len < kGrhBytes + kDgramHeaderBytes || s.ready.size() >= s.recv_slots) {
      post_recv_slot(s, slot);
      return;
    }
    s.ready.push_back({slot, wc.byte_len, 0});
    // The reply path: the sender's GID from the GRH and its QP, under the address it named.
    const uint8_t* base = s.recv_mem.data() + uint64_t(slot) * s.slot_bytes;
    DgramHeader h;
    memcpy(&h, base + kGrhBytes, sizeof h);
    const sockaddr_storage from = sender_address(h);
    bool known = false;
    for (auto& d : s.destinations) known |= same_addr(d.addr, from) && d.qpn == wc.src_qp;
    if (!known) {
      ibv_ah_attr ah{};
      ah.is_global = 1;
      // The 40 bytes before the payload: an IPv6 header, or for RoCEv2 over IPv4 the IPv4
      // header in their last 20 bytes (as rdma-core's providers place it).
      if ((base[0] >> 4) == 6) {
        memcpy(ah.grh.dgid.raw, base + 8, 16);
      } else {
        ah.grh.dgid.raw[10] = ah.grh.dgid.raw[11] = 0xff;
        memcpy(ah.grh.dgid.raw + 12, base + 20 + 12, 4);
      }
      ah.grh.hop_limit = 64;
      ah.port_num = 1;
      if (ibv_ah* a = ibv_create_ah(s.pd, &ah)) remember_destination(s, from, a, wc.src_qp);
    }
    return;
  }
  if (s.sq_outstanding) --s.sq_outstanding;
  if ((wc.wr_id & 0xffffffff) < s.send_slots) s.free_send.push_back(uint32_t(wc.wr_id));
}

// The destination's UD QP, resolved with SIDR on a short-lived id of its own.
int resolve_destination(RSocket& s, const sockaddr_storage& dst) {
  for (auto& d : s.destinations)
    if (same_addr(d.addr, dst)) return 0;
  rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) return errno;
  rdma_cm_id* id = nullptr;
  int err = 0;
  set_nonblock_fd(ch->fd);
  const int64_t deadline = now_ms() + kResolveTimeoutMs;
  auto wait = [&](rdma_cm_event_type want, uint32_t* qpn, ibv_ah_attr* ah) {
    rdma_cm_event* e = nullptr;
    while (rdma_get_cm_event(ch, &e)) {
      if (errno != EAGAIN) return errno;
      const int64_t left = deadline - now_ms();
      if (left <= 0) return ETIMEDOUT;
      pollfd p{ch->fd, POLLIN, 0};
      poll(&p, 1, int(left));
    }
    int r = e->event == want
                ? 0
                : (e->event == RDMA_CM_EVENT_UNREACHABLE ? EHOSTUNREACH : ECONNREFUSED);
    if (!r && qpn) {
      *qpn = e->param.ud.qp_num;
      *ah = e->param.ud.ah_attr;
    }
    rdma_ack_cm_event(e);
    return r;
  };
  uint32_t qpn = 0;
  ibv_ah_attr ah{};
  sockaddr* src = s.has_bound ? reinterpret_cast<sockaddr*>(&s.bound) : nullptr;
  sockaddr_storage src_any{};
  if (src) {
    memcpy(&src_any, src, sizeof src_any);
    reinterpret_cast<sockaddr_in&>(src_any).sin_port = 0;  // same offset for both families
    src = reinterpret_cast<sockaddr*>(&src_any);
  }
  if (rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP)) err = errno;
  if (!err && rdma_resolve_addr(id, src, (sockaddr*)&dst, kResolveTimeoutMs)) err = errno;
  if (!err) err = wait(RDMA_CM_EVENT_ADDR_RESOLVED, nullptr, nullptr);
  if (!err && rdma_resolve_route(id, kResolveTimeoutMs)) err = errno;
  if (!err) err = wait(RDMA_CM_EVENT_ROUTE_RESOLVED, nullptr, nullptr);
  rdma_conn_param param{};
  if (!err && rdma_connect(id, &param)) err = errno;
  if (!err) err = wait(RDMA_CM_EVENT_ESTABLISHED, &qpn, &ah);
  if (!err) {
    ibv_ah* a = ibv_create_ah(s.pd, &ah);
    if (!a)
      err = errno ? errno : ENOMEM;
    else
      remember_destination(s, dst, a, qpn);
  }
  if (id) rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  return err;
}

// A datagram socket's own address, carried in each datagram: the bound one (a wildcard made the
// device's address), else the device's with a port the socket's id is bound to, listening for
// SIDR so that the address names this socket.
int ensure_dgram_bound(RSocket& s) {
  if (s.has_bound && !(s.bound.ss_family == AF_INET &&
                       reinterpret_cast<sockaddr_in&>(s.bound).sin_addr.s_addr == INADDR_ANY))
    return 0;
  // Our address: the device's (its GID 0 is the IPv4-mapped or IPv6 address).
  ibv_gid gid{};
  if (ibv_query_gid(s.verbs, 1, 0, &gid)) return errno ? errno : ENODEV;
  sockaddr_storage local{};
  static constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (memcmp(gid.raw, kV4Mapped, 12) == 0) {
    auto& a4 = reinterpret_cast<sockaddr_in&>(local);
    a4.sin_family = AF_INET;
    memcpy(&a4.sin_addr, gid.raw + 12, 4);
  } else {
    auto& a6 = reinterpret_cast<sockaddr_in6&>(local);
    a6.sin6_family = AF_INET6;
    memcpy(&a6.sin6_addr, gid.raw, 16);
  }
  const uint16_t port = s.has_bound ? reinterpret_cast<sockaddr_in&>(s.bound).sin_port : 0;
  if (!s.has_bound) {
    reinterpret_cast<sockaddr_in&>(local).sin_port = 0;
    if (rdma_bind_addr(s.id, (sockaddr*)&local)) return errno;
    rdma_listen(s.id, int(kMaxBacklog));
    sockaddr* got = rdma_get_local_addr(s.id);
    memcpy(&s.bound, got, addr_len(got->sa_family));
    s.has_bound = true;
    return 0;
  }
  reinterpret_cast<sockaddr_in&>(local).sin_port = port;
  memcpy(&s.bound, &local, sizeof local);
  return 0;
}

// SIDR requests to a bound datagram socket: answered with its UD QP.
void answer_sidr(RSocket& s) {
  rdma_cm_event* e = nullptr;
  while (s.channel && rdma_get_cm_event(s.channel, &e) == 0) {
    rdma_cm_id* id = e->id;
    const bool request = e->event == RDMA_CM_EVENT_CONNECT_REQUEST;
    rdma_ack_cm_event(e);
    if (!request) continue;
    if (ensure_dgram_qp(s) == 0) {
      rdma_conn_param p{};
      p.qp_num = s.qp->qp_num;
      rdma_accept(id, &p);
    } else {
      rdma_reject(id, nullptr, 0);
    }
    rdma_destroy_id(id);
  }
}

ssize_t dgram_sendto(RSocket& s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                     int flags, const sockaddr* to, socklen_t tolen) {
  sockaddr_storage dst{};
  if (to) {
    if (tolen < addr_len(to->sa_family) || tolen > sizeof dst) return fail(EINVAL);
    memcpy(&dst, to, addr_len(to->sa_family));
  } else if (s.connected_to) {
    dst = *s.connected_to;
  } else {
    return fail(EDESTADDRREQ);
  }
  if (int err = ensure_dgram_qp(s)) return fail(err);
  if (int err = ensure_dgram_bound(s)) return fail(err);
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  if (total + kDgramHeaderBytes > s.slot_bytes - kGrhBytes) return fail(EMSGSIZE);
  const Destination* d = nullptr;
  for (;;) {
    answer_sidr(s);
    drain_cq(s);
    d = nullptr;
    for (auto& x : s.destinations)
      if (same_addr(x.addr, dst)) d = &x;
    if (!d) {
      lock.unlock();
      // Resolution waits for the peer's SIDR_REP: outside the lock, on a temporary id.
      int err = resolve_destination(s, dst);
      lock.lock();
      if (err) return fail(err);
      continue;
    }
    if (!s.free_send.empty() && sq_room(s)) break;
    if (!blocking(s, flags)) return fail(EAGAIN);
    wait_news(s, lock, -1);
  }
  const uint32_t slot = s.free_send.back();
  s.free_send.pop_back();
  uint8_t* out = s.send_mem.data() + uint64_t(slot) * s.slot_bytes;
  DgramHeader h{};
  h.family = htons(s.bound.ss_family);
  if (s.bound.ss_family == AF_INET6) {
    auto& a6 = reinterpret_cast<sockaddr_in6&>(s.bound);
    h.port = a6.sin6_port;
    memcpy(h.addr, &a6.sin6_addr, 16);
  } else {
    auto& a4 = reinterpret_cast<sockaddr_in&>(s.bound);
    h.port = a4.sin_port;
    memcpy(h.addr + 12, &a4.sin_addr, 4);
  }
  memcpy(out, &h, sizeof h);
  size_t off = sizeof h;
  for (int i = 0; i < iovcnt; ++i) {
    memcpy(out + off, iov[i].iov_base, iov[i].iov_len);
    off += iov[i].iov_len;
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(out), uint32_t(off), s.send_mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = slot;
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.ud.ah = d->ah;
  wr.wr.ud.remote_qpn = d->qpn;
  wr.wr.ud.remote_qkey = kRdmaUdpQkey;
  if (int err = post_send(s, wr)) {
    s.free_send.push_back(slot);
    return fail(err);
  }
  return ssize_t(total);
}

ssize_t dgram_recvfrom(RSocket& s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                       int flags, sockaddr* from, socklen_t* fromlen) {
  if (int err = ensure_dgram_qp(s)) return fail(err);
  for (;;) {
    answer_sidr(s);
    drain_cq(s);
    if (!s.ready.empty()) break;
    if (!blocking(s, flags)) return fail(EAGAIN);
    wait_news(s, lock, -1);
  }
  RecvReady r = s.ready.front();
  const uint8_t* base = s.recv_mem.data() + uint64_t(r.slot) * s.slot_bytes;
  DgramHeader h;
  memcpy(&h, base + kGrhBytes, sizeof h);
  const uint8_t* payload = base + kGrhBytes + kDgramHeaderBytes;
  const size_t len = r.length - kGrhBytes - kDgramHeaderBytes;
  size_t copied = 0;
  for (int i = 0; i < iovcnt && copied < len; ++i) {
    const size_t n = std::min(iov[i].iov_len, len - copied);
    memcpy(iov[i].iov_base, payload + copied, n);
    copied += n;
  }
  if (from && fromlen) {
    const sockaddr_storage a = sender_address(h);
    const socklen_t want = addr_len(a.ss_family);
    memcpy(from, &a, std::min(*fromlen, want));
    *fromlen = want;
  }
  if (!(flags & MSG_PEEK)) {
    s.ready.pop_front();
    post_recv_slot(s, r.slot);
  }
  return ssize_t(copied);
}

// ---- readiness for rpoll ---------------------------------------------------------------------

short readiness(RSocket& s) {
  short r = 0;
  if (s.type == SOCK_DGRAM) {
    answer_sidr(s);
    drain_cq(s);
    if (!s.ready.empty()) r |= POLLIN;
    if (!s.qp || (!s.free_send.empty() && sq_room(s))) r |= POLLOUT;
    return r;
  }
  progress(s);
  switch (s.state) {
    case State::kListening:
      if (!s.backlog.empty()) r |= POLLIN;
      break;
    case State::kConnected:
      if (stream_readable(s)) r |= POLLIN;
      if (stream_writable(s) && s.credits->can_send_data() && !s.free_send.empty() && sq_room(s))
        r |= POLLOUT;
      if (s.peer_gone || s.fin_received) r |= POLLRDHUP;
      // Hung up only once nothing is left to read (a peer that sent its last bytes and
      // disconnected is read to the end first, as a TCP peer's FIN).
      if (s.peer_gone && s.ready.empty()) r |= POLLHUP;
      if (s.reset) r |= POLLERR;
      break;
    case State::kClosed:
      r |= POLLOUT | POLLERR | POLLHUP;
      break;
    default:
      break;
  }
  return r;
}

int do_rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  // Nanoseconds: with a deadline in whole milliseconds, a wait woken by news that is not what the
  // caller polls for ended at the next millisecond boundary, short of the timeout poll promises.
  const int64_t deadline = timeout > 0 ? now_ns() + int64_t(timeout) * 1'000'000 : 0;
  std::vector<pollfd> real;
  std::vector<std::shared_ptr<RSocket>> socks(nfds);
  for (nfds_t i = 0; i < nfds; ++i) socks[i] = fds[i].fd >= 0 ? lookup(fds[i].fd) : nullptr;
  int64_t spin_until = 0;
  const bool any_rsocket = std::any_of(socks.begin(), socks.end(), [](const auto& p) { return p; });
  for (;;) {
    int ready = 0;
    real.clear();
    bool any_normal = false;
    for (nfds_t i = 0; i < nfds; ++i) {
      fds[i].revents = 0;
      if (socks[i]) {
        std::unique_lock lock(socks[i]->mu);
        fds[i].revents = short(readiness(*socks[i]) & (fds[i].events | POLLERR | POLLHUP));
        if (fds[i].revents) ++ready;
      } else {
        any_normal = true;
      }
    }
    // Normal fds: a non-blocking look now, so that their readiness joins the rsockets'.
    if (any_normal) {
      std::vector<pollfd> normal;
      std::vector<nfds_t> where;
      for (nfds_t i = 0; i < nfds; ++i)
        if (!socks[i]) {
          normal.push_back({fds[i].fd, fds[i].events, 0});
          where.push_back(i);
        }
      if (poll(normal.data(), normal.size(), 0) > 0)
        for (size_t k = 0; k < normal.size(); ++k)
          if ((fds[where[k]].revents = normal[k].revents)) ++ready;
    }
    if (ready || timeout == 0) return ready;
    // Poll before sleeping, as wait_news does: the look above ran each rsocket's CQ.
    const int64_t now = now_ns();
    if (spin_until == 0) spin_until = now + (any_rsocket ? spin_ns() : 0);
    if (now < spin_until && (timeout < 0 || now < deadline)) continue;
    timespec wait{};
    if (timeout > 0) {
      const int64_t left = deadline - now_ns();
      if (left <= 0) return 0;
      wait = {time_t(left / 1'000'000'000), long(left % 1'000'000'000)};
    }
    // Sleep on everything: the normal fds, and each rsocket's completion and event channels
    // (its CQ armed first; a completion between the look and the arm is found by the re-look).
    for (nfds_t i = 0; i < nfds; ++i) {
      if (!socks[i]) {
        real.push_back({fds[i].fd, fds[i].events, 0});
        continue;
      }
      RSocket& s = *socks[i];
      std::unique_lock lock(s.mu);
      if (s.cq) {
        ibv_req_notify_cq(s.cq, 0);
        real.push_back({s.cc->fd, POLLIN, 0});
      }
      if (s.channel) real.push_back({s.channel->fd, POLLIN, 0});
    }
    // Re-look after arming, so nothing that completed in between is slept through.
    bool now_ready = false;
    for (nfds_t i = 0; i < nfds && !now_ready; ++i) {
      if (!socks[i]) continue;
      std::unique_lock lock(socks[i]->mu);
      if (readiness(*socks[i]) & (fds[i].events | POLLERR | POLLHUP)) now_ready = true;
    }
    if (now_ready) continue;
    int r = ppoll(real.data(), real.size(), timeout > 0 ? &wait : nullptr, nullptr);
    if (r < 0) return -1;
  }
}

}  // namespace

// ---- the API ---------------------------------------------------------------------------------

UROCE_RSOCKET_EXPORT int rsocket(int domain, int type, int protocol) {
  if (domain != AF_INET && domain != AF_INET6) return fail(EAFNOSUPPORT);
  const int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (base != SOCK_STREAM && base != SOCK_DGRAM) return fail(EPROTONOSUPPORT);
  if (protocol && protocol != IPPROTO_TCP && protocol != IPPROTO_UDP) return fail(EPROTONOSUPPORT);
  std::shared_ptr<RSocket> s;
  if (int err = new_socket(domain, base, base == SOCK_STREAM ? RDMA_PS_TCP : RDMA_PS_UDP, &s))
    return fail(err);
  s->nonblocking = type & SOCK_NONBLOCK;
  return s->fd;
}

UROCE_RSOCKET_EXPORT int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!addr || addrlen < addr_len(addr->sa_family)) return fail(EINVAL);
  std::unique_lock lock(s->mu);
  if (s->state != State::kInit) return fail(EINVAL);
  if (rdma_bind_addr(s->id, const_cast<sockaddr*>(addr))) return -1;
  sockaddr* got = rdma_get_local_addr(s->id);
  memcpy(&s->bound, got, addr_len(got->sa_family));
  s->has_bound = true;
  s->state = State::kBound;
  if (s->type == SOCK_DGRAM) {
    // Others reach a bound datagram socket by SIDR on its port.
    if (rdma_listen(s->id, int(kMaxBacklog))) return -1;
    if (int err = ensure_dgram_qp(*s)) return fail(err);
  }
  return 0;
}

UROCE_RSOCKET_EXPORT int rlisten(int socket, int backlog) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  std::unique_lock lock(s->mu);
  if (s->type != SOCK_STREAM) return fail(EOPNOTSUPP);
  if (s->state == State::kListening) return 0;
  if (s->state != State::kBound) return fail(EINVAL);
  if (rdma_listen(s->id, backlog)) return -1;
  s->backlog_max = std::clamp<size_t>(backlog > 0 ? size_t(backlog) : 1, 1, kMaxBacklog);
  s->state = State::kListening;
  return 0;
}

UROCE_RSOCKET_EXPORT int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  auto l = lookup(socket);
  if (!l) return fail(EBADF);
  std::unique_lock lock(l->mu);
  if (l->state != State::kListening) return fail(EINVAL);
  for (;;) {
    drain_cm(*l);
    if (!l->backlog.empty()) break;
    if (l->nonblocking) return fail(EAGAIN);
    wait_news(*l, lock, -1);
  }
  const PendingConnection pc = l->backlog.front();
  l->backlog.pop_front();
  // The connection's own socket: a channel (its fd) of its own, the listener's options.
  auto s = std::make_shared<RSocket>();
  s->type = SOCK_STREAM;
  s->family = l->family;
  s->rcvbuf = l->rcvbuf;
  s->sndbuf = l->sndbuf;
  s->rq_size = l->rq_size;
  s->sq_size = l->sq_size;
  s->iomap_size = l->iomap_size;
  s->inline_size = l->inline_size;
  s->nodelay = l->nodelay;
  s->keepalive = l->keepalive;
  s->id = pc.id;
  s->channel = rdma_create_event_channel();
  int err = s->channel ? 0 : (errno ? errno : ENOMEM);
  if (!err) {
    set_nonblock_fd(s->channel->fd);
    if (rdma_migrate_id(pc.id, s->channel)) err = errno;
  }
  if (!err) err = create_stream_qp(*s, pc.id);
  if (!err) {
    s->credits.emplace(pc.window, window_of(*s));
    s->peer_message_bytes = pc.message_bytes;
    ConnectHeader h = header_of(*s);
    rdma_conn_param param{};
    param.private_data = &h;
    param.private_data_len = sizeof h;
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    if (rdma_accept(pc.id, &param)) err = errno ? errno : ECONNABORTED;
  }
  if (!err) {
    std::lock_guard table(g_table_mu);
    if (g_sockets.size() >= kMaxSockets)
      err = EMFILE;
    else
      g_sockets[s->channel->fd] = s;
  }
  if (err) {
    if (!s->qp) rdma_reject(pc.id, nullptr, 0);
    destroy_socket(*s);
    return fail(err);
  }
  s->fd = s->channel->fd;
  s->state = State::kConnected;
  if (addr && addrlen) {
    sockaddr* peer = rdma_get_peer_addr(pc.id);
    const socklen_t want = addr_len(peer->sa_family);
    memcpy(addr, peer, std::min(*addrlen, want));
    *addrlen = want;
  }
  return s->fd;
}

UROCE_RSOCKET_EXPORT int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!addr || addrlen < addr_len(addr->sa_family)) return fail(EINVAL);
  std::unique_lock lock(s->mu);
  if (s->type == SOCK_DGRAM) {
    sockaddr_storage dst{};
    memcpy(&dst, addr, addr_len(addr->sa_family));
    s->connected_to = dst;
    return 0;
  }
  if (s->state == State::kConnecting) return fail(EALREADY);
  if (s->state == State::kConnected) return fail(EISCONN);
  if (s->state != State::kInit && s->state != State::kBound) return fail(EINVAL);
  sockaddr* src = s->has_bound ? reinterpret_cast<sockaddr*>(&s->bound) : nullptr;
  if (rdma_resolve_addr(s->id, src, const_cast<sockaddr*>(addr), kResolveTimeoutMs)) return -1;
  auto wait_event = [&](rdma_cm_event_type want) -> int {
    const int64_t deadline = now_ms() + kResolveTimeoutMs;
    for (;;) {
      rdma_cm_event* e = nullptr;
      if (rdma_get_cm_event(s->channel, &e) == 0) {
        const rdma_cm_event_type got = e->event;
        rdma_ack_cm_event(e);
        return got == want ? 0 : EHOSTUNREACH;
      }
      if (errno != EAGAIN) return errno;
      const int64_t left = deadline - now_ms();
      if (left <= 0) return ETIMEDOUT;
      pollfd p{s->channel->fd, POLLIN, 0};
      poll(&p, 1, int(left));
    }
  };
  if (int err = wait_event(RDMA_CM_EVENT_ADDR_RESOLVED)) return fail(err);
  if (rdma_resolve_route(s->id, kResolveTimeoutMs)) return -1;
  if (int err = wait_event(RDMA_CM_EVENT_ROUTE_RESOLVED)) return fail(err);
  if (int err = create_stream_qp(*s, s->id)) {
    free_resources(*s);
    return fail(err);
  }
  ConnectHeader h = header_of(*s);
  rdma_conn_param param{};
  param.private_data = &h;
  param.private_data_len = sizeof h;
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_connect(s->id, &param)) {
    int err = errno;
    free_resources(*s);
    return fail(err);
  }
  s->state = State::kConnecting;
  if (s->nonblocking) return fail(EINPROGRESS);
  while (s->state == State::kConnecting) {
    progress(*s);
    if (s->state != State::kConnecting) break;
    wait_news(*s, lock, -1);
  }
  if (s->state != State::kConnected) {
    int err = s->so_error ? s->so_error : ECONNREFUSED;
    s->so_error = 0;
    return fail(err);
  }
  return 0;
}

UROCE_RSOCKET_EXPORT ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!msg) return fail(EINVAL);
  std::unique_lock lock(s->mu);
  if (s->type == SOCK_DGRAM)
    return dgram_sendto(*s, lock, msg->msg_iov, int(msg->msg_iovlen), flags,
                        static_cast<const sockaddr*>(msg->msg_name), msg->msg_namelen);
  return stream_send(*s, lock, msg->msg_iov, int(msg->msg_iovlen), flags);
}

UROCE_RSOCKET_EXPORT ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  iovec v{const_cast<void*>(buf), len};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  return rsendmsg(socket, &m, flags);
}

UROCE_RSOCKET_EXPORT ssize_t rsendto(int socket, const void* buf, size_t len, int flags,
                                     const sockaddr* to, socklen_t tolen) {
  iovec v{const_cast<void*>(buf), len};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_name = const_cast<sockaddr*>(to);
  m.msg_namelen = to ? tolen : 0;
  return rsendmsg(socket, &m, flags);
}

UROCE_RSOCKET_EXPORT ssize_t rwrite(int socket, const void* buf, size_t count) {
  return rsend(socket, buf, count, 0);
}

UROCE_RSOCKET_EXPORT ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = size_t(iovcnt);
  return rsendmsg(socket, &m, 0);
}

UROCE_RSOCKET_EXPORT ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!msg) return fail(EINVAL);
  std::unique_lock lock(s->mu);
  if (s->type == SOCK_DGRAM) {
    socklen_t len = msg->msg_namelen;
    ssize_t r = dgram_recvfrom(*s, lock, msg->msg_iov, int(msg->msg_iovlen), flags,
                               static_cast<sockaddr*>(msg->msg_name), &len);
    msg->msg_namelen = msg->msg_name ? len : 0;
    return r;
  }
  return stream_recv(*s, lock, msg->msg_iov, int(msg->msg_iovlen), flags);
}

UROCE_RSOCKET_EXPORT ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* from,
                                       socklen_t* fromlen) {
  iovec v{buf, len};
  msghdr m{};
  m.msg_iov = &v;
  m.msg_iovlen = 1;
  m.msg_name = from;
  m.msg_namelen = from && fromlen ? *fromlen : 0;
  ssize_t r = rrecvmsg(socket, &m, flags);
  if (r >= 0 && from && fromlen) *fromlen = m.msg_namelen;
  return r;
}

UROCE_RSOCKET_EXPORT ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  return rrecvfrom(socket, buf, len, flags, nullptr, nullptr);
}

UROCE_RSOCKET_EXPORT ssize_t rread(int socket, void* buf, size_t count) {
  return rrecv(socket, buf, count, 0);
}

UROCE_RSOCKET_EXPORT ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = size_t(iovcnt);
  return rrecvmsg(socket, &m, 0);
}

UROCE_RSOCKET_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  if (!fds && nfds) return fail(EFAULT);
  return do_rpoll(fds, nfds, timeout);
}

UROCE_RSOCKET_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                                 timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) return fail(EINVAL);
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (readfds && FD_ISSET(fd, readfds)) ev |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) ev |= POLLOUT;
    if (exceptfds && FD_ISSET(fd, exceptfds)) ev |= POLLPRI;
    if (ev) fds.push_back({fd, ev, 0});
  }
  const int ms = timeout ? int(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
  int r = do_rpoll(fds.data(), fds.size(), ms);
  if (r < 0) return r;
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  int count = 0;
  for (const pollfd& p : fds) {
    if (readfds && (p.revents & (POLLIN | POLLHUP | POLLERR)) && (p.events & POLLIN)) {
      FD_SET(p.fd, readfds);
      ++count;
    }
    if (writefds && (p.revents & (POLLOUT | POLLERR)) && (p.events & POLLOUT)) {
      FD_SET(p.fd, writefds);
      ++count;
    }
    if (exceptfds && (p.revents & POLLPRI)) {
      FD_SET(p.fd, exceptfds);
      ++count;
    }
  }
  if (timeout && r == 0) timeout->tv_sec = timeout->tv_usec = 0;
  return count;
}

UROCE_RSOCKET_EXPORT int rshutdown(int socket, int how) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  std::unique_lock lock(s->mu);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
  if (s->type == SOCK_DGRAM) return 0;
  if (s->state != State::kConnected) return fail(ENOTCONN);
  progress(*s);
  if (how != SHUT_RD) {
    s->shut_wr = true;
    send_fin(*s);
  }
  if (how != SHUT_WR) s->shut_rd = true;
  return 0;
}

UROCE_RSOCKET_EXPORT int rclose(int socket) {
  std::shared_ptr<RSocket> s;
  {
    std::lock_guard lock(g_table_mu);
    auto it = g_sockets.find(socket);
    if (it == g_sockets.end()) return fail(EBADF);
    s = it->second;
    g_sockets.erase(it);
  }
  std::unique_lock lock(s->mu);
  if (s->type == SOCK_STREAM && s->state == State::kConnected) {
    progress(*s);
    send_fin(*s);
    // Everything posted delivered (acknowledged) before the disconnect, whose DREQ travels
    // apart from the data and would flush it.
    const int64_t deadline = now_ms() + kCloseDrainMs;
    while (s->sq_outstanding && !s->reset && !s->peer_gone && now_ms() < deadline) {
      wait_news(*s, lock, int(std::max<int64_t>(1, deadline - now_ms())));
      drain_cq(*s);
      // The peer's DISCONNECTED (it may close first) would otherwise stay on the event channel,
      // and the wait above would return at once, again and again, until the deadline.
      drain_cm(*s);
    }
    rdma_disconnect(s->id);
  }
  destroy_socket(*s);
  return 0;
}

UROCE_RSOCKET_EXPORT int rsetsockopt(int socket, int level, int optname, const void* optval,
                                     socklen_t optlen) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  std::unique_lock lock(s->mu);
  auto int_value = [&](int* out) {
    if (!optval || optlen < sizeof(int)) return false;
    memcpy(out, optval, sizeof(int));
    return true;
  };
  int v = 0;
  // The socket-level and TCP options are kept as given: the library needs none of them to act.
  auto set_int = [&](int& field) { return int_value(&field) ? 0 : fail(EINVAL); };
  switch (level) {
    case SOL_SOCKET:
      switch (optname) {
        case SO_REUSEADDR:
          return set_int(s->reuseaddr);
        // Sizes a socket's buffers when they are made (connect, accept, the first datagram
        // call); later, as in rdma-core, the call succeeds and changes nothing.
        case SO_RCVBUF:
          if (!int_value(&v)) return fail(EINVAL);
          if (!s->qp) s->rcvbuf = std::max(v, 0);
          return 0;
        case SO_SNDBUF:
          if (!int_value(&v)) return fail(EINVAL);
          if (!s->qp) s->sndbuf = std::max(v, 0);
          return 0;
        case SO_KEEPALIVE:
          return set_int(s->keepalive);
        case SO_LINGER:
          if (!optval || optlen < sizeof(linger)) return fail(EINVAL);
          memcpy(&s->linger_opt, optval, sizeof(linger));
          return 0;
        default:
          return fail(ENOTSUP);
      }
    case IPPROTO_TCP:
      switch (optname) {
        case TCP_NODELAY:
          return set_int(s->nodelay);
        case TCP_KEEPIDLE:
          return set_int(s->keepidle);
        default:
          return fail(ENOTSUP);
      }
    case IPPROTO_IPV6:
      if (optname == IPV6_V6ONLY) return 0;
      return fail(ENOTSUP);
    case SOL_RDMA: {
      if (optname == RDMA_ROUTE) return 0;  // uroce resolves the route itself
      if (!int_value(&v) || v < 0) return fail(EINVAL);
      // Sizes apply to the connection made after them (as rdma-core).
      switch (optname) {
        case RDMA_SQSIZE:
          s->sq_size = uint32_t(v);
          return 0;
        case RDMA_RQSIZE:
          s->rq_size = uint32_t(v);
          return 0;
        case RDMA_INLINE:
          s->inline_size = uint32_t(v);
          return 0;
        case RDMA_IOMAPSIZE:
          s->iomap_size = uint32_t(v);
          return 0;
        default:
          return fail(ENOTSUP);
      }
    }
    default:
      return fail(ENOTSUP);
  }
}

UROCE_RSOCKET_EXPORT int rgetsockopt(int socket, int level, int optname, void* optval,
                                     socklen_t* optlen) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!optval || !optlen) return fail(EINVAL);
  std::unique_lock lock(s->mu);
  int v = 0;
  switch (level) {
    case SOL_SOCKET:
      switch (optname) {
        case SO_ERROR:
          progress(*s);
          v = s->so_error;
          s->so_error = 0;
          break;
        case SO_REUSEADDR:
          v = s->reuseaddr;
          break;
        case SO_RCVBUF:
          v = reported_buffer(s->rcvbuf);
          // A datagram socket's receive queue holds one slot per 2 KiB (dgram_recv_slots): once
          // made, the buffer is what its slots hold, if less (rdma-core's ds_set_qp_size).
          if (s->type == SOCK_DGRAM && s->qp)
            v = int(std::min<uint64_t>(uint64_t(v), uint64_t(s->recv_slots) * kDgramBufferPerSlot));
          break;
        case SO_SNDBUF:
          v = reported_buffer(s->sndbuf);
          if (v < int(kSendLowWater)) v = 2 * int(kSendLowWater);
          break;
        case SO_KEEPALIVE:
          v = s->keepalive;
          break;
        case SO_LINGER:
          if (*optlen < sizeof(linger)) return fail(EINVAL);
          memcpy(optval, &s->linger_opt, sizeof(linger));
          *optlen = sizeof(linger);
          return 0;
        default:
          return fail(ENOTSUP);
      }
      break;
    case IPPROTO_TCP:
      if (optname == TCP_NODELAY)
        v = s->nodelay;
      else if (optname == TCP_KEEPIDLE)
        v = s->keepidle;
      else if (optname == TCP_MAXSEG)
        v = int(kMessageBytes);
      else
        return fail(ENOTSUP);
      break;
    case SOL_RDMA:
      switch (optname) {
        case RDMA_SQSIZE:
          v = int(s->sq_size ? s->sq_size : window_of(*s));
          break;
        case RDMA_RQSIZE:
          v = int(window_of(*s));
          break;
        case RDMA_INLINE:
          v = int(s->inline_size);
          break;
        case RDMA_IOMAPSIZE:
          v = int(iomaps_of(*s));
          break;
        default:
          return fail(ENOTSUP);
      }
      break;
    default:
      return fail(ENOTSUP);
  }
  if (*optlen < sizeof(int)) return fail(EINVAL);
  memcpy(optval, &v, sizeof v);
  *optlen = sizeof(int);
  return 0;
}

UROCE_RSOCKET_EXPORT int rfcntl(int socket, int cmd, ...) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  std::unique_lock lock(s->mu);
  va_list args;
  va_start(args, cmd);
  int result = 0;
  switch (cmd) {
    case F_GETFL:
      result = O_RDWR | (s->nonblocking ? O_NONBLOCK : 0);
      break;
    case F_SETFL:
      s->nonblocking = va_arg(args, int) & O_NONBLOCK;
      break;
    default:
      result = fail(ENOTSUP);
      break;
  }
  va_end(args);
  return result;
}

UROCE_RSOCKET_EXPORT int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!addr || !addrlen) return fail(EINVAL);
  std::unique_lock lock(s->mu);
  sockaddr_storage a{};
  if (s->type == SOCK_DGRAM) {
    if (!s->connected_to) return fail(ENOTCONN);
    a = *s->connected_to;
  } else {
    if (s->state != State::kConnected) return fail(ENOTCONN);
    sockaddr* p = rdma_get_peer_addr(s->id);
    memcpy(&a, p, addr_len(p->sa_family));
  }
  const socklen_t want = addr_len(a.ss_family);
  memcpy(addr, &a, std::min(*addrlen, want));
  *addrlen = want;
  return 0;
}

UROCE_RSOCKET_EXPORT int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!addr || !addrlen) return fail(EINVAL);
  std::unique_lock lock(s->mu);
  sockaddr_storage a{};
  if (s->type == SOCK_DGRAM || s->state != State::kConnected) {
    if (s->has_bound)
      a = s->bound;
    else
      a.ss_family = sa_family_t(s->family);
  } else {
    sockaddr* p = rdma_get_local_addr(s->id);
    memcpy(&a, p, addr_len(p->sa_family));
  }
  const socklen_t want = addr_len(a.ss_family);
  memcpy(addr, &a, std::min(*addrlen, want));
  *addrlen = want;
  return 0;
}

// riomap: the buffer registered for remote writes and announced to the peer (an iomap message,
// ordered with the stream's data), at `offset` in the socket's window space (-1: the next free).
UROCE_RSOCKET_EXPORT off_t riomap(int socket, void* buf, size_t len, int prot, int flags,
                                  off_t offset) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!buf || !len || flags || !(prot & PROT_WRITE) || (prot & ~(PROT_READ | PROT_WRITE)))
    return fail(EINVAL);
  std::unique_lock lock(s->mu);
  progress(*s);
  if (s->type != SOCK_STREAM || !stream_writable(*s)) return fail(ENOTCONN);
  if (s->local_maps.size() >= iomaps_of(*s)) return fail(ENOMEM);
  if (!sq_room(*s)) return fail(EAGAIN);
  const uint64_t at = offset == -1 ? s->next_iomap_offset : uint64_t(offset);
  ibv_mr* mr = ibv_reg_mr(s->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!mr) return -1;
  IomapMessage m{htobe64(at), htobe64(reinterpret_cast<uintptr_t>(buf)), htobe64(len),
                 htonl(mr->rkey), 0};
  const size_t index = s->local_maps.size();
  uint8_t* slot = s->ctrl_mem.data() + index * sizeof m;
  memcpy(slot, &m, sizeof m);
  ibv_sge sge{reinterpret_cast<uintptr_t>(slot), uint32_t(sizeof m), s->ctrl_mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = UINT32_MAX;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(encode_imm(MessageType::kIomap, s->credits->take_owed()));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (int err = post_send(*s, wr)) {
    ibv_dereg_mr(mr);
    return fail(err);
  }
  s->local_maps.push_back({mr, at});
  s->next_iomap_offset = std::max(s->next_iomap_offset, at + len);
  return off_t(at);
}

// The registration ends; the peer keeps the window it was told of (rdma-core's behaves alike:
// the application must not unmap what the peer still writes to).
UROCE_RSOCKET_EXPORT int riounmap(int socket, void* buf, size_t len) {
  auto s = lookup(socket);
  if (!s) return fail(EBADF);
  std::unique_lock lock(s->mu);
  for (auto it = s->local_maps.begin(); it != s->local_maps.end(); ++it) {
    if (it->mr->addr == buf && it->mr->length == len) {
      ibv_dereg_mr(it->mr);
      s->local_maps.erase(it);
      return 0;
    }
  }
  return fail(EINVAL);
}

// An RDMA WRITE into the peer's window at `offset`, through a send slot (partial writes as
// rsend's).
UROCE_RSOCKET_EXPORT size_t riowrite(int socket, const void* buf, size_t count, off_t offset,
                                     int flags) {
  auto s = lookup(socket);
  if (!s) return size_t(fail(EBADF));
  std::unique_lock lock(s->mu);
  size_t done = 0;
  while (done < count) {
    progress(*s);
    if (!stream_writable(*s)) {
      if (done) break;
      return size_t(fail(s->reset ? ECONNRESET : ENOTCONN));
    }
    const uint64_t at = uint64_t(offset) + done;
    const RemoteIomap* map = nullptr;
    for (auto& m : s->remote_maps)
      if (at >= m.offset && at < m.offset + m.length) map = &m;
    if (!map) {
      if (done) break;
      return size_t(fail(EINVAL));
    }
    if (s->free_send.empty() || !sq_room(*s)) {
      if (!blocking(*s, flags)) {
        if (done) break;
        return size_t(fail(EAGAIN));
      }
      wait_news(*s, lock, -1);
      continue;
    }
    const size_t chunk =
        std::min<size_t>({count - done, s->slot_bytes, map->offset + map->length - at});
    const uint32_t slot = s->free_send.back();
    s->free_send.pop_back();
    uint8_t* src = s->send_mem.data() + uint64_t(slot) * s->slot_bytes;
    memcpy(src, static_cast<const uint8_t*>(buf) + done, chunk);
    ibv_sge sge{reinterpret_cast<uintptr_t>(src), uint32_t(chunk), s->send_mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kWriteTag | slot;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = map->addr + (at - map->offset);
    wr.wr.rdma.rkey = map->rkey;
    if (int err = post_send(*s, wr)) {
      s->free_send.push_back(slot);
      if (done) break;
      return size_t(fail(err));
    }
    done += chunk;
  }
  return done;
}
