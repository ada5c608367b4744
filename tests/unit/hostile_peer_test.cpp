// The hostile-peer suite (docs/security.md): a verbs device on a real UDP socket with a connected
// RC QP whose peer is a plain UDP socket on the path's address, sending hand-built RoCEv2 packets
// (correct ICRC unless a test breaks it) and reading what the device answers. Each test asserts
// the answer (NAK syndrome and PSN, silence, completion status, QP state), the counters, and that
// no byte of the arena around the registered memory changed outside what the test permits.
//
// Every test uses addresses of its own (127.77.<60 + n>.1 and .2), so ctest can run them at once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/nic.h"
#include "link/clock.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/qp.h"
#include "wire/crc32.h"
#include "wire/packet.h"

namespace uroce::api {
namespace {

using namespace std::chrono_literals;
using transport::QpState;
using transport::WcStatus;
using wire::NakCode;
namespace op = wire::op;

constexpr uint32_t kPsn = 1000;
constexpr uint32_t kPeerQpn = 0x777;
constexpr size_t kPage = 4096;
constexpr uint32_t kRemoteAll =
    transport::kAccessRemoteWrite | transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;

uint8_t pattern(size_t i) {
  return static_cast<uint8_t>(i * 7 + 3);
}

struct Reply {
  wire::TransportHeaders hdr;
  std::vector<uint8_t> payload;
};

// The arena: four pages of guard pattern; `all` (remote write, read, atomic) and `local` (no
// remote rights) are registered in the victim's PD at pages 1 and 2, `foreign` (every right) in
// another PD at page 3. 1 KiB each, so the rest of each page is guard too.
class HostilePeer : public ::testing::Test {
 protected:
  void start(int net, uint32_t rq_psn = kPsn) {
    victim_addr_ = "127.77." + std::to_string(60 + net) + ".1";
    peer_addr_ = "127.77." + std::to_string(60 + net) + ".2";
    NicOptions o;
    o.link.address = victim_addr_;
    auto n = open_nic(o);
    ASSERT_TRUE(n.ok()) << victim_addr_ << ": " << std::strerror(n.error());
    nic_ = std::move(*n);
    dev_ = &nic_->device();
    ctx_ = std::move(dev_->open().value());
    pd_ = std::move(ctx_->alloc_pd().value());
    pd2_ = std::move(ctx_->alloc_pd().value());
    cq_ = std::move(ctx_->create_cq(256).value());
    for (size_t i = 0; i < arena_.size(); ++i) arena_[i] = pattern(i);
    const uint32_t local = transport::kAccessLocalWrite;
    all_ = std::move(
        pd_->reg_mr(at(kPage), 1024, local | kRemoteAll | transport::kAccessMwBind).value());
    local_ = std::move(pd_->reg_mr(at(2 * kPage), 1024, local).value());
    foreign_ = std::move(
        pd2_->reg_mr(at(3 * kPage), 1024, local | kRemoteAll | transport::kAccessMwBind).value());
    open_peer();
    qp_ = make_qp(rq_psn);
  }
  void TearDown() override {
    qp_.reset();
    spare_qps_.clear();
    windows_.clear();
    all_.reset();
    local_.reset();
    foreign_.reset();
    cq_.reset();
    pd2_.reset();
    pd_.reset();
    ctx_.reset();
    nic_.reset();
    if (fd_ >= 0) ::close(fd_);
  }

  uint8_t* at(size_t off) { return arena_.data() + off; }
  uint64_t va(size_t off) { return reinterpret_cast<uint64_t>(at(off)); }
  // Every byte of the arena still holds the pattern, except [from, from + len).
  bool arena_intact_except(size_t from = 0, size_t len = 0) {
    for (size_t i = 0; i < arena_.size(); ++i) {
      if (i >= from && i < from + len) continue;
      if (arena_[i] != pattern(i)) {
        ADD_FAILURE() << "arena byte " << i << " changed";
        return false;
      }
    }
    return true;
  }

  std::unique_ptr<verbs::QueuePair> make_qp(uint32_t psn, uint32_t access = kRemoteAll) {
    verbs::QpInitAttr init;
    init.send_cq = init.recv_cq = cq_.get();
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = 16;
    auto qp = std::move(pd_->create_qp(init).value());
    verbs::QpAttr a;
    a.port_num = 1;
    a.qp_access_flags = access;
    a.qp_state = QpState::kInit;
    EXPECT_EQ(qp->modify(a, verbs::kQpState | verbs::kQpPkeyIndex | verbs::kQpPort |
                                verbs::kQpAccessFlags),
              0);
    a.qp_state = QpState::kRtr;
    a.path_mtu = verbs::Mtu::k1024;
    a.dest_qp_num = kPeerQpn;
    a.rq_psn = psn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = true;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = peer_gid();
    EXPECT_EQ(
        qp->modify(a, verbs::kQpState | verbs::kQpAv | verbs::kQpPathMtu | verbs::kQpDestQpn |
                          verbs::kQpRqPsn | verbs::kQpMaxDestRdAtomic | verbs::kQpMinRnrTimer),
        0);
    a.qp_state = QpState::kRts;
    a.sq_psn = psn;
    a.timeout = 12;  // about 17 ms: a dropped response is asked for again soon
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    EXPECT_EQ(qp->modify(a, verbs::kQpState | verbs::kQpSqPsn | verbs::kQpTimeout |
                                verbs::kQpRetryCnt | verbs::kQpRnrRetry | verbs::kQpMaxQpRdAtomic),
              0);
    return qp;
  }

  Gid peer_gid() const {
    in_addr a{};
    ::inet_pton(AF_INET, peer_addr_.c_str(), &a);
    std::array<uint8_t, 4> b;
    std::memcpy(b.data(), &a, 4);
    return gid_from_ipv4(b);
  }

  // The peer: a socket on the path's address at the RoCEv2 port, where the victim sends.
  void open_peer() {
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd_, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(wire::kRoceV2Port);
    ::inet_pton(AF_INET, peer_addr_.c_str(), &sa.sin_addr);
    ASSERT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
  }
  wire::IpEndpoints to_victim() const {
    wire::IpEndpoints ep;
    ::inet_pton(AF_INET, peer_addr_.c_str(), ep.src.data());
    ::inet_pton(AF_INET, victim_addr_.c_str(), ep.dst.data());
    ep.udp_src_port = wire::kRoceV2Port;
    return ep;
  }
  void send_raw(std::span<const uint8_t> bytes) {
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(wire::kRoceV2Port);
    ::inet_pton(AF_INET, victim_addr_.c_str(), &dst.sin_addr);
    ASSERT_EQ(
        ::sendto(fd_, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst),
        static_cast<ssize_t>(bytes.size()));
  }
  // Transport bytes (BTH .. pad) with a correct ICRC appended.
  std::vector<uint8_t> seal(std::vector<uint8_t> bytes) {
    const uint32_t total = static_cast<uint32_t>(bytes.size() + wire::kIcrcBytes);
    uint32_t crc = wire::icrc_begin_udp(to_victim(), total,
                                        std::span<const uint8_t>(bytes).first(wire::kBthBytes));
    crc = wire::crc32(crc, std::span<const uint8_t>(bytes).subspan(wire::kBthBytes));
    bytes.resize(total);
    wire::store_icrc(bytes.data() + total - wire::kIcrcBytes, crc);
    return bytes;
  }
  std::vector<uint8_t> packet(const wire::TransportHeaders& h,
                              std::span<const uint8_t> payload = {}) {
    std::vector<uint8_t> out(2048);
    out.resize(wire::build_udp_payload(to_victim(), h, payload, out));
    EXPECT_FALSE(out.empty());
    return out;
  }
  void send(const wire::TransportHeaders& h, std::span<const uint8_t> payload = {}) {
    send_raw(packet(h, payload));
  }
  // Sends what a test built and runs the victim until its link has taken every datagram, so
  // that the socket buffer never overflows during a flood.
  void deliver(const std::vector<std::vector<uint8_t>>& datagrams) {
    for (const auto& d : datagrams) send_raw(d);
    const uint64_t want = link_datagrams() + datagrams.size();
    for (int i = 0; i < 5000 && link_datagrams() < want; ++i) pump();
    ASSERT_EQ(link_datagrams(), want);
  }
  uint64_t link_datagrams() const {
    return counter("link_rx_packets") + counter("link_rx_malformed_drops") +
           counter("link_rx_not_roce_drops") + counter("rx_icrc_encapsulated");
  }

  void pump() {
    dev_->progress(link::monotonic_ns());
    std::this_thread::sleep_for(100us);
  }
  // The next packet the victim sends to its peer, pumping the device meanwhile; none within
  // about `rounds` passes: nullopt (bounded, never hangs).
  std::optional<Reply> next_reply(int rounds = 3000) {
    std::array<uint8_t, 4096> buf;
    for (int i = 0; i < rounds; ++i) {
      sockaddr_in from{};
      socklen_t len = sizeof from;
      const ssize_t n =
          ::recvfrom(fd_, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n > 0) {
        wire::IpEndpoints ep;
        std::memcpy(ep.src.data(), &from.sin_addr, 4);
        ::inet_pton(AF_INET, peer_addr_.c_str(), ep.dst.data());
        ep.udp_src_port = ntohs(from.sin_port);
        auto parsed = wire::parse_udp_payload(ep, {buf.data(), static_cast<size_t>(n)});
        if (!parsed) {
          ADD_FAILURE() << "the victim sent a bad packet: " << wire::to_string(parsed.error());
          return std::nullopt;
        }
        return Reply{parsed->hdr, {parsed->payload.begin(), parsed->payload.end()}};
      }
      pump();
    }
    return std::nullopt;
  }
  // Nothing from the victim while it runs ~50 passes.
  bool silent() {
    auto r = next_reply(50);
    if (r)
      ADD_FAILURE() << "unexpected opcode " << int(r->hdr.bth.opcode) << " psn "
                    << r->hdr.bth.psn.value();
    return !r;
  }
  void expect_nak(NakCode code, uint32_t psn, uint32_t msn, const char* why) {
    auto r = next_reply();
    ASSERT_TRUE(r) << why << ": no answer";
    EXPECT_EQ(r->hdr.bth.opcode, op::kRcAck) << why;
    EXPECT_EQ(r->hdr.bth.dest_qp, kPeerQpn) << why;
    EXPECT_EQ(r->hdr.bth.psn.value(), psn) << why;
    EXPECT_EQ(r->hdr.aeth.type(), wire::AckType::kNak) << why;
    EXPECT_EQ(r->hdr.aeth.nak_code(), code) << why;
    EXPECT_EQ(r->hdr.aeth.msn, msn) << why;
  }
  void expect_ack(uint32_t psn, uint32_t msn, const char* why) {
    auto r = next_reply();
    ASSERT_TRUE(r) << why << ": no answer";
    EXPECT_EQ(r->hdr.bth.opcode, op::kRcAck) << why;
    EXPECT_EQ(r->hdr.bth.psn.value(), psn) << why;
    EXPECT_EQ(r->hdr.aeth.type(), wire::AckType::kAck) << why;
    EXPECT_EQ(r->hdr.aeth.msn, msn) << why;
  }
  // Runs the victim until its QP leaves RTS (the NAKed error is applied at the end of a pass).
  QpState settle(verbs::QueuePair& qp) {
    for (int i = 0; i < 20 && qp.state() == QpState::kRts; ++i) pump();
    return qp.state();
  }

  wire::TransportHeaders request(uint8_t opcode, uint32_t psn, uint64_t addr, uint32_t rkey,
                                 uint32_t len, uint32_t qpn = 0) {
    wire::TransportHeaders h;
    h.bth.opcode = opcode;
    h.bth.dest_qp = qpn != 0 ? qpn : qp_->qp_num();
    h.bth.psn = Psn(psn);
    h.bth.ack_req = true;
    h.reth = {addr, rkey, len};
    h.atomic = {addr, rkey, 0, 0};
    return h;
  }
  uint64_t counter(const char* name) const {
    for (const verbs::Counter& c : dev_->counters())
      if (c.name == name) return c.value;
    ADD_FAILURE() << name;
    return 0;
  }
  std::optional<transport::Completion> completion(int rounds = 3000) {
    std::array<transport::Completion, 1> wc;
    for (int i = 0; i < rounds; ++i) {
      if (cq_->poll(wc) == 1) return wc[0];
      pump();
    }
    return std::nullopt;
  }

  std::string victim_addr_, peer_addr_;
  std::unique_ptr<Nic> nic_;
  verbs::Device* dev_ = nullptr;
  std::unique_ptr<verbs::Context> ctx_;
  std::unique_ptr<verbs::ProtectionDomain> pd_, pd2_;
  std::unique_ptr<verbs::CompletionQueue> cq_;
  std::vector<uint8_t> arena_ = std::vector<uint8_t>(4 * kPage);
  std::unique_ptr<verbs::MemoryRegion> all_, local_, foreign_;
  std::vector<std::unique_ptr<verbs::MemoryWindow>> windows_;
  std::vector<std::unique_ptr<verbs::QueuePair>> spare_qps_;
  std::unique_ptr<verbs::QueuePair> qp_;
  int fd_ = -1;
};

// Every key, bound and access failure: the NAK IBA 9.7.5.1.5 names (Remote Access Error, or
// Invalid Request for a misaligned atomic), the PSN and MSN of the request, the QP in ERR after
// it, and not one byte of the arena touched. Each case gets a fresh QP, since the NAK ends it.
TEST_F(HostilePeer, EveryKeyBoundAndAccessFailureIsNakedWithNothingPlaced) {
  start(0);
  // Windows: one of the victim's PD bound to another QP, one of another PD bound to this QP's
  // number (its PD is not the QP's).
  auto mine = std::move(pd_->alloc_mw(verbs::MwType::kType2).value());
  auto theirs = std::move(pd2_->alloc_mw(verbs::MwType::kType2).value());
  struct Case {
    const char* why;
    uint8_t opcode;
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
    NakCode code;
    uint32_t qp_access = kRemoteAll;
  };
  const uint32_t rkey = all_->rkey();
  std::vector<Case> cases = {
      {"WRITE, key of no region", op::kRcWriteOnly, va(kPage), rkey + 0x10000, 16,
       NakCode::kRemoteAccessError},
      {"WRITE, stale key tag", op::kRcWriteOnly, va(kPage), rkey ^ 1, 16,
       NakCode::kRemoteAccessError},
      {"WRITE, below the region", op::kRcWriteOnly, va(kPage) - 8, rkey, 16,
       NakCode::kRemoteAccessError},
      {"WRITE, past its end", op::kRcWriteOnly, va(kPage) + 1024 - 8, rkey, 16,
       NakCode::kRemoteAccessError},
      {"WRITE, address + length wraps", op::kRcWriteOnly, ~uint64_t{0} - 7, rkey, 16,
       NakCode::kRemoteAccessError},
      {"WRITE, region without remote write", op::kRcWriteOnly, va(2 * kPage), local_->rkey(), 16,
       NakCode::kRemoteAccessError},
      {"WRITE, QP without remote write", op::kRcWriteOnly, va(kPage), rkey, 16,
       NakCode::kRemoteAccessError, transport::kAccessRemoteRead},
      {"WRITE, region of another PD", op::kRcWriteOnly, va(3 * kPage), foreign_->rkey(), 16,
       NakCode::kRemoteAccessError},
      {"READ, region without remote read", op::kRcReadRequest, va(2 * kPage), local_->rkey(), 16,
       NakCode::kRemoteAccessError},
      {"READ, past its end", op::kRcReadRequest, va(kPage) + 512, rkey, 1024,
       NakCode::kRemoteAccessError},
      {"READ, 2 GiB from a 1 KiB region", op::kRcReadRequest, va(kPage), rkey, 0x80000000u,
       NakCode::kRemoteAccessError},
      {"READ, QP without remote read", op::kRcReadRequest, va(kPage), rkey, 16,
       NakCode::kRemoteAccessError, transport::kAccessRemoteWrite},
      {"FETCH_ADD, region without atomic", op::kRcFetchAdd, va(2 * kPage), local_->rkey(), 8,
       NakCode::kRemoteAccessError},
      {"FETCH_ADD, past its end", op::kRcFetchAdd, va(kPage) + 1024, rkey, 8,
       NakCode::kRemoteAccessError},
      {"CMP_SWAP, misaligned", op::kRcCompareSwap, va(kPage) + 4, rkey, 8,
       NakCode::kInvalidRequest},
      {"CMP_SWAP, QP without atomic", op::kRcCompareSwap, va(kPage), rkey, 8,
       NakCode::kRemoteAccessError, transport::kAccessRemoteWrite | transport::kAccessRemoteRead},
  };
  for (const Case& c : cases) {
    auto qp = make_qp(kPsn, c.qp_access);
    const std::vector<uint8_t> junk(c.opcode == op::kRcWriteOnly ? c.len : 0, 0xee);
    send(request(c.opcode, kPsn, c.addr, c.rkey, c.len, qp->qp_num()), junk);
    expect_nak(c.code, kPsn, 0, c.why);
    EXPECT_EQ(settle(*qp), QpState::kErr) << c.why;
    EXPECT_TRUE(silent()) << c.why;  // one NAK, nothing streamed
    EXPECT_TRUE(arena_intact_except()) << c.why;
    spare_qps_.push_back(std::move(qp));
  }
  // The windows, each through a QP of the victim's PD.
  auto qp = make_qp(kPsn);
  transport::MwBindInfo b{mine->rkey(), verbs::next_window_key(mine->rkey()),
                          all_->lkey(), va(kPage),
                          64,           transport::kAccessRemoteWrite};
  ASSERT_EQ(pd_->bind_mw(b, qp->qp_num() + 1), WcStatus::kSuccess);
  send(request(op::kRcWriteOnly, kPsn, va(kPage), b.new_rkey, 16, qp->qp_num()),
       std::vector<uint8_t>(16, 0xee));
  expect_nak(NakCode::kRemoteAccessError, kPsn, 0, "window bound to another QP");
  EXPECT_EQ(settle(*qp), QpState::kErr);
  auto qp2 = make_qp(kPsn);
  transport::MwBindInfo f{theirs->rkey(),
                          verbs::next_window_key(theirs->rkey()),
                          foreign_->lkey(),
                          va(3 * kPage),
                          64,
                          transport::kAccessRemoteWrite};
  ASSERT_EQ(pd2_->bind_mw(f, qp2->qp_num()), WcStatus::kSuccess);
  send(request(op::kRcWriteOnly, kPsn, va(3 * kPage), f.new_rkey, 16, qp2->qp_num()),
       std::vector<uint8_t>(16, 0xee));
  expect_nak(NakCode::kRemoteAccessError, kPsn, 0, "window of another PD");
  EXPECT_EQ(settle(*qp2), QpState::kErr);
  EXPECT_TRUE(arena_intact_except());
  spare_qps_.push_back(std::move(qp));
  spare_qps_.push_back(std::move(qp2));
  windows_.push_back(std::move(mine));
  windows_.push_back(std::move(theirs));
}

// Datagrams no QP may see: shorter than a BTH and ICRC, a bad ICRC, a header cut short, an
// opcode outside the table, a pad count longer than the payload, a READ request with payload.
// Each is counted at the link; the QP answers nothing, stays in RTS and still expects kPsn.
TEST_F(HostilePeer, MalformedAndTruncatedPacketsAreCountedDropsThatLeaveTheQpAsItWas) {
  start(1);
  const auto write = request(op::kRcWriteOnly, kPsn, va(kPage), all_->rkey(), 16);
  const std::vector<uint8_t> data(16, 0xee);
  std::vector<uint8_t> good = packet(write, data);
  std::vector<std::vector<uint8_t>> bad;
  bad.push_back({0x0a, 0, 0});                                           // 3 bytes
  bad.push_back(std::vector<uint8_t>(good.begin(), good.begin() + 15));  // < BTH + ICRC
  std::vector<uint8_t> bad_icrc = good;
  bad_icrc.back() ^= 1;
  bad.push_back(bad_icrc);
  std::vector<uint8_t> body(good.begin(), good.end() - wire::kIcrcBytes);
  bad.push_back(seal({body.begin(), body.begin() + wire::kBthBytes + 8}));  // RETH cut short
  std::vector<uint8_t> unknown = body;
  unknown[0] = 0x1f;  // an RC opcode the table does not define
  bad.push_back(seal(unknown));
  std::vector<uint8_t> pad = body;
  pad[1] = static_cast<uint8_t>((pad[1] & ~0x30) | (3 << 4));  // pad 3 on a 16-byte payload...
  pad.resize(wire::kBthBytes + 16 + 2);                        // ...of which 2 bytes came
  bad.push_back(seal(pad));
  std::vector<uint8_t> read = packet(request(op::kRcReadRequest, kPsn, va(kPage), all_->rkey(), 8));
  std::vector<uint8_t> read_body(read.begin(), read.end() - wire::kIcrcBytes);
  read_body.insert(read_body.end(), 8, 0xee);
  bad.push_back(seal(read_body));
  deliver(bad);
  EXPECT_EQ(counter("link_rx_malformed_drops"), 6u);
  EXPECT_EQ(counter("rx_icrc_encapsulated"), 1u);
  EXPECT_EQ(counter("link_rx_packets"), 0u);
  EXPECT_EQ(counter("rx_packets"), 0u);
  EXPECT_TRUE(silent());
  EXPECT_EQ(qp_->state(), QpState::kRts);
  EXPECT_TRUE(arena_intact_except());
  // A packet for a QP number that does not exist, and a well-formed one for this QP in a state
  // that takes none (RESET): counted, unanswered.
  auto reset_qp = [&] {
    verbs::QpInitAttr init;
    init.send_cq = init.recv_cq = cq_.get();
    return std::move(pd_->create_qp(init).value());
  }();
  deliver({packet(request(op::kRcWriteOnly, kPsn, va(kPage), all_->rkey(), 16, 0xabcde), data),
           packet(request(op::kRcWriteOnly, kPsn, va(kPage), all_->rkey(), 16, reset_qp->qp_num()),
                  data)});
  EXPECT_EQ(counter("rx_unknown_qpn_drops"), 1u);
  EXPECT_EQ(counter("rx_qp_state_drops"), 1u);
  EXPECT_EQ(counter("rx_packets"), 0u);
  EXPECT_TRUE(silent());
  // The real request, at the PSN nothing above consumed: placed and ACKed.
  send_raw(good);
  expect_ack(kPsn, 1, "the valid WRITE");
  EXPECT_TRUE(arena_intact_except(kPage, 16));
  EXPECT_EQ(at(kPage)[0], 0xee);
  EXPECT_EQ(at(kPage)[15], 0xee);
}

// PSN games: a far-future PSN gets one sequence NAK naming the expected PSN and then silence; a
// PSN half the space away counts as old (a duplicate: ACKed again, not executed); a replayed
// WRITE with other data is ACKed and not placed again.
TEST_F(HostilePeer, PsnGamesAreNakedOnceAndDuplicatesAreNotReExecuted) {
  start(2);
  const std::vector<uint8_t> evil(16, 0xee), good(16, 0x11), replay(16, 0x22);
  send(request(op::kRcWriteOnly, kPsn + 1000, va(kPage), all_->rkey(), 16), evil);
  expect_nak(NakCode::kPsnSequenceError, kPsn, 0, "far future");
  send(request(op::kRcWriteOnly, kPsn + 2000, va(kPage), all_->rkey(), 16), evil);
  EXPECT_TRUE(silent());  // one NAK per gap
  send(request(op::kRcWriteOnly, kPsn + Psn::kHalf + 1, va(kPage), all_->rkey(), 16), evil);
  expect_ack(kPsn - 1, 0, "a PSN more than half the space ahead is behind");
  EXPECT_TRUE(arena_intact_except());
  EXPECT_EQ(qp_->state(), QpState::kRts);

  send(request(op::kRcWriteOnly, kPsn, va(kPage), all_->rkey(), 16), good);
  expect_ack(kPsn, 1, "the expected PSN");
  send(request(op::kRcWriteOnly, kPsn, va(kPage), all_->rkey(), 16), replay);
  expect_ack(kPsn, 1, "the replay");
  EXPECT_TRUE(arena_intact_except(kPage, 16));
  EXPECT_EQ(at(kPage)[0], 0x11);
  EXPECT_EQ(at(kPage)[15], 0x11);
  EXPECT_EQ(counter("duplicate_request"), 2u);
  EXPECT_EQ(counter("out_of_sequence"), 2u);
  EXPECT_EQ(counter("seq_naks_sent"), 1u);
}

// PSNs wrap at 2^24: a QP that starts just below the wrap takes 0xfffffe, 0xffffff, 0, 1 in
// order, and after it a replay of 0xffffff is a duplicate.
TEST_F(HostilePeer, PsnsWrapAroundAndStayOrderedAcrossTheWrap) {
  start(3, 0xfffffe);
  const uint32_t psns[] = {0xfffffe, 0xffffff, 0, 1};
  for (uint32_t i = 0; i < 4; ++i) {
    const std::vector<uint8_t> data(8, static_cast<uint8_t>(0x30 + i));
    send(request(op::kRcWriteOnly, psns[i], va(kPage + 8 * i), all_->rkey(), 8), data);
    expect_ack(psns[i], i + 1, "across the wrap");
  }
  send(request(op::kRcWriteOnly, 0xffffff, va(kPage), all_->rkey(), 8),
       std::vector<uint8_t>(8, 0xee));
  expect_ack(1, 4, "replay of 0xffffff after the wrap");
  EXPECT_TRUE(arena_intact_except(kPage, 32));
  for (uint32_t i = 0; i < 32; ++i) EXPECT_EQ(at(kPage)[i], 0x30 + i / 8) << i;
}

// A replayed atomic (IBA 9.7.5.1.2): answered with the saved original value, never executed
// again, even when the replay carries other operands.
TEST_F(HostilePeer, DuplicateAtomicsAreAnsweredFromTheSavedResultNotReExecuted) {
  start(4);
  uint64_t v = 100;
  std::memcpy(at(kPage), &v, 8);
  auto add = request(op::kRcFetchAdd, kPsn, va(kPage), all_->rkey(), 8);
  add.atomic.swap_add = 5;
  auto cas = request(op::kRcCompareSwap, kPsn + 1, va(kPage), all_->rkey(), 8);
  cas.atomic.compare = 105;
  cas.atomic.swap_add = 7;
  for (int round = 0; round < 3; ++round) {
    send(add);
    auto r = next_reply();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->hdr.bth.opcode, op::kRcAtomicAck);
    EXPECT_EQ(r->hdr.bth.psn.value(), kPsn);
    EXPECT_EQ(r->hdr.atomic_ack.original, 100u) << round;
    if (round == 0) {
      send(cas);
      r = next_reply();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->hdr.bth.opcode, op::kRcAtomicAck);
      EXPECT_EQ(r->hdr.atomic_ack.original, 105u);
    }
    add.atomic.swap_add = 1000;  // the replays ask for more
  }
  cas.atomic.compare = 7;
  cas.atomic.swap_add = 9999;
  send(cas);
  auto r = next_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->hdr.bth.psn.value(), kPsn + 1);
  EXPECT_EQ(r->hdr.atomic_ack.original, 105u);
  std::memcpy(&v, at(kPage), 8);
  EXPECT_EQ(v, 7u);  // 100 + 5, then swapped to 7 once
  EXPECT_TRUE(arena_intact_except(kPage, 8));
  EXPECT_EQ(counter("duplicate_request"), 3u);
}

// A hostile responder: the victim's own READ and atomic answered with the wrong length, the
// wrong opcode and the wrong PSN. None completes the work request or places a byte; the honest
// answer, when it comes, completes it with exactly its data.
TEST_F(HostilePeer, AHostileResponderCannotCompleteOrPlaceWithWrongLengthOpcodeOrPsn) {
  start(5);
  transport::Sge s{va(kPage), 32, all_->lkey()};
  transport::SendWr wr;
  wr.wr_id = 1;
  wr.opcode = transport::WrOpcode::kRdmaRead;
  wr.flags = transport::kSendSignaled;
  wr.sg_list = {&s, 1};
  wr.remote_addr = 0x10000;
  wr.rkey = 0x1234;
  ASSERT_EQ(qp_->post_send(wr), 0);
  auto req = next_reply();
  ASSERT_TRUE(req);
  ASSERT_EQ(req->hdr.bth.opcode, op::kRcReadRequest);
  EXPECT_EQ(req->hdr.bth.psn.value(), kPsn);
  EXPECT_EQ(req->hdr.reth.dma_length, 32u);
  EXPECT_EQ(req->hdr.reth.va, 0x10000u);
  EXPECT_EQ(req->hdr.reth.rkey, 0x1234u);

  auto response = [&](uint8_t opcode, uint32_t psn) {
    wire::TransportHeaders h;
    h.bth.opcode = opcode;
    h.bth.dest_qp = qp_->qp_num();
    h.bth.psn = Psn(psn);
    h.aeth = wire::Aeth::ack(1);
    h.atomic_ack.original = 0xeeeeeeeeeeeeeeee;
    return h;
  };
  const std::vector<uint8_t> evil16(16, 0xee), evil32(32, 0xee), evil64(64, 0xee);
  send(response(op::kRcReadResponseOnly, kPsn), evil16);      // short
  send(response(op::kRcReadResponseOnly, kPsn), evil64);      // long
  send(response(op::kRcReadResponseFirst, kPsn), evil32);     // a FIRST for a 1-packet READ
  send(response(op::kRcAtomicAck, kPsn));                     // an atomic's answer
  send(response(op::kRcReadResponseOnly, kPsn + 1), evil32);  // a PSN it never sent
  send(response(op::kRcReadResponseOnly, kPsn - 1), evil32);  // an old PSN
  for (int i = 0; i < 100; ++i) pump();
  std::array<transport::Completion, 1> wc;
  EXPECT_EQ(cq_->poll(wc), 0u);
  EXPECT_TRUE(arena_intact_except());
  EXPECT_EQ(qp_->state(), QpState::kRts);
  // The victim asks again (its timer) or waits; the honest answer completes it.
  std::vector<uint8_t> honest(32);
  for (size_t i = 0; i < honest.size(); ++i) honest[i] = static_cast<uint8_t>(0x40 + i);
  send(response(op::kRcReadResponseOnly, kPsn), honest);
  auto c = completion();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->wr_id, 1u);
  EXPECT_EQ(c->status, WcStatus::kSuccess);
  EXPECT_TRUE(arena_intact_except(kPage, 32));
  EXPECT_EQ(std::memcmp(at(kPage), honest.data(), 32), 0);

  // An atomic: answered with a READ response, an ACK-less atomic answer at the wrong PSN, then
  // the honest one.
  transport::Sge s8{va(kPage + 64), 8, all_->lkey()};
  wr.wr_id = 2;
  wr.opcode = transport::WrOpcode::kAtomicFetchAdd;
  wr.sg_list = {&s8, 1};
  wr.compare_add = 1;
  ASSERT_EQ(qp_->post_send(wr), 0);
  req = next_reply();
  ASSERT_TRUE(req);
  while (req && req->hdr.bth.opcode != op::kRcFetchAdd) req = next_reply();  // a READ resend
  ASSERT_TRUE(req);
  const uint32_t apsn = req->hdr.bth.psn.value();
  EXPECT_EQ(apsn, kPsn + 1);
  send(response(op::kRcReadResponseOnly, apsn), std::vector<uint8_t>(8, 0xee));
  send(response(op::kRcAtomicAck, apsn + 1));
  for (int i = 0; i < 100; ++i) pump();
  EXPECT_EQ(cq_->poll(wc), 0u);
  EXPECT_TRUE(arena_intact_except(kPage, 32));
  auto ok = response(op::kRcAtomicAck, apsn);
  ok.aeth = wire::Aeth::ack(2);
  ok.atomic_ack.original = 0x1122334455667788;
  send(ok);
  c = completion();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->wr_id, 2u);
  EXPECT_EQ(c->status, WcStatus::kSuccess);
  uint64_t got = 0;
  std::memcpy(&got, at(kPage + 64), 8);
  EXPECT_EQ(got, 0x1122334455667788u);
  // Only the READ's 32 bytes and the atomic's 8 changed.
  for (size_t i = 0; i < arena_.size(); ++i) {
    if ((i >= kPage && i < kPage + 32) || (i >= kPage + 64 && i < kPage + 72)) continue;
    ASSERT_EQ(arena_[i], pattern(i)) << i;
  }
  EXPECT_EQ(counter("rx_qp_drops"), 8u);  // the 6 + 2 answers above
}

// Floods: 10,000 packets from the future get one NAK and nothing held; 10,000 for a QP number
// that does not exist get nothing; 10,000 replays of an old WRITE are ACKed without placing.
// What the device holds (the reorder and response gauges) stays 0.
TEST_F(HostilePeer, FloodsCostBoundedWorkAndHoldNothing) {
  start(6);
  constexpr int kFlood = 10'000, kBatch = 100;
  const std::vector<uint8_t> evil(16, 0xee);
  for (int sent = 0; sent < kFlood; sent += kBatch) {
    std::vector<std::vector<uint8_t>> batch;
    for (int i = 0; i < kBatch; ++i)
      batch.push_back(packet(
          request(op::kRcWriteOnly, kPsn + 1 + sent + i, va(kPage), all_->rkey(), 16), evil));
    deliver(batch);
  }
  expect_nak(NakCode::kPsnSequenceError, kPsn, 0, "the flood's one NAK");
  EXPECT_TRUE(silent());
  EXPECT_EQ(counter("out_of_sequence"), uint64_t{kFlood});
  EXPECT_EQ(counter("seq_naks_sent"), 1u);
  for (int sent = 0; sent < kFlood; sent += kBatch) {
    std::vector<std::vector<uint8_t>> batch;
    for (int i = 0; i < kBatch; ++i)
      batch.push_back(
          packet(request(op::kRcWriteOnly, kPsn, va(kPage), all_->rkey(), 16, 0xfff000 + i), evil));
    deliver(batch);
  }
  EXPECT_EQ(counter("rx_unknown_qpn_drops"), uint64_t{kFlood});
  EXPECT_TRUE(silent());
  EXPECT_EQ(counter("sr_reorder_bytes_held"), 0u);
  EXPECT_EQ(counter("responses_queued"), 0u);
  EXPECT_TRUE(arena_intact_except());
  EXPECT_EQ(qp_->state(), QpState::kRts);
  // The peer the QP expects is still served.
  send(request(op::kRcWriteOnly, kPsn, va(kPage), all_->rkey(), 16), std::vector<uint8_t>(16, 1));
  expect_ack(kPsn, 1, "after the floods");
  EXPECT_TRUE(arena_intact_except(kPage, 16));
}

}  // namespace
}  // namespace uroce::api
