// open_link (link/factory.h), the pcap tap CaptureLink (link/capture_link.h) and open_nic
// (api/nic.h) over real loopback sockets on 127.77.50-53.x, apart from every other test's.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "api/nic.h"
#include "link/capture_link.h"
#include "link/factory.h"
#include "wire/opcode.h"
#include "wire/packet.h"

namespace uroce::link {
namespace {

Gid gid_v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return gid_from_ipv4(std::array<uint8_t, 4>{a, b, c, d});
}

std::string temp_path(const char* name) {
  return testing::TempDir() + name + "_" + std::to_string(getpid()) + ".pcap";
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

uint32_t host32(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, &b[at], 4);
  return v;
}

// An RC SEND Only of `payload` to `dgid`, as a transport hands it to a link.
struct Send {
  wire::TransportHeaders hdr;
  wire::AddressVector av;
  wire::TxPacket tx;
  std::vector<uint8_t> payload;

  Send(const Gid& dgid, uint32_t psn, std::vector<uint8_t> bytes) : payload(std::move(bytes)) {
    hdr.bth.opcode = wire::op::kRcSendOnly;
    hdr.bth.dest_qp = 0x000abc;
    hdr.bth.psn = Psn(psn);
    hdr.bth.pad_count = wire::pad_for(static_cast<uint32_t>(payload.size()));
    av.dgid = dgid;
    tx.header_len = wire::write_transport_headers(hdr, tx.header);
    tx.pad = hdr.bth.pad_count;
    tx.payload_len = static_cast<uint32_t>(payload.size());
    tx.payload[tx.payload_parts++] = payload;
    tx.dest = &av;
  }
};

// Polls `link` until one packet arrived or a second passed; its PSN, or -1.
int64_t receive_one(Link& link) {
  int64_t psn = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (psn < 0 && std::chrono::steady_clock::now() < deadline) {
    if (link.poll([&](const wire::RxPacket& p) { psn = p.hdr->bth.psn.value(); }, 16) == 0) {
      pollfd pfd{link.wait_fd(), POLLIN, 0};
      ::poll(&pfd, 1, 20);
    }
  }
  return psn;
}

TEST(LinkFactory, KindNames) {
  EXPECT_EQ(parse_link_kind("udp"), LinkKind::kUdp);
  EXPECT_EQ(parse_link_kind("UDP"), std::nullopt);
  EXPECT_EQ(parse_link_kind(""), std::nullopt);
  EXPECT_EQ(parse_link_kind("af_xdp"), std::nullopt);
  EXPECT_STREQ(link_kind_name(LinkKind::kUdp), "udp");
  EXPECT_EQ(parse_link_kind("raw"), LinkKind::kRaw);
  EXPECT_STREQ(link_kind_name(LinkKind::kRaw), "raw");
  EXPECT_EQ(parse_link_kind("xdp"), LinkKind::kXdp);
  EXPECT_STREQ(link_kind_name(LinkKind::kXdp), "xdp");
}

TEST(LinkFactory, AnXdpLinkOnAnAddressNoInterfaceHoldsIsEinvalWithASentence) {
  LinkOptions o;
  o.kind = LinkKind::kXdp;
  o.address = "198.51.100.77";  // TEST-NET-2: held by no interface here
  std::string error;
  auto l = open_link(o, &error);
  ASSERT_FALSE(l.ok());
#ifdef UROCE_HAVE_XDP
  EXPECT_EQ(l.error(), EINVAL);
  EXPECT_EQ(error,
            std::string("cannot open an AF_XDP link (needs root and an interface that takes an XDP "
                        "program) on the interface holding 198.51.100.77: interface: ") +
                std::strerror(EINVAL));
#else
  EXPECT_EQ(l.error(), EPROTONOSUPPORT);
#endif
}

TEST(LinkFactory, ARawLinkOnAnAddressNoInterfaceHoldsIsEinvalWithASentence) {
  LinkOptions o;
  o.kind = LinkKind::kRaw;
  o.address = "198.51.100.77";  // TEST-NET-2: held by no interface here
  std::string error;
  auto l = open_link(o, &error);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error(), EINVAL);
  EXPECT_EQ(error,
            std::string("cannot open a raw Ethernet link (AF_PACKET, needs root) on the interface "
                        "holding 198.51.100.77: ") +
                std::strerror(EINVAL));
}

TEST(LinkFactory, AnUnknownKindIsEinval) {
  LinkOptions o;
  o.kind = static_cast<LinkKind>(200);
  o.address = "127.77.50.1";
  std::string error;
  auto l = open_link(o, &error);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error(), EINVAL);
  EXPECT_EQ(error, std::string("unknown link kind 200: ") + std::strerror(EINVAL));
}

TEST(LinkFactory, OpensAUdpLinkOrSaysWhyNot) {
  LinkOptions o;
  o.address = "127.77.50.2";
  auto l = open_link(o);
  ASSERT_TRUE(l.ok()) << std::strerror(l.error());
  EXPECT_EQ((*l)->local_gid(), gid_v4(127, 77, 50, 2));
  EXPECT_GE((*l)->wait_fd(), 0);
  EXPECT_NE(dynamic_cast<UdpLink*>(l->get()), nullptr);  // no capture: the bare link

  std::string error;
  auto again = open_link(o, &error);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error(), EADDRINUSE);
  EXPECT_EQ(error,
            std::string("cannot open UDP port 4791 on 127.77.50.2: ") + std::strerror(EADDRINUSE));

  o.address = "not-an-address";
  auto bad = open_link(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), EINVAL);
}

TEST(LinkFactory, ACapturePathWrapsTheLinkAndRecordsBothDirections) {
  const std::string path = temp_path("link_factory_capture");
  const Gid ga = gid_v4(127, 77, 51, 1), gb = gid_v4(127, 77, 51, 2);
  {
    LinkOptions oa, ob;
    oa.address = "127.77.51.1";
    oa.pcap_path = path;
    ob.address = "127.77.51.2";
    auto a = open_link(oa);
    auto b = open_link(ob);
    ASSERT_TRUE(a.ok() && b.ok());
    auto* tap = dynamic_cast<CaptureLink*>(a->get());
    ASSERT_NE(tap, nullptr);
    EXPECT_NE(dynamic_cast<UdpLink*>(&tap->inner()), nullptr);
    EXPECT_EQ((*a)->local_gid(), ga);

    Send out(gb, 7, std::vector<uint8_t>(20, 0x5a));
    (*a)->transmit(out.tx);
    (*a)->flush();
    ASSERT_EQ(receive_one(**b), 7);
    Send back(ga, 9, std::vector<uint8_t>(12, 0xa5));
    (*b)->transmit(back.tx);
    (*b)->flush();
    ASSERT_EQ(receive_one(**a), 9);
    EXPECT_EQ(tap->pcap().write_errors(), 0u);
  }  // closing the link closes the file
  const std::vector<uint8_t> f = read_file(path);
  // Ethernet (14) + IPv4 (20) + UDP (8) + BTH (12) + payload + ICRC (4) per record.
  const size_t sent = 14 + 20 + 8 + 12 + 20 + 4, got = 14 + 20 + 8 + 12 + 12 + 4;
  ASSERT_EQ(f.size(), 24u + (16 + sent) + (16 + got));
  EXPECT_EQ(host32(f, 20), 1u);  // LINKTYPE_ETHERNET
  const size_t r1 = 24 + 16, r2 = r1 + sent + 16;
  EXPECT_EQ(host32(f, r1 - 8), sent);
  EXPECT_EQ(host32(f, r2 - 8), got);
  const uint8_t a_ip[4] = {127, 77, 51, 1}, b_ip[4] = {127, 77, 51, 2};
  // The first record is what A sent: A -> B, to UDP port 4791.
  EXPECT_EQ(std::memcmp(&f[r1 + 14 + 12], a_ip, 4), 0);
  EXPECT_EQ(std::memcmp(&f[r1 + 14 + 16], b_ip, 4), 0);
  EXPECT_EQ(f[r1 + 14 + 20 + 2] << 8 | f[r1 + 14 + 20 + 3], 4791);
  EXPECT_EQ(f[r1 + 14 + 28], wire::op::kRcSendOnly);
  // The second is what A received: B -> A.
  EXPECT_EQ(std::memcmp(&f[r2 + 14 + 12], b_ip, 4), 0);
  EXPECT_EQ(std::memcmp(&f[r2 + 14 + 16], a_ip, 4), 0);
  EXPECT_EQ(f[r2 + 14 + 20 + 2] << 8 | f[r2 + 14 + 20 + 3], 4791);
  std::remove(path.c_str());
}

TEST(LinkFactory, ACaptureFileThatCannotBeWrittenFailsTheOpen) {
  LinkOptions o;
  o.address = "127.77.50.3";
  o.pcap_path = "/nonexistent-dir/x.pcap";
  std::string error;
  auto l = open_link(o, &error);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error(), ENOENT);
  EXPECT_EQ(error, std::string("cannot write /nonexistent-dir/x.pcap: ") + std::strerror(ENOENT));
  o.pcap_path.clear();
  EXPECT_TRUE(open_link(o).ok());  // the failed open let go of the address
}

TEST(CaptureLink, StampsRecordsWithItsClock) {
  const std::string path = temp_path("capture_link_clock");
  {
    UdpLinkOptions uo;
    uo.address = "127.77.52.1";
    auto inner = UdpLink::open(uo);
    ASSERT_TRUE(inner.ok());
    auto pcap = std::make_shared<wire::PcapWriter>();
    ASSERT_EQ(pcap->open(path), 0);
    Nanos now = 5'000'000'123;
    CaptureLink tap(std::move(*inner), pcap, [&] { return now; });
    Send out(gid_v4(127, 77, 52, 2), 1, std::vector<uint8_t>(4, 1));
    tap.transmit(out.tx);
    now = 6'000'000'456;
    tap.transmit(out.tx);
    tap.flush();
  }
  const std::vector<uint8_t> f = read_file(path);
  const size_t rec = 14 + 20 + 8 + 12 + 4 + 4;
  ASSERT_EQ(f.size(), 24u + 2 * (16 + rec));
  EXPECT_EQ(host32(f, 24), 5u);
  EXPECT_EQ(host32(f, 28), 123u);
  EXPECT_EQ(host32(f, 24 + 16 + rec), 6u);
  EXPECT_EQ(host32(f, 24 + 16 + rec + 4), 456u);
  std::remove(path.c_str());
}

TEST(OpenNic, ReturnsTheDeviceOnTheLinkWithItsEngine) {
  api::NicOptions o;
  o.link.address = "127.77.53.1";
  o.device.name = "nictest0";
  o.device.port.active_mtu = verbs::Mtu::k2048;
  o.start_engine = true;
  auto nic = api::open_nic(o);
  ASSERT_TRUE(nic.ok()) << std::strerror(nic.error());
  api::Nic& n = **nic;
  EXPECT_EQ(n.device().gid(), gid_v4(127, 77, 53, 1));
  EXPECT_EQ(n.link().local_gid(), gid_v4(127, 77, 53, 1));
  EXPECT_EQ(n.device().name(), "nictest0");
  EXPECT_EQ(n.device().port_attr().active_mtu, verbs::Mtu::k2048);
  EXPECT_TRUE(n.engine().running());
  auto ctx = n.device().open();  // the device works: a context opens and closes
  ASSERT_TRUE(ctx.ok());
  ctx->reset();

  o.link.address = "127.77.53.2";
  o.start_engine = false;
  auto idle = api::open_nic(o);
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE((*idle)->engine().running());
  EXPECT_EQ((*idle)->engine().pump(), kNever);  // the caller drives; nothing to do
}

TEST(OpenNic, KeepsTheQpDefaultsItsUsersApplyToEveryQp) {
  api::NicOptions o;
  o.link.address = "127.77.53.3";
  o.qp_defaults.congestion.algorithm = CcAlgorithm::kDcqcnPaper;
  o.qp_defaults.congestion.line_rate_bps = 2e9;
  o.qp_defaults.loss_recovery = LossRecovery::kSelectiveRepeat;
  o.qp_defaults.write_segments = WriteSegments::kPerMessage;
  auto nic = api::open_nic(o);
  ASSERT_TRUE(nic.ok()) << std::strerror(nic.error());
  QpInitAttr init;  // starts with the transport's own defaults
  EXPECT_EQ(init.loss_recovery, LossRecovery::kGoBackN);
  apply_qp_defaults((*nic)->qp_defaults(), init);
  EXPECT_EQ(init.congestion.algorithm, CcAlgorithm::kDcqcnPaper);
  EXPECT_EQ(init.congestion.line_rate_bps, 2e9);
  EXPECT_EQ(init.loss_recovery, LossRecovery::kSelectiveRepeat);
  EXPECT_EQ(init.write_segments, WriteSegments::kPerMessage);
}

uint64_t counter(const std::vector<verbs::Counter>& all, std::string_view name) {
  for (const auto& c : all)
    if (c.name == name) return c.value;
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

TEST(OpenNic, CountersAddWhoRanThePassesAndTheLinksSystemCalls) {
  api::NicOptions o;
  o.link.address = "127.77.53.4";
  auto nic = api::open_nic(o);
  ASSERT_TRUE(nic.ok()) << std::strerror(nic.error());
  api::Nic& n = **nic;
  n.engine().pump();  // two passes on this thread, each one receive call that finds nothing
  n.engine().pump();
  const std::vector<verbs::Counter> all = n.counters();
  EXPECT_EQ(counter(all, "progress_passes"), 2u);  // the device's own counters come first
  EXPECT_EQ(counter(all, "engine_passes"), 2u);
  EXPECT_EQ(counter(all, "engine_inline_passes"), 2u);
  EXPECT_EQ(counter(all, "engine_sleeps"), 0u);
  EXPECT_EQ(counter(all, "link_rx_calls"), 2u);
  EXPECT_EQ(counter(all, "link_rx_empty_calls"), 2u);
  EXPECT_EQ(counter(all, "link_tx_calls"), 0u);
  EXPECT_EQ(counter(all, "link_tx_gso_sends"), 0u);
  EXPECT_EQ(counter(all, "link_rx_gro_blobs"), 0u);
}

TEST(OpenNic, ABadAddressGivesItsErrnoAndASentence) {
  api::NicOptions o;
  o.link.address = "192.0.2.1";  // TEST-NET-1: no host has it
  std::string error;
  auto nic = api::open_nic(o, &error);
  ASSERT_FALSE(nic.ok());
  EXPECT_EQ(nic.error(), EADDRNOTAVAIL);
  EXPECT_EQ(error,
            std::string("cannot open UDP port 4791 on 192.0.2.1: ") + std::strerror(EADDRNOTAVAIL));
  o.link.address = "127.77.53.999";
  nic = api::open_nic(o);
  ASSERT_FALSE(nic.ok());
  EXPECT_EQ(nic.error(), EINVAL);
}

}  // namespace
}  // namespace uroce::link
