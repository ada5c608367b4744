// XRC on the wire (IBA annex A14): the opcodes of transport 0b101 and the XRCETH, byte for byte.
#include <gtest/gtest.h>

#include <vector>

#include "wire/packet.h"

namespace uroce::wire {
namespace {

std::vector<uint8_t> headers_of(const TransportHeaders& h) {
  std::vector<uint8_t> out(kMaxTransportHeaderBytes, 0xee);
  out.resize(write_transport_headers(h, out));
  return out;
}

TransportHeaders xrc_request(uint8_t opcode) {
  TransportHeaders h;
  h.bth.opcode = opcode;
  h.bth.dest_qp = 0x000012;
  h.bth.ack_req = true;
  h.bth.psn = Psn(5);
  h.xrc_srqn = 0x00abcd;
  return h;
}

TEST(WireXrc, SendOnlyCarriesXrcethAfterBth) {
  const TransportHeaders h = xrc_request(op::kXrcBase | op::kRcSendOnly);
  const std::vector<uint8_t> expected = {
      0xa4, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x80, 0x00, 0x00, 0x05,  // BTH
      0x00, 0x00, 0xab, 0xcd,                                                  // XRCETH
  };
  EXPECT_EQ(headers_of(h), expected);
  EXPECT_EQ(opcode_info(0xa4).name, "XRC_SEND_ONLY");
  EXPECT_EQ(opcode_info(0xa4).service, Service::kXrc);
}

TEST(WireXrc, WriteOnlyImmOrdersXrcethRethImmDt) {
  TransportHeaders h = xrc_request(op::kXrcBase | op::kRcWriteOnlyImm);
  h.reth = {0x0102030405060708, 0x11223344, 0x100};
  h.imm = 0xcafebabe;
  const std::vector<uint8_t> expected = {
      0xab, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x12, 0x80, 0x00, 0x00, 0x05,  // BTH
      0x00, 0x00, 0xab, 0xcd,                                                  // XRCETH
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,                          // RETH VA
      0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x01, 0x00,                          // R_Key, length
      0xca, 0xfe, 0xba, 0xbe,                                                  // ImmDt
  };
  EXPECT_EQ(headers_of(h), expected);
}

TEST(WireXrc, FetchAddCarriesXrcethThenAtomicEth) {
  TransportHeaders h = xrc_request(op::kXrcBase | op::kRcFetchAdd);
  h.atomic = {0x1000, 0x77, 3, 0};
  const std::vector<uint8_t> bytes = headers_of(h);
  ASSERT_EQ(bytes.size(), 12u + 4 + 28);
  EXPECT_EQ(bytes[0], 0xb4);
  EXPECT_EQ(bytes[15], 0xcd);
  EXPECT_EQ(bytes[16 + 6], 0x10);  // AtomicETH VA 0x1000 right after the XRCETH
  EXPECT_EQ(bytes[16 + 11], 0x77);
}

TEST(WireXrc, ResponsesCarryNoXrceth) {
  TransportHeaders h;
  h.bth.opcode = op::kXrcBase | op::kRcAck;
  h.bth.psn = Psn(9);
  h.aeth = Aeth::nak(3, NakCode::kRemoteAccessError);
  h.xrc_srqn = 0xabcd;  // ignored: ACKs have no XRCETH
  const std::vector<uint8_t> expected = {
      0xb1, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09,  // BTH
      0x62, 0x00, 0x00, 0x03,                                                  // AETH
  };
  EXPECT_EQ(headers_of(h), expected);
  EXPECT_EQ(opcode_info(0xb1).name, "XRC_ACKNOWLEDGE");
  EXPECT_FALSE(opcode_info(op::kXrcBase | op::kRcReadResponseFirst).has(kXrcEth));
  EXPECT_FALSE(opcode_info(op::kXrcBase | op::kRcAtomicAck).has(kXrcEth));
  EXPECT_FALSE(opcode_info(0xb5).valid());  // 0x15 is reserved in RC, so 0xb5 is in XRC
}

TEST(WireXrc, ParseReadsTheSrqNumberAndIgnoresTheReservedByte) {
  std::vector<uint8_t> bytes = headers_of(xrc_request(op::kXrcBase | op::kRcSendOnly));
  bytes[12] = 0xff;  // reserved: a receiver ignores it
  bytes.insert(bytes.end(), {1, 2, 3, 4});
  auto p = parse_transport(bytes);
  ASSERT_TRUE(p.ok()) << to_string(p.error());
  EXPECT_EQ(p->hdr.xrc_srqn, 0x00abcdu);
  EXPECT_EQ(p->payload.size(), 4u);
  EXPECT_EQ(p->payload[0], 1);
}

TEST(WireXrc, TruncatedXrcethIsRejected) {
  std::vector<uint8_t> bytes = headers_of(xrc_request(op::kXrcBase | op::kRcReadRequest));
  ASSERT_EQ(bytes.size(), 12u + 4 + 16);
  bytes.resize(12 + 4 + 8);
  auto p = parse_transport(bytes);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(), ParseError::kTruncated);
}

}  // namespace
}  // namespace uroce::wire
