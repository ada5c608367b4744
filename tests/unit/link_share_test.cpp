// One device address shared by several processes (link/shared_address.h): the steering decision
// sans I/O over MADs the wire codec builds, the slot in CM communication IDs and device QPNs, and
// (root only: the SK_REUSEPORT program needs CAP_BPF) real links sharing 127.77.200.1, each
// packet arriving at exactly the member that owns it.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <map>
#include <vector>

#include "api/cm/connection_manager.h"
#include "link/share/steer_decision.h"
#include "link/udp_link.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "wire/mad.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce {
namespace {

// ---- The decision, as the kernel runs it ----------------------------------------------------

std::array<uint8_t, UROCE_SHARE_BTH_BYTES> bth_to(uint32_t qpn) {
  wire::TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = qpn;
  std::array<uint8_t, wire::kMaxTransportHeaderBytes> bytes{};
  wire::write_transport_headers(h, bytes);
  std::array<uint8_t, UROCE_SHARE_BTH_BYTES> bth;
  std::memcpy(bth.data(), bytes.data(), bth.size());
  return bth;
}

// DETH then the MAD, as they follow the BTH of a datagram to QPN 1.
std::vector<uint8_t> after_bth(const wire::CmMessage& message) {
  wire::CmMad mad;
  mad.header.transaction_id = 0x1234;
  mad.message = message;
  const auto bytes = wire::build_cm_mad(mad);
  std::vector<uint8_t> out(8 + bytes.size(), 0);  // DETH (Q_Key, source QP: not read), the MAD
  std::memcpy(out.data() + 8, bytes.data(), bytes.size());
  return out;
}

uroce_share_steer steer_mad(const wire::CmMessage& message) {
  return uroce_share_steer_mad(after_bth(message).data());
}

TEST(ShareSteer, DataPacketsGoToTheSlotInTheirDestinationQpn) {
  const auto to = [](uint32_t qpn) { return uroce_share_steer_bth(bth_to(qpn).data()); };
  EXPECT_EQ(to(0x000011).verdict, UROCE_SHARE_SLOT);
  EXPECT_EQ(to(0x000011).slot, 0u);
  EXPECT_EQ(to(0x100011).slot, 1u);
  EXPECT_EQ(to(0x3fffff).slot, 3u);
  EXPECT_EQ(to(0xf00000).slot, 15u);
  EXPECT_EQ(to(0x000001).verdict, UROCE_SHARE_READ_MAD);  // the GSI QP: read the MAD
  EXPECT_EQ(to(0xffffff).verdict, UROCE_SHARE_ANY);       // multicast
}

TEST(ShareSteer, RequestsGoByServiceIdRepliesByOurCommunicationId) {
  const uint64_t service = wire::rdma_service_id(wire::RdmaPortSpace::kTcp, 7471);
  wire::CmReq req;
  req.local_comm_id = 0x5000002a;  // the requester's; not ours
  req.service_id = service;
  uroce_share_steer s = steer_mad(req);
  EXPECT_EQ(s.verdict, UROCE_SHARE_SERVICE);
  EXPECT_EQ(s.service_id, 0x0000000001061d2full);
  wire::CmSidrReq sidr;
  sidr.request_id = 0x7000002a;
  sidr.service_id = wire::rdma_service_id(wire::RdmaPortSpace::kUdp, 5000);
  s = steer_mad(sidr);
  EXPECT_EQ(s.verdict, UROCE_SHARE_SERVICE);
  EXPECT_EQ(s.service_id, 0x0000000001111388ull);

  // Each reply carries the receiver's own ID as its remote one; its slot is the top 4 bits.
  const uint32_t ours = 0x3000beef, theirs = 0xa0000001;
  wire::CmRep rep;
  rep.local_comm_id = theirs;
  rep.remote_comm_id = ours;
  wire::CmMra mra;
  mra.local_comm_id = theirs;
  mra.remote_comm_id = ours;
  wire::CmRej rej;
  rej.local_comm_id = theirs;
  rej.remote_comm_id = ours;
  wire::CmRtu rtu;
  rtu.local_comm_id = theirs;
  rtu.remote_comm_id = ours;
  wire::CmDreq dreq;
  dreq.local_comm_id = theirs;
  dreq.remote_comm_id = ours;
  wire::CmDrep drep;
  drep.local_comm_id = theirs;
  drep.remote_comm_id = ours;
  for (const wire::CmMessage& m : std::vector<wire::CmMessage>{rep, mra, rej, rtu, dreq, drep}) {
    s = steer_mad(m);
    EXPECT_EQ(s.verdict, UROCE_SHARE_SLOT) << wire::cm_message_name(m);
    EXPECT_EQ(s.slot, 3u) << wire::cm_message_name(m);
  }
  wire::CmSidrRep sidr_rep;
  sidr_rep.request_id = 0xc0000007;  // the ID our SIDR_REQ carried
  s = steer_mad(sidr_rep);
  EXPECT_EQ(s.verdict, UROCE_SHARE_SLOT);
  EXPECT_EQ(s.slot, 12u);
}

TEST(ShareSteer, WhatNamesNoOwnerGoesToAnyMember) {
  // The REJ a requester sends when its REQs timed out knows no ID of the receiver's.
  wire::CmRej timed_out;
  timed_out.local_comm_id = 0x10000001;
  timed_out.remote_comm_id = 0;
  EXPECT_EQ(steer_mad(timed_out).verdict, UROCE_SHARE_ANY);
  // Not a CM MAD (another management class), or another base version.
  std::vector<uint8_t> bytes = after_bth(wire::CmRtu{1, 0x20000001});
  EXPECT_EQ(uroce_share_steer_mad(bytes.data()).verdict, UROCE_SHARE_SLOT);
  bytes[8 + 1] = 0x04;  // performance management
  EXPECT_EQ(uroce_share_steer_mad(bytes.data()).verdict, UROCE_SHARE_ANY);
  bytes[8 + 1] = 0x07;
  bytes[8 + 0] = 2;
  EXPECT_EQ(uroce_share_steer_mad(bytes.data()).verdict, UROCE_SHARE_ANY);
  // ClassPortInfo (attribute 0x0001).
  bytes = after_bth(wire::CmRtu{1, 0x20000001});
  bytes[8 + 16] = 0;
  bytes[8 + 17] = 1;
  EXPECT_EQ(uroce_share_steer_mad(bytes.data()).verdict, UROCE_SHARE_ANY);
}

// ---- The slot in what a member hands out -----------------------------------------------------

TEST(ShareSteer, ConnectionManagerPutsItsSlotInEveryCommunicationId) {
  const Gid us = gid_from_ipv4({127, 77, 200, 1});
  const Gid peer = gid_from_ipv4({127, 77, 200, 2});
  for (const std::optional<uint32_t> slot :
       {std::optional<uint32_t>{}, std::optional<uint32_t>{9}}) {
    cm::CmConfig config;
    config.first_comm_id = 0xfffffffe;  // wraps past 0, which is never handed out
    config.comm_id_slot = slot;
    cm::ConnectionManager cm(us, config);
    std::vector<uint32_t> ids;
    for (int i = 0; i < 3; ++i) {
      cm::ConnectParams p;
      p.peer = peer;
      p.service_id = wire::rdma_service_id(wire::RdmaPortSpace::kTcp, 1);
      p.qpn = 0x11;
      auto id = cm.connect(p, 0);
      ASSERT_TRUE(id.ok());
      ids.push_back(*id);
      // The REQ on the wire carries the same ID.
      auto mad = cm.pop_outgoing();
      ASSERT_TRUE(mad.has_value());
      auto parsed = wire::parse_cm_mad(mad->bytes);
      ASSERT_TRUE(parsed.ok());
      EXPECT_EQ(std::get<wire::CmReq>(parsed->message).local_comm_id, *id);
    }
    // A SIDR request ID is one of the same IDs.
    auto sidr = cm.sidr_resolve(peer, wire::rdma_service_id(wire::RdmaPortSpace::kUdp, 1), {}, 0);
    ASSERT_TRUE(sidr.ok());
    ids.push_back(*sidr);
    if (slot)
      EXPECT_EQ(ids, (std::vector<uint32_t>{0x9ffffffe, 0x9fffffff, 0x90000000, 0x90000001}));
    else
      EXPECT_EQ(ids, (std::vector<uint32_t>{0xfffffffe, 0xffffffff, 1, 2}));
  }
}

// A link that says it shares its address, for the device's QPN range.
class SlotLink final : public link::Link {
 public:
  explicit SlotLink(std::optional<uint32_t> slot) : slot_(slot) {}
  Gid local_gid() const override { return gid_from_ipv4({127, 77, 200, 9}); }
  void transmit(const wire::TxPacket&) override {}
  void flush() override {}
  size_t poll(const link::RxHandler&, size_t) override { return 0; }
  const link::LinkCounters& counters() const override { return counters_; }
  std::optional<uint32_t> shared_slot() const override { return slot_; }

 private:
  std::optional<uint32_t> slot_;
  link::LinkCounters counters_;
};

// The QPNs of the first two QPs a device on `link` creates.
std::vector<uint32_t> first_qpns(link::Link& link) {
  verbs::Device device(link);
  auto ctx = std::move(device.open().value());
  auto pd = std::move(ctx->alloc_pd().value());
  auto cq = std::move(ctx->create_cq(16).value());
  verbs::QpInitAttr a;
  a.send_cq = a.recv_cq = cq.get();
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  std::vector<uint32_t> qpns;
  {
    auto one = std::move(pd->create_qp(a).value());
    auto two = std::move(pd->create_qp(a).value());
    qpns = {one->qp_num(), two->qp_num()};
  }
  return qpns;
}

TEST(ShareSteer, DeviceHandsOutQpnsInsideItsSlot) {
  SlotLink alone(std::nullopt), slot0(0), slot3(3), slot15(15);
  EXPECT_EQ(first_qpns(alone), (std::vector<uint32_t>{0x11, 0x12}));
  EXPECT_EQ(first_qpns(slot0), (std::vector<uint32_t>{0x11, 0x12}));  // 0 and 1 are special
  EXPECT_EQ(first_qpns(slot3), (std::vector<uint32_t>{0x300000, 0x300001}));
  EXPECT_EQ(first_qpns(slot15), (std::vector<uint32_t>{0xf00000, 0xf00001}));
  // The range bounds max_qp: 2^20 QPNs a slot, less 0 to 0x10 in slot 0 and the multicast QPN
  // 0xffffff in slot 15.
  const uint32_t max_qp = verbs::DeviceConfig{}.attr.max_qp;
  EXPECT_EQ(verbs::Device(slot0).attr().max_qp, std::min(max_qp, (1u << 20) - 0x11));
  EXPECT_EQ(verbs::Device(slot15).attr().max_qp, std::min(max_qp, (1u << 20) - 1));
  EXPECT_EQ(verbs::Device(alone).attr().max_qp, std::min(max_qp, (1u << 24) - 0x11));
}

// ---- Real links sharing an address (root) ----------------------------------------------------

constexpr const char* kShared = "127.77.200.1";
constexpr const char* kPeer = "127.77.200.2";

std::unique_ptr<link::UdpLink> open_shared(int* error = nullptr) {
  link::UdpLinkOptions o;
  o.address = kShared;
  o.shared_address = true;
  std::string why;
  auto r = link::UdpLink::open(o, &why);
  if (!r.ok()) {
    if (error) *error = r.error();
    return nullptr;
  }
  return std::move(*r);
}

struct Sent {
  wire::TransportHeaders hdr;
  std::array<uint8_t, wire::kMadBytes> payload{};
  wire::AddressVector av;
  wire::TxPacket tx;
};

// A packet from the peer to the shared address: an RC SEND ONLY to `qpn`, or a MAD to QPN 1.
std::unique_ptr<Sent> packet(uint32_t qpn, uint32_t psn, const wire::CmMessage* mad = nullptr) {
  auto s = std::make_unique<Sent>();
  s->hdr.bth.opcode = mad ? wire::op::kUdSendOnly : wire::op::kRcSendOnly;
  s->hdr.bth.dest_qp = mad ? 1 : qpn;
  s->hdr.bth.psn = Psn(psn);
  s->hdr.deth = {wire::kGsiQkey, 1};
  if (mad) {
    wire::CmMad m;
    m.message = *mad;
    s->payload = wire::build_cm_mad(m);
  }
  s->av.dgid = gid_from_ipv4({127, 77, 200, 1});
  s->tx.header_len = wire::write_transport_headers(s->hdr, s->tx.header);
  s->tx.payload[0] = std::span<const uint8_t>(s->payload.data(), mad ? wire::kMadBytes : 64);
  s->tx.payload_parts = 1;
  s->tx.payload_len = mad ? wire::kMadBytes : 64;
  s->tx.dest = &s->av;
  return s;
}

// PSNs of the packets each link receives within a short wait, by destination QPN.
std::vector<uint32_t> receive_psns(link::UdpLink& link, size_t expected) {
  std::vector<uint32_t> psns;
  for (int waits = 0; waits < 100 && psns.size() < expected; ++waits) {
    link.poll([&](const wire::RxPacket& p) { psns.push_back(p.hdr->bth.psn.value()); }, 64);
    if (psns.size() < expected) {
      pollfd pfd{link.wait_fd(), POLLIN, 0};
      ::poll(&pfd, 1, 20);
    }
  }
  // Anything more that would arrive late.
  pollfd pfd{link.wait_fd(), POLLIN, 0};
  ::poll(&pfd, 1, 50);
  link.poll([&](const wire::RxPacket& p) { psns.push_back(p.hdr->bth.psn.value()); }, 64);
  return psns;
}

TEST(ShareSteer, EachMemberOfASharedAddressGetsExactlyItsPackets) {
  if (::geteuid() != 0) GTEST_SKIP() << "the steering program needs root (CAP_BPF)";
  int err = 0;
  auto a = open_shared(&err);
  if (!a && err == EPROTONOSUPPORT) GTEST_SKIP() << "a build without libbpf (UROCE_XDP=OFF)";
  ASSERT_TRUE(a) << std::strerror(err);
  auto b = open_shared(&err);
  ASSERT_TRUE(b) << std::strerror(err);
  EXPECT_EQ(a->shared_slot(), std::optional<uint32_t>(0));
  EXPECT_EQ(b->shared_slot(), std::optional<uint32_t>(1));
  EXPECT_FALSE(a->gro_active());  // a GRO blob would be steered by its first datagram only

  // Without sharing, the address is taken.
  link::UdpLinkOptions plain;
  plain.address = kShared;
  auto refused = link::UdpLink::open(plain);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), EADDRINUSE);

  const uint64_t service = wire::rdma_service_id(wire::RdmaPortSpace::kTcp, 7471);
  EXPECT_EQ(b->claim_service(service), 0);
  EXPECT_EQ(a->claim_service(service), EADDRINUSE);
  EXPECT_EQ(b->claim_service(service), EADDRINUSE);  // twice by one member, as a second listen

  link::UdpLinkOptions peer_options;
  peer_options.address = kPeer;
  auto peer = link::UdpLink::open(peer_options);
  ASSERT_TRUE(peer.ok()) << std::strerror(peer.error());
  // Data to both slots interleaved, sent in one flush (equal sizes: GSO would run them together
  // if the link did not cut runs at a slot change), then CM MADs: a REQ for b's service, a REP
  // for an ID of a's and a DREQ for one of b's.
  std::vector<std::unique_ptr<Sent>> sent;
  for (uint32_t i = 0; i < 8; ++i) sent.push_back(packet(i % 2 ? 0x100011 : 0x000011, 100 + i));
  wire::CmReq req;
  req.local_comm_id = 0xe0000001;
  req.service_id = service;
  wire::CmRep rep;
  rep.local_comm_id = 0xe0000002;
  rep.remote_comm_id = 0x0000abcd;
  wire::CmDreq dreq;
  dreq.local_comm_id = 0xe0000003;
  dreq.remote_comm_id = 0x1000abcd;
  const wire::CmMessage mads[] = {req, rep, dreq};
  for (uint32_t i = 0; i < 3; ++i) sent.push_back(packet(0, 200 + i, &mads[i]));
  for (auto& s : sent) (*peer)->transmit(s->tx);
  (*peer)->flush();
  EXPECT_EQ(receive_psns(*a, 5), (std::vector<uint32_t>{100, 102, 104, 106, 201}));
  EXPECT_EQ(receive_psns(*b, 6), (std::vector<uint32_t>{101, 103, 105, 107, 200, 202}));

  // b leaves: its slot and service free; the next member takes slot 1 and may listen there.
  b.reset();
  auto c = open_shared(&err);
  ASSERT_TRUE(c) << std::strerror(err);
  EXPECT_EQ(c->shared_slot(), std::optional<uint32_t>(1));
  EXPECT_EQ(a->claim_service(service), 0);
  a->release_service(service);
  EXPECT_EQ(c->claim_service(service), 0);
}

}  // namespace
}  // namespace uroce
