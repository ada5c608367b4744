// UdpLink over real loopback sockets. Each test binds its own 127.77.<test>.x addresses so tests
// can run in parallel (ctest -j) with each other and with end-to-end tests on 127.0.0.x.
// The 127.77.N blocks the unit tests use, so that a new test takes a free one (two tests on one
// address fail to bind, or one receives the other's packets, only when ctest happens to run them
// together): this file 1, 2, 30-39, 56-58; udp_link_progress_test 40, 43-49, 54, 55, 67-69;
// cm_gsi_test 41; udp_path_check_test 42; link_factory_test 50-53; hostile_peer_test 60-66;
// link_share_test 200.
#include "link/udp_link.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "wire/packet.h"

namespace uroce::link {
namespace {

using wire::TransportHeaders;

std::string v4(int test, int host) {
  return "127.77." + std::to_string(test) + "." + std::to_string(host);
}

Gid gid_of(const std::string& ipv4) {
  std::array<uint8_t, 4> a;
  EXPECT_EQ(inet_pton(AF_INET, ipv4.c_str(), a.data()), 1);
  return gid_from_ipv4(a);
}

std::unique_ptr<UdpLink> open_link(const std::string& addr, UdpLinkOptions o = {}) {
  o.address = addr;
  auto r = UdpLink::open(o);
  if (!r.ok()) {
    ADD_FAILURE() << "open " << addr << ": " << std::strerror(r.error());
    return nullptr;
  }
  return std::move(*r);
}

// A packet as a transport would hand it over: headers written, payload as a gather list.
struct Outgoing {
  TransportHeaders hdr;
  std::vector<uint8_t> payload;
  wire::AddressVector av;
  wire::TxPacket tx;

  Outgoing(uint8_t opcode, uint32_t psn, size_t payload_bytes, const Gid& dgid, int parts = 1) {
    hdr.bth.opcode = opcode;
    hdr.bth.dest_qp = 0x000abc;
    hdr.bth.psn = Psn(psn);
    hdr.reth = {0x1000 + psn, 0x77, static_cast<uint32_t>(payload_bytes)};
    hdr.aeth = wire::Aeth::ack(psn);
    hdr.imm = 0xfeedf00d;
    payload.resize(payload_bytes);
    for (size_t i = 0; i < payload_bytes; ++i) payload[i] = static_cast<uint8_t>(psn * 31 + i);
    const auto& info = wire::opcode_info(opcode);
    hdr.bth.pad_count = info.payload ? wire::pad_for(static_cast<uint32_t>(payload_bytes)) : 0;
    av.dgid = dgid;
    av.traffic_class = 26 << 2;  // DSCP 26
    tx.header_len = wire::write_transport_headers(hdr, tx.header);
    tx.pad = hdr.bth.pad_count;
    tx.payload_len = static_cast<uint32_t>(payload_bytes);
    // Split the payload into `parts` pieces (some possibly empty) to exercise the gather list.
    size_t at = 0;
    for (int p = 0; p < parts; ++p) {
      const size_t n = p + 1 == parts ? payload_bytes - at : payload_bytes / parts;
      tx.payload[tx.payload_parts++] = std::span<const uint8_t>(payload.data() + at, n);
      at += n;
    }
    tx.dest = &av;
  }
};

struct Received {
  TransportHeaders hdr;
  std::vector<uint8_t> payload;
  Gid sgid, dgid;
  uint16_t udp_src_port;
  bool ce;
  uint8_t traffic_class, hop_limit;
};

Received received(const wire::RxPacket& p) {
  return {*p.hdr,          {p.payload.begin(), p.payload.end()},
          p.sgid,          p.dgid,
          p.udp_src_port,  p.ce,
          p.traffic_class, p.hop_limit};
}

// Polls until `want` packets arrived or a second passes, blocking on wait_fd() in between.
std::vector<Received> receive(UdpLink& link, size_t want, size_t budget = 64) {
  std::vector<Received> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    const size_t n =
        link.poll([&](const wire::RxPacket& p) { got.push_back(received(p)); }, budget);
    EXPECT_LE(n, budget);
    if (n == 0) {
      pollfd pfd{link.wait_fd(), POLLIN, 0};
      ::poll(&pfd, 1, 20);
    }
  }
  return got;
}

void expect_same(const Outgoing& sent, const Received& got) {
  EXPECT_EQ(got.hdr.bth.opcode, sent.hdr.bth.opcode);
  EXPECT_EQ(got.hdr.bth.psn, sent.hdr.bth.psn);
  EXPECT_EQ(got.hdr.bth.dest_qp, sent.hdr.bth.dest_qp);
  EXPECT_EQ(got.hdr.bth.pad_count, sent.hdr.bth.pad_count);
  if (wire::opcode_info(sent.hdr.bth.opcode).has(wire::kReth)) {
    EXPECT_EQ(got.hdr.reth.va, sent.hdr.reth.va);
    EXPECT_EQ(got.hdr.reth.dma_length, sent.hdr.reth.dma_length);
  }
  EXPECT_EQ(got.payload, sent.payload) << "psn " << sent.hdr.bth.psn.value();
}

TEST(UdpLink, GidIsTheBoundAddressAndWildcardsAreRefused) {
  auto a = open_link(v4(1, 1));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->local_gid(), gid_of(v4(1, 1)));
  EXPECT_FALSE(a->ipv6());
  EXPECT_GE(a->wait_fd(), 0);
  UdpLinkOptions o;
  for (const char* bad : {"0.0.0.0", "::", "not-an-address", "", "::ffff:127.0.0.1"}) {
    o.address = bad;
    auto r = UdpLink::open(o);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error(), EINVAL) << bad;
  }
  o.address = v4(1, 1);
  auto dup = UdpLink::open(o);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error(), EADDRINUSE);
  o.address = v4(1, 2);
  o.rx_batch = 0;
  EXPECT_FALSE(UdpLink::open(o).ok());
}

TEST(UdpLink, ExchangesEverySizeClassAndOpcodeShape) {
  auto a = open_link(v4(2, 1));
  auto b = open_link(v4(2, 2));
  ASSERT_TRUE(a && b);
  const Gid to_b = b->local_gid();
  std::vector<std::unique_ptr<Outgoing>> sent;
  uint32_t psn = 0xfffff0;  // crosses the 24-bit wrap
  for (size_t size : {0, 1, 2, 3, 4, 5, 7, 255, 1023, 1024, 4093, 4095, 4096})
    sent.push_back(std::make_unique<Outgoing>(wire::op::kRcSendOnly, psn++, size, to_b, 3));
  sent.push_back(std::make_unique<Outgoing>(wire::op::kRcWriteOnlyImm, psn++, 4096, to_b, 16));
  sent.push_back(std::make_unique<Outgoing>(wire::op::kRcWriteFirst, psn++, 4096, to_b));
  sent.push_back(std::make_unique<Outgoing>(wire::op::kRcReadRequest, psn++, 0, to_b));
  sent.push_back(std::make_unique<Outgoing>(wire::op::kRcAck, psn++, 0, to_b));
  sent.push_back(std::make_unique<Outgoing>(wire::op::kUdSendOnly, psn++, 33, to_b));
  // One flush per packet (no GSO runs) and then all of them in one flush (mixed sizes).
  for (auto& s : sent) {
    a->transmit(s->tx);
    a->flush();
  }
  for (auto& s : sent) a->transmit(s->tx);
  a->flush();
  auto got = receive(*b, 2 * sent.size());
  ASSERT_EQ(got.size(), 2 * sent.size());
  // Within one flush, requests leave before responses (the ACK here), each in queued order.
  std::vector<const Outgoing*> batched;
  for (bool responses : {false, true})
    for (auto& s : sent)
      if (wire::opcode_info(s->hdr.bth.opcode).is_response() == responses)
        batched.push_back(s.get());
  ASSERT_NE(batched.back(), sent.back().get());  // the case mixes them
  for (size_t i = 0; i < got.size(); ++i) {
    expect_same(i < sent.size() ? *sent[i] : *batched[i - sent.size()], got[i]);
    EXPECT_EQ(got[i].sgid, a->local_gid());
    EXPECT_EQ(got[i].dgid, b->local_gid());
    EXPECT_EQ(got[i].udp_src_port, wire::kRoceV2Port);
    EXPECT_FALSE(got[i].ce);
  }
  EXPECT_EQ(a->counters().tx_packets, 2 * sent.size());
  EXPECT_EQ(a->counters().tx_errors, 0u);
  EXPECT_EQ(b->counters().rx_packets, 2 * sent.size());
  EXPECT_EQ(b->counters().rx_drop_bad_icrc + b->counters().rx_drop_malformed, 0u);
  // A byte counter counts whole IPv4 packets (link.h): IP, UDP, BTH .. ICRC.
  uint64_t ip_bytes = 0;
  for (auto& s : sent) {
    uint64_t payload = 0;
    for (uint32_t i = 0; i < s->tx.payload_parts; ++i) payload += s->tx.payload[i].size();
    ip_bytes += wire::kIpv4Bytes + wire::kUdpBytes + s->tx.header_len + payload + s->tx.pad +
                wire::kIcrcBytes;
  }
  EXPECT_EQ(a->counters().tx_bytes, 2 * ip_bytes);
  EXPECT_EQ(b->counters().rx_bytes, 2 * ip_bytes);
}

struct BatchCase {
  bool mmsg, gso, gro;
  bool linearize = true;  // false: the kernel gathers each packet's pieces
};

class UdpLinkBatching : public ::testing::TestWithParam<BatchCase> {};

// A window of MTU-size packets, a short tail, then packets for a second peer, all in one flush:
// every batching path must deliver all of them, in order, intact.
TEST_P(UdpLinkBatching, DeliversAWindowInOrder) {
  const BatchCase c = GetParam();
  const int t = 10 + (c.mmsg ? 1 : 0) + (c.gso ? 2 : 0) + (c.gro ? 4 : 0) + (c.linearize ? 0 : 8);
  UdpLinkOptions o;
  o.mmsg = c.mmsg;
  o.gso = c.gso;
  o.gro = c.gro;
  o.linearize = c.linearize;
  auto a = open_link(v4(t, 1), o);
  auto b = open_link(v4(t, 2), o);
  auto c2 = open_link(v4(t, 3), o);
  ASSERT_TRUE(a && b && c2);
  EXPECT_EQ(a->gso_active(), c.gso);
  EXPECT_EQ(b->gro_active(), c.gro);
  std::vector<std::unique_ptr<Outgoing>> to_b, to_c;
  for (uint32_t i = 0; i < 150; ++i)
    to_b.push_back(
        std::make_unique<Outgoing>(wire::op::kRcWriteMiddle, i, 4096, b->local_gid(), 1 + i % 3));
  to_b.push_back(std::make_unique<Outgoing>(wire::op::kRcWriteLast, 150, 1001, b->local_gid()));
  for (uint32_t i = 0; i < 10; ++i)
    to_c.push_back(std::make_unique<Outgoing>(wire::op::kRcSendMiddle, i, 1024, c2->local_gid()));
  for (auto& s : to_b) a->transmit(s->tx);
  for (auto& s : to_c) a->transmit(s->tx);
  a->flush();

  auto got_b = receive(*b, to_b.size(), 7);  // a small budget splits GRO blobs across polls
  auto got_c = receive(*c2, to_c.size());
  ASSERT_EQ(got_b.size(), to_b.size());
  ASSERT_EQ(got_c.size(), to_c.size());
  for (size_t i = 0; i < to_b.size(); ++i) expect_same(*to_b[i], got_b[i]);
  for (size_t i = 0; i < to_c.size(); ++i) expect_same(*to_c[i], got_c[i]);
  EXPECT_EQ(a->counters().tx_errors, 0u);
  EXPECT_EQ(b->counters().rx_drop_bad_icrc, 0u);
  // The batching really happened (or really did not), send for send. A GSO send holds as many
  // 4112-byte datagrams as fit below the largest UDP payload less an IPv6 header (15), and a
  // shorter one may end it: b's window goes in ten sends, the last also carrying the 1001-byte
  // tail, and c's ten in one.
  const uint32_t window_datagram = to_b[0]->tx.header_len + 4096 + wire::kIcrcBytes;
  const size_t per_send = (UdpLink::kMaxDatagramBytes - wire::kIpv6Bytes) / window_datagram;
  ASSERT_EQ(per_send, 15u);
  const size_t b_sends = 150 / per_send;
  ASSERT_EQ(b_sends * per_send, 150u);  // so the tail joins the last full send
  const size_t total = to_b.size() + to_c.size();
  const size_t messages = c.gso ? b_sends + 1 : total;
  EXPECT_EQ(a->stats().tx_eagain_waits, 0u);
  EXPECT_EQ(a->stats().tx_gso_sends, c.gso ? b_sends + 1 : 0u);
  EXPECT_EQ(a->stats().tx_syscalls,
            c.mmsg ? (messages + UdpLink::kMaxMmsg - 1) / UdpLink::kMaxMmsg : messages);
  // Every segment but the first of a send carries IP ID k, whether it arrives in a GRO blob
  // (where its place guesses k) or cut apart by the kernel (where k is searched for).
  EXPECT_EQ(b->stats().rx_icrc_gso_id, c.gso ? to_b.size() - b_sends : 0u);
  EXPECT_EQ(c2->stats().rx_icrc_gso_id, c.gso ? to_c.size() - 1 : 0u);
  // Loopback hands a GRO socket each GSO send whole, and never merges separate sends.
  EXPECT_EQ(b->stats().rx_gro_blobs, c.gso && c.gro ? b_sends : 0u);
  EXPECT_EQ(c2->stats().rx_gro_blobs, c.gso && c.gro ? 1u : 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Paths, UdpLinkBatching,
    ::testing::Values(BatchCase{false, false, false}, BatchCase{true, false, false},
                      BatchCase{true, true, false}, BatchCase{true, false, true},
                      BatchCase{true, true, true}, BatchCase{false, true, true},
                      BatchCase{true, true, true, false}, BatchCase{true, false, false, false}),
    [](const auto& p) {
      return std::string(p.param.mmsg ? "mmsg" : "single") + (p.param.gso ? "_gso" : "") +
             (p.param.gro ? "_gro" : "") + (p.param.linearize ? "" : "_gather");
    });

// A plain UDP socket standing in for another RoCE implementation, or an attacker.
struct PlainSocket {
  int fd = -1;
  sockaddr_in addr{};
  explicit PlainSocket(const std::string& ip, uint16_t port = 0) {
    fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    const int df = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof df);
  }
  ~PlainSocket() { ::close(fd); }
  void send_to(const std::string& ip, std::span<const uint8_t> bytes, int tos = 0) const {
    setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(wire::kRoceV2Port);
    inet_pton(AF_INET, ip.c_str(), &to.sin_addr);
    ASSERT_EQ(
        ::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
        static_cast<ssize_t>(bytes.size()));
  }
  // A complete RoCEv2 datagram (BTH .. ICRC) from this socket to `ip`, built by the wire codec
  // independently of the link: the ICRC covers the real IP/UDP headers with identification 0.
  std::vector<uint8_t> roce_datagram(const std::string& ip, const TransportHeaders& h,
                                     std::span<const uint8_t> payload) const {
    wire::IpEndpoints ep;
    std::memcpy(ep.src.data(), &addr.sin_addr, 4);
    inet_pton(AF_INET, ip.c_str(), ep.dst.data());
    ep.udp_src_port = ntohs(addr.sin_port);
    std::vector<uint8_t> buf(9000);
    const uint32_t n = wire::build_ip_packet(ep, h, payload, buf);
    const auto& info = wire::opcode_info(h.bth.opcode);
    EXPECT_EQ(n, wire::kIpv4Bytes + wire::kUdpBytes + info.header_bytes + payload.size() +
                     wire::pad_for(static_cast<uint32_t>(payload.size())) + wire::kIcrcBytes);
    return {buf.begin() + wire::kIpv4Bytes + wire::kUdpBytes, buf.begin() + n};
  }
};

TransportHeaders send_only(uint32_t psn) {
  TransportHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 0x42;
  h.bth.psn = Psn(psn);
  return h;
}

TEST(UdpLink, ForeignSenderIsAcceptedAndCorruptionIsCountedNotDelivered) {
  auto b = open_link(v4(30, 2));
  ASSERT_TRUE(b);
  PlainSocket other(v4(30, 9));
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5, 6, 7};
  auto good = other.roce_datagram(v4(30, 2), send_only(5), payload);
  other.send_to(v4(30, 2), good);
  auto got = receive(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, payload);
  EXPECT_EQ(got[0].udp_src_port, ntohs(other.addr.sin_port));  // covered by the ICRC too
  EXPECT_EQ(got[0].sgid, gid_of(v4(30, 9)));

  // Every single-byte corruption of the packet is caught by the ICRC.
  for (size_t i = 0; i < good.size(); ++i) {
    auto bad = good;
    bad[i] ^= 0x10;
    if (i == 4) continue;  // the BTH byte holding FECN/BECN is masked out of the ICRC by design
    other.send_to(v4(30, 2), bad);
  }
  // Too short for a BTH and an ICRC, empty, and a valid ICRC over an opcode nobody defined.
  other.send_to(v4(30, 2), std::vector<uint8_t>(15, 0));
  other.send_to(v4(30, 2), std::vector<uint8_t>{});
  auto unknown = other.roce_datagram(v4(30, 2), send_only(6), payload);
  {
    // Rebuild the ICRC over the changed opcode: a well-formed frame with a nonsense opcode.
    wire::IpEndpoints ep;
    std::memcpy(ep.src.data(), &other.addr.sin_addr, 4);
    inet_pton(AF_INET, v4(30, 2).c_str(), ep.dst.data());
    ep.udp_src_port = ntohs(other.addr.sin_port);
    std::vector<uint8_t> ip(9000);
    const uint32_t n = wire::build_ip_packet(ep, send_only(6), payload, ip);
    ip[wire::kIpv4Bytes + wire::kUdpBytes] = 0x1f;  // reserved RC opcode
    const uint32_t icrc = wire::compute_icrc(std::span<const uint8_t>(ip.data(), n - 4));
    for (int k = 0; k < 4; ++k) ip[n - 4 + k] = static_cast<uint8_t>(icrc >> (8 * k));
    unknown.assign(ip.begin() + wire::kIpv4Bytes + wire::kUdpBytes, ip.begin() + n);
  }
  other.send_to(v4(30, 2), unknown);
  const size_t corrupted = good.size() - 1;
  got = receive(*b, 1);  // waits the full second: nothing valid should arrive
  EXPECT_TRUE(got.empty());
  const LinkCounters& c = b->counters();
  EXPECT_EQ(c.rx_packets, 1u);
  EXPECT_EQ(c.rx_drop_bad_icrc, corrupted);
  EXPECT_EQ(c.rx_drop_malformed, 3u);
}

// A GSO segment's ICRC covers identification k, which the receiver cannot see: k < 64 passes
// (and is counted), anything else is a bad ICRC.
TEST(UdpLink, Ipv4IcrcOverGsoSegmentIdentificationsBelow64) {
  auto b = open_link(v4(35, 2));
  ASSERT_TRUE(b);
  PlainSocket other(v4(35, 9));
  const std::vector<uint8_t> payload(1000, 0x3c);
  for (uint16_t id : {0, 1, 5, 63, 64, 1000}) {
    wire::IpEndpoints ep;
    std::memcpy(ep.src.data(), &other.addr.sin_addr, 4);
    inet_pton(AF_INET, v4(35, 2).c_str(), ep.dst.data());
    ep.udp_src_port = ntohs(other.addr.sin_port);
    std::vector<uint8_t> ip(2000);
    const uint32_t n = wire::build_ip_packet(ep, send_only(id), payload, ip);
    ip[4] = static_cast<uint8_t>(id >> 8);
    ip[5] = static_cast<uint8_t>(id);
    const uint32_t icrc = wire::compute_icrc(std::span<const uint8_t>(ip.data(), n - 4));
    for (int k = 0; k < 4; ++k) ip[n - 4 + k] = static_cast<uint8_t>(icrc >> (8 * k));
    other.send_to(v4(35, 2), std::span<const uint8_t>(ip.data() + 28, n - 28));
  }
  auto got = receive(*b, 4);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i].hdr.bth.psn, Psn(std::array<uint32_t, 4>{0, 1, 5, 63}[i]));
  receive(*b, 1);  // let the last two arrive
  EXPECT_EQ(b->stats().rx_icrc_gso_id, 3u);
  EXPECT_EQ(b->counters().rx_drop_bad_icrc, 2u);
}

TEST(UdpLink, CongestionExperiencedIsReportedAndEct0IsSent) {
  auto b = open_link(v4(31, 2));
  ASSERT_TRUE(b);
  PlainSocket other(v4(31, 9));
  const std::vector<uint8_t> payload(64, 0xab);
  other.send_to(v4(31, 2), other.roce_datagram(v4(31, 2), send_only(1), payload), 0x03);  // CE
  other.send_to(v4(31, 2), other.roce_datagram(v4(31, 2), send_only(2), payload), 0x02);  // ECT0
  auto got = receive(*b, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].ce);
  EXPECT_FALSE(got[1].ce);
  EXPECT_EQ(b->counters().rx_ce_marked, 1u);

  // The link's own packets leave with the caller's DSCP and ECT(0) (or Not-ECT when asked).
  PlainSocket sink(v4(31, 3), wire::kRoceV2Port);
  const int one = 1;
  ASSERT_EQ(setsockopt(sink.fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one), 0);
  Outgoing ect(wire::op::kRcSendOnly, 1, 10, gid_of(v4(31, 3)));
  Outgoing not_ect(wire::op::kRcSendOnly, 2, 10, gid_of(v4(31, 3)));
  not_ect.tx.ect = false;
  b->transmit(ect.tx);
  b->transmit(not_ect.tx);
  b->flush();
  for (int expected_tos : {26 << 2 | 2, 26 << 2 | 0}) {
    std::array<uint8_t, 256> buf;
    alignas(cmsghdr) std::array<uint8_t, 64> control;
    iovec iov{buf.data(), buf.size()};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.data();
    m.msg_controllen = control.size();
    ASSERT_EQ(::recvmsg(sink.fd, &m, 0),
              static_cast<ssize_t>(ect.tx.header_len + 10 + ect.tx.pad + wire::kIcrcBytes));
    int tos = -1;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
      if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) tos = *CMSG_DATA(cm);
    EXPECT_EQ(tos, expected_tos);
  }
}

TEST(UdpLink, HopLimitGoesOutAndTrafficClassAndTtlComeBackUp) {
  // An address handle's hop limit is the packets' TTL (0: the system's default), a change of it
  // ends a GSO run, and the receiver reports TOS and TTL as they arrived (a UD GRH carries them).
  auto a = open_link(v4(36, 1)), b = open_link(v4(36, 2));
  ASSERT_TRUE(a && b);
  std::vector<std::unique_ptr<Outgoing>> sent;
  const std::array<uint8_t, 4> ttls = {9, 9, 17, 0};
  for (uint32_t i = 0; i < 12; ++i) {
    sent.push_back(
        std::make_unique<Outgoing>(wire::op::kRcWriteMiddle, i, 1024, gid_of(v4(36, 2))));
    sent.back()->av.hop_limit = ttls[i / 3];
    if (i == 11) sent.back()->tx.ect = false;
  }
  for (auto& s : sent) a->transmit(s->tx);
  a->flush();
  auto got = receive(*b, sent.size());
  ASSERT_EQ(got.size(), sent.size());
  int default_ttl = 64;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_default_ttl", "r")) {
    EXPECT_EQ(std::fscanf(f, "%d", &default_ttl), 1);
    std::fclose(f);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    expect_same(*sent[i], got[i]);
    EXPECT_EQ(got[i].hop_limit, ttls[i / 3] ? ttls[i / 3] : default_ttl) << i;
    EXPECT_EQ(got[i].traffic_class, i == 11 ? 26 << 2 : 26 << 2 | 2) << i;
  }
}

TEST(UdpLink, KeptIcrcPrefixesNeverMixDestinationsLengthsOrSegments) {
  // The sender keeps the IP/UDP part of the ICRC per GSO segment index, destination and length;
  // interleaving two peers and three sizes must never hand one packet another's part.
  auto a = open_link(v4(37, 1)), b = open_link(v4(37, 2)), c = open_link(v4(37, 3));
  ASSERT_TRUE(a && b && c);
  std::vector<std::unique_ptr<Outgoing>> to_b, to_c;
  for (uint32_t round = 0; round < 2; ++round) {
    for (uint32_t i = 0; i < 24; ++i) {
      const size_t size = i % 8 == 7 ? 100 + i : 1024;  // runs of 1024 broken by short packets
      auto& list = (i / 4) % 2 ? to_c : to_b;
      const Gid dst = (i / 4) % 2 ? gid_of(v4(37, 3)) : gid_of(v4(37, 2));
      list.push_back(std::make_unique<Outgoing>(wire::op::kRcWriteMiddle,
                                                static_cast<uint32_t>(list.size()), size, dst));
      a->transmit(list.back()->tx);
    }
    a->flush();
  }
  auto got_b = receive(*b, to_b.size()), got_c = receive(*c, to_c.size());
  ASSERT_EQ(got_b.size(), to_b.size());
  ASSERT_EQ(got_c.size(), to_c.size());
  for (size_t i = 0; i < got_b.size(); ++i) expect_same(*to_b[i], got_b[i]);
  for (size_t i = 0; i < got_c.size(); ++i) expect_same(*to_c[i], got_c[i]);
  EXPECT_EQ(b->counters().rx_drop_bad_icrc + c->counters().rx_drop_bad_icrc, 0u);

  // A stream to one peer finds its parts kept from the previous send on: the first send's eight
  // segments miss (the kept parts for IDs 0-3 are c's, those for 4-7 were never made), the
  // second's all hit.
  const uint64_t hits = a->stats().tx_icrc_prefix_hits;
  std::vector<std::unique_ptr<Outgoing>> stream;
  for (uint32_t flush = 0; flush < 2; ++flush) {
    for (uint32_t i = 0; i < 8; ++i) {
      stream.push_back(std::make_unique<Outgoing>(
          wire::op::kRcWriteMiddle, static_cast<uint32_t>(stream.size()), 1024, gid_of(v4(37, 2))));
      a->transmit(stream.back()->tx);
    }
    a->flush();
  }
  auto got = receive(*b, stream.size());
  ASSERT_EQ(got.size(), stream.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same(*stream[i], got[i]);
  EXPECT_EQ(a->stats().tx_icrc_prefix_hits - hits, 8u);
  EXPECT_EQ(b->counters().rx_drop_bad_icrc, 0u);
}

TEST(UdpLink, ReceiverKeepsIcrcPrefixesPerSenderAndLength) {
  // The receiver keeps the IP/UDP part of the ICRC per sender, length and guessed GSO segment;
  // packets one at a time (identification 0) from two senders, small ones (one CRC call), 4 KiB
  // ones split in pieces (the sender's fused copy and CRC per piece) and odd lengths with a pad:
  // a: 8, 8, c: 8, a: 8, 4096, 4096, 4096 (3 pieces), 101, 101. Kept parts are found for a's
  // second 8, the second and third 4096 and the second 101: 4.
  auto a = open_link(v4(38, 1)), b = open_link(v4(38, 2)), c = open_link(v4(38, 3));
  ASSERT_TRUE(a && b && c);
  const Gid to_b = gid_of(v4(38, 2));
  struct Send {
    UdpLink* from;
    size_t size;
    int parts;
  };
  const std::vector<Send> sends = {{a.get(), 8, 1},    {a.get(), 8, 1},    {c.get(), 8, 1},
                                   {a.get(), 8, 1},    {a.get(), 4096, 1}, {a.get(), 4096, 1},
                                   {a.get(), 4096, 3}, {a.get(), 101, 1},  {a.get(), 101, 1}};
  std::vector<std::unique_ptr<Outgoing>> sent;
  for (const Send& s : sends) {
    sent.push_back(std::make_unique<Outgoing>(
        wire::op::kRcWriteMiddle, static_cast<uint32_t>(sent.size()), s.size, to_b, s.parts));
    s.from->transmit(sent.back()->tx);
    s.from->flush();
  }
  auto got = receive(*b, sent.size());
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same(*sent[i], got[i]);
  EXPECT_EQ(b->counters().rx_drop_bad_icrc, 0u);
  EXPECT_EQ(b->stats().rx_icrc_prefix_hits, 4u);
}

// A packet socket on lo, to see frames as a third party (Wireshark, a NIC) would; -1 without
// CAP_NET_RAW.
int open_capture() {
  const int cap = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (cap < 0) return -1;
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_protocol = htons(ETH_P_ALL);
  ll.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
  // Parallel tests put 64 KiB GSO frames on lo; a big buffer keeps ours from being dropped.
  const int buf = 64 << 20;
  if (setsockopt(cap, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
    setsockopt(cap, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (::bind(cap, reinterpret_cast<sockaddr*>(&ll), sizeof ll) != 0) {
    ::close(cap);
    return -1;
  }
  return cap;
}

// The first captured frame to UDP port 4791 at `dst` (4 or 16 bytes), parsed by the wire codec
// (which checks the ICRC against the real IP header). Other tests' traffic on lo is skipped by
// address before parsing, so their deliberately bad packets do not count here.
std::optional<wire::ParseResult<wire::RoceFrame>> capture_to(int cap,
                                                             std::span<const uint8_t> dst) {
  std::vector<uint8_t> frame(70000);
  // Bounded by time, not frames: parallel tests may put thousands of frames on lo meanwhile.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    const ssize_t n = ::recv(cap, frame.data(), frame.size(), 0);
    if (n <= 0) {
      pollfd pfd{cap, POLLIN, 0};
      ::poll(&pfd, 1, 10);
      continue;
    }
    const size_t at = dst.size() == 4 ? wire::kEthBytes + 16 : wire::kEthBytes + 24;
    const size_t udp = wire::kEthBytes + (dst.size() == 4 ? wire::kIpv4Bytes : wire::kIpv6Bytes);
    if (static_cast<size_t>(n) < udp + wire::kUdpBytes ||
        !std::equal(dst.begin(), dst.end(), frame.begin() + static_cast<ptrdiff_t>(at)) ||
        load_be16(&frame[udp + 2]) != wire::kRoceV2Port)
      continue;
    return wire::parse_frame({frame.data(), static_cast<size_t>(n)});
  }
  return std::nullopt;
}

// Sends `pkt` and captures it, up to three times (a capture socket may still drop a frame when
// parallel tests flood lo). Returns the frame and how many copies were sent (for the caller to
// receive them all).
std::pair<std::optional<wire::ParseResult<wire::RoceFrame>>, size_t> send_and_capture(
    UdpLink& link, const Outgoing& pkt, int cap, std::span<const uint8_t> dst) {
  for (size_t sent = 1; sent <= 3; ++sent) {
    link.transmit(pkt.tx);
    link.flush();
    if (auto f = capture_to(cap, dst)) return {f, sent};
  }
  return {std::nullopt, 3};
}

// What leaves the link is a RoCEv2 packet a third party accepts: capture it on the loopback
// device and check it, real IP header and all, with the wire codec's parse_frame.
TEST(UdpLink, CapturedPacketsCarryAnIcrcOverTheRealHeaders) {
  const int cap = open_capture();
  if (cap < 0) GTEST_SKIP() << "no packet socket (needs CAP_NET_RAW): " << std::strerror(errno);
  UdpLinkOptions o;
  o.gso = false;  // loopback never cuts GSO sends, so only single packets show their real header
  auto a = open_link(v4(32, 1), o);
  auto b = open_link(v4(32, 2), o);
  ASSERT_TRUE(a && b);
  Outgoing pkt(wire::op::kRcWriteOnly, 77, 301, b->local_gid(), 2);
  const std::array<uint8_t, 4> dst{127, 77, 32, 2};
  auto [f, copies] = send_and_capture(*a, pkt, cap, dst);
  ::close(cap);
  ASSERT_TRUE(f.has_value()) << "no frame captured";
  ASSERT_TRUE(f->ok()) << wire::to_string(f->error());
  const wire::RocePacket& p = (*f)->packet;
  ASSERT_TRUE(p.ipv4);
  EXPECT_EQ(p.ipv4->identification, 0);
  EXPECT_TRUE(p.ipv4->dont_fragment);
  EXPECT_EQ(p.ipv4->ecn, wire::Ecn::kEct0);
  EXPECT_EQ(p.ipv4->dscp, 26);
  EXPECT_EQ(p.udp.src_port, wire::kRoceV2Port);
  EXPECT_EQ(p.transport.hdr.bth.psn, Psn(77));
  EXPECT_EQ(receive(*b, copies).size(), copies);
}

TEST(UdpLink, SmallBudgetsAndFullQueuesStayBounded) {
  UdpLinkOptions o;
  o.tx_queue_packets = 8;  // transmit() flushes by itself every 8 packets
  auto a = open_link(v4(33, 1), o);
  auto b = open_link(v4(33, 2), o);
  ASSERT_TRUE(a && b);
  std::vector<std::unique_ptr<Outgoing>> sent;
  for (uint32_t i = 0; i < 40; ++i)
    sent.push_back(std::make_unique<Outgoing>(wire::op::kRcSendMiddle, i, 2048, b->local_gid()));
  for (auto& s : sent) a->transmit(s->tx);
  a->flush();
  EXPECT_EQ(a->counters().tx_packets, 40u);
  auto got = receive(*b, 40, 1);  // one packet per poll, even out of a GRO blob
  ASSERT_EQ(got.size(), 40u);
  for (size_t i = 0; i < got.size(); ++i) expect_same(*sent[i], got[i]);
  EXPECT_EQ(b->poll([](const wire::RxPacket&) {}, 16), 0u);  // nothing left, and no blocking
}

// A process's exit handlers may still send: librdmacm's drop-in disconnects what is connected at
// exit, and that pass runs after the exiting thread's thread_local objects are destroyed (C++
// [basic.start.term]). A gather list kept in a thread_local vector was used after its destructor
// then (perftest's ib_read_bw -R died with SIGSEGV at exit once its sends were large enough for
// the vector to be unmapped).
UdpLink* exit_link = nullptr;
std::vector<std::unique_ptr<Outgoing>>* exit_packets = nullptr;
void send_all_at_exit() {
  for (auto& p : *exit_packets) exit_link->transmit(p->tx);
  exit_link->flush();
  std::_Exit(exit_link->counters().tx_packets == 2 * exit_packets->size() ? 0 : 3);
}

TEST(UdpLink, AnExitHandlerCanStillSend) {
  EXPECT_EXIT(
      {
        UdpLinkOptions o;
        o.tx_queue_packets = 512;  // gather lists past malloc's mmap threshold, unmapped when freed
        exit_link = open_link(v4(39, 1), o).release();
        exit_packets = new std::vector<std::unique_ptr<Outgoing>>;
        for (uint32_t i = 0; i < 512; ++i)
          exit_packets->push_back(std::make_unique<Outgoing>(wire::op::kRcSendMiddle, i, 1024,
                                                             gid_of(v4(39, 2)), /*parts=*/4));
        // A full queue on this thread first: the largest gather lists it can need.
        for (auto& p : *exit_packets) exit_link->transmit(p->tx);
        exit_link->flush();
        std::atexit(send_all_at_exit);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// A TOS and TTL that keep coming become the socket's own (no control message per send); sends
// with other values, or with the default TTL, still leave with theirs.
TEST(UdpLink, TheSocketTakesTheTosAndTtlThatKeepComingAndOthersStillGoOut) {
  auto a = open_link(v4(56, 1)), b = open_link(v4(56, 2));
  ASSERT_TRUE(a && b);
  struct Shape {
    uint8_t ttl;
    bool ect;
  };
  std::vector<Shape> shapes(UdpLink::kSocketDefaultsAfter + 4, Shape{9, true});
  shapes.push_back({0, true});   // the default TTL: the socket goes back to it
  shapes.push_back({9, false});  // another TOS (Not-ECT)
  shapes.push_back({9, true});
  shapes.push_back({0, true});
  int default_ttl = 64;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_default_ttl", "r")) {
    EXPECT_EQ(std::fscanf(f, "%d", &default_ttl), 1);
    std::fclose(f);
  }
  for (uint32_t i = 0; i < shapes.size(); ++i) {
    Outgoing out(wire::op::kRcSendOnly, i, 8, b->local_gid());
    out.av.hop_limit = shapes[i].ttl;
    out.tx.ect = shapes[i].ect;
    a->transmit(out.tx);
    a->flush();  // a send each
    auto got = receive(*b, 1);
    ASSERT_EQ(got.size(), 1u) << i;
    EXPECT_EQ(got[0].hop_limit, shapes[i].ttl ? shapes[i].ttl : default_ttl) << i;
    EXPECT_EQ(got[0].traffic_class, shapes[i].ect ? 26 << 2 | 2 : 26 << 2) << i;
    // Taken at the kSocketDefaultsAfter-th send of the same values, given back at TTL 0.
    const uint64_t changes = i + 1 < UdpLink::kSocketDefaultsAfter ? 0
                             : i < shapes.size() - 4               ? 1
                                                                   : 2;
    EXPECT_EQ(a->stats().tx_socket_defaults, changes) << i;
  }
}

// The socket changes only between send calls: messages built for what it applied leave with
// that, although the same call carries the run that makes the socket take other values, and
// a message with the default TTL in a call puts it back on the default before any is built.
TEST(UdpLink, TheSocketsTosAndTtlChangeOnlyBetweenSendCalls) {
  UdpLinkOptions one_each;
  one_each.gso = false;  // a message per packet
  auto a = open_link(v4(58, 1), one_each), b = open_link(v4(58, 2));
  ASSERT_TRUE(a && b);
  int default_ttl = 64;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_default_ttl", "r")) {
    EXPECT_EQ(std::fscanf(f, "%d", &default_ttl), 1);
    std::fclose(f);
  }
  struct Shape {
    uint8_t ttl;
    bool ect;
  };
  auto send_and_check = [&](const std::vector<Shape>& shapes) {
    std::vector<std::unique_ptr<Outgoing>> sent;
    for (const Shape& sh : shapes) {
      sent.push_back(std::make_unique<Outgoing>(
          wire::op::kRcSendOnly, static_cast<uint32_t>(sent.size()), 8, b->local_gid()));
      sent.back()->av.hop_limit = sh.ttl;
      sent.back()->tx.ect = sh.ect;
      a->transmit(sent.back()->tx);
    }
    a->flush();  // one sendmmsg
    auto got = receive(*b, shapes.size());
    ASSERT_EQ(got.size(), shapes.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].hop_limit, shapes[i].ttl ? shapes[i].ttl : default_ttl) << i;
      EXPECT_EQ(got[i].traffic_class, shapes[i].ect ? 26 << 2 | 2 : 26 << 2) << i;
    }
  };
  // Not-ECT with the default TTL first (the socket's TOS is 0, so that message carries its TOS),
  // then a run that makes the socket take ECT(0) and TTL 9.
  std::vector<Shape> first{{0, false}};
  first.resize(1 + UdpLink::kSocketDefaultsAfter, Shape{9, true});
  send_and_check(first);
  EXPECT_EQ(a->stats().tx_socket_defaults, 1u);
  // The socket now sends TTL 9: a call with TTL 9 before a default-TTL message.
  send_and_check({{9, true}, {0, true}, {9, false}});
  EXPECT_EQ(a->stats().tx_socket_defaults, 2u);
}

// After a receive call that found the socket empty, the next asks for one datagram (a ping-pong
// pays for every entry asked for); two calls in a row that find data go back to batches.
TEST(UdpLink, AfterAnEmptyCallOneDatagramIsAskedForThenBatchesAgain) {
  UdpLinkOptions plain;
  plain.gso = plain.gro = false;  // a datagram per packet, so that calls count datagrams
  auto a = open_link(v4(57, 1), plain), b = open_link(v4(57, 2), plain);
  ASSERT_TRUE(a && b);
  const auto noop = [](const wire::RxPacket&) {};
  EXPECT_EQ(b->poll(noop, 64), 0u);  // empty
  std::vector<std::unique_ptr<Outgoing>> sent;
  auto send = [&](uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
      sent.push_back(std::make_unique<Outgoing>(
          wire::op::kRcSendOnly, static_cast<uint32_t>(sent.size()), 8, b->local_gid()));
      a->transmit(sent.back()->tx);
    }
    a->flush();
  };
  std::vector<Received> got;
  const auto keep = [&](const wire::RxPacket& p) { got.push_back(received(p)); };
  send(1);
  pollfd pfd{b->wait_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 1000), 1);
  EXPECT_EQ(b->poll(keep, 64), 1u);  // a batch call, after the empty one: one came
  EXPECT_EQ(b->stats().rx_single_syscalls, 0u);
  send(5);  // loopback queues them before the send call returns
  ASSERT_EQ(::poll(&pfd, 1, 1000), 1);
  EXPECT_EQ(b->poll(keep, 64), 1u);  // one asked for, one taken: this poll ends
  EXPECT_EQ(b->stats().rx_single_syscalls, 1u);
  EXPECT_EQ(b->poll(keep, 64), 4u);  // data twice in a row: a batch again
  EXPECT_EQ(b->stats().rx_single_syscalls, 1u);
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < got.size(); ++i) expect_same(*sent[i], got[i]);
}

TEST(UdpLink, BadTransmitsAreCountedNotSent) {
  auto a = open_link(v4(34, 1));
  ASSERT_TRUE(a);
  Outgoing no_dest(wire::op::kRcSendOnly, 1, 8, a->local_gid());
  no_dest.tx.dest = nullptr;
  a->transmit(no_dest.tx);
  Gid v6{};
  v6[15] = 1;  // ::1 from an IPv4 link
  Outgoing wrong_family(wire::op::kRcSendOnly, 2, 8, v6);
  a->transmit(wrong_family.tx);
  a->flush();
  EXPECT_EQ(a->counters().tx_errors, 2u);
  EXPECT_EQ(a->counters().tx_packets, 0u);
}

TEST(UdpLink, APacketThatAsksForItSendsWhatIsQueuedAtOnce) {
  auto a = open_link(v4(34, 3)), b = open_link(v4(34, 4));
  ASSERT_TRUE(a && b);
  Outgoing p1(wire::op::kRcSendFirst, 1, 256, b->local_gid());
  Outgoing p2(wire::op::kRcSendMiddle, 2, 256, b->local_gid());
  Outgoing p3(wire::op::kRcSendLast, 3, 256, b->local_gid());
  p2.tx.flush_after = true;
  a->transmit(p1.tx);
  EXPECT_EQ(a->counters().tx_packets, 0u);  // queued for the batch
  a->transmit(p2.tx);
  EXPECT_EQ(a->counters().tx_packets, 2u);  // sent with the packet before it
  a->transmit(p3.tx);
  EXPECT_EQ(a->counters().tx_packets, 2u);
  a->flush();
  EXPECT_EQ(a->counters().tx_packets, 3u);
  auto got = receive(*b, 3);
  ASSERT_EQ(got.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(got[i].hdr.bth.psn, Psn(i + 1));
}

TEST(UdpLink, Ipv6OnLoopback) {
  UdpLinkOptions o;
  o.address = "::1";
  auto r = UdpLink::open(o);
  if (!r.ok() && (r.error() == EADDRNOTAVAIL || r.error() == EAFNOSUPPORT))
    GTEST_SKIP() << "no IPv6 loopback here: " << std::strerror(r.error());
  if (!r.ok() && r.error() == EADDRINUSE) GTEST_SKIP() << "[::1]:4791 is taken by another test";
  ASSERT_TRUE(r.ok()) << std::strerror(r.error());
  UdpLink& a = **r;
  ASSERT_TRUE(a.ipv6());
  Gid loop{};
  loop[15] = 1;
  EXPECT_EQ(a.local_gid(), loop);
  // One packet alone first, captured if we may: its ICRC must hold over the real IPv6 header.
  const int cap = open_capture();
  Outgoing single(wire::op::kRcSendOnly, 7, 333, loop);
  single.av.hop_limit = 5;
  size_t copies = 1;
  if (cap >= 0) {
    auto [f, n] = send_and_capture(a, single, cap, loop);
    copies = n;
    ::close(cap);
    ASSERT_TRUE(f.has_value()) << "no frame captured";
    ASSERT_TRUE(f->ok()) << wire::to_string(f->error());
    ASSERT_TRUE((*f)->packet.ipv6);
    EXPECT_EQ((*f)->packet.ipv6->ecn, wire::Ecn::kEct0);
  } else {
    a.transmit(single.tx);
    a.flush();
  }
  const auto single_got = receive(a, copies);
  ASSERT_EQ(single_got.size(), copies);
  EXPECT_EQ(single_got[0].hop_limit, 5);
  EXPECT_EQ(single_got[0].traffic_class, 26 << 2 | 2);
  // ::1 is the only loopback address, so the link talks to itself: a GSO window and odd sizes.
  std::vector<std::unique_ptr<Outgoing>> sent;
  for (uint32_t i = 0; i < 20; ++i)
    sent.push_back(std::make_unique<Outgoing>(wire::op::kRcWriteMiddle, i, 4096, loop));
  for (size_t size : {0, 1, 3, 4097 - 4096 + 6})
    sent.push_back(std::make_unique<Outgoing>(wire::op::kRcSendOnly, 100 + size, size, loop));
  for (auto& s : sent) a.transmit(s->tx);
  a.flush();
  auto got = receive(a, sent.size());
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < got.size(); ++i) {
    expect_same(*sent[i], got[i]);
    EXPECT_EQ(got[i].sgid, loop);
  }
  EXPECT_EQ(a.counters().rx_drop_bad_icrc, 0u);
  EXPECT_EQ(a.stats().rx_icrc_gso_id, 0u);  // IPv6 has no identification to guess
  // With GSO the window goes in a send of 15 and one of 5 that the empty SEND (shorter) ends,
  // then sizes 1 and 3 (both 20 bytes padded) share a send; size 7 goes alone.
  EXPECT_EQ(a.stats().tx_gso_sends, a.gso_active() ? 3u : 0u);
}

}  // namespace
}  // namespace uroce::link
