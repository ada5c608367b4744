// Writes a pcap of packets the codec built (one per opcode in the table, IPv4 and IPv6, with and
// without 802.1Q, every pad count) and has Wireshark's dissector (tshark) read it back: every
// field must come back as written, with no malformed-packet or expert flags. This checks the
// codec against an independent implementation, and the pcap writer against a real reader.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "wire/packet.h"
#include "wire/pcap.h"

namespace uroce::wire {
namespace {

// The fields asked of tshark, in order; the test reads its output by these positions.
const char* const kFields[] = {
    "frame.time_epoch",
    "udp.dstport",
    "infiniband.bth.opcode",
    "infiniband.bth.se",
    "infiniband.bth.m",
    "infiniband.bth.padcnt",
    "infiniband.bth.tver",
    "infiniband.bth.p_key",
    "infiniband.bth.destqp",
    "infiniband.bth.a",
    "infiniband.bth.psn",
    "infiniband.bth",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt",
    "infiniband.atomicacketh.origremdt",
    "infiniband.immdt",
    "infiniband.ieth",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.invariant.crc",
    "infiniband.vendor",
    "data.data",
    "vlan.id",
    "vlan.priority",
    "ip.dsfield.ecn",
    "ipv6.tclass.ecn",
    "_ws.expert",
    "_ws.malformed",
};
enum Col {
  kColTime,
  kColDstPort,
  kColOpcode,
  kColSe,
  kColMigReq,
  kColPad,
  kColTver,
  kColPkey,
  kColDestQp,
  kColAckReq,
  kColPsn,
  kColBthBytes,
  kColRethVa,
  kColRethRkey,
  kColRethLen,
  kColAethSyndrome,
  kColAethMsn,
  kColSwap,
  kColCompare,
  kColOrig,
  kColImm,
  kColIeth,
  kColQkey,
  kColSrcQp,
  kColIcrc,
  kColVendor,
  kColData,
  kColVlanId,
  kColVlanPrio,
  kColEcn4,
  kColEcn6,
  kColExpert,
  kColMalformed,
  kColCols
};
static_assert(std::size(kFields) == kColCols);

// Heuristic payload dissectors that would take test payloads for their own protocols and then
// call them malformed; uroce's payloads are opaque bytes.
const char* const kNoHeuristics[] = {
    "rpcordma", "smb_direct", "iser",           "nvme-rdma",       "smc",
    "lnet",     "fcoib",      "infiniband_sdp", "infiniband.eoib", "drbd"};

bool have_tshark() {
  return std::system("tshark --version >/dev/null 2>&1") == 0;
}

// The protocols tshark knows, by filter name: naming an unknown one to --disable-protocol makes
// tshark print nothing, and the set differs between Wireshark versions.
std::set<std::string> tshark_protocols() {
  std::set<std::string> names;
  std::FILE* f = popen("tshark -G protocols 2>/dev/null", "r");
  if (!f) return names;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    std::string s(line);
    const auto last_tab = s.rfind('\t');
    if (last_tab == std::string::npos) continue;
    s = s.substr(last_tab + 1);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    names.insert(s);
  }
  pclose(f);
  return names;
}

uint64_t num(const std::string& s) {
  return std::strtoull(s.c_str(), nullptr, 0);
}
std::string hex(std::span<const uint8_t> b) {
  std::string s;
  char buf[3];
  for (uint8_t x : b) {
    std::snprintf(buf, sizeof buf, "%02x", x);
    s += buf;
  }
  return s;
}

struct Sent {
  TransportHeaders hdr;
  std::vector<uint8_t> payload;
  bool v6 = false;
  std::optional<uint16_t> vlan;
  Ecn ecn = Ecn::kEct0;
  uint64_t time_ns = 0;
  uint32_t icrc = 0;
};

// Field values that differ from packet to packet and use every bit width.
Sent make(int i, uint8_t opcode) {
  Sent s;
  TransportHeaders& h = s.hdr;
  h.bth.opcode = opcode;
  h.bth.solicited = i & 1;
  h.bth.mig_req = i & 2;
  h.bth.ack_req = i & 4;
  h.bth.pkey = static_cast<uint16_t>(i % 3 ? 0xffff : 0x8000 | i);
  h.bth.dest_qp = static_cast<uint32_t>(0x10000 * i + 0x123) & 0xffffff;
  h.bth.psn = Psn(0xfffff0) + i;  // crosses the 24-bit wrap
  if (opcode == op::kCnp) h = cnp_headers(h.bth.dest_qp);
  h.reth = {0x0000100000000000ull * static_cast<uint64_t>(i) + 0x1234,
            0xa0000000u | static_cast<uint32_t>(i), 4096u * static_cast<uint32_t>(i)};
  switch (i % 3) {
    case 0:
      h.aeth = Aeth::ack(static_cast<uint32_t>(i) * 1000);
      break;
    case 1:
      h.aeth = Aeth::rnr_nak(static_cast<uint32_t>(i), static_cast<uint8_t>(i % 32));
      break;
    default:
      h.aeth = Aeth::nak(0xfffff0u + static_cast<uint32_t>(i), NakCode::kInvalidRequest);
  }
  h.atomic = {0x7f0000001000ull + 8u * static_cast<uint64_t>(i), 0x51u + static_cast<uint32_t>(i),
              0x0102030405060708ull * static_cast<uint64_t>(i), ~static_cast<uint64_t>(i)};
  h.atomic_ack.original = 0xfeedfacecafe0000ull | static_cast<uint64_t>(i);
  h.imm = 0xa5000000u | static_cast<uint32_t>(i);
  h.ieth_rkey = 0x5e000000u | static_cast<uint32_t>(i);
  h.deth = {0x80010000u + static_cast<uint32_t>(i), static_cast<uint32_t>(0xabc00 + i)};
  h.xrc_srqn = 0x5c0000u | static_cast<uint32_t>(i);
  if (opcode_info(opcode).payload) {
    s.payload.resize(static_cast<size_t>(i % 8 + (i % 3 == 0 ? 64 : 0)));
    for (size_t k = 0; k < s.payload.size(); ++k) s.payload[k] = static_cast<uint8_t>(i + 3 * k);
  }
  s.v6 = i % 2;
  if (i % 3 == 1) s.vlan = static_cast<uint16_t>((i % 8) << 13 | (100 + i));
  s.ecn = static_cast<Ecn>(i % 4);
  s.time_ns = 1'000'000'000ull * (1700000000ull + static_cast<uint64_t>(i)) + 7ull * i;
  return s;
}

TEST(WireTshark, DecodesEveryOpcodeAsWritten) {
  if (!have_tshark()) GTEST_SKIP() << "tshark not found (Debian package tshark): pcap not decoded";
  // Kept when the test fails, for a look with Wireshark.
  const std::string pcap = testing::TempDir() + "wire_tshark_" + std::to_string(getpid()) + ".pcap";
  const std::string out = pcap + ".txt";
  SCOPED_TRACE("capture: " + pcap);

  std::vector<Sent> sent;
  PcapWriter w;
  ASSERT_EQ(w.open(pcap), 0);
  for (int code = 0; code < 256; ++code) {
    if (!opcode_info(static_cast<uint8_t>(code)).valid()) continue;
    Sent s = make(static_cast<int>(sent.size()), static_cast<uint8_t>(code));
    IpEndpoints ep;
    ep.ipv6 = s.v6;
    ep.src = s.v6 ? std::array<uint8_t, 16>{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
                  : std::array<uint8_t, 16>{192, 0, 2, 1};
    ep.dst = s.v6 ? std::array<uint8_t, 16>{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
                  : std::array<uint8_t, 16>{192, 0, 2, 2};
    ep.ecn = s.ecn;
    std::vector<uint8_t> frame(256);
    Ethernet eth;
    eth.src = {2, 0, 0, 0, 0, 1};
    eth.dst = {2, 0, 0, 0, 0, 2};
    eth.vlan_tci = s.vlan;
    eth.ethertype = s.v6 ? kEthertypeIpv6 : kEthertypeIpv4;
    const uint32_t l2 = write_ethernet(eth, frame);
    const uint32_t n = build_ip_packet(ep, s.hdr, s.payload, std::span(frame).subspan(l2));
    ASSERT_EQ(n, (s.v6 ? kIpv6Bytes : kIpv4Bytes) + kUdpBytes +
                     opcode_info(s.hdr.bth.opcode).header_bytes + s.payload.size() +
                     pad_for(static_cast<uint32_t>(s.payload.size())) + kIcrcBytes);
    frame.resize(l2 + n);
    s.icrc = load_icrc(&frame[frame.size() - kIcrcBytes]);
    if (sent.size() % 5 == 4 && !s.vlan) {
      w.write_ip_packet(std::span(frame).subspan(l2), s.time_ns);  // synthetic zero MACs
    } else {
      w.write_frame(frame, s.time_ns);
    }
    sent.push_back(std::move(s));
  }
  w.close();
  ASSERT_EQ(w.write_errors(), 0u);

  std::string cmd = "tshark -n -r '" + pcap + "' -T fields -E occurrence=f -E separator=/t";
  const std::set<std::string> known = tshark_protocols();
  for (const char* p : kNoHeuristics)
    if (known.count(p)) cmd += std::string(" --disable-protocol ") + p;
  for (const char* f : kFields) cmd += std::string(" -e ") + f;
  cmd += " >'" + out + "' 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::ifstream in(out);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
    cols.resize(kColCols);
    rows.push_back(std::move(cols));
  }
  ASSERT_EQ(rows.size(), sent.size());

  int icrc_shown = 0;
  for (size_t i = 0; i < sent.size(); ++i) {
    const Sent& s = sent[i];
    const auto& r = rows[i];
    const TransportHeaders& h = s.hdr;
    const OpcodeInfo& info = opcode_info(h.bth.opcode);
    SCOPED_TRACE(testing::Message() << "frame " << i + 1 << " " << info.name);
    EXPECT_EQ(r[kColExpert], "");
    EXPECT_EQ(r[kColMalformed], "");
    char t[40];
    std::snprintf(t, sizeof t, "%" PRIu64 ".%09" PRIu64, s.time_ns / 1000000000,
                  s.time_ns % 1000000000);
    EXPECT_EQ(r[kColTime], t);
    EXPECT_EQ(num(r[kColDstPort]), kRoceV2Port);
    EXPECT_EQ(num(r[s.v6 ? kColEcn6 : kColEcn4]), static_cast<uint64_t>(s.ecn));
    EXPECT_EQ(r[kColVlanId].empty(), !s.vlan);
    if (s.vlan) {
      EXPECT_EQ(num(r[kColVlanId]), *s.vlan & 0xfffu);
      EXPECT_EQ(num(r[kColVlanPrio]), *s.vlan >> 13u);
    }
    EXPECT_EQ(num(r[kColOpcode]), h.bth.opcode);
    EXPECT_EQ(num(r[kColDestQp]), h.bth.dest_qp);
    EXPECT_EQ(num(r[kColPsn]), h.bth.psn.value());
    EXPECT_EQ(num(r[kColPkey]), h.bth.pkey);
    // The BTH bytes as tshark delimits them: FECN/BECN in byte 4 (Wireshark 4.0 does not name
    // those bits, so the raw byte is compared).
    std::array<uint8_t, kMaxTransportHeaderBytes> bth{};
    TransportHeaders hp = h;
    hp.bth.pad_count = info.payload ? pad_for(static_cast<uint32_t>(s.payload.size())) : 0;
    write_transport_headers(hp, bth);
    EXPECT_EQ(r[kColBthBytes], hex(std::span(bth).first(kBthBytes)));
    if (h.bth.opcode == op::kCnp) continue;  // Wireshark 4.0 knows no more of a CNP
    if (info.service == Service::kXrc) {
      // Wireshark 4.0 names the XRC opcodes but decodes nothing after the BTH: it shows the next
      // 4 bytes as unknown data (first occurrence), which must be the XRCETH on a request (the
      // SRQ number in its low 24 bits) and the AETH on a response.
      std::array<uint8_t, kMaxTransportHeaderBytes> hdr{};
      const uint32_t n = write_transport_headers(hp, hdr);
      std::vector<uint8_t> after_bth(hdr.begin() + kBthBytes, hdr.begin() + n);
      after_bth.insert(after_bth.end(), s.payload.begin(), s.payload.end());
      if (after_bth.size() >= 4) {
        EXPECT_EQ(r[kColVendor], hex(std::span(after_bth).first(4)));
      }
      if (info.has(kXrcEth)) {
        EXPECT_EQ(num("0x" + r[kColVendor]) & 0xffffff, h.xrc_srqn);
      }
      continue;
    }
    EXPECT_EQ(num(r[kColSe]), h.bth.solicited);
    EXPECT_EQ(num(r[kColMigReq]), h.bth.mig_req);
    EXPECT_EQ(num(r[kColAckReq]), h.bth.ack_req);
    EXPECT_EQ(num(r[kColTver]), 0u);
    EXPECT_EQ(num(r[kColPad]), hp.bth.pad_count);
    // AtomicETH's VA and R_Key are shown with RETH's field names.
    EXPECT_EQ(r[kColRethVa].empty(), !info.has(kReth) && !info.has(kAtomicEth));
    if (info.has(kReth)) {
      EXPECT_EQ(num(r[kColRethVa]), h.reth.va);
      EXPECT_EQ(num(r[kColRethRkey]), h.reth.rkey);
      EXPECT_EQ(num(r[kColRethLen]), h.reth.dma_length);
    }
    if (info.has(kAtomicEth)) {
      EXPECT_EQ(num(r[kColRethVa]), h.atomic.va);
      EXPECT_EQ(num(r[kColRethRkey]), h.atomic.rkey);
      EXPECT_EQ(num(r[kColSwap]), h.atomic.swap_add);
      EXPECT_EQ(num(r[kColCompare]), h.atomic.compare);
    }
    EXPECT_EQ(r[kColAethSyndrome].empty(), !info.has(kAeth));
    if (info.has(kAeth)) {
      EXPECT_EQ(num(r[kColAethSyndrome]), h.aeth.syndrome);
      EXPECT_EQ(num(r[kColAethMsn]), h.aeth.msn);
    }
    EXPECT_EQ(r[kColOrig].empty(), !info.has(kAtomicAckEth));
    if (info.has(kAtomicAckEth)) {
      EXPECT_EQ(num(r[kColOrig]), h.atomic_ack.original);
    }
    EXPECT_EQ(r[kColImm].empty(), !info.has(kImmDt));
    if (info.has(kImmDt)) {
      EXPECT_EQ(std::strtoull(r[kColImm].c_str(), nullptr, 16), h.imm);
    }
    EXPECT_EQ(r[kColIeth].empty(), !info.has(kIeth));
    if (info.has(kIeth)) {
      EXPECT_EQ(std::strtoull(r[kColIeth].c_str(), nullptr, 16), h.ieth_rkey);
    }
    EXPECT_EQ(r[kColQkey].empty(), !info.has(kDeth));
    if (info.has(kDeth)) {
      EXPECT_EQ(num(r[kColQkey]), h.deth.qkey);
      EXPECT_EQ(num(r[kColSrcQp]), h.deth.src_qp);
    }
    // Wireshark 4.0 stops after the IMMDT of a UD SEND with immediate, so it shows no payload
    // or ICRC there; everywhere else both must be what was written. Its payload includes the pad.
    if (h.bth.opcode == op::kUdSendOnlyImm) continue;
    std::vector<uint8_t> padded = s.payload;
    padded.resize(padded.size() + hp.bth.pad_count, 0);
    EXPECT_EQ(r[kColData], hex(padded));
    ++icrc_shown;
    // tshark reads the ICRC's 4 bytes as a big-endian number; they are sent LSB first.
    EXPECT_EQ(num(r[kColIcrc]), __builtin_bswap32(s.icrc));
  }
  EXPECT_EQ(icrc_shown, 36);  // all 38 opcodes but CNP and UD_SEND_ONLY_WITH_IMMEDIATE
  if (!HasFailure()) {
    std::remove(pcap.c_str());
    std::remove(out.c_str());
  }
}

// RoCE v1 frames (EtherType 0x8915, GRH, BTH .. ICRC) for every opcode, with and without 802.1Q:
// tshark must decode them as RoCE with the GRH and BTH as written and nothing malformed.
TEST(WireTshark, DecodesRoceV1FramesAsWritten) {
  if (!have_tshark()) GTEST_SKIP() << "tshark not found (Debian package tshark): pcap not decoded";
  const std::string pcap =
      testing::TempDir() + "wire_tshark_v1_" + std::to_string(getpid()) + ".pcap";
  const std::string out = pcap + ".txt";
  SCOPED_TRACE("capture: " + pcap);
  const char* const fields[] = {"eth.type",
                                "infiniband.grh.ipver",
                                "infiniband.grh.tclass",
                                "infiniband.grh.flowlabel",
                                "infiniband.grh.paylen",
                                "infiniband.grh.nxthdr",
                                "infiniband.grh.hoplmt",
                                "infiniband.grh.sgid",
                                "infiniband.grh.dgid",
                                "infiniband.bth.opcode",
                                "infiniband.bth.destqp",
                                "infiniband.bth.psn",
                                "infiniband.invariant.crc",
                                "vlan.priority",
                                "_ws.expert",
                                "_ws.malformed"};
  struct V1Sent {
    Sent s;
    Grh grh;
    uint32_t len = 0;
  };
  std::vector<V1Sent> sent;
  PcapWriter w;
  ASSERT_EQ(w.open(pcap), 0);
  for (int code = 0; code < 256; ++code) {
    if (!opcode_info(static_cast<uint8_t>(code)).valid()) continue;
    V1Sent v;
    const int i = static_cast<int>(sent.size());
    v.s = make(i, static_cast<uint8_t>(code));
    v.grh.traffic_class = static_cast<uint8_t>(i * 4);
    v.grh.flow_label = static_cast<uint32_t>(0x10001 * i) & 0xfffff;
    v.grh.hop_limit = static_cast<uint8_t>(1 + i);
    v.grh.sgid = gid_from_ipv4({198, 18, 0, 1});
    v.grh.dgid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(i)};
    Ethernet eth;
    eth.src = {2, 0, 0, 0, 0, 1};
    eth.dst = {2, 0, 0, 0, 0, 2};
    eth.vlan_tci = v.s.vlan;
    eth.ethertype = kEthertypeRoceV1;
    std::vector<uint8_t> frame(256);
    const uint32_t l2 = write_ethernet(eth, frame);
    v.len = build_v1_packet(v.grh, v.s.hdr, v.s.payload, std::span(frame).subspan(l2));
    ASSERT_GT(v.len, 0u);
    frame.resize(l2 + v.len);
    v.s.icrc = load_icrc(&frame[frame.size() - kIcrcBytes]);
    w.write_frame(frame, v.s.time_ns);
    sent.push_back(std::move(v));
  }
  w.close();
  std::string cmd = "tshark -n -r '" + pcap + "' -T fields -E occurrence=f -E separator=/t";
  const std::set<std::string> known = tshark_protocols();
  for (const char* p : kNoHeuristics)
    if (known.count(p)) cmd += std::string(" --disable-protocol ") + p;
  for (const char* f : fields) cmd += std::string(" -e ") + f;
  cmd += " >'" + out + "' 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
    cols.resize(std::size(fields));
    rows.push_back(std::move(cols));
  }
  ASSERT_EQ(rows.size(), sent.size());
  int icrc_shown = 0;
  for (size_t i = 0; i < sent.size(); ++i) {
    const V1Sent& v = sent[i];
    const auto& r = rows[i];
    SCOPED_TRACE(testing::Message()
                 << "frame " << i + 1 << " " << opcode_info(v.s.hdr.bth.opcode).name);
    EXPECT_EQ(r[14], "");
    EXPECT_EQ(r[15], "");
    EXPECT_EQ(num(r[0]), v.s.vlan ? kEthertypeVlan : kEthertypeRoceV1);
    EXPECT_EQ(num(r[1]), 6u);
    EXPECT_EQ(num(r[2]), v.grh.traffic_class);
    EXPECT_EQ(num(r[3]), v.grh.flow_label);
    EXPECT_EQ(num(r[4]), v.len - kGrhBytes);
    EXPECT_EQ(num(r[5]), kGrhNextHeaderIba);
    EXPECT_EQ(num(r[6]), v.grh.hop_limit);
    EXPECT_EQ(r[7], "::ffff:198.18.0.1");
    EXPECT_EQ(r[8],
              "fe80::" + (i == 0 ? std::string() : (std::stringstream() << std::hex << i).str()));
    EXPECT_EQ(num(r[9]), v.s.hdr.bth.opcode);
    EXPECT_EQ(num(r[10]), v.s.hdr.bth.dest_qp);
    EXPECT_EQ(num(r[11]), v.s.hdr.bth.psn.value());
    EXPECT_EQ(r[13].empty(), !v.s.vlan);
    if (!r[12].empty()) {
      ++icrc_shown;
      EXPECT_EQ(num(r[12]), __builtin_bswap32(v.s.icrc));
    }
  }
  EXPECT_GE(icrc_shown, 36);
  if (!HasFailure()) {
    std::remove(pcap.c_str());
    std::remove(out.c_str());
  }
}

}  // namespace
}  // namespace uroce::wire
