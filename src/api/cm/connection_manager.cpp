#include "api/cm/connection_manager.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/bytes.h"
#include "link/share/steer_decision.h"

namespace uroce::cm {
namespace {

using namespace wire;

template <size_t N>
bool copy_private(std::array<uint8_t, N>& to, std::span<const uint8_t> from) {
  if (from.size() > N) return false;
  std::copy(from.begin(), from.end(), to.begin());
  return true;
}

template <size_t N>
std::vector<uint8_t> to_vector(const std::array<uint8_t, N>& a) {
  return {a.begin(), a.end()};
}

bool live(ConnState s) {
  return s == ConnState::kRepSent || s == ConnState::kMraRepRcvd || s == ConnState::kEstablished ||
         s == ConnState::kDreqSent || s == ConnState::kRepRcvd;
}

}  // namespace

const char* to_string(CmEventType t) {
  switch (t) {
    case CmEventType::kConnectRequest:
      return "CONNECT_REQUEST";
    case CmEventType::kConnectResponse:
      return "CONNECT_RESPONSE";
    case CmEventType::kEstablished:
      return "ESTABLISHED";
    case CmEventType::kRejected:
      return "REJECTED";
    case CmEventType::kUnreachable:
      return "UNREACHABLE";
    case CmEventType::kDisconnected:
      return "DISCONNECTED";
    case CmEventType::kTimewaitExit:
      return "TIMEWAIT_EXIT";
    case CmEventType::kSidrRequest:
      return "SIDR_REQUEST";
    case CmEventType::kSidrResolved:
      return "SIDR_RESOLVED";
  }
  return "?";
}

const char* to_string(ConnState s) {
  switch (s) {
    case ConnState::kReqSent:
      return "REQ_SENT";
    case ConnState::kMraReqRcvd:
      return "MRA_REQ_RCVD";
    case ConnState::kRepRcvd:
      return "REP_RCVD";
    case ConnState::kReqRcvd:
      return "REQ_RCVD";
    case ConnState::kRepSent:
      return "REP_SENT";
    case ConnState::kMraRepRcvd:
      return "MRA_REP_RCVD";
    case ConnState::kEstablished:
      return "ESTABLISHED";
    case ConnState::kDreqSent:
      return "DREQ_SENT";
    case ConnState::kTimewait:
      return "TIMEWAIT";
    case ConnState::kSidrReqSent:
      return "SIDR_REQ_SENT";
    case ConnState::kSidrReqRcvd:
      return "SIDR_REQ_RCVD";
    case ConnState::kSidrAnswered:
      return "SIDR_ANSWERED";
  }
  return "?";
}

ConnectionManager::ConnectionManager(Gid local_gid, CmConfig config)
    : local_gid_(local_gid), config_(config), next_comm_id_(config.first_comm_id) {
  config_.max_cm_retries = std::min<uint8_t>(config_.max_cm_retries, 15);
  config_.cm_response_timeout = std::min<uint8_t>(config_.cm_response_timeout, 31);
  config_.mra_service_timeout = std::min<uint8_t>(config_.mra_service_timeout, 31);
}

// ---- tables --------------------------------------------------------------------------------

ConnectionManager::Conn* ConnectionManager::find(ConnId id) {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : &it->second;
}
const ConnectionManager::Conn* ConnectionManager::find(ConnId id) const {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : &it->second;
}

ConnectionManager::Conn* ConnectionManager::addressed(const Gid& peer, uint32_t our_id,
                                                      uint32_t their_id) {
  Conn* c = find(our_id);
  if (!c || c->peer != peer) return nullptr;
  // Before the peer's REP we do not know its comm ID; after it, a mismatch is a stale message.
  if (c->remote_comm_id != 0 && c->remote_comm_id != their_id) return nullptr;
  return c;
}

ConnId ConnectionManager::next_comm_id() {
  // Comm ID 0 means "none" on the wire; skip it and any still in use.
  for (;;) {
    ConnId id = next_comm_id_++;
    if (config_.comm_id_slot)
      id = *config_.comm_id_slot << UROCE_SHARE_COMM_ID_SHIFT |
           (id & ((1u << UROCE_SHARE_COMM_ID_SHIFT) - 1));
    if (id != 0 && !conns_.count(id)) return id;
  }
}

ConnectionManager::Conn* ConnectionManager::new_conn(Nanos) {
  if (conns_.size() >= config_.max_connections) {
    ++counters_.table_full;
    return nullptr;
  }
  const ConnId id = next_comm_id();
  Conn& c = conns_[id];
  c.id = id;
  return &c;
}

void ConnectionManager::erase(ConnId id) {
  conns_.erase(id);
}

std::optional<ListenerId> ConnectionManager::listener_for(uint64_t service_id) const {
  for (const auto& [id, sid] : listeners_)
    if (sid == service_id) return id;
  return std::nullopt;
}

std::optional<ConnState> ConnectionManager::state(ConnId id) const {
  const Conn* c = find(id);
  if (!c) return std::nullopt;
  return c->state;
}

// ---- output --------------------------------------------------------------------------------

void ConnectionManager::send(const Gid& peer, const CmMad& mad) {
  if (outgoing_.size() >= config_.max_outgoing) {
    ++counters_.outgoing_dropped;  // as if lost on the wire: the retry timers recover
    return;
  }
  OutgoingMad out;
  out.peer = peer;
  build_cm_mad(mad, out.bytes);
  outgoing_.push_back(out);
  ++counters_.sent;
}

void ConnectionManager::send_with_retry(Conn& c, const CmMad& mad, Nanos now) {
  build_cm_mad(mad, c.last_sent);
  send(c.peer, mad);
  c.retries_left = c.max_retries;
  c.deadline = now + c.response_timeout;
}

void ConnectionManager::resend(Conn& c) {
  if (outgoing_.size() >= config_.max_outgoing) {
    ++counters_.outgoing_dropped;
    return;
  }
  outgoing_.push_back({c.peer, c.last_sent});
  ++counters_.sent;
}

void ConnectionManager::send_rej(const Gid& peer, uint64_t tid, uint32_t our_id, uint32_t their_id,
                                 CmMessageRef what, uint16_t reason,
                                 std::span<const uint8_t> private_data) {
  CmRej rej;
  rej.local_comm_id = our_id;
  rej.remote_comm_id = their_id;
  rej.message_rejected = what;
  rej.reason = reason;
  if (reason == rej_reason::kTimeout) {
    // IBA 12.6.7.2: a timeout REJ names the rejecting CA by its GUID in the ARI, which is how
    // Linux's CM finds the connection a REJ (timeout) is about.
    store_be64(rej.ari.data(), config_.local_ca_guid);
    rej.reject_info_length = 8;
  }
  copy_private(rej.private_data, private_data);
  CmMad mad{{}, rej};
  mad.header.transaction_id = tid;
  send(peer, mad);
}

void ConnectionManager::send_drep(const Gid& peer, uint64_t tid, uint32_t our_id,
                                  uint32_t their_id) {
  CmDrep drep;
  drep.local_comm_id = our_id;
  drep.remote_comm_id = their_id;
  CmMad mad{{}, drep};
  mad.header.transaction_id = tid;
  send(peer, mad);
}

CmEvent ConnectionManager::event_for(const Conn& c, CmEventType t) const {
  CmEvent e;
  e.type = t;
  e.conn = c.id;
  e.listener = c.listener;
  e.peer = c.peer;
  return e;
}

void ConnectionManager::emit(const Conn& c, CmEvent e) {
  if (c.detached) return;
  if (events_.size() >= config_.max_events) {
    ++counters_.events_dropped;
    return;
  }
  events_.push_back(std::move(e));
}

std::optional<OutgoingMad> ConnectionManager::pop_outgoing() {
  if (outgoing_.empty()) return std::nullopt;
  OutgoingMad m = outgoing_.front();
  outgoing_.pop_front();
  return m;
}

std::optional<CmEvent> ConnectionManager::pop_event() {
  if (events_.empty()) return std::nullopt;
  CmEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

Nanos ConnectionManager::next_deadline() const {
  Nanos d = kNever;
  for (const auto& [id, c] : conns_) d = std::min(d, c.deadline);
  return d;
}

// ---- consumer calls ------------------------------------------------------------------------

Result<ListenerId> ConnectionManager::listen(uint64_t service_id) {
  if (listener_for(service_id)) return Err(EADDRINUSE);
  if (listeners_.size() >= config_.max_listeners) return Err(ENOSPC);
  const ListenerId id = next_listener_++;
  listeners_[id] = service_id;
  return id;
}

int ConnectionManager::stop_listening(ListenerId id) {
  return listeners_.erase(id) ? 0 : ENOENT;
}

Result<ConnId> ConnectionManager::connect(const ConnectParams& p, Nanos now) {
  if (p.private_data.size() > kReqPrivateBytes || p.qpn == 0 || p.qpn > 0xffffff ||
      p.ece.vendor_id > 0xffffff)
    return Err(EINVAL);
  Conn* c = new_conn(now);
  if (!c) return Err(ENOSPC);
  c->active = true;
  c->state = ConnState::kReqSent;
  c->peer = p.peer;
  c->local_qpn = p.qpn;
  c->service_id = p.service_id;
  c->transaction_id = c->id;
  c->response_timeout =
      2 * cm_timeout_ns(config_.packet_lifetime) + cm_timeout_ns(config_.cm_response_timeout);
  c->max_retries = config_.max_cm_retries;

  CmReq req;
  req.local_comm_id = c->id;
  req.service_id = p.service_id;
  req.local_ca_guid = config_.local_ca_guid;
  req.local_qpn = p.qpn;
  req.responder_resources = p.responder_resources;
  req.initiator_depth = p.initiator_depth;
  req.remote_cm_response_timeout = config_.cm_response_timeout;
  req.transport = p.transport;
  req.extended_transport = p.extended_transport;
  req.starting_psn = p.starting_psn & 0xffffff;
  req.local_cm_response_timeout = config_.cm_response_timeout;
  req.retry_count = p.retry_count;
  req.path_mtu = p.path_mtu;
  req.rnr_retry_count = p.rnr_retry_count;
  req.max_cm_retries = config_.max_cm_retries;
  req.srq = p.srq;
  req.primary = p.primary;
  req.vendor_id = p.ece.vendor_id;
  copy_private(req.private_data, p.private_data);
  CmMad mad{{}, req};
  mad.header.transaction_id = c->transaction_id;
  mad.header.attribute_modifier = p.ece.options;
  send_with_retry(*c, mad, now);
  return c->id;
}

int ConnectionManager::accept(ConnId id, const AcceptParams& p, Nanos now) {
  Conn* c = find(id);
  if (!c) return ENOENT;
  if (c->state != ConnState::kReqRcvd || p.private_data.size() > kRepPrivateBytes || p.qpn == 0 ||
      p.qpn > 0xffffff || p.ece.vendor_id > 0xffffff)
    return EINVAL;
  c->local_qpn = p.qpn;
  CmRep rep;
  rep.local_comm_id = c->id;
  rep.remote_comm_id = c->remote_comm_id;
  rep.local_qpn = p.qpn;
  rep.starting_psn = p.starting_psn & 0xffffff;
  rep.responder_resources = p.responder_resources;
  rep.initiator_depth = p.initiator_depth;
  rep.rnr_retry_count = p.rnr_retry_count;
  rep.srq = p.srq;
  rep.local_ca_guid = config_.local_ca_guid;
  rep.vendor_id = p.ece.vendor_id;
  copy_private(rep.private_data, p.private_data);
  CmMad mad{{}, rep};
  mad.header.transaction_id = c->transaction_id;
  mad.header.attribute_modifier = p.ece.options;
  c->state = ConnState::kRepSent;
  send_with_retry(*c, mad, now);
  return 0;
}

int ConnectionManager::establish(ConnId id, std::span<const uint8_t> private_data, Nanos) {
  Conn* c = find(id);
  if (!c) return ENOENT;
  if (c->state != ConnState::kRepRcvd || private_data.size() > kRtuPrivateBytes) return EINVAL;
  CmRtu rtu;
  rtu.local_comm_id = c->id;
  rtu.remote_comm_id = c->remote_comm_id;
  copy_private(rtu.private_data, private_data);
  CmMad mad{{}, rtu};
  mad.header.transaction_id = c->transaction_id;
  build_cm_mad(mad, c->last_sent);  // a repeated REP gets this RTU again
  send(c->peer, mad);
  c->state = ConnState::kEstablished;
  c->deadline = kNever;
  emit(*c, event_for(*c, CmEventType::kEstablished));
  return 0;
}

int ConnectionManager::reject(ConnId id, std::span<const uint8_t> private_data, Nanos,
                              uint16_t reason) {
  Conn* c = find(id);
  if (!c) return ENOENT;
  if (private_data.size() > kRejPrivateBytes) return EINVAL;
  CmMessageRef what;
  if (c->state == ConnState::kReqRcvd)
    what = CmMessageRef::kReq;
  else if (c->state == ConnState::kRepRcvd)
    what = CmMessageRef::kRep;
  else
    return EINVAL;
  send_rej(c->peer, c->transaction_id, c->id, c->remote_comm_id, what, reason, private_data);
  erase(id);
  return 0;
}

void ConnectionManager::start_disconnect(Conn& c, std::span<const uint8_t> private_data,
                                         Nanos now) {
  CmDreq dreq;
  dreq.local_comm_id = c.id;
  dreq.remote_comm_id = c.remote_comm_id;
  dreq.remote_qpn = c.remote_qpn;
  copy_private(dreq.private_data, private_data);
  CmMad mad{{}, dreq};
  mad.header.transaction_id = c.transaction_id;
  c.state = ConnState::kDreqSent;
  c.max_retries = config_.max_cm_retries;
  send_with_retry(c, mad, now);
}

int ConnectionManager::disconnect(ConnId id, std::span<const uint8_t> private_data, Nanos now) {
  Conn* c = find(id);
  if (!c) return ENOENT;
  if (private_data.size() > kDreqPrivateBytes) return EINVAL;
  if (c->state != ConnState::kEstablished && c->state != ConnState::kRepSent &&
      c->state != ConnState::kMraRepRcvd)
    return EINVAL;
  start_disconnect(*c, private_data, now);
  return 0;
}

int ConnectionManager::notify_established(ConnId id, Nanos) {
  Conn* c = find(id);
  if (!c) return ENOENT;
  if (c->state != ConnState::kRepSent && c->state != ConnState::kMraRepRcvd) return EINVAL;
  c->state = ConnState::kEstablished;
  c->deadline = kNever;
  emit(*c, event_for(*c, CmEventType::kEstablished));
  return 0;
}

int ConnectionManager::destroy(ConnId id, Nanos now) {
  Conn* c = find(id);
  if (!c) return ENOENT;
  c->detached = true;
  switch (c->state) {
    case ConnState::kEstablished:
      start_disconnect(*c, {}, now);
      return 0;
    case ConnState::kDreqSent:
    case ConnState::kTimewait:
    case ConnState::kSidrAnswered:
      return 0;  // finishes on its own, silently
    case ConnState::kReqSent:
    case ConnState::kMraReqRcvd:
      send_rej(c->peer, c->transaction_id, c->id, 0, CmMessageRef::kReq, rej_reason::kTimeout, {});
      break;
    case ConnState::kReqRcvd:
      send_rej(c->peer, c->transaction_id, c->id, c->remote_comm_id, CmMessageRef::kReq,
               rej_reason::kConsumerDefined, {});
      break;
    case ConnState::kRepRcvd:
      send_rej(c->peer, c->transaction_id, c->id, c->remote_comm_id, CmMessageRef::kRep,
               rej_reason::kConsumerDefined, {});
      break;
    case ConnState::kRepSent:
    case ConnState::kMraRepRcvd:
      send_rej(c->peer, c->transaction_id, c->id, c->remote_comm_id, CmMessageRef::kRep,
               rej_reason::kConsumerDefined, {});
      break;
    case ConnState::kSidrReqSent:
      break;
    case ConnState::kSidrReqRcvd: {
      sidr_reject(id, {}, now);
      return 0;
    }
  }
  erase(id);
  return 0;
}

Result<ConnId> ConnectionManager::sidr_resolve(const Gid& peer, uint64_t service_id,
                                               std::span<const uint8_t> private_data, Nanos now) {
  if (private_data.size() > kSidrReqPrivateBytes) return Err(EINVAL);
  Conn* c = new_conn(now);
  if (!c) return Err(ENOSPC);
  c->active = true;
  c->state = ConnState::kSidrReqSent;
  c->peer = peer;
  c->service_id = service_id;
  c->transaction_id = c->id;
  c->response_timeout =
      2 * cm_timeout_ns(config_.packet_lifetime) + cm_timeout_ns(config_.cm_response_timeout);
  c->max_retries = config_.max_cm_retries;
  CmSidrReq req;
  req.request_id = c->id;
  req.service_id = service_id;
  copy_private(req.private_data, private_data);
  CmMad mad{{}, req};
  mad.header.transaction_id = c->transaction_id;
  send_with_retry(*c, mad, now);
  return c->id;
}

int ConnectionManager::sidr_reply(ConnId id, uint32_t qpn, uint32_t qkey,
                                  std::span<const uint8_t> private_data, Nanos now) {
  Conn* c = find(id);
  if (!c) return ENOENT;
  if (c->state != ConnState::kSidrReqRcvd || private_data.size() > kSidrRepPrivateBytes ||
      qpn > 0xffffff)
    return EINVAL;
  CmSidrRep rep;
  rep.request_id = c->remote_comm_id;
  rep.status = sidr_status::kValid;
  rep.qpn = qpn;
  rep.service_id = c->service_id;
  rep.qkey = qkey;
  copy_private(rep.private_data, private_data);
  CmMad mad{{}, rep};
  mad.header.transaction_id = c->transaction_id;
  build_cm_mad(mad, c->last_sent);
  send(c->peer, mad);
  c->state = ConnState::kSidrAnswered;
  c->deadline = now + config_.timewait;
  return 0;
}

int ConnectionManager::sidr_reject(ConnId id, std::span<const uint8_t> private_data, Nanos now) {
  Conn* c = find(id);
  if (!c) return ENOENT;
  if (c->state != ConnState::kSidrReqRcvd || private_data.size() > kSidrRepPrivateBytes)
    return EINVAL;
  CmSidrRep rep;
  rep.request_id = c->remote_comm_id;
  rep.status = sidr_status::kRejected;
  rep.service_id = c->service_id;
  copy_private(rep.private_data, private_data);
  CmMad mad{{}, rep};
  mad.header.transaction_id = c->transaction_id;
  build_cm_mad(mad, c->last_sent);
  send(c->peer, mad);
  c->state = ConnState::kSidrAnswered;
  c->deadline = now + config_.timewait;
  return 0;
}

// ---- input ---------------------------------------------------------------------------------

void ConnectionManager::receive(const Gid& peer, std::span<const uint8_t> bytes, Nanos now) {
  ++counters_.received;
  auto mad = parse_cm_mad(bytes);
  if (!mad) {
    ++counters_.malformed;
    return;
  }
  const MadHeader& h = mad->header;
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, CmReq>) on_req(peer, h, m, now);
        if constexpr (std::is_same_v<M, CmMra>) on_mra(peer, m, now);
        if constexpr (std::is_same_v<M, CmRej>) on_rej(peer, m);
        if constexpr (std::is_same_v<M, CmRep>) on_rep(peer, h, m, now);
        if constexpr (std::is_same_v<M, CmRtu>) on_rtu(peer, m);
        if constexpr (std::is_same_v<M, CmDreq>) on_dreq(peer, h, m, now);
        if constexpr (std::is_same_v<M, CmDrep>) on_drep(peer, m, now);
        if constexpr (std::is_same_v<M, CmSidrReq>) on_sidr_req(peer, h, m, now);
        if constexpr (std::is_same_v<M, CmSidrRep>) on_sidr_rep(peer, m);
      },
      mad->message);
}

void ConnectionManager::on_req(const Gid& peer, const MadHeader& h, const CmReq& m, Nanos now) {
  // A repeated REQ: the record that came from it answers again.
  for (auto& [id, c] : conns_) {
    if (c.active || c.peer != peer || c.remote_comm_id != m.local_comm_id ||
        c.remote_ca_guid != m.local_ca_guid || c.state == ConnState::kSidrAnswered ||
        c.state == ConnState::kSidrReqRcvd)
      continue;
    ++counters_.duplicates;
    switch (c.state) {
      case ConnState::kReqRcvd: {
        // The consumer is still deciding: ask the active side for more time.
        CmMra mra;
        mra.local_comm_id = c.id;
        mra.remote_comm_id = c.remote_comm_id;
        mra.message_mraed = CmMessageRef::kReq;
        mra.service_timeout = config_.mra_service_timeout;
        CmMad mad{{}, mra};
        mad.header.transaction_id = c.transaction_id;
        send(c.peer, mad);
        c.deadline = std::max(c.deadline, now + (2 * cm_timeout_ns(config_.packet_lifetime) +
                                                 cm_timeout_ns(config_.mra_service_timeout)) *
                                                    (c.max_retries + 1u));
        break;
      }
      case ConnState::kRepSent:
      case ConnState::kMraRepRcvd:
        resend(c);  // the same REP
        break;
      case ConnState::kTimewait:
        ++counters_.stale;
        send_rej(peer, h.transaction_id, c.id, m.local_comm_id, CmMessageRef::kReq,
                 rej_reason::kStaleConn, {});
        break;
      default:
        break;  // established or disconnecting: an old copy, dropped
    }
    return;
  }

  // The same remote QP on a connection we still hold: the peer lost its state (IBA 12.9.8.3).
  // A connection in timewait no longer holds the remote QP, as in Linux's CM (it leaves the
  // remote-QPN table on entering timewait): a restarted peer's QPs reuse their numbers at once.
  for (auto& [id, c] : conns_) {
    if (c.peer != peer || c.remote_qpn != m.local_qpn || c.remote_qpn == 0 ||
        c.remote_ca_guid != m.local_ca_guid || !live(c.state))
      continue;
    ++counters_.stale;
    send_rej(peer, h.transaction_id, 0, m.local_comm_id, CmMessageRef::kReq, rej_reason::kStaleConn,
             {});
    // Its DREP (or the DREQ's timeout) reports DISCONNECTED.
    if (c.state == ConnState::kEstablished) start_disconnect(c, {}, now);
    return;
  }

  const auto listener = listener_for(m.service_id);
  if (!listener) {
    ++counters_.no_listener;
    send_rej(peer, h.transaction_id, 0, m.local_comm_id, CmMessageRef::kReq,
             rej_reason::kInvalidServiceId, {});
    return;
  }
  const bool xrc =
      m.transport == CmTransport::kExtended && m.extended_transport == wire::kExtendedTransportXrc;
  if (m.transport != CmTransport::kRc && m.transport != CmTransport::kUc && !xrc) {
    send_rej(peer, h.transaction_id, 0, m.local_comm_id, CmMessageRef::kReq,
             rej_reason::kInvalidTransportType, {});
    return;
  }
  Conn* c = new_conn(now);
  if (!c) {
    send_rej(peer, h.transaction_id, 0, m.local_comm_id, CmMessageRef::kReq,
             rej_reason::kNoResources, {});
    return;
  }
  c->state = ConnState::kReqRcvd;
  c->peer = peer;
  c->remote_comm_id = m.local_comm_id;
  c->remote_ca_guid = m.local_ca_guid;
  c->remote_qpn = m.local_qpn;
  c->service_id = m.service_id;
  c->listener = *listener;
  c->transaction_id = h.transaction_id;
  // Our REP waits for the active side's answer, which it promised within its local timeout.
  c->response_timeout =
      2 * cm_timeout_ns(config_.packet_lifetime) + cm_timeout_ns(m.local_cm_response_timeout);
  c->max_retries = m.max_cm_retries;
  // If the consumer never answers, the active side gives up after its retries: so do we.
  c->deadline = now + (2 * cm_timeout_ns(config_.packet_lifetime) +
                       cm_timeout_ns(m.remote_cm_response_timeout)) *
                          (m.max_cm_retries + 1u);
  CmEvent e = event_for(*c, CmEventType::kConnectRequest);
  e.req = m;
  e.ece = {m.vendor_id, h.attribute_modifier};
  e.private_data = to_vector(m.private_data);
  emit(*c, std::move(e));
}

void ConnectionManager::on_mra(const Gid& peer, const CmMra& m, Nanos now) {
  Conn* c = addressed(peer, m.remote_comm_id, m.local_comm_id);
  const Nanos wait = 2 * cm_timeout_ns(config_.packet_lifetime) + cm_timeout_ns(m.service_timeout);
  if (c && m.message_mraed == CmMessageRef::kReq &&
      (c->state == ConnState::kReqSent || c->state == ConnState::kMraReqRcvd)) {
    c->state = ConnState::kMraReqRcvd;
    c->deadline = now + wait;
    return;
  }
  if (c && m.message_mraed == CmMessageRef::kRep &&
      (c->state == ConnState::kRepSent || c->state == ConnState::kMraRepRcvd)) {
    c->state = ConnState::kMraRepRcvd;
    c->deadline = now + wait;
    return;
  }
  ++counters_.unmatched;
}

void ConnectionManager::on_rej(const Gid& peer, const CmRej& m) {
  Conn* c = addressed(peer, m.remote_comm_id, m.local_comm_id);
  if (!c) {
    ++counters_.unmatched;
    return;
  }
  switch (c->state) {
    case ConnState::kReqSent:
    case ConnState::kMraReqRcvd:
    case ConnState::kRepRcvd:
    case ConnState::kReqRcvd:
    case ConnState::kRepSent:
    case ConnState::kMraRepRcvd: {
      CmEvent e = event_for(*c, CmEventType::kRejected);
      e.status = m.reason;
      e.private_data = to_vector(m.private_data);
      emit(*c, std::move(e));
      erase(c->id);
      return;
    }
    default:
      ++counters_.unmatched;
  }
}

void ConnectionManager::on_rep(const Gid& peer, const MadHeader& h, const CmRep& m, Nanos now) {
  Conn* c = find(m.remote_comm_id);
  if (!c || !c->active || c->peer != peer) {
    ++counters_.unmatched;
    send_rej(peer, h.transaction_id, 0, m.local_comm_id, CmMessageRef::kRep,
             rej_reason::kInvalidCommId, {});
    return;
  }
  if (c->state == ConnState::kReqSent || c->state == ConnState::kMraReqRcvd) {
    c->state = ConnState::kRepRcvd;
    c->remote_comm_id = m.local_comm_id;
    c->remote_ca_guid = m.local_ca_guid;
    c->remote_qpn = m.local_qpn;
    // The passive side resends its REP until our RTU; if the consumer never answers, give up
    // once it has.
    c->deadline = now + c->response_timeout * (c->max_retries + 1u);
    CmEvent e = event_for(*c, CmEventType::kConnectResponse);
    e.rep = m;
    e.ece = {m.vendor_id, h.attribute_modifier};
    e.private_data = to_vector(m.private_data);
    emit(*c, std::move(e));
    return;
  }
  if (c->remote_comm_id != m.local_comm_id) {
    ++counters_.unmatched;
    return;
  }
  ++counters_.duplicates;
  if (c->state == ConnState::kEstablished) {
    resend(*c);  // our RTU was lost
  } else if (c->state == ConnState::kRepRcvd) {
    CmMra mra;
    mra.local_comm_id = c->id;
    mra.remote_comm_id = c->remote_comm_id;
    mra.message_mraed = CmMessageRef::kRep;
    mra.service_timeout = config_.mra_service_timeout;
    CmMad mad{{}, mra};
    mad.header.transaction_id = c->transaction_id;
    send(c->peer, mad);
    c->deadline = std::max(c->deadline, now + (2 * cm_timeout_ns(config_.packet_lifetime) +
                                               cm_timeout_ns(config_.mra_service_timeout)) *
                                                  (c->max_retries + 1u));
  }
}

void ConnectionManager::on_rtu(const Gid& peer, const CmRtu& m) {
  Conn* c = addressed(peer, m.remote_comm_id, m.local_comm_id);
  if (!c || (c->state != ConnState::kRepSent && c->state != ConnState::kMraRepRcvd)) {
    ++counters_.unmatched;
    return;
  }
  c->state = ConnState::kEstablished;
  c->deadline = kNever;
  emit(*c, event_for(*c, CmEventType::kEstablished));
}

void ConnectionManager::enter_timewait(Conn& c, Nanos now) {
  c.state = ConnState::kTimewait;
  c.deadline = now + config_.timewait;
}

void ConnectionManager::on_dreq(const Gid& peer, const MadHeader& h, const CmDreq& m, Nanos now) {
  Conn* c = addressed(peer, m.remote_comm_id, m.local_comm_id);
  if (!c || c->remote_comm_id == 0) {
    // Nothing to disconnect: answer anyway so the peer stops asking.
    ++counters_.unmatched;
    send_drep(peer, h.transaction_id, m.remote_comm_id, m.local_comm_id);
    return;
  }
  switch (c->state) {
    case ConnState::kEstablished:
    case ConnState::kRepSent:
    case ConnState::kMraRepRcvd:
    case ConnState::kDreqSent:
      send_drep(peer, h.transaction_id, c->id, c->remote_comm_id);
      emit(*c, event_for(*c, CmEventType::kDisconnected));
      enter_timewait(*c, now);
      return;
    case ConnState::kTimewait:
      ++counters_.duplicates;
      send_drep(peer, h.transaction_id, c->id, c->remote_comm_id);
      return;
    default:
      ++counters_.unmatched;
  }
}

void ConnectionManager::on_drep(const Gid& peer, const CmDrep& m, Nanos now) {
  Conn* c = addressed(peer, m.remote_comm_id, m.local_comm_id);
  if (!c || c->state != ConnState::kDreqSent) {
    ++counters_.unmatched;
    return;
  }
  emit(*c, event_for(*c, CmEventType::kDisconnected));
  enter_timewait(*c, now);
}

void ConnectionManager::on_sidr_req(const Gid& peer, const MadHeader& h, const CmSidrReq& m,
                                    Nanos now) {
  for (auto& [id, c] : conns_) {
    if (c.active || c.peer != peer || c.remote_comm_id != m.request_id ||
        (c.state != ConnState::kSidrReqRcvd && c.state != ConnState::kSidrAnswered))
      continue;
    ++counters_.duplicates;
    if (c.state == ConnState::kSidrAnswered) resend(c);
    return;
  }
  auto answer = [&](uint8_t status) {
    CmSidrRep rep;
    rep.request_id = m.request_id;
    rep.status = status;
    rep.service_id = m.service_id;
    send(peer, CmMad{{.transaction_id = h.transaction_id}, rep});
  };
  const auto listener = listener_for(m.service_id);
  if (!listener) {
    ++counters_.no_listener;
    answer(sidr_status::kServiceIdNotSupported);
    return;
  }
  Conn* c = new_conn(now);
  if (!c) {
    answer(sidr_status::kRejected);
    return;
  }
  c->state = ConnState::kSidrReqRcvd;
  c->peer = peer;
  c->remote_comm_id = m.request_id;
  c->service_id = m.service_id;
  c->listener = *listener;
  c->transaction_id = h.transaction_id;
  c->deadline = now + (2 * cm_timeout_ns(config_.packet_lifetime) +
                       cm_timeout_ns(config_.cm_response_timeout)) *
                          (config_.max_cm_retries + 1u);
  CmEvent e = event_for(*c, CmEventType::kSidrRequest);
  e.private_data = to_vector(m.private_data);
  emit(*c, std::move(e));
}

void ConnectionManager::on_sidr_rep(const Gid& peer, const CmSidrRep& m) {
  Conn* c = find(m.request_id);
  if (!c || c->peer != peer || c->state != ConnState::kSidrReqSent ||
      c->service_id != m.service_id) {
    ++counters_.unmatched;
    return;
  }
  CmEvent e = event_for(*c, CmEventType::kSidrResolved);
  e.status = m.status;
  e.qpn = m.qpn;
  e.qkey = m.qkey;
  e.private_data = to_vector(m.private_data);
  emit(*c, std::move(e));
  erase(c->id);
}

// ---- time ----------------------------------------------------------------------------------

void ConnectionManager::advance(Nanos now) {
  // Collect first: a timer may erase its record.
  std::vector<ConnId> due;
  for (const auto& [id, c] : conns_)
    if (c.deadline <= now) due.push_back(id);
  std::sort(due.begin(), due.end());  // a fixed order, whatever the hash table's
  for (ConnId id : due)
    if (Conn* c = find(id)) on_timer(*c, now);
}

void ConnectionManager::on_timer(Conn& c, Nanos now) {
  const bool retrying = c.state == ConnState::kReqSent || c.state == ConnState::kMraReqRcvd ||
                        c.state == ConnState::kRepSent || c.state == ConnState::kMraRepRcvd ||
                        c.state == ConnState::kDreqSent || c.state == ConnState::kSidrReqSent;
  if (retrying && c.retries_left > 0) {
    --c.retries_left;
    ++counters_.retransmits;
    resend(c);
    c.deadline = now + c.response_timeout;
    return;
  }
  CmEvent unreachable = event_for(c, CmEventType::kUnreachable);
  unreachable.status = ETIMEDOUT;
  switch (c.state) {
    case ConnState::kReqSent:
    case ConnState::kMraReqRcvd:
      send_rej(c.peer, c.transaction_id, c.id, 0, CmMessageRef::kReq, rej_reason::kTimeout, {});
      emit(c, unreachable);
      erase(c.id);
      return;
    case ConnState::kRepSent:
    case ConnState::kMraRepRcvd:
    case ConnState::kRepRcvd:
    case ConnState::kReqRcvd:
      send_rej(c.peer, c.transaction_id, c.id, c.remote_comm_id,
               c.state == ConnState::kReqRcvd ? CmMessageRef::kReq : CmMessageRef::kRep,
               rej_reason::kTimeout, {});
      emit(c, unreachable);
      erase(c.id);
      return;
    case ConnState::kDreqSent:
      emit(c, event_for(c, CmEventType::kDisconnected));
      enter_timewait(c, now);
      return;
    case ConnState::kTimewait:
      emit(c, event_for(c, CmEventType::kTimewaitExit));
      erase(c.id);
      return;
    case ConnState::kSidrReqSent:
    case ConnState::kSidrReqRcvd:
      emit(c, unreachable);
      erase(c.id);
      return;
    case ConnState::kSidrAnswered:
      erase(c.id);
      return;
    case ConnState::kEstablished:
      c.deadline = kNever;
      return;
  }
}

}  // namespace uroce::cm
