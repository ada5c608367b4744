// The GSI QP plumbing: two NICs on real UDP links (127.77.41.x, two addresses per test so that
// ctest may run the tests in parallel), each with its connection manager attached to QPN 1 and
// driven only by its progress engine's thread. CM MADs cross as RoCEv2 UD SEND ONLY packets;
// events reach the handler; a REQ for a service nobody listens on is rejected with reason 8; a
// UD packet to QPN 1 with another Q_Key is dropped and counted.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "api/nic.h"
#include "wire/mad.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::api {
namespace {

using namespace std::chrono_literals;

// Events from a CmPort's handler, waited for with a timeout (a lost event fails, not hangs).
struct EventLog {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<cm::CmEvent> events;

  cm::CmService::EventHandler handler() {
    return [this](cm::CmEvent&& e) {
      std::lock_guard lock(mu);
      events.push_back(std::move(e));
      cv.notify_all();
    };
  }
  std::optional<cm::CmEvent> next() {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, 5s, [&] { return !events.empty(); })) return std::nullopt;
    cm::CmEvent e = std::move(events.front());
    events.pop_front();
    return e;
  }
};

struct Side {
  std::unique_ptr<Nic> nic;
  EventLog log;

  explicit Side(const std::string& addr) {
    NicOptions o;
    o.link.address = addr;
    o.start_engine = true;
    auto n = open_nic(o);
    if (!n.ok()) {
      ADD_FAILURE() << "open " << addr << ": " << std::strerror(n.error());
      return;
    }
    nic = std::move(*n);
    nic->cm().set_event_handler(log.handler());
  }
  ~Side() {
    if (nic) nic->cm().set_event_handler({});
  }
};

constexpr uint64_t kService = wire::rdma_service_id(wire::RdmaPortSpace::kTcp, 7471);

cm::ConnectParams connect_params(Side& from, Side& to) {
  cm::ConnectParams p;
  p.peer = to.nic->device().gid();
  p.service_id = kService;
  p.qpn = 0x123;
  p.starting_psn = 0x456;
  const Gid local = from.nic->device().gid();
  std::copy(local.begin(), local.end(), p.primary.local_gid.begin());
  std::copy(p.peer.begin(), p.peer.end(), p.primary.remote_gid.begin());
  return p;
}

TEST(CmGsi, ConnectAcceptEstablishOverUdp) {
  Side a("127.77.41.1"), b("127.77.41.2");
  ASSERT_TRUE(a.nic && b.nic);
  ASSERT_TRUE(b.nic->cm().listen(kService).ok());
  const uint8_t hello[3] = {'h', 'i', '!'};
  cm::ConnectParams p = connect_params(a, b);
  p.private_data = hello;
  auto conn = a.nic->cm().connect(p);
  ASSERT_TRUE(conn.ok());

  auto req = b.log.next();
  ASSERT_TRUE(req);
  EXPECT_EQ(req->type, cm::CmEventType::kConnectRequest);
  EXPECT_EQ(req->peer, a.nic->device().gid());
  ASSERT_TRUE(req->req);
  EXPECT_EQ(req->req->local_qpn, 0x123u);
  EXPECT_EQ(req->req->local_ca_guid, a.nic->device().attr().node_guid);
  EXPECT_EQ(std::memcmp(req->private_data.data(), hello, 3), 0);

  cm::AcceptParams ap;
  ap.qpn = 0x789;
  ASSERT_EQ(b.nic->cm().accept(req->conn, ap), 0);
  auto rep = a.log.next();
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->type, cm::CmEventType::kConnectResponse);
  ASSERT_TRUE(rep->rep);
  EXPECT_EQ(rep->rep->local_qpn, 0x789u);
  ASSERT_EQ(a.nic->cm().establish(*conn, {}), 0);
  auto est_a = a.log.next();
  ASSERT_TRUE(est_a);
  EXPECT_EQ(est_a->type, cm::CmEventType::kEstablished);
  auto est_b = b.log.next();
  ASSERT_TRUE(est_b);
  EXPECT_EQ(est_b->type, cm::CmEventType::kEstablished);

  ASSERT_EQ(a.nic->cm().disconnect(*conn, {}), 0);
  auto dis_b = b.log.next();
  ASSERT_TRUE(dis_b);
  EXPECT_EQ(dis_b->type, cm::CmEventType::kDisconnected);
  auto dis_a = a.log.next();
  ASSERT_TRUE(dis_a);
  EXPECT_EQ(dis_a->type, cm::CmEventType::kDisconnected);

  // REQ, REP, RTU, DREQ from A's side of the exchange and REP, DREP... counted per direction.
  EXPECT_EQ(a.nic->device().gsi_counters().tx_mads, 3u);  // REQ, RTU, DREQ
  EXPECT_EQ(b.nic->device().gsi_counters().tx_mads, 2u);  // REP, DREP
  EXPECT_EQ(b.nic->device().gsi_counters().rx_mads, 3u);
  EXPECT_EQ(a.nic->device().gsi_counters().rx_drops, 0u);
}

TEST(CmGsi, NoListenerIsRejectedWithInvalidServiceId) {
  Side a("127.77.41.3"), b("127.77.41.4");
  ASSERT_TRUE(a.nic && b.nic);
  ASSERT_TRUE(a.nic->cm().connect(connect_params(a, b)).ok());
  auto e = a.log.next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, cm::CmEventType::kRejected);
  EXPECT_EQ(e->status, wire::rej_reason::kInvalidServiceId);
  EXPECT_EQ(b.nic->cm().counters().no_listener, 1u);
}

// A UD SEND to QPN 1 with a Q_Key other than the GSI's never reaches the CM.
TEST(CmGsi, WrongQkeyIsDroppedAndCounted) {
  Side b("127.77.41.6");
  ASSERT_TRUE(b.nic);
  NicOptions o;
  o.link.address = "127.77.41.5";
  auto raw = open_nic(o);  // only its link is used, to send a hand-built packet
  ASSERT_TRUE(raw.ok());
  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kUdSendOnly;
  h.bth.dest_qp = wire::kGsiQpn;
  h.deth.qkey = 0x1234;
  h.deth.src_qp = 1;
  std::array<uint8_t, wire::kMadBytes> mad{};
  wire::AddressVector av;
  av.dgid = b.nic->device().gid();
  wire::TxPacket p;
  p.header_len = wire::write_transport_headers(h, p.header);
  p.payload[0] = mad;
  p.payload_parts = 1;
  p.payload_len = wire::kMadBytes;
  p.dest = &av;
  (*raw)->link().transmit(p);
  (*raw)->link().flush();
  for (int i = 0; i < 500 && b.nic->device().gsi_counters().rx_drops == 0; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(b.nic->device().gsi_counters().rx_drops, 1u);
  EXPECT_EQ(b.nic->device().gsi_counters().rx_mads, 0u);
  EXPECT_EQ(b.nic->cm().counters().received, 0u);
}

}  // namespace
}  // namespace uroce::api
