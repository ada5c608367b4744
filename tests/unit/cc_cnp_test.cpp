// Notification point: the CNP rate limit per QP and the CNP's bytes on the wire.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "cc/cnp.h"
#include "wire/packet.h"

namespace uroce::cc {
namespace {

TEST(CnpPacer, FirstCeAnswersAtOnceThenOncePerInterval) {
  CnpPacer np(kCnpIntervalPaperNs);  // 50 us
  EXPECT_TRUE(np.on_ce(1'000'000));
  EXPECT_FALSE(np.on_ce(1'000'001));
  EXPECT_FALSE(np.on_ce(1'049'999));
  EXPECT_TRUE(np.on_ce(1'050'000));  // exactly one interval later
  EXPECT_FALSE(np.on_ce(1'060'000));
  EXPECT_TRUE(np.on_ce(2'000'000));
  EXPECT_EQ(np.counters().ce_packets, 6u);
  EXPECT_EQ(np.counters().cnps, 3u);
  EXPECT_EQ(np.counters().suppressed, 3u);
}

TEST(CnpPacer, Mlx5IntervalAndTimeZero) {
  CnpPacer np(kCnpIntervalMlx5Ns);  // 4 us
  EXPECT_TRUE(np.on_ce(0));         // the very first CE, even at t = 0
  EXPECT_FALSE(np.on_ce(3'999));
  EXPECT_TRUE(np.on_ce(4'000));
  // A CE every 100 ns for 1 ms: one CNP per 4 us, 250 of them (at 8, 12, ..., 1004 us: 250).
  int cnps = 0;
  for (Nanos t = 4'100; t <= 1'004'000; t += 100) cnps += np.on_ce(t);
  EXPECT_EQ(cnps, 250);
}

TEST(CnpPacer, ClockSteppingBackDoesNotSilenceIt) {
  CnpPacer np(kCnpIntervalPaperNs);
  EXPECT_TRUE(np.on_ce(1'000'000));
  EXPECT_TRUE(np.on_ce(10));
}

// The bytes of Mellanox's "RoCEv2 CNP Packet Format Example": 81 00 ff ff 40 00 00 d2, PSN 0,
// then 16 reserved zero bytes.
TEST(CnpHeaders, MatchTheReferenceCnp) {
  std::array<uint8_t, wire::kMaxTransportHeaderBytes> buf;
  buf.fill(0xee);
  const uint32_t n = write_cnp_headers(0xd2, buf);
  ASSERT_EQ(n, 28u);
  const std::array<uint8_t, 12> bth = {0x81, 0x00, 0xff, 0xff, 0x40, 0x00,
                                       0x00, 0xd2, 0x00, 0x00, 0x00, 0x00};
  for (size_t i = 0; i < bth.size(); ++i) EXPECT_EQ(buf[i], bth[i]) << i;
  for (size_t i = 12; i < 28; ++i) EXPECT_EQ(buf[i], 0) << i;
}

TEST(CnpHeaders, RoundTripThroughTheParser) {
  std::array<uint8_t, wire::kMaxTransportHeaderBytes> buf{};
  const uint32_t n = write_cnp_headers(0xabcdef, buf);
  auto parsed = wire::parse_transport(std::span<const uint8_t>(buf.data(), n));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->hdr.bth.opcode, wire::op::kCnp);
  EXPECT_TRUE(parsed->hdr.bth.becn);
  EXPECT_EQ(parsed->hdr.bth.dest_qp, 0xabcdefu);
  EXPECT_EQ(parsed->hdr.bth.pkey, 0xffff);
  EXPECT_EQ(parsed->hdr.bth.psn.value(), 0u);
  EXPECT_TRUE(parsed->payload.empty());
  // Only 24 bits of QPN exist; a larger value is cut, not spilled into the byte before.
  write_cnp_headers(0x1abcdef, buf);
  EXPECT_EQ(buf[4], 0x40);
  EXPECT_EQ(buf[5], 0xab);
}

}  // namespace
}  // namespace uroce::cc
