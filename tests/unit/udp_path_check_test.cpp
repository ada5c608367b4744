// The path check on real UDP sockets (docs/security.md): two verbs devices on 127.77.42.1 and .2
// with a connected RC QP each, and a third host on 127.77.42.3 (a plain UDP socket) that sends
// hand-built RoCEv2 packets, correct in every field but where they come from, to the target's
// QP: a WRITE at the PSN it expects with its real R_Key, and a READ request for its memory. Neither
// acts; both are counted in rx_path_drops; the real peer's WRITE then lands.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "api/nic.h"
#include "link/clock.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/qp.h"
#include "wire/packet.h"

namespace uroce::api {
namespace {

using namespace std::chrono_literals;
using transport::QpState;
namespace op = wire::op;

constexpr uint32_t kPsn = 1000;

uint64_t counter(const verbs::Device& d, const char* name) {
  for (const verbs::Counter& c : d.counters())
    if (c.name == name) return c.value;
  ADD_FAILURE() << name;
  return 0;
}

struct Side {
  std::unique_ptr<Nic> nic;
  verbs::Device* dev = nullptr;
  std::unique_ptr<verbs::Context> ctx;
  std::unique_ptr<verbs::ProtectionDomain> pd;
  std::unique_ptr<verbs::CompletionQueue> cq;
  std::vector<uint8_t> buf = std::vector<uint8_t>(4096);
  std::unique_ptr<verbs::MemoryRegion> mr;
  std::unique_ptr<verbs::QueuePair> qp;

  explicit Side(const std::string& addr) {
    NicOptions o;
    o.link.address = addr;
    auto n = open_nic(o);
    if (!n.ok()) {
      ADD_FAILURE() << "open " << addr << ": " << std::strerror(n.error());
      return;
    }
    nic = std::move(*n);
    dev = &nic->device();
    ctx = std::move(dev->open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(64).value());
    mr = std::move(pd->reg_mr(buf.data(), buf.size(),
                              transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                                  transport::kAccessRemoteRead)
                       .value());
    verbs::QpInitAttr init;
    init.send_cq = init.recv_cq = cq.get();
    qp = std::move(pd->create_qp(init).value());
  }
  ~Side() {
    qp.reset();
    mr.reset();
    cq.reset();
    pd.reset();
    ctx.reset();
    nic.reset();
  }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(buf.data()); }

  void connect(const Side& peer) {
    verbs::QpAttr a;
    a.port_num = 1;
    a.qp_access_flags = transport::kAccessRemoteWrite | transport::kAccessRemoteRead;
    a.qp_state = QpState::kInit;
    ASSERT_EQ(qp->modify(a, verbs::kQpState | verbs::kQpPkeyIndex | verbs::kQpPort |
                                verbs::kQpAccessFlags),
              0);
    a.qp_state = QpState::kRtr;
    a.path_mtu = verbs::Mtu::k1024;
    a.dest_qp_num = peer.qp->qp_num();
    a.rq_psn = kPsn;
    a.max_dest_rd_atomic = 1;
    a.ah_attr.is_global = true;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = peer.dev->gid();
    ASSERT_EQ(
        qp->modify(a, verbs::kQpState | verbs::kQpAv | verbs::kQpPathMtu | verbs::kQpDestQpn |
                          verbs::kQpRqPsn | verbs::kQpMaxDestRdAtomic | verbs::kQpMinRnrTimer),
        0);
    a.qp_state = QpState::kRts;
    a.sq_psn = kPsn;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    ASSERT_EQ(qp->modify(a, verbs::kQpState | verbs::kQpSqPsn | verbs::kQpTimeout |
                                verbs::kQpRetryCnt | verbs::kQpRnrRetry | verbs::kQpMaxQpRdAtomic),
              0);
  }
};

// A third host: a UDP socket on `addr` that sends RoCEv2 packets with a correct ICRC for its own
// address and port.
class Attacker {
 public:
  explicit Attacker(const char* addr) {
    fd_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, addr, &sa.sin_addr);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    socklen_t len = sizeof sa;
    ok_ = ok_ && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
    port_ = ntohs(sa.sin_port);
    std::memcpy(src_.data(), &sa.sin_addr, 4);
  }
  ~Attacker() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  bool send(const char* to, const wire::TransportHeaders& h, std::span<const uint8_t> payload) {
    wire::IpEndpoints ep;
    ep.src = src_;
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(wire::kRoceV2Port);
    ::inet_pton(AF_INET, to, &dst.sin_addr);
    std::memcpy(ep.dst.data(), &dst.sin_addr, 4);
    ep.udp_src_port = port_;
    std::array<uint8_t, 2048> out{};
    const uint32_t n = wire::build_udp_payload(ep, h, payload, out);
    return n > 0 && ::sendto(fd_, out.data(), n, 0, reinterpret_cast<sockaddr*>(&dst),
                             sizeof dst) == static_cast<ssize_t>(n);
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  uint16_t port_ = 0;
  std::array<uint8_t, 16> src_{};
};

// Runs both devices until `done` (bounded: a missing packet fails the test, never hangs it).
template <typename Done>
bool run_until(Side& a, Side& b, Done done) {
  for (int i = 0; i < 2000; ++i) {
    a.dev->progress(link::monotonic_ns());
    b.dev->progress(link::monotonic_ns());
    if (done()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(UdpPathCheck, PacketsFromAThirdAddressNeitherWriteNorReadTheQpsMemory) {
  Side init("127.77.42.1"), target("127.77.42.2");
  ASSERT_TRUE(init.qp && target.qp);
  init.connect(target);
  target.connect(init);
  Attacker evil("127.77.42.3");
  ASSERT_TRUE(evil.ok());
  std::fill(target.buf.begin(), target.buf.end(), 0x5a);

  wire::TransportHeaders w;
  w.bth.opcode = op::kRcWriteOnly;
  w.bth.dest_qp = target.qp->qp_num();
  w.bth.psn = Psn(kPsn);
  w.bth.ack_req = true;
  w.reth = {target.addr(), target.mr->rkey(), 64};
  const std::vector<uint8_t> junk(64, 0xee);
  ASSERT_TRUE(evil.send("127.77.42.2", w, junk));
  wire::TransportHeaders r;
  r.bth.opcode = op::kRcReadRequest;
  r.bth.dest_qp = target.qp->qp_num();
  r.bth.psn = Psn(kPsn);
  r.bth.ack_req = true;
  r.reth = {target.addr(), target.mr->rkey(), 4096};
  ASSERT_TRUE(evil.send("127.77.42.2", r, {}));
  ASSERT_TRUE(run_until(init, target, [&] { return counter(*target.dev, "rx_path_drops") == 2; }));
  EXPECT_TRUE(
      std::all_of(target.buf.begin(), target.buf.end(), [](uint8_t x) { return x == 0x5a; }));
  EXPECT_EQ(counter(*target.dev, "tx_packets"), 0u);  // no ACK, no READ response, to anyone
  EXPECT_EQ(counter(*target.dev, "rx_packets"), 0u);
  EXPECT_EQ(counter(*init.dev, "link_rx_packets"), 0u);

  // The real peer, at the PSN the attacker tried: its WRITE lands and completes.
  std::fill(init.buf.begin(), init.buf.begin() + 64, 0x11);
  transport::Sge s{init.addr(), 64, init.mr->lkey()};
  transport::SendWr wr;
  wr.wr_id = 1;
  wr.opcode = transport::WrOpcode::kRdmaWrite;
  wr.flags = transport::kSendSignaled;
  wr.sg_list = {&s, 1};
  wr.remote_addr = target.addr();
  wr.rkey = target.mr->rkey();
  ASSERT_EQ(init.qp->post_send(wr), 0);
  std::array<transport::Completion, 4> wc;
  size_t got = 0;
  ASSERT_TRUE(run_until(init, target, [&] { return (got = init.cq->poll(wc)) > 0; }));
  EXPECT_EQ(wc[0].status, transport::WcStatus::kSuccess);
  EXPECT_TRUE(std::all_of(target.buf.begin(), target.buf.begin() + 64,
                          [](uint8_t x) { return x == 0x11; }));
  EXPECT_TRUE(
      std::all_of(target.buf.begin() + 64, target.buf.end(), [](uint8_t x) { return x == 0x5a; }));
}

}  // namespace
}  // namespace uroce::api
