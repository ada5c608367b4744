// Writes a pcap of CM MADs built by the codec, each a RoCEv2 UD SEND ONLY to QPN 1 with the GSI
// Q_Key, and has Wireshark's InfiniBand dissector (tshark) read them back: the MAD header and the
// CM fields it knows must come back as written, rdma_cm's IP header in the REQ's private data
// included, with no malformed-packet or expert flags. Wireshark 4.0 names no MRA or SIDR fields,
// so those two are checked for a clean MAD header only. The REQ, REP and SIDR_REP carry ECE (a
// vendor ID in bytes 4.0 counts as reserved, options in the attribute modifier): the fields
// around them must still decode as written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "wire/mad.h"
#include "wire/packet.h"
#include "wire/pcap.h"

namespace uroce::wire {
namespace {

const char* const kFields[] = {
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.mad.baseversion",
    "infiniband.mad.mgmtclass",
    "infiniband.mad.classversion",
    "infiniband.mad.method",
    "infiniband.mad.transactionid",
    "infiniband.mad.attributeid",
    "infiniband.mad.attributemodifier",
    "infiniband.cm.req",
    "infiniband.cm.req.serviceid",
    "infiniband.cm.req.localqpn",
    "infiniband.cm.req.startpsn",
    "infiniband.cm.req.remoteresptout",
    "infiniband.cm.req.localresptout",
    "infiniband.cm.req.maxcmretr",
    "infiniband.cm.req.rnrretrcount",
    "infiniband.cm.req.pppmtu",
    "infiniband.cm.req.prim_flowlabel",
    "infiniband.cm.req.prim_sl",
    "infiniband.cm.req.ip_cm.ipv",
    "infiniband.cm.req.ip_cm.sport",
    "infiniband.cm.req.ip_cm.sip4",
    "infiniband.cm.req.ip_cm.dip4",
    "infiniband.cm.rep",
    "infiniband.cm.rep.remotecommid",
    "infiniband.cm.rep.localqpn",
    "infiniband.cm.rep.startpsn",
    "infiniband.cm.rtu.remotecommid",
    "infiniband.cm.rej.reason",
    "infiniband.cm.rej.msgrej",
    "infiniband.cm.dreq.localcommid",
    "infiniband.cm.req.remoteqpneecn",
    "infiniband.cm.drsp.remotecommid",
    "_ws.expert",
    "_ws.malformed",
};
enum Col {
  kOpcode,
  kDestQp,
  kQkey,
  kSrcQp,
  kBase,
  kClass,
  kClassVersion,
  kMethod,
  kTid,
  kAttr,
  kAttrMod,
  kReqComm,
  kReqService,
  kReqQpn,
  kReqPsn,
  kReqRemoteTimeout,
  kReqLocalTimeout,
  kReqMaxRetries,
  kReqRnr,
  kReqMtu,
  kReqFlowLabel,
  kReqSl,
  kIpVersion,
  kIpSport,
  kIpSrc,
  kIpDst,
  kRepComm,
  kRepRemoteComm,
  kRepQpn,
  kRepPsn,
  kRtuRemoteComm,
  kRejReason,
  kRejMsg,
  kDreqComm,
  kDreqQpn,
  kDrepRemoteComm,
  kExpert,
  kMalformed,
  kCols
};
static_assert(std::size(kFields) == kCols);

uint64_t num(const std::string& s) {
  return std::strtoull(s.c_str(), nullptr, 0);
}

std::vector<CmMessage> messages() {
  CmReq req;
  req.local_comm_id = 0x1a2b3c4d;
  req.service_id = rdma_service_id(RdmaPortSpace::kTcp, 7471);
  req.local_ca_guid = 0x0002c90300a1b2c3;
  req.local_qpn = 0x000123;
  req.responder_resources = 16;
  req.initiator_depth = 16;
  req.remote_cm_response_timeout = 20;
  req.starting_psn = 0xabcdef;
  req.local_cm_response_timeout = 18;
  req.retry_count = 7;
  req.path_mtu = 5;
  req.rnr_retry_count = 6;
  req.max_cm_retries = 15;
  req.primary.local_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  req.primary.remote_gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 2};
  req.primary.flow_label = 0x54321;
  req.primary.sl = 5;
  req.primary.hop_limit = 64;
  req.primary.local_ack_timeout = 14;
  write_cma_header(CmaHeader::ipv4({192, 0, 2, 1}, {192, 0, 2, 2}, 43210), req.private_data);
  CmRep rep;
  rep.local_comm_id = 0x55667788;
  rep.remote_comm_id = req.local_comm_id;
  rep.local_qpn = 0x000456;
  rep.starting_psn = 0x123456;
  rep.local_ca_guid = 0x0002c90300d4e5f6;
  CmRtu rtu;
  rtu.local_comm_id = req.local_comm_id;
  rtu.remote_comm_id = rep.local_comm_id;
  CmRej rej;
  rej.remote_comm_id = req.local_comm_id;
  rej.reason = rej_reason::kInvalidServiceId;
  rej.message_rejected = CmMessageRef::kReq;
  CmDreq dreq;
  dreq.local_comm_id = req.local_comm_id;
  dreq.remote_comm_id = rep.local_comm_id;
  dreq.remote_qpn = rep.local_qpn;
  CmDrep drep;
  drep.local_comm_id = rep.local_comm_id;
  drep.remote_comm_id = req.local_comm_id;
  CmMra mra;
  mra.remote_comm_id = req.local_comm_id;
  mra.service_timeout = 22;
  CmSidrReq sidr_req;
  sidr_req.request_id = 9;
  sidr_req.service_id = rdma_service_id(RdmaPortSpace::kUdp, 7174);
  CmSidrRep sidr_rep;
  sidr_rep.request_id = 9;
  sidr_rep.qpn = 0x789;
  sidr_rep.qkey = 0x01234567;
  sidr_rep.service_id = sidr_req.service_id;
  req.vendor_id = 0x0015b3;
  rep.vendor_id = 0x0015b3;
  sidr_rep.vendor_id = 0x0015b3;
  return {req, rep, rtu, rej, dreq, drep, mra, sidr_req, sidr_rep};
}

// ECE options in the attribute modifier of the messages that carry them (docs/cm.md, "ECE").
uint32_t ece_options(const CmMessage& m) {
  if (std::holds_alternative<CmReq>(m)) return 0x10000007;
  if (std::holds_alternative<CmRep>(m)) return 0x10000005;
  if (std::holds_alternative<CmSidrRep>(m)) return 0x10000003;
  return 0;
}

TEST(WireCmTshark, DecodesCmMadsAsWritten) {
  if (std::system("tshark --version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "tshark not found (Debian package tshark): pcap not decoded";
  const std::string pcap = testing::TempDir() + "wire_cm_" + std::to_string(getpid()) + ".pcap";
  const std::string out = pcap + ".txt";
  SCOPED_TRACE("capture: " + pcap);

  const std::vector<CmMessage> sent = messages();
  PcapWriter w;
  ASSERT_EQ(w.open(pcap), 0);
  for (size_t i = 0; i < sent.size(); ++i) {
    CmMad mad{{}, sent[i]};
    mad.header.transaction_id = 0x0000000100000000ull + i;
    mad.header.attribute_modifier = ece_options(sent[i]);
    const auto bytes = build_cm_mad(mad);
    TransportHeaders h;
    h.bth.opcode = op::kUdSendOnly;
    h.bth.dest_qp = kGsiQpn;
    h.bth.psn = Psn(static_cast<uint32_t>(i));
    h.deth = {kGsiQkey, kGsiQpn};
    IpEndpoints ep;
    ep.src = {192, 0, 2, 1};
    ep.dst = {192, 0, 2, 2};
    std::vector<uint8_t> frame(512);
    Ethernet eth;
    eth.src = {2, 0, 0, 0, 0, 1};
    eth.dst = {2, 0, 0, 0, 0, 2};
    const uint32_t l2 = write_ethernet(eth, frame);
    const uint32_t n = build_ip_packet(ep, h, bytes, std::span(frame).subspan(l2));
    ASSERT_GT(n, 0u);
    frame.resize(l2 + n);
    w.write_frame(frame, 1'700'000'000'000'000'000ull + i * 1000);
  }
  w.close();
  ASSERT_EQ(w.write_errors(), 0u);

  std::string cmd = "tshark -n -r '" + pcap + "' -T fields -E occurrence=f -E separator=/t";
  for (const char* f : kFields) cmd += std::string(" -e ") + f;
  cmd += " >'" + out + "' 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
    cols.resize(kCols);
    rows.push_back(std::move(cols));
  }
  ASSERT_EQ(rows.size(), sent.size());

  for (size_t i = 0; i < sent.size(); ++i) {
    const auto& r = rows[i];
    SCOPED_TRACE(std::string(cm_message_name(sent[i])));
    EXPECT_EQ(r[kExpert], "");
    EXPECT_EQ(r[kMalformed], "");
    EXPECT_EQ(num(r[kOpcode]), op::kUdSendOnly);
    EXPECT_EQ(num(r[kDestQp]), 1u);
    EXPECT_EQ(num(r[kQkey]), kGsiQkey);
    EXPECT_EQ(num(r[kSrcQp]), 1u);
    EXPECT_EQ(num(r[kBase]), 1u);
    EXPECT_EQ(num(r[kClass]), kMgmtClassCm);
    EXPECT_EQ(num(r[kClassVersion]), 2u);
    EXPECT_EQ(num(r[kMethod]), kMadMethodSend);
    EXPECT_EQ(num(r[kTid]), 0x0000000100000000ull + i);
    EXPECT_EQ(num(r[kAttr]), cm_attribute_id(sent[i]));
    EXPECT_EQ(num(r[kAttrMod]), ece_options(sent[i]));
  }
  const auto& req = std::get<CmReq>(sent[0]);
  const auto& r0 = rows[0];
  EXPECT_EQ(num(r0[kReqComm]), req.local_comm_id);
  EXPECT_EQ(num(r0[kReqService]), req.service_id);
  EXPECT_EQ(num(r0[kReqQpn]), req.local_qpn);
  EXPECT_EQ(num(r0[kReqPsn]), req.starting_psn);
  EXPECT_EQ(num(r0[kReqRemoteTimeout]), req.remote_cm_response_timeout);
  EXPECT_EQ(num(r0[kReqLocalTimeout]), req.local_cm_response_timeout);
  EXPECT_EQ(num(r0[kReqMaxRetries]), req.max_cm_retries);
  EXPECT_EQ(num(r0[kReqRnr]), req.rnr_retry_count);
  EXPECT_EQ(num(r0[kReqMtu]), req.path_mtu);
  // Wireshark 4.0 reads only the first 2 bytes of the flow label's word (the top 12 of its 20
  // bits); IBA table 106 and Linux's CM_REQ_PRIMARY_FLOW_LABEL put all 20 at the word's top.
  EXPECT_EQ(num(r0[kReqFlowLabel]), req.primary.flow_label >> 8);
  EXPECT_EQ(num(r0[kReqSl]), req.primary.sl);
  EXPECT_EQ(num(r0[kIpVersion]), 4u);
  EXPECT_EQ(num(r0[kIpSport]), 43210u);
  EXPECT_EQ(r0[kIpSrc], "192.0.2.1");
  EXPECT_EQ(r0[kIpDst], "192.0.2.2");
  const auto& rep = std::get<CmRep>(sent[1]);
  EXPECT_EQ(num(rows[1][kRepComm]), rep.local_comm_id);
  EXPECT_EQ(num(rows[1][kRepRemoteComm]), rep.remote_comm_id);
  EXPECT_EQ(num(rows[1][kRepQpn]), rep.local_qpn);
  EXPECT_EQ(num(rows[1][kRepPsn]), rep.starting_psn);
  EXPECT_EQ(num(rows[2][kRtuRemoteComm]), std::get<CmRtu>(sent[2]).remote_comm_id);
  EXPECT_EQ(num(rows[3][kRejReason]), rej_reason::kInvalidServiceId);
  EXPECT_EQ(num(rows[3][kRejMsg]), 0u);
  EXPECT_EQ(num(rows[4][kDreqComm]), std::get<CmDreq>(sent[4]).local_comm_id);
  EXPECT_EQ(num(rows[4][kDreqQpn]), std::get<CmDreq>(sent[4]).remote_qpn);
  EXPECT_EQ(num(rows[5][kDrepRemoteComm]), std::get<CmDrep>(sent[5]).remote_comm_id);
  if (!HasFailure()) {
    std::remove(pcap.c_str());
    std::remove(out.c_str());
  }
}

}  // namespace
}  // namespace uroce::wire
