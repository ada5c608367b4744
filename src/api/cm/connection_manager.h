#pragma once
// The InfiniBand communication manager (IBA vol. 1 chapter 12) as a sans-I/O state machine, as
// the transport is: CM MADs and the time come in, MADs to send, events for the consumer and the
// next deadline go out. Nothing here owns a QP, a socket, a thread or a clock; the GSI QP and the
// progress engine's timers feed it (docs/cm.md). One ConnectionManager serves one port (one GID).
//
// Every table is bounded (CmConfig): connection records (live, timewait and answered SIDR
// requests together), listeners, queued MADs and queued events. A full table refuses with an
// errno or a REJ (No resources); a full queue drops and counts.
#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/types.h"
#include "wire/mad.h"

namespace uroce::cm {

using ConnId = uint32_t;  // our local communication ID; also the SIDR request ID we sent
using ListenerId = uint32_t;

struct CmConfig {
  uint64_t local_ca_guid = 0;
  uint32_t first_comm_id = 1;  // IDs are handed out from here on (a seed keeps restarts apart)
  // Set on an address shared by several processes: every ID (and SIDR request ID) handed out
  // carries this slot in its top bits, so the replies naming it reach this process
  // (link/share/steer_decision.h); the rest of the bits count on from first_comm_id.
  std::optional<uint32_t> comm_id_slot;
  uint32_t max_connections = 1024;
  uint32_t max_listeners = 64;
  uint32_t max_outgoing = 1024;
  uint32_t max_events = 1024;
  // Exponents of 4.096 us. rdma_cm's are 20 for both CM timeouts and 16 for a RoCE packet
  // lifetime; a deadline is 2 * packet lifetime + the peer's CM response time.
  uint8_t cm_response_timeout = 20;
  uint8_t packet_lifetime = 16;
  uint8_t max_cm_retries = 15;       // 4 bits on the wire
  uint8_t mra_service_timeout = 22;  // asked for by an MRA while the consumer decides
  Nanos timewait = 1'000'000'000;
};

// 4.096 us * 2^exponent, in nanoseconds (exponents above 31 are clamped, as the field is 5 bits).
constexpr Nanos cm_timeout_ns(uint8_t exponent) {
  return Nanos{4096} << (exponent > 31 ? 31 : exponent);
}

// What the consumer sees; the librdmacm drop-in maps these to RDMA_CM_EVENT_* one to one, but
// kSidrResolved: ESTABLISHED when `status` is SIDR valid, else UNREACHABLE.
enum class CmEventType : uint8_t {
  kConnectRequest,   // passive: a REQ for a listener; answer with accept() or reject()
  kConnectResponse,  // active: a REP; move the QP to RTR/RTS, then establish() or reject()
  kEstablished,
  kRejected,      // a REJ: status is its reason
  kUnreachable,   // retries exhausted: status ETIMEDOUT
  kDisconnected,  // DREQ received, or our DREQ answered or timed out
  kTimewaitExit,
  kSidrRequest,   // passive: a SIDR_REQ for a listener; answer with sidr_reply()/sidr_reject()
  kSidrResolved,  // active: a SIDR_REP; status is its status
};
const char* to_string(CmEventType t);

// Enhanced Connection Establishment (docs/cm.md, "ECE"): a 24-bit vendor ID in the REQ or REP and
// 32 bits of options in its MAD header's attribute modifier, carried as Linux's CM carries them;
// what they mean is the two sides' affair (their QPs' providers).
struct Ece {
  uint32_t vendor_id = 0;  // 24 bits; 0: none
  uint32_t options = 0;

  bool operator==(const Ece&) const = default;
};

struct CmEvent {
  CmEventType type = CmEventType::kEstablished;
  ConnId conn = 0;
  ListenerId listener = 0;
  Gid peer{};
  int status = 0;
  std::optional<wire::CmReq> req;  // kConnectRequest
  std::optional<wire::CmRep> rep;  // kConnectResponse
  Ece ece;                         // kConnectRequest, kConnectResponse: what the REQ/REP carried
  uint32_t qpn = 0;                // kSidrResolved: the remote UD QP and its Q_Key
  uint32_t qkey = 0;
  std::vector<uint8_t> private_data;  // the message's whole private-data area
};

struct OutgoingMad {
  Gid peer{};  // to QPN 1 at this GID, Q_Key 0x80010000
  std::array<uint8_t, wire::kMadBytes> bytes{};
};

// What the active side asks for. The REQ's primary path and QP attributes come from here.
struct ConnectParams {
  Gid peer{};
  uint64_t service_id = 0;
  uint32_t qpn = 0;
  uint32_t starting_psn = 0;
  wire::CmTransport transport = wire::CmTransport::kRc;
  uint8_t extended_transport = 0;  // with kExtended: wire::kExtendedTransportXrc
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t retry_count = 7;
  uint8_t rnr_retry_count = 7;
  uint8_t path_mtu = 3;  // IBA enum: 1024
  bool srq = false;
  wire::CmPath primary;
  Ece ece;
  std::span<const uint8_t> private_data;  // at most wire::kReqPrivateBytes
};

struct AcceptParams {
  uint32_t qpn = 0;
  uint32_t starting_psn = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t rnr_retry_count = 7;
  bool srq = false;
  Ece ece;  // rdma_cm: the REQ's vendor ID echoed, this side's options
  std::span<const uint8_t> private_data;  // at most wire::kRepPrivateBytes
};

struct CmCounters {
  uint64_t received = 0;
  uint64_t malformed = 0;   // failed parse_cm_mad
  uint64_t unmatched = 0;   // no record, wrong peer or wrong state: dropped
  uint64_t duplicates = 0;  // a repeated REQ, REP, DREQ or SIDR_REQ answered again
  uint64_t sent = 0;
  uint64_t retransmits = 0;
  uint64_t no_listener = 0;  // REJ invalid service ID / SIDR_REP service ID not supported
  uint64_t stale = 0;        // REJ stale connection
  uint64_t table_full = 0;   // REJ no resources, or connect() refused
  uint64_t outgoing_dropped = 0;
  uint64_t events_dropped = 0;
};

enum class ConnState : uint8_t {
  kReqSent,
  kMraReqRcvd,  // our REQ was MRAed: waiting longer
  kRepRcvd,     // waiting for the consumer's establish()
  kReqRcvd,     // waiting for the consumer's accept()
  kRepSent,
  kMraRepRcvd,
  kEstablished,
  kDreqSent,
  kTimewait,
  kSidrReqSent,
  kSidrReqRcvd,
  kSidrAnswered,  // kept for a timewait to answer a repeated SIDR_REQ the same way
};
const char* to_string(ConnState s);

class ConnectionManager {
 public:
  ConnectionManager(Gid local_gid, CmConfig config);

  // ---- consumer calls (errno on failure: EINVAL bad argument or state, ENOSPC table full,
  // EADDRINUSE service ID taken, ENOENT unknown id) ----
  Result<ListenerId> listen(uint64_t service_id);
  int stop_listening(ListenerId id);
  Result<ConnId> connect(const ConnectParams& p, Nanos now);
  int accept(ConnId id, const AcceptParams& p, Nanos now);
  int establish(ConnId id, std::span<const uint8_t> private_data, Nanos now);  // sends RTU
  // REJ reason 28 (consumer defined) with the private data; kReqRcvd or kRepRcvd only.
  // `reason`: rdma_cm rejects with kConsumerDefined, rdma_reject_ece with
  // kVendorOptionNotSupported.
  int reject(ConnId id, std::span<const uint8_t> private_data, Nanos now,
             uint16_t reason = wire::rej_reason::kConsumerDefined);
  int disconnect(ConnId id, std::span<const uint8_t> private_data, Nanos now);
  // Data arrived on a connection still waiting for its RTU: it is established (IBA 12.9.7).
  int notify_established(ConnId id, Nanos now);
  // The consumer lets go of the id: a live connection gets a DREQ (its timewait runs on with no
  // events), one being set up a REJ; nothing more is reported for it.
  int destroy(ConnId id, Nanos now);

  Result<ConnId> sidr_resolve(const Gid& peer, uint64_t service_id,
                              std::span<const uint8_t> private_data, Nanos now);
  int sidr_reply(ConnId id, uint32_t qpn, uint32_t qkey, std::span<const uint8_t> private_data,
                 Nanos now);
  int sidr_reject(ConnId id, std::span<const uint8_t> private_data, Nanos now);

  // ---- inputs and outputs ----
  // A MAD that arrived on QP1 from `peer`.
  void receive(const Gid& peer, std::span<const uint8_t> mad, Nanos now);
  // Fires every timer due at `now` (retransmissions, give-ups, timewait exits).
  void advance(Nanos now);
  Nanos next_deadline() const;
  std::optional<OutgoingMad> pop_outgoing();
  bool has_outgoing() const { return !outgoing_.empty(); }
  std::optional<CmEvent> pop_event();

  std::optional<ConnState> state(ConnId id) const;
  size_t connections() const { return conns_.size(); }
  const CmCounters& counters() const { return counters_; }
  const Gid& local_gid() const { return local_gid_; }

 private:
  struct Conn {
    ConnId id = 0;
    ConnState state = ConnState::kReqSent;
    bool active = false;
    bool detached = false;  // destroyed by the consumer: no more events
    Gid peer{};
    uint32_t remote_comm_id = 0;
    uint64_t remote_ca_guid = 0;
    uint32_t local_qpn = 0;
    uint32_t remote_qpn = 0;
    uint64_t service_id = 0;
    ListenerId listener = 0;
    uint64_t transaction_id = 0;
    Nanos response_timeout = 0;  // how long the peer may take to answer us
    uint8_t max_retries = 0;
    uint8_t retries_left = 0;
    Nanos deadline = kNever;
    Nanos ready_since = 0;  // kReqRcvd/kSidrReqRcvd: the consumer has been asked since
    std::array<uint8_t, wire::kMadBytes> last_sent{};  // resent on a timeout or a duplicate
  };

  void on_req(const Gid& peer, const wire::MadHeader& h, const wire::CmReq& m, Nanos now);
  void on_mra(const Gid& peer, const wire::CmMra& m, Nanos now);
  void on_rej(const Gid& peer, const wire::CmRej& m);
  void on_rep(const Gid& peer, const wire::MadHeader& h, const wire::CmRep& m, Nanos now);
  void on_rtu(const Gid& peer, const wire::CmRtu& m);
  void on_dreq(const Gid& peer, const wire::MadHeader& h, const wire::CmDreq& m, Nanos now);
  void on_drep(const Gid& peer, const wire::CmDrep& m, Nanos now);
  void on_sidr_req(const Gid& peer, const wire::MadHeader& h, const wire::CmSidrReq& m, Nanos now);
  void on_sidr_rep(const Gid& peer, const wire::CmSidrRep& m);
  void on_timer(Conn& c, Nanos now);

  Conn* find(ConnId id);
  const Conn* find(ConnId id) const;
  // The record a peer's message names by our comm ID, if it came from that peer.
  Conn* addressed(const Gid& peer, uint32_t our_id, uint32_t their_id);
  Conn* new_conn(Nanos now);
  ConnId next_comm_id();
  void erase(ConnId id);
  std::optional<ListenerId> listener_for(uint64_t service_id) const;

  void send(const Gid& peer, const wire::CmMad& mad);
  // Sends and keeps the bytes for retransmission, arming the retry timer.
  void send_with_retry(Conn& c, const wire::CmMad& mad, Nanos now);
  void resend(Conn& c);
  void send_rej(const Gid& peer, uint64_t tid, uint32_t our_id, uint32_t their_id,
                wire::CmMessageRef what, uint16_t reason, std::span<const uint8_t> private_data);
  void send_drep(const Gid& peer, uint64_t tid, uint32_t our_id, uint32_t their_id);
  void start_disconnect(Conn& c, std::span<const uint8_t> private_data, Nanos now);
  void enter_timewait(Conn& c, Nanos now);
  void emit(const Conn& c, CmEvent e);
  CmEvent event_for(const Conn& c, CmEventType t) const;

  Gid local_gid_;
  CmConfig config_;
  std::unordered_map<ConnId, Conn> conns_;
  std::unordered_map<ListenerId, uint64_t> listeners_;  // id -> service ID
  ListenerId next_listener_ = 1;
  uint32_t next_comm_id_;
  std::deque<OutgoingMad> outgoing_;
  std::deque<CmEvent> events_;
  CmCounters counters_;
};

}  // namespace uroce::cm
