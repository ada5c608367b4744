// The CM state machine, sans-I/O: two ConnectionManagers talk through an in-memory channel in
// virtual time that can drop, duplicate and reorder MADs. Each test checks the exact events each
// side reports, and where the wire matters, the exact MADs sent.
#include <gtest/gtest.h>

#include <cerrno>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "api/cm/connection_manager.h"

namespace uroce::cm {
namespace {

using namespace wire;
using Events = std::vector<CmEventType>;
using E = CmEventType;

const Gid kGidA = gid_from_ipv4({192, 0, 2, 1});
const Gid kGidB = gid_from_ipv4({192, 0, 2, 2});
const uint64_t kService = rdma_service_id(RdmaPortSpace::kTcp, 7471);
constexpr Nanos kMs = 1'000'000;

CmConfig test_config(uint64_t guid) {
  CmConfig c;
  c.local_ca_guid = guid;
  c.first_comm_id = static_cast<uint32_t>(guid << 16 | 1);
  c.packet_lifetime = 8;       // 1 ms
  c.cm_response_timeout = 12;  // 16.8 ms
  c.mra_service_timeout = 16;  // 268 ms
  c.max_cm_retries = 5;
  c.timewait = 50 * kMs;
  return c;
}

struct Node {
  Node(Gid g, CmConfig c) : gid(g), cm(g, c) {}
  Gid gid;
  ConnectionManager cm;
  std::vector<CmEvent> events;
  std::vector<std::string> sent;  // message names, in order
  // What the consumer does with each event; the defaults accept and establish.
  std::function<void(Node&, const CmEvent&, Nanos)> on_event = [](Node& n, const CmEvent& e,
                                                                  Nanos now) {
    if (e.type == E::kConnectRequest) {
      AcceptParams a;
      a.qpn = 0x200 + e.conn % 16;
      a.starting_psn = 0x1000;
      EXPECT_EQ(n.cm.accept(e.conn, a, now), 0);
    } else if (e.type == E::kConnectResponse) {
      EXPECT_EQ(n.cm.establish(e.conn, {}, now), 0);
    } else if (e.type == E::kSidrRequest) {
      EXPECT_EQ(n.cm.sidr_reply(e.conn, 0x345, 0x01234567, {}, now), 0);
    }
  };
  Events types() const {
    Events t;
    for (const auto& e : events) t.push_back(e.type);
    return t;
  }
};

// Two nodes and the channel between them, in virtual time.
class Channel {
 public:
  Channel(Node& a, Node& b, uint64_t seed = 1) : a_(a), b_(b), rng_(seed) {}

  double drop = 0, duplicate = 0;
  Nanos latency = 1 * kMs, jitter = 0;  // jitter reorders
  // Drops a MAD when it returns true (by message name and how many of that name were sent).
  std::function<bool(const Node& from, const std::string& name, int nth)> drop_if;
  Nanos now = 0;

  // Runs until nothing is in flight and no timer is due before `until`.
  void run(Nanos until) {
    for (;;) {
      settle();
      Nanos next = std::min(a_.cm.next_deadline(), b_.cm.next_deadline());
      for (const auto& f : flight_) next = std::min(next, f.at);
      if (next == kNever || next > until) break;
      now = std::max(now, next);
      std::vector<Flight> due, rest;
      for (auto& f : flight_) (f.at <= now ? due : rest).push_back(f);
      flight_ = std::move(rest);
      std::stable_sort(due.begin(), due.end(),
                       [](const Flight& x, const Flight& y) { return x.at < y.at; });
      for (const auto& f : due) f.to->cm.receive(f.from, f.bytes, now);
      a_.cm.advance(now);
      b_.cm.advance(now);
    }
    now = std::max(now, until);
  }
  void settle() {
    for (bool busy = true; busy;) {
      busy = false;
      for (Node* n : {&a_, &b_}) {
        while (auto m = n->cm.pop_outgoing()) {
          busy = true;
          transmit(*n, *m);
        }
        while (auto e = n->cm.pop_event()) {
          busy = true;
          n->events.push_back(*e);
          n->on_event(*n, *e, now);
        }
      }
    }
  }
  uint64_t random() { return rng_(); }

 private:
  struct Flight {
    Nanos at;
    Node* to;
    Gid from;
    std::array<uint8_t, kMadBytes> bytes;
  };
  bool chance(double p) { return static_cast<double>(rng_() % 1'000'000) < p * 1e6; }
  void transmit(Node& from, const OutgoingMad& m) {
    auto parsed = parse_cm_mad(m.bytes);
    ASSERT_TRUE(parsed.ok());
    const std::string name(cm_message_name(parsed->message));
    from.sent.push_back(name);
    int nth = 0;
    for (const auto& s : from.sent) nth += s == name;
    Node* to = m.peer == a_.gid ? &a_ : m.peer == b_.gid ? &b_ : nullptr;
    if (!to) return;  // to a third node that is not there
    if (drop_if && drop_if(from, name, nth)) return;
    if (chance(drop)) return;
    const int copies = chance(duplicate) ? 2 : 1;
    for (int i = 0; i < copies; ++i) {
      const Nanos delay = latency + (jitter ? rng_() % jitter : 0);
      flight_.push_back({now + delay, to, from.gid, m.bytes});
    }
  }
  Node& a_;
  Node& b_;
  std::mt19937_64 rng_;
  std::vector<Flight> flight_;
};

ConnectParams to_b(uint32_t qpn = 0x111) {
  ConnectParams p;
  p.peer = kGidB;
  p.service_id = kService;
  p.qpn = qpn;
  p.starting_psn = 0x777;
  p.primary.local_gid = kGidA;
  p.primary.remote_gid = kGidB;
  return p;
}

struct Pair {
  Node a{kGidA, test_config(0xa)};
  Node b{kGidB, test_config(0xb)};
};

TEST(CmStateMachine, ConnectAndDisconnect) {
  Pair p;
  Channel ch(p.a, p.b);
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  const std::array<uint8_t, 3> hello = {1, 2, 3};
  ConnectParams cp = to_b();
  cp.private_data = hello;
  auto id = p.a.cm.connect(cp, ch.now);
  ASSERT_TRUE(id.ok());
  ch.run(10 * kMs);
  EXPECT_EQ(p.a.types(), (Events{E::kConnectResponse, E::kEstablished}));
  EXPECT_EQ(p.b.types(), (Events{E::kConnectRequest, E::kEstablished}));
  ASSERT_TRUE(p.b.events[0].req.has_value());
  EXPECT_EQ(p.b.events[0].req->local_qpn, 0x111u);
  EXPECT_EQ(p.b.events[0].req->starting_psn, 0x777u);
  EXPECT_EQ(p.b.events[0].private_data.size(), kReqPrivateBytes);
  EXPECT_EQ(p.b.events[0].private_data[2], 3);
  ASSERT_TRUE(p.a.events[0].rep.has_value());
  EXPECT_EQ(p.a.events[0].rep->local_qpn, 0x200u + p.b.events[0].conn % 16);
  EXPECT_EQ(p.a.cm.state(*id), ConnState::kEstablished);

  EXPECT_EQ(p.a.cm.disconnect(*id, {}, ch.now), 0);
  ch.run(ch.now + 10 * kMs);
  EXPECT_EQ(p.a.cm.state(*id), ConnState::kTimewait);
  ch.run(ch.now + 100 * kMs);
  EXPECT_EQ(p.a.types(),
            (Events{E::kConnectResponse, E::kEstablished, E::kDisconnected, E::kTimewaitExit}));
  EXPECT_EQ(p.b.types(),
            (Events{E::kConnectRequest, E::kEstablished, E::kDisconnected, E::kTimewaitExit}));
  EXPECT_EQ(p.a.sent, (std::vector<std::string>{"REQ", "RTU", "DREQ"}));
  EXPECT_EQ(p.b.sent, (std::vector<std::string>{"REP", "DREP"}));
  EXPECT_EQ(p.a.cm.connections(), 0u);
  EXPECT_EQ(p.b.cm.connections(), 0u);
  EXPECT_EQ(p.a.cm.next_deadline(), kNever);
}

TEST(CmStateMachine, NoListenerIsRejectedWithInvalidServiceId) {
  Pair p;
  Channel ch(p.a, p.b);
  ASSERT_TRUE(p.a.cm.connect(to_b(), 0).ok());
  ch.run(10 * kMs);
  ASSERT_EQ(p.a.types(), (Events{E::kRejected}));
  EXPECT_EQ(p.a.events[0].status, rej_reason::kInvalidServiceId);
  EXPECT_EQ(p.b.sent, (std::vector<std::string>{"REJ"}));
  EXPECT_EQ(p.b.cm.counters().no_listener, 1u);
  EXPECT_EQ(p.a.cm.connections(), 0u);
  EXPECT_EQ(p.b.cm.connections(), 0u);
}

// XRC (rdma_cm's XRC_SEND ids): the REQ's transport is "extended" with extended type XRC, as
// Linux's CM sends it; other extended types and RD get REJ invalid transport type.
TEST(CmStateMachine, XrcReqIsAcceptedOtherTransportsAreRejected) {
  {
    Pair p;
    Channel ch(p.a, p.b);
    ASSERT_TRUE(p.b.cm.listen(kService).ok());
    ConnectParams cp = to_b();
    cp.transport = CmTransport::kExtended;
    cp.extended_transport = kExtendedTransportXrc;
    ASSERT_TRUE(p.a.cm.connect(cp, ch.now).ok());
    ch.run(10 * kMs);
    EXPECT_EQ(p.a.types(), (Events{E::kConnectResponse, E::kEstablished}));
    EXPECT_EQ(p.b.types(), (Events{E::kConnectRequest, E::kEstablished}));
    ASSERT_TRUE(p.b.events[0].req.has_value());
    EXPECT_EQ(p.b.events[0].req->transport, CmTransport::kExtended);
    EXPECT_EQ(p.b.events[0].req->extended_transport, kExtendedTransportXrc);
  }
  for (auto [transport, extended] :
       {std::pair{CmTransport::kRd, uint8_t{0}}, std::pair{CmTransport::kExtended, uint8_t{2}}}) {
    Pair p;
    Channel ch(p.a, p.b);
    ASSERT_TRUE(p.b.cm.listen(kService).ok());
    ConnectParams cp = to_b();
    cp.transport = transport;
    cp.extended_transport = extended;
    ASSERT_TRUE(p.a.cm.connect(cp, ch.now).ok());
    ch.run(10 * kMs);
    ASSERT_EQ(p.a.types(), (Events{E::kRejected}));
    EXPECT_EQ(p.a.events[0].status, rej_reason::kInvalidTransportType);
    EXPECT_TRUE(p.b.types().empty());
    EXPECT_EQ(p.b.sent, (std::vector<std::string>{"REJ"}));
  }
}

TEST(CmStateMachine, ConsumerRejectCarriesReason28AndPrivateData) {
  Pair p;
  Channel ch(p.a, p.b);
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  p.b.on_event = [](Node& n, const CmEvent& e, Nanos now) {
    const std::array<uint8_t, 2> why = {0xde, 0xad};
    if (e.type == E::kConnectRequest) {
      EXPECT_EQ(n.cm.reject(e.conn, why, now), 0);
    }
  };
  ASSERT_TRUE(p.a.cm.connect(to_b(), 0).ok());
  ch.run(10 * kMs);
  ASSERT_EQ(p.a.types(), (Events{E::kRejected}));
  EXPECT_EQ(p.a.events[0].status, rej_reason::kConsumerDefined);
  EXPECT_EQ(p.a.events[0].private_data[0], 0xde);
  EXPECT_EQ(p.a.events[0].private_data[1], 0xad);
  EXPECT_EQ(p.b.types(), (Events{E::kConnectRequest}));
  EXPECT_EQ(p.b.cm.connections(), 0u);
}

// rdma_reject_ece: the same REJ with reason 35 (vendor option not supported).
TEST(CmStateMachine, RejectWithAnotherReasonSendsIt) {
  Pair p;
  Channel ch(p.a, p.b);
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  p.b.on_event = [](Node& n, const CmEvent& e, Nanos now) {
    if (e.type == E::kConnectRequest) {
      EXPECT_EQ(n.cm.reject(e.conn, {}, now, rej_reason::kVendorOptionNotSupported), 0);
    }
  };
  ASSERT_TRUE(p.a.cm.connect(to_b(), 0).ok());
  ch.run(10 * kMs);
  ASSERT_EQ(p.a.types(), (Events{E::kRejected}));
  EXPECT_EQ(p.a.events[0].status, 35);
  EXPECT_EQ(p.b.sent, (std::vector<std::string>{"REJ"}));
}

// ECE: the active side's vendor ID and options travel in the REQ, the passive side's answer in
// the REP (rdma_cm echoes the vendor ID, its own options), each reported with the event; a REQ
// copy resent after a loss carries them too; a vendor ID wider than 24 bits is refused.
TEST(CmStateMachine, EceTravelsInReqAndRep) {
  Pair p;
  Channel ch(p.a, p.b);
  ch.drop_if = [](const Node&, const std::string& name, int nth) {
    return name == "REQ" && nth == 1;
  };
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  p.b.on_event = [](Node& n, const CmEvent& e, Nanos now) {
    if (e.type == E::kConnectRequest) {
      AcceptParams a;
      a.qpn = 0x222;
      a.ece = {e.ece.vendor_id, 0x5};
      EXPECT_EQ(n.cm.accept(e.conn, a, now), 0);
    }
  };
  ConnectParams cp = to_b();
  cp.ece = {0x0015b3, 0x10000007};
  ConnectParams too_wide = cp;
  too_wide.ece.vendor_id = 0x1000000;
  EXPECT_EQ(p.a.cm.connect(too_wide, 0).error(), EINVAL);
  ASSERT_TRUE(p.a.cm.connect(cp, 0).ok());
  ch.run(kMs * 1000);
  ASSERT_EQ(p.b.types(), (Events{E::kConnectRequest, E::kEstablished}));
  EXPECT_EQ(p.b.events[0].ece, (Ece{0x0015b3, 0x10000007}));
  ASSERT_EQ(p.a.types(), (Events{E::kConnectResponse, E::kEstablished}));
  EXPECT_EQ(p.a.events[0].ece, (Ece{0x0015b3, 0x5}));
  EXPECT_EQ(p.a.sent, (std::vector<std::string>{"REQ", "REQ", "RTU"}));

  // Without ECE nothing is reported.
  Pair q;
  Channel ch2(q.a, q.b);
  ASSERT_TRUE(q.b.cm.listen(kService).ok());
  ASSERT_TRUE(q.a.cm.connect(to_b(), 0).ok());
  ch2.run(10 * kMs);
  ASSERT_EQ(q.b.types(), (Events{E::kConnectRequest, E::kEstablished}));
  EXPECT_EQ(q.b.events[0].ece, Ece{});
  EXPECT_EQ(q.a.events[0].ece, Ece{});
}

TEST(CmStateMachine, LostReqIsRetransmitted) {
  Pair p;
  Channel ch(p.a, p.b);
  ch.drop_if = [](const Node&, const std::string& name, int nth) {
    return name == "REQ" && nth <= 2;
  };
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  ASSERT_TRUE(p.a.cm.connect(to_b(), 0).ok());
  ch.run(kMs * 1000);
  EXPECT_EQ(p.a.types(), (Events{E::kConnectResponse, E::kEstablished}));
  EXPECT_EQ(p.b.types(), (Events{E::kConnectRequest, E::kEstablished}));
  EXPECT_EQ(p.a.sent, (std::vector<std::string>{"REQ", "REQ", "REQ", "RTU"}));
  EXPECT_EQ(p.a.cm.counters().retransmits, 2u);
}

TEST(CmStateMachine, EveryReqLostGivesUnreachableAfterMaxRetries) {
  Pair p;
  Channel ch(p.a, p.b);
  ch.drop = 1.0;
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  ASSERT_TRUE(p.a.cm.connect(to_b(), 0).ok());
  ch.run(kMs * 10000);
  ASSERT_EQ(p.a.types(), (Events{E::kUnreachable}));
  EXPECT_EQ(p.a.events[0].status, ETIMEDOUT);
  // The first REQ, max_cm_retries (5) more, then a REJ (timeout) for the peer's sake.
  EXPECT_EQ(p.a.sent, (std::vector<std::string>{"REQ", "REQ", "REQ", "REQ", "REQ", "REQ", "REJ"}));
  EXPECT_EQ(p.a.events[0].conn, 0xa0001u);
  EXPECT_EQ(ch.now, kMs * 10000);
  EXPECT_EQ(p.a.cm.connections(), 0u);
  EXPECT_TRUE(p.b.events.empty());
}

TEST(CmStateMachine, TimeoutRejNamesTheCaGuidInTheAri) {
  ConnectionManager a(kGidA, test_config(0xa));
  auto id = a.connect(to_b(), 0);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(a.pop_outgoing().has_value());  // the REQ
  ASSERT_EQ(a.destroy(*id, 0), 0);
  auto out = a.pop_outgoing();
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->peer, kGidB);
  const auto rej = std::get<CmRej>(parse_cm_mad(out->bytes)->message);
  EXPECT_EQ(rej.reason, rej_reason::kTimeout);
  EXPECT_EQ(rej.local_comm_id, *id);
  EXPECT_EQ(rej.reject_info_length, 8);
  EXPECT_EQ(rej.ari[7], 0x0a);  // CA GUID 0x000000000000000a, big-endian
  EXPECT_EQ(rej.ari[0], 0x00);
  EXPECT_EQ(a.connections(), 0u);
  EXPECT_FALSE(a.pop_event().has_value());  // destroyed: nothing more is reported
}

TEST(CmStateMachine, GiveUpHappensAtTheSpecifiedTime) {
  Pair p;
  Channel ch(p.a, p.b);
  ch.drop = 1.0;
  ASSERT_TRUE(p.a.cm.connect(to_b(), 0).ok());
  const Nanos wait = 2 * cm_timeout_ns(8) + cm_timeout_ns(12);
  ch.run(6 * wait - 1);
  EXPECT_TRUE(p.a.events.empty());
  ch.run(6 * wait);
  EXPECT_EQ(p.a.types(), (Events{E::kUnreachable}));
}

TEST(CmStateMachine, LostRtuIsRecoveredByTheRepeatedRep) {
  Pair p;
  Channel ch(p.a, p.b);
  ch.drop_if = [](const Node&, const std::string& name, int nth) {
    return name == "RTU" && nth == 1;
  };
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  ASSERT_TRUE(p.a.cm.connect(to_b(), 0).ok());
  ch.run(kMs * 1000);
  EXPECT_EQ(p.a.types(), (Events{E::kConnectResponse, E::kEstablished}));
  EXPECT_EQ(p.b.types(), (Events{E::kConnectRequest, E::kEstablished}));
  EXPECT_EQ(p.b.sent, (std::vector<std::string>{"REP", "REP"}));
  EXPECT_EQ(p.a.sent, (std::vector<std::string>{"REQ", "RTU", "RTU"}));
}

TEST(CmStateMachine, RepeatedReqGetsTheSameRep) {
  ConnectionManager b(kGidB, test_config(0xb));
  ASSERT_TRUE(b.listen(kService).ok());
  CmReq req;
  req.local_comm_id = 99;
  req.service_id = kService;
  req.local_qpn = 0x42;
  req.local_cm_response_timeout = 12;
  req.remote_cm_response_timeout = 12;
  req.max_cm_retries = 3;
  const auto bytes = build_cm_mad({{}, req});
  b.receive(kGidA, bytes, 0);
  auto e = b.pop_event();
  ASSERT_TRUE(e && e->type == E::kConnectRequest);
  AcceptParams ap;
  ap.qpn = 0x43;
  ASSERT_EQ(b.accept(e->conn, ap, 0), 0);
  auto first = b.pop_outgoing();
  ASSERT_TRUE(first.has_value());
  b.receive(kGidA, bytes, kMs);
  auto second = b.pop_outgoing();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->bytes, first->bytes);
  EXPECT_EQ(std::get<CmRep>(parse_cm_mad(second->bytes)->message).remote_comm_id, 99u);
  EXPECT_FALSE(b.pop_event().has_value());  // no second CONNECT_REQUEST
  EXPECT_EQ(b.counters().duplicates, 1u);
  EXPECT_EQ(b.connections(), 1u);
}

TEST(CmStateMachine, SlowConsumerSendsMraAndTheActiveSideWaits) {
  Pair p;
  Channel ch(p.a, p.b);
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  ConnId pending = 0;
  p.b.on_event = [&](Node&, const CmEvent& e, Nanos) {
    if (e.type == E::kConnectRequest) pending = e.conn;
  };
  ASSERT_TRUE(p.a.cm.connect(to_b(), 0).ok());
  // Far beyond the active side's 6 REQ waits (~120 ms) without an MRA.
  ch.run(200 * kMs);
  ASSERT_NE(pending, 0u);
  EXPECT_EQ(p.b.sent, (std::vector<std::string>{"MRA"}));
  EXPECT_EQ(p.a.cm.state(0xa0001), ConnState::kMraReqRcvd);
  AcceptParams ap;
  ap.qpn = 0x222;
  ASSERT_EQ(p.b.cm.accept(pending, ap, ch.now), 0);
  ch.run(ch.now + 100 * kMs);
  EXPECT_EQ(p.a.types(), (Events{E::kConnectResponse, E::kEstablished}));
  EXPECT_EQ(p.b.types(), (Events{E::kConnectRequest, E::kEstablished}));
  EXPECT_EQ(p.a.sent, (std::vector<std::string>{"REQ", "REQ", "RTU"}));
}

TEST(CmStateMachine, ReqFromAQpStillConnectedIsStale) {
  Pair p;
  Channel ch(p.a, p.b);
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  auto first = p.a.cm.connect(to_b(0x555), 0);
  ASSERT_TRUE(first.ok());
  ch.run(10 * kMs);
  ASSERT_EQ(p.b.types(), (Events{E::kConnectRequest, E::kEstablished}));

  // A restarts and forgets: a new CM on the same GID and CA GUID, new comm IDs, same QPN.
  CmConfig c = test_config(0xa);
  c.first_comm_id = 0x7000;
  Node a2(kGidA, c);
  Channel ch2(a2, p.b);
  ch2.now = ch.now;
  ASSERT_TRUE(a2.cm.connect(to_b(0x555), ch2.now).ok());
  ch2.run(ch2.now + 10 * kMs);
  ASSERT_EQ(a2.types(), (Events{E::kRejected}));
  EXPECT_EQ(a2.events[0].status, rej_reason::kStaleConn);
  // B tears the old connection down: a DREQ to A's GID (answered by a2, which knows nothing).
  EXPECT_EQ(p.b.types(), (Events{E::kConnectRequest, E::kEstablished, E::kDisconnected}));
  EXPECT_EQ(p.b.sent, (std::vector<std::string>{"REP", "REJ", "DREQ"}));
  EXPECT_EQ(a2.sent, (std::vector<std::string>{"REQ", "DREP"}));
  EXPECT_EQ(p.b.cm.counters().stale, 1u);
}

TEST(CmStateMachine, ReqFromAQpWhoseOldConnectionIsInTimewaitIsAccepted) {
  Pair p;
  Channel ch(p.a, p.b);
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  auto first = p.a.cm.connect(to_b(0x555), 0);
  ASSERT_TRUE(first.ok());
  ch.run(10 * kMs);
  ASSERT_EQ(p.a.cm.disconnect(*first, {}, ch.now), 0);
  ch.run(ch.now + 10 * kMs);  // within the 50 ms timewait
  ASSERT_EQ(p.b.cm.state(p.b.events[0].conn), ConnState::kTimewait);

  // A new process on A (new comm IDs) whose QP got the old QPN: a new connection, as with Linux's
  // CM, not a stale one.
  CmConfig c = test_config(0xa);
  c.first_comm_id = 0x7000;
  Node a2(kGidA, c);
  Channel ch2(a2, p.b);
  ch2.now = ch.now;
  ASSERT_TRUE(a2.cm.connect(to_b(0x555), ch2.now).ok());
  ch2.run(ch2.now + 10 * kMs);
  EXPECT_EQ(a2.types(), (Events{E::kConnectResponse, E::kEstablished}));
  EXPECT_EQ(p.b.types(), (Events{E::kConnectRequest, E::kEstablished, E::kDisconnected,
                                 E::kConnectRequest, E::kEstablished}));
  EXPECT_EQ(p.b.cm.counters().stale, 0u);
}

TEST(CmStateMachine, SidrResolvesAndReportsUnsupportedService) {
  Pair p;
  Channel ch(p.a, p.b);
  const uint64_t udp = rdma_service_id(RdmaPortSpace::kUdp, 7174);
  ASSERT_TRUE(p.b.cm.listen(udp).ok());
  const ConnId known = *p.a.cm.sidr_resolve(kGidB, udp, {}, 0);
  const ConnId unknown = *p.a.cm.sidr_resolve(kGidB, udp + 1, {}, 0);
  ch.run(10 * kMs);
  // B answers the unknown service at once and the known one after its consumer has.
  ASSERT_EQ(p.a.types(), (Events{E::kSidrResolved, E::kSidrResolved}));
  EXPECT_EQ(p.a.events[0].conn, unknown);
  EXPECT_EQ(p.a.events[0].status, sidr_status::kServiceIdNotSupported);
  EXPECT_EQ(p.a.events[1].conn, known);
  EXPECT_EQ(p.a.events[1].status, sidr_status::kValid);
  EXPECT_EQ(p.a.events[1].qpn, 0x345u);
  EXPECT_EQ(p.a.events[1].qkey, 0x01234567u);
  EXPECT_EQ(p.b.types(), (Events{E::kSidrRequest}));
  EXPECT_EQ(p.a.cm.connections(), 0u);
  ch.run(ch.now + 100 * kMs);  // B's answered record lingers one timewait
  EXPECT_EQ(p.b.cm.connections(), 0u);
}

TEST(CmStateMachine, SidrLostRepIsAnsweredAgainWithoutAskingTwice) {
  Pair p;
  Channel ch(p.a, p.b);
  ch.drop_if = [](const Node&, const std::string& name, int nth) {
    return name == "SIDR_REP" && nth == 1;
  };
  const uint64_t udp = rdma_service_id(RdmaPortSpace::kUdp, 7174);
  ASSERT_TRUE(p.b.cm.listen(udp).ok());
  ASSERT_TRUE(p.a.cm.sidr_resolve(kGidB, udp, {}, 0).ok());
  ch.run(200 * kMs);
  EXPECT_EQ(p.a.types(), (Events{E::kSidrResolved}));
  EXPECT_EQ(p.b.types(), (Events{E::kSidrRequest}));
  EXPECT_EQ(p.b.sent, (std::vector<std::string>{"SIDR_REP", "SIDR_REP"}));
}

TEST(CmStateMachine, DestroyEstablishedSendsDreqAndReportsNothingMore) {
  Pair p;
  Channel ch(p.a, p.b);
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  auto id = p.a.cm.connect(to_b(), 0);
  ch.run(10 * kMs);
  ASSERT_EQ(p.a.cm.destroy(*id, ch.now), 0);
  ch.run(ch.now + 200 * kMs);
  EXPECT_EQ(p.a.types(), (Events{E::kConnectResponse, E::kEstablished}));
  EXPECT_EQ(p.b.types(),
            (Events{E::kConnectRequest, E::kEstablished, E::kDisconnected, E::kTimewaitExit}));
  EXPECT_EQ(p.a.cm.connections(), 0u);
}

TEST(CmStateMachine, SimultaneousDisconnect) {
  Pair p;
  Channel ch(p.a, p.b);
  ASSERT_TRUE(p.b.cm.listen(kService).ok());
  auto id = p.a.cm.connect(to_b(), 0);
  ch.run(10 * kMs);
  ASSERT_EQ(p.a.cm.disconnect(*id, {}, ch.now), 0);
  ASSERT_EQ(p.b.cm.disconnect(p.b.events[0].conn, {}, ch.now), 0);
  ch.run(ch.now + 200 * kMs);
  EXPECT_EQ(p.a.types(),
            (Events{E::kConnectResponse, E::kEstablished, E::kDisconnected, E::kTimewaitExit}));
  EXPECT_EQ(p.b.types(),
            (Events{E::kConnectRequest, E::kEstablished, E::kDisconnected, E::kTimewaitExit}));
  EXPECT_EQ(p.a.sent, (std::vector<std::string>{"REQ", "RTU", "DREQ", "DREP"}));
  EXPECT_EQ(p.b.sent, (std::vector<std::string>{"REP", "DREQ", "DREP"}));
  EXPECT_EQ(p.a.cm.connections() + p.b.cm.connections(), 0u);
}

TEST(CmStateMachine, TablesAreBounded) {
  CmConfig c = test_config(0xb);
  c.max_connections = 2;
  c.max_listeners = 1;
  ConnectionManager b(kGidB, c);
  ASSERT_TRUE(b.listen(kService).ok());
  EXPECT_EQ(b.listen(kService + 1).error(), ENOSPC);
  EXPECT_EQ(b.listen(kService).error(), EADDRINUSE);
  for (uint32_t i = 1; i <= 3; ++i) {
    CmReq req;
    req.local_comm_id = i;
    req.local_qpn = 0x100 + i;
    req.service_id = kService;
    b.receive(kGidA, build_cm_mad({{}, req}), 0);
  }
  EXPECT_EQ(b.connections(), 2u);
  EXPECT_EQ(b.counters().table_full, 1u);
  std::optional<OutgoingMad> out = b.pop_outgoing();
  ASSERT_TRUE(out.has_value());
  const auto rej = std::get<CmRej>(parse_cm_mad(out->bytes)->message);
  EXPECT_EQ(rej.reason, rej_reason::kNoResources);
  EXPECT_EQ(rej.remote_comm_id, 3u);
  ConnectParams cp = to_b();
  cp.peer = kGidA;
  EXPECT_EQ(b.connect(cp, 0).error(), ENOSPC);
  std::array<uint8_t, kReqPrivateBytes + 1> too_long{};
  cp.private_data = too_long;
  EXPECT_EQ(b.connect(cp, 0).error(), EINVAL);

  CmConfig small = test_config(0xa);
  small.max_outgoing = 1;
  ConnectionManager a(kGidA, small);
  ASSERT_TRUE(a.connect(to_b(1), 0).ok());
  ASSERT_TRUE(a.connect(to_b(2), 0).ok());
  EXPECT_EQ(a.counters().outgoing_dropped, 1u);
}

TEST(CmStateMachine, MalformedAndUnexpectedMadsAreCountedNotFatal) {
  ConnectionManager b(kGidB, test_config(0xb));
  std::array<uint8_t, 10> junk{};
  b.receive(kGidA, junk, 0);
  auto bytes = build_cm_mad({{}, CmRtu{}});
  bytes[1] = 0x04;
  b.receive(kGidA, bytes, 0);
  CmRtu rtu;
  rtu.remote_comm_id = 1234;
  b.receive(kGidA, build_cm_mad({{}, rtu}), 0);
  CmDrep drep;
  b.receive(kGidA, build_cm_mad({{}, drep}), 0);
  EXPECT_EQ(b.counters().malformed, 2u);
  EXPECT_EQ(b.counters().unmatched, 2u);
  EXPECT_FALSE(b.pop_event().has_value());
  EXPECT_FALSE(b.pop_outgoing().has_value());
  EXPECT_EQ(b.accept(77, {}, 0), ENOENT);
}

// Many seeds of a channel that drops, duplicates and reorders: every connection is made and
// taken down with exactly the events of a clean run, and nothing is left behind.
TEST(CmStateMachine, LossyDuplicatingReorderingChannel) {
  uint64_t retransmits = 0, duplicates = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    Pair p;
    Channel ch(p.a, p.b, seed);
    ch.drop = 0.2;
    ch.duplicate = 0.2;
    ch.jitter = 3 * kMs;
    ASSERT_TRUE(p.b.cm.listen(kService).ok());
    constexpr int kConns = 3;
    std::vector<ConnId> ids;
    for (int i = 0; i < kConns; ++i)
      ids.push_back(*p.a.cm.connect(to_b(0x100 + static_cast<uint32_t>(i)), 0));
    ch.run(2000 * kMs);
    for (ConnId id : ids) ASSERT_EQ(p.a.cm.state(id), ConnState::kEstablished);
    EXPECT_EQ(p.b.cm.connections(), static_cast<size_t>(kConns));
    for (ConnId id : ids) ASSERT_EQ(p.a.cm.disconnect(id, {}, ch.now), 0);
    ch.run(ch.now + 4000 * kMs);
    // Per connection on each side: the four events of a clean run, in order.
    for (Node* n : {&p.a, &p.b}) {
      std::map<ConnId, Events> per;
      for (const auto& e : n->events) per[e.conn].push_back(e.type);
      ASSERT_EQ(per.size(), static_cast<size_t>(kConns));
      const Events want =
          n == &p.a
              ? Events{E::kConnectResponse, E::kEstablished, E::kDisconnected, E::kTimewaitExit}
              : Events{E::kConnectRequest, E::kEstablished, E::kDisconnected, E::kTimewaitExit};
      for (const auto& [id, ev] : per) EXPECT_EQ(ev, want) << "conn " << id;
      EXPECT_EQ(n->cm.connections(), 0u);
      EXPECT_EQ(n->cm.next_deadline(), kNever);
      retransmits += n->cm.counters().retransmits;
      duplicates += n->cm.counters().duplicates;
    }
  }
  // The channel did what it was asked: the state machines had to recover.
  EXPECT_GT(retransmits, 40u);
  EXPECT_GT(duplicates, 40u);
}

}  // namespace
}  // namespace uroce::cm
