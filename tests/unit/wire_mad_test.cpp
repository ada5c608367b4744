// The CM MAD codec against byte vectors derived by hand from IBA vol. 1 tables 106-120 (offsets
// are the message offset plus the 24-byte MAD header), and its error values on bad input.
#include <gtest/gtest.h>

#include <vector>

#include "wire/mad.h"

namespace uroce::wire {
namespace {

std::array<uint8_t, 16> ipv4_mapped_gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

CmReq sample_req() {
  CmReq r;
  r.local_comm_id = 0x11223344;
  r.service_id = rdma_service_id(RdmaPortSpace::kTcp, 18515);
  r.local_ca_guid = 0x0002c90300a1b2c3;
  r.local_qkey = 0;
  r.local_qpn = 0xabcdef;
  r.responder_resources = 16;
  r.local_eecn = 0;
  r.initiator_depth = 4;
  r.remote_eecn = 0;
  r.remote_cm_response_timeout = 20;
  r.transport = CmTransport::kRc;
  r.end_to_end_flow_control = true;
  r.starting_psn = 0x654321;
  r.local_cm_response_timeout = 20;
  r.retry_count = 7;
  r.pkey = 0xffff;
  r.path_mtu = 5;
  r.rnr_retry_count = 7;
  r.max_cm_retries = 15;
  r.srq = true;
  r.primary.local_gid = ipv4_mapped_gid(192, 0, 2, 1);
  r.primary.remote_gid = ipv4_mapped_gid(192, 0, 2, 2);
  r.primary.flow_label = 0x12345;
  r.primary.packet_rate = 0x3f;
  r.primary.traffic_class = 0x68;
  r.primary.hop_limit = 64;
  r.primary.sl = 3;
  r.primary.subnet_local = true;
  r.primary.local_ack_timeout = 18;
  r.sap_supported = true;
  write_cma_header(CmaHeader::ipv4({192, 0, 2, 1}, {192, 0, 2, 2}, 0xc350), r.private_data);
  r.private_data[kCmaHeaderBytes] = 0x5a;  // the application's first byte
  return r;
}

TEST(WireMad, ReqBytesAtTheirOffsets) {
  CmMad mad{{}, sample_req()};
  mad.header.transaction_id = 0x0102030405060708;
  mad.header.attribute_id = cm_attr::kReq;
  const auto b = build_cm_mad(mad);
  const std::vector<uint8_t> header(b.begin(), b.begin() + 24);
  EXPECT_EQ(header, (std::vector<uint8_t>{1, 7, 2, 3, 0,    0,    0, 0, 1, 2, 3, 4,
                                          5, 6, 7, 8, 0x00, 0x10, 0, 0, 0, 0, 0, 0}));
  auto at = [&](size_t off, size_t n) {
    return std::vector<uint8_t>(b.begin() + 24 + static_cast<long>(off),
                                b.begin() + 24 + static_cast<long>(off + n));
  };
  EXPECT_EQ(at(0, 8), (std::vector<uint8_t>{0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0}));
  // 0x0000000001 | port space TCP 0x06 | port 18515 = 0x4853
  EXPECT_EQ(at(8, 8), (std::vector<uint8_t>{0, 0, 0, 0, 0x01, 0x06, 0x48, 0x53}));
  EXPECT_EQ(at(16, 8), (std::vector<uint8_t>{0x00, 0x02, 0xc9, 0x03, 0x00, 0xa1, 0xb2, 0xc3}));
  EXPECT_EQ(at(32, 4), (std::vector<uint8_t>{0xab, 0xcd, 0xef, 16}));  // QPN, responder res.
  EXPECT_EQ(at(39, 1), (std::vector<uint8_t>{4}));                     // initiator depth
  // 43: remote CM timeout 20 = 10100, transport RC 00, E2E 1 -> 1010 0001
  EXPECT_EQ(at(43, 1), (std::vector<uint8_t>{0xa1}));
  EXPECT_EQ(at(44, 3), (std::vector<uint8_t>{0x65, 0x43, 0x21}));
  // 47: local CM timeout 20 = 10100, retry count 7 = 111 -> 1010 0111
  EXPECT_EQ(at(47, 1), (std::vector<uint8_t>{0xa7}));
  EXPECT_EQ(at(48, 2), (std::vector<uint8_t>{0xff, 0xff}));
  // 50: MTU 5 = 0101, RDC 0, RNR retry 7 = 111 -> 0101 0111
  EXPECT_EQ(at(50, 1), (std::vector<uint8_t>{0x57}));
  // 51: max CM retries 15 = 1111, SRQ 1, extended transport 000 -> 1111 1000
  EXPECT_EQ(at(51, 1), (std::vector<uint8_t>{0xf8}));
  EXPECT_EQ(at(52, 4), (std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(at(56 + 10, 6), (std::vector<uint8_t>{0xff, 0xff, 192, 0, 2, 1}));
  EXPECT_EQ(at(72 + 10, 6), (std::vector<uint8_t>{0xff, 0xff, 192, 0, 2, 2}));
  // 88: flow label 0x12345 in the top 20 bits, packet rate 0x3f in the low 6 of byte 91
  EXPECT_EQ(at(88, 4), (std::vector<uint8_t>{0x12, 0x34, 0x50, 0x3f}));
  EXPECT_EQ(at(92, 2), (std::vector<uint8_t>{0x68, 64}));
  // 94: SL 3 = 0011, subnet local 1 -> 0011 1000; 95: ACK timeout 18 = 10010 -> 1001 0000
  EXPECT_EQ(at(94, 2), (std::vector<uint8_t>{0x38, 0x90}));
  // 139: alternate ACK timeout 0, SAP supported at bit 5 -> 0000 0100
  EXPECT_EQ(at(139, 1), (std::vector<uint8_t>{0x04}));
  // 140: the rdma_cm header: version 0, IP version 4 in the upper nibble, port 0xc350, then the
  // addresses in the last 4 of 16 bytes each.
  EXPECT_EQ(at(140, 4), (std::vector<uint8_t>{0x00, 0x40, 0xc3, 0x50}));
  EXPECT_EQ(at(144, 16), (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 192, 0, 2, 1}));
  EXPECT_EQ(at(160, 16), (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 192, 0, 2, 2}));
  EXPECT_EQ(at(176, 1), (std::vector<uint8_t>{0x5a}));

  auto parsed = parse_cm_mad(b);
  ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
  EXPECT_EQ(parsed->header.attribute_id, cm_attr::kReq);
  EXPECT_EQ(*parsed, mad);
  auto cma = parse_cma_header(std::get<CmReq>(parsed->message).private_data);
  ASSERT_TRUE(cma.ok());
  EXPECT_EQ(cma->src_ipv4(), (std::array<uint8_t, 4>{192, 0, 2, 1}));
  EXPECT_EQ(cma->dst_ipv4(), (std::array<uint8_t, 4>{192, 0, 2, 2}));
  EXPECT_EQ(cma->src_port, 0xc350);
}

TEST(WireMad, RejMraRepSidrBits) {
  CmRej rej;
  rej.local_comm_id = 7;
  rej.remote_comm_id = 9;
  rej.message_rejected = CmMessageRef::kRep;
  rej.reject_info_length = 5;
  rej.reason = rej_reason::kConsumerDefined;
  rej.ari[0] = 0xaa;
  rej.private_data[0] = 0xbb;
  auto b = build_cm_mad({{}, rej});
  EXPECT_EQ(b[16], 0x00);
  EXPECT_EQ(b[17], 0x12);
  EXPECT_EQ(b[24 + 8], 0x40);   // REP = 01 in the top 2 bits
  EXPECT_EQ(b[24 + 9], 0x0a);   // 5 in the top 7 bits
  EXPECT_EQ(b[24 + 10], 0x00);  // reason 28
  EXPECT_EQ(b[24 + 11], 0x1c);
  EXPECT_EQ(b[24 + 12], 0xaa);  // ARI
  EXPECT_EQ(b[24 + 84], 0xbb);  // private data
  EXPECT_EQ(std::get<CmRej>(parse_cm_mad(b)->message), rej);

  CmMra mra;
  mra.message_mraed = CmMessageRef::kRep;
  mra.service_timeout = 23;
  b = build_cm_mad({{}, mra});
  EXPECT_EQ(b[17], 0x11);
  EXPECT_EQ(b[24 + 8], 0x40);
  EXPECT_EQ(b[24 + 9], 0xb8);  // 10111 000
  EXPECT_EQ(std::get<CmMra>(parse_cm_mad(b)->message), mra);

  CmRep rep;
  rep.local_qpn = 0x000123;
  rep.starting_psn = 0xfedcba;
  rep.target_ack_delay = 15;
  rep.end_to_end_flow_control = true;
  rep.rnr_retry_count = 7;
  rep.srq = true;
  rep.local_ca_guid = 0x1122334455667788;
  b = build_cm_mad({{}, rep});
  EXPECT_EQ(b[17], 0x13);
  EXPECT_EQ(b[24 + 12], 0x00);
  EXPECT_EQ(b[24 + 14], 0x23);
  EXPECT_EQ(b[24 + 20], 0xfe);
  EXPECT_EQ(b[24 + 26], 0x79);  // 01111 00 1
  EXPECT_EQ(b[24 + 27], 0xf0);  // 111 1 0000
  EXPECT_EQ(b[24 + 28], 0x11);
  EXPECT_EQ(b[24 + 35], 0x88);
  EXPECT_EQ(std::get<CmRep>(parse_cm_mad(b)->message), rep);

  CmDreq dreq;
  dreq.remote_qpn = 0x345678;
  b = build_cm_mad({{}, dreq});
  EXPECT_EQ(b[17], 0x15);
  EXPECT_EQ(b[24 + 8], 0x34);
  EXPECT_EQ(b[24 + 10], 0x78);
  EXPECT_EQ(b[24 + 11], 0x00);

  CmSidrRep sidr;
  sidr.request_id = 0xdeadbeef;
  sidr.status = sidr_status::kServiceIdNotSupported;
  sidr.qpn = 0x00abcd;
  sidr.service_id = rdma_service_id(RdmaPortSpace::kUdp, 7174);
  sidr.qkey = 0x01234567;
  b = build_cm_mad({{}, sidr});
  EXPECT_EQ(b[17], 0x18);
  EXPECT_EQ(b[24 + 4], 1);
  EXPECT_EQ(b[24 + 9], 0xab);
  EXPECT_EQ(b[24 + 10], 0xcd);
  EXPECT_EQ(b[24 + 16], 0x01);  // service ID from 12: 00 00 00 00 01 11 1c 06
  EXPECT_EQ(b[24 + 17], 0x11);
  EXPECT_EQ(b[24 + 18], 0x1c);
  EXPECT_EQ(b[24 + 19], 0x06);
  EXPECT_EQ(b[24 + 20], 0x01);
  EXPECT_EQ(b[24 + 23], 0x67);
  EXPECT_EQ(std::get<CmSidrRep>(parse_cm_mad(b)->message), sidr);

  CmSidrReq sreq;
  sreq.request_id = 3;
  sreq.pkey = 0x8001;
  sreq.service_id = sidr.service_id;
  b = build_cm_mad({{}, sreq});
  EXPECT_EQ(b[17], 0x17);
  EXPECT_EQ(b[24 + 4], 0x80);
  EXPECT_EQ(b[24 + 5], 0x01);
  EXPECT_EQ(b[24 + 13], 0x11);
  EXPECT_EQ(std::get<CmSidrReq>(parse_cm_mad(b)->message), sreq);
}

// ECE (Enhanced Connection Establishment, IBA comment 9434) where Linux's CM puts it
// (include/rdma/ibta_vol1_c12.h): the options in the MAD header's attribute modifier, the 24-bit
// vendor ID in the REQ's bytes 5..7, split over the REP's bytes 15, 19 and 23 (after the QPN, the
// EECN and the PSN), and in the SIDR_REP's bytes 6..7 (upper 16 bits) and 11 (low 8).
TEST(WireMad, EceVendorIdAndOptions) {
  CmMad req{{}, sample_req()};
  std::get<CmReq>(req.message).vendor_id = 0x0015b3;  // Mellanox's vendor ID
  req.header.attribute_id = cm_attr::kReq;            // as the parser reports it
  req.header.attribute_modifier = 0x10000001;
  auto b = build_cm_mad(req);
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 20, b.begin() + 24),
            (std::vector<uint8_t>{0x10, 0x00, 0x00, 0x01}));
  // Bytes 4..7: the reserved byte 4, then the vendor ID; the comm ID before them is intact.
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 24, b.begin() + 32),
            (std::vector<uint8_t>{0x11, 0x22, 0x33, 0x44, 0x00, 0x00, 0x15, 0xb3}));
  auto parsed = parse_cm_mad(b);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, req);
  EXPECT_EQ(std::get<CmReq>(parsed->message).vendor_id, 0x0015b3u);
  EXPECT_EQ(parsed->header.attribute_modifier, 0x10000001u);

  CmRep rep;
  rep.local_qpn = 0xabcdef;
  rep.local_eecn = 0x123456;
  rep.starting_psn = 0xfedcba;
  rep.vendor_id = 0xa1b2c3;
  CmMad rep_mad{{}, rep};
  rep_mad.header.attribute_id = cm_attr::kRep;
  rep_mad.header.attribute_modifier = 0x20000003;
  b = build_cm_mad(rep_mad);
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 20, b.begin() + 24),
            (std::vector<uint8_t>{0x20, 0x00, 0x00, 0x03}));
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 24 + 12, b.begin() + 24 + 24),
            (std::vector<uint8_t>{0xab, 0xcd, 0xef, 0xa1, 0x12, 0x34, 0x56, 0xb2, 0xfe, 0xdc, 0xba,
                                  0xc3}));
  parsed = parse_cm_mad(b);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, rep_mad);

  CmSidrRep sidr;
  sidr.status = sidr_status::kValid;
  sidr.info_length = 0;
  sidr.qpn = 0x00abcd;
  sidr.vendor_id = 0x0015b3;
  b = build_cm_mad({{}, sidr});
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 24 + 4, b.begin() + 24 + 12),
            (std::vector<uint8_t>{0x00, 0x00, 0x00, 0x15, 0x00, 0xab, 0xcd, 0xb3}));
  EXPECT_EQ(std::get<CmSidrRep>(parse_cm_mad(b)->message), sidr);

  // Without ECE every one of those bytes is zero, as a CM that predates it sends them.
  CmReq plain = sample_req();
  b = build_cm_mad({{}, plain});
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 20, b.begin() + 24), (std::vector<uint8_t>(4, 0)));
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 28, b.begin() + 32), (std::vector<uint8_t>(4, 0)));
}

// Every message rebuilt from its parse gives the same bytes, private data included.
TEST(WireMad, EveryMessageRoundTrips) {
  std::vector<CmMessage> all = {sample_req(), CmMra{},  CmRej{},     CmRep{},    CmRtu{},
                                CmDreq{},     CmDrep{}, CmSidrReq{}, CmSidrRep{}};
  for (size_t i = 0; i < all.size(); ++i) {
    std::visit(
        [i](auto& m) {
          for (size_t k = 0; k < m.private_data.size(); ++k)
            m.private_data[k] = static_cast<uint8_t>(k * 7 + i);
        },
        all[i]);
    CmMad mad{{}, all[i]};
    mad.header.transaction_id = i;
    mad.header.attribute_modifier = 0x01000000u * static_cast<uint32_t>(i);
    mad.header.attribute_id = cm_attribute_id(all[i]);
    const auto b = build_cm_mad(mad);
    auto p = parse_cm_mad(b);
    ASSERT_TRUE(p.ok()) << cm_message_name(all[i]);
    EXPECT_EQ(*p, mad) << cm_message_name(all[i]);
    EXPECT_EQ(build_cm_mad(*p), b);
  }
}

TEST(WireMad, BadInputGivesErrorValues) {
  const auto good = build_cm_mad({{}, CmRtu{}});
  ASSERT_TRUE(parse_cm_mad(good).ok());
  auto with = [&](size_t at, uint8_t v) {
    auto b = good;
    b[at] = v;
    auto r = parse_cm_mad(b);
    return r.ok() ? std::optional<MadError>{} : std::optional<MadError>{r.error()};
  };
  EXPECT_EQ(parse_cm_mad(std::span(good).first(255)).error(), MadError::kBadLength);
  std::vector<uint8_t> longer(good.begin(), good.end());
  longer.push_back(0);
  EXPECT_EQ(parse_cm_mad(longer).error(), MadError::kBadLength);
  EXPECT_EQ(parse_cm_mad({}).error(), MadError::kBadLength);
  EXPECT_EQ(with(0, 2), MadError::kBadBaseVersion);
  EXPECT_EQ(with(1, 0x04), MadError::kNotCm);  // performance management
  EXPECT_EQ(with(2, 1), MadError::kBadClassVersion);
  EXPECT_EQ(with(3, 0x01), MadError::kBadMethod);              // Get
  EXPECT_EQ(with(3, 0x83), MadError::kBadMethod);              // Send with the response bit
  EXPECT_EQ(with(17, 0x19), MadError::kUnsupportedAttribute);  // LAP
  EXPECT_EQ(with(17, 0x01), MadError::kUnsupportedAttribute);  // ClassPortInfo
  EXPECT_EQ(with(16, 0xff), MadError::kUnsupportedAttribute);

  auto rej = build_cm_mad({{}, CmRej{}});
  rej[24 + 9] = 73 << 1;
  EXPECT_EQ(parse_cm_mad(rej).error(), MadError::kBadField);
  rej[24 + 9] = 72 << 1;
  EXPECT_TRUE(parse_cm_mad(rej).ok());
  auto sidr = build_cm_mad({{}, CmSidrRep{}});
  sidr[24 + 5] = 73;
  EXPECT_EQ(parse_cm_mad(sidr).error(), MadError::kBadField);
}

TEST(WireMad, RdmaCmHeaderAndServiceId) {
  std::array<uint8_t, kCmaHeaderBytes> h{};
  CmaHeader v6;
  v6.ip_version = 6;
  v6.src_port = 1;
  v6.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  v6.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  write_cma_header(v6, h);
  EXPECT_EQ(h[1], 0x60);
  EXPECT_EQ(h[4], 0xfd);
  EXPECT_EQ(h[35], 2);
  EXPECT_EQ(*parse_cma_header(h), v6);
  EXPECT_EQ(parse_cma_header(std::span(h).first(35)).error(), MadError::kTruncated);
  h[0] = 1;
  EXPECT_EQ(parse_cma_header(h).error(), MadError::kBadCmaVersion);
  h[0] = 0;
  h[1] = 0x50;
  EXPECT_EQ(parse_cma_header(h).error(), MadError::kBadIpVersion);
  // An IPv4 address behind ::ffff: is read from the same last 4 bytes.
  h[1] = 0x40;
  h[14] = h[15] = 0xff;
  h[16] = 10, h[17] = 0, h[18] = 0, h[19] = 1;
  EXPECT_EQ(parse_cma_header(h)->src_ipv4(), (std::array<uint8_t, 4>{10, 0, 0, 1}));

  EXPECT_EQ(rdma_service_id(RdmaPortSpace::kTcp, 0x1234), 0x0000000001061234ull);
  EXPECT_EQ(rdma_service_id(RdmaPortSpace::kUdp, 0x1234), 0x0000000001111234ull);
  EXPECT_EQ(rdma_service_id(RdmaPortSpace::kIb, 0x1234), 0x00000000013f1234ull);
  EXPECT_EQ(rdma_service_id(RdmaPortSpace::kIpoib, 0x1234), 0x0000000001021234ull);
  auto sid = parse_rdma_service_id(0x0000000001110050ull);
  ASSERT_TRUE(sid.ok());
  EXPECT_EQ(sid->port_space, RdmaPortSpace::kUdp);
  EXPECT_EQ(sid->port, 0x50);
  EXPECT_EQ(parse_rdma_service_id(0x0000000001070050ull).error(), MadError::kNotRdmaServiceId);
  EXPECT_EQ(parse_rdma_service_id(0x1000000001060050ull).error(), MadError::kNotRdmaServiceId);
}

}  // namespace
}  // namespace uroce::wire
