// The GRH a UD receive buffer starts with, rebuilt from the IP header the datagram came in.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "wire/packet.h"

namespace uroce::wire {
namespace {

TEST(WireGrh, Ipv4SenderGetsTwentyZeroBytesThenTheIpv4Header) {
  GrhSource src;
  src.sgid = gid_from_ipv4({10, 0, 0, 1});
  src.dgid = gid_from_ipv4({10, 0, 0, 2});
  src.traffic_class = 0x8a;  // DSCP 34, ECT(0)
  src.hop_limit = 63;
  src.udp_length = 100;
  const std::array<uint8_t, 40> expect = {
      0,    0,    0,    0,    0,  0, 0, 0, 0, 0,  // GRH area left zero
      0,    0,    0,    0,    0,  0, 0, 0, 0, 0,  //
      0x45, 0x8a, 0x00, 0x78,                     // version/IHL, TOS, 20 + 100
      0x00, 0x00, 0x40, 0x00,                     // identification 0, DF
      0x3f, 0x11, 0x26, 0xe9,                     // TTL, UDP, header checksum
      10,   0,    0,    1,    10, 0, 0, 2,        // source, destination
  };
  EXPECT_EQ(build_ud_grh(src), expect);
  static_assert(kGrhBytes == 40 && kGrhIpv4Offset == 20);
}

TEST(WireGrh, Ipv6SenderGetsTheIpv6Header) {
  GrhSource src;
  src.sgid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  src.dgid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  src.traffic_class = 0x8a;
  src.hop_limit = 64;
  src.udp_length = 100;
  const std::array<uint8_t, 40> expect = {
      0x68, 0xa0, 0x00, 0x00,  // version 6, traffic class 0x8a, flow label 0
      0x00, 0x64, 0x11, 0x40,  // payload length 100, next header UDP, hop limit 64
      0xfe, 0x80, 0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,  // source
      0xfe, 0x80, 0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,  // destination
  };
  EXPECT_EQ(build_ud_grh(src), expect);
}

}  // namespace
}  // namespace uroce::wire
