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

TEST(WireGrh, RoceV1PacketGetsItsOwnGrhWhateverTheGidKind) {
  GrhSource src;
  src.sgid = gid_from_ipv4({198, 18, 0, 1});  // IPv4-mapped GIDs still get the GRH layout
  src.dgid = gid_from_ipv4({198, 18, 0, 2});
  src.traffic_class = 0x8a;
  src.hop_limit = 1;
  src.udp_length = 100;  // as if there were a UDP header: the GRH's payload starts at the BTH
  src.roce_v1 = true;
  src.flow_label = 0xabcde;
  const std::array<uint8_t, 40> expect = {
      0x68, 0xaa, 0xbc, 0xde,  // version 6, traffic class 0x8a, flow label 0xabcde
      0x00, 0x5c, 0x1b, 0x01,  // payload length 92 (BTH to ICRC), next header BTH, hop limit 1
      0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1,  // source GID
      0,    0,    0,    0,    0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 2,  // destination GID
  };
  EXPECT_EQ(build_ud_grh(src), expect);
}

}  // namespace
}  // namespace uroce::wire
