// Known-answer tests against scapy's RoCE layer: tests/vectors/roce_scapy.txt (RoCEv2) and
// roce_v1_scapy.txt (RoCE v1) hold packets scapy built (scripts/gen-wire-vectors.py) with the
// fields they were built from. uroce must parse each into those fields, ICRC included, and build
// the same bytes from them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "wire/packet.h"

namespace uroce::wire {
namespace {

struct Vector {
  std::string name;
  std::map<std::string, std::string> fields;

  bool has(const std::string& k) const { return fields.count(k) != 0; }
  uint64_t num(const std::string& k) const {
    auto it = fields.find(k);
    if (it == fields.end()) {
      ADD_FAILURE() << name << ": no field " << k;
      return 0;
    }
    return std::strtoull(it->second.c_str(), nullptr, 10);
  }
  int64_t snum(const std::string& k) const {
    return std::strtoll(fields.at(k).c_str(), nullptr, 10);
  }
  std::vector<uint8_t> hex(const std::string& k) const {
    const std::string& s = fields.at(k);
    std::vector<uint8_t> out;
    if (s == "-") return out;
    EXPECT_EQ(s.size() % 2, 0u) << name << ": " << k;
    for (size_t i = 0; i + 1 < s.size(); i += 2)
      out.push_back(static_cast<uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
    return out;
  }
};

std::vector<Vector> load_vectors(const std::string& file = "roce_scapy.txt") {
  const std::string path = std::string(UROCE_SOURCE_DIR) + "/tests/vectors/" + file;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<Vector> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.front() == '[' && line.back() == ']') {
      out.push_back({line.substr(1, line.size() - 2), {}});
      continue;
    }
    const auto sp = line.find(' ');
    if (out.empty() || sp == std::string::npos) {
      ADD_FAILURE() << "bad line in " << path << ": " << line;
      continue;
    }
    out.back().fields[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return out;
}

// The fields a vector lists, as uroce's header structs.
TransportHeaders headers_of(const Vector& v) {
  TransportHeaders h;
  h.bth.opcode = static_cast<uint8_t>(v.num("opcode"));
  h.bth.solicited = v.num("se");
  h.bth.mig_req = v.num("migreq");
  h.bth.pad_count = static_cast<uint8_t>(v.num("pad"));
  h.bth.pkey = static_cast<uint16_t>(v.num("pkey"));
  h.bth.fecn = v.num("fecn");
  h.bth.becn = v.num("becn");
  h.bth.dest_qp = static_cast<uint32_t>(v.num("dqpn"));
  h.bth.ack_req = v.num("ackreq");
  h.bth.psn = Psn(static_cast<uint32_t>(v.num("psn")));
  const OpcodeInfo& info = opcode_info(h.bth.opcode);
  if (info.has(kReth))
    h.reth = {v.num("reth_va"), static_cast<uint32_t>(v.num("reth_rkey")),
              static_cast<uint32_t>(v.num("reth_len"))};
  if (info.has(kAeth))
    h.aeth = {static_cast<uint8_t>(v.num("aeth_syndrome")),
              static_cast<uint32_t>(v.num("aeth_msn"))};
  if (info.has(kAtomicEth))
    h.atomic = {v.num("atomic_va"), static_cast<uint32_t>(v.num("atomic_rkey")),
                v.num("atomic_swap"), v.num("atomic_cmp")};
  if (info.has(kAtomicAckEth)) h.atomic_ack.original = v.num("atomic_orig");
  if (info.has(kImmDt)) h.imm = static_cast<uint32_t>(v.num("imm"));
  if (info.has(kIeth)) h.ieth_rkey = static_cast<uint32_t>(v.num("ieth_rkey"));
  if (info.has(kDeth))
    h.deth = {static_cast<uint32_t>(v.num("deth_qkey")),
              static_cast<uint32_t>(v.num("deth_srcqp"))};
  if (info.has(kXrcEth)) h.xrc_srqn = static_cast<uint32_t>(v.num("xrc_srqn"));
  return h;
}

IpEndpoints endpoints_of(const Vector& v) {
  IpEndpoints ep;
  ep.ipv6 = v.num("ipv6");
  if (ep.ipv6) {
    ep.src = {0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};  // fd00:0:0:1::1
    ep.dst = {0xfd, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2};  // fd00:0:0:2::2
  } else {
    ep.src = {198, 18, 0, 1};
    ep.dst = {198, 18, 0, 2};
  }
  ep.udp_src_port = static_cast<uint16_t>(v.num("sport"));
  ep.dscp = static_cast<uint8_t>(v.num("dscp"));
  ep.ecn = static_cast<Ecn>(v.num("ecn"));
  ep.flow_label = static_cast<uint32_t>(v.num("flow"));
  return ep;
}

void expect_headers_equal(const std::string& name, const TransportHeaders& want,
                          const TransportHeaders& got) {
  SCOPED_TRACE(name);
  EXPECT_EQ(got.bth.opcode, want.bth.opcode);
  EXPECT_EQ(got.bth.solicited, want.bth.solicited);
  EXPECT_EQ(got.bth.mig_req, want.bth.mig_req);
  EXPECT_EQ(got.bth.pad_count, want.bth.pad_count);
  EXPECT_EQ(got.bth.tver, 0);
  EXPECT_EQ(got.bth.pkey, want.bth.pkey);
  EXPECT_EQ(got.bth.fecn, want.bth.fecn);
  EXPECT_EQ(got.bth.becn, want.bth.becn);
  EXPECT_EQ(got.bth.dest_qp, want.bth.dest_qp);
  EXPECT_EQ(got.bth.ack_req, want.bth.ack_req);
  EXPECT_EQ(got.bth.psn, want.bth.psn);
  const OpcodeInfo& info = opcode_info(want.bth.opcode);
  if (info.has(kReth)) {
    EXPECT_EQ(got.reth.va, want.reth.va);
    EXPECT_EQ(got.reth.rkey, want.reth.rkey);
    EXPECT_EQ(got.reth.dma_length, want.reth.dma_length);
  }
  if (info.has(kAeth)) {
    EXPECT_EQ(got.aeth.syndrome, want.aeth.syndrome);
    EXPECT_EQ(got.aeth.msn, want.aeth.msn);
  }
  if (info.has(kAtomicEth)) {
    EXPECT_EQ(got.atomic.va, want.atomic.va);
    EXPECT_EQ(got.atomic.rkey, want.atomic.rkey);
    EXPECT_EQ(got.atomic.swap_add, want.atomic.swap_add);
    EXPECT_EQ(got.atomic.compare, want.atomic.compare);
  }
  if (info.has(kAtomicAckEth)) {
    EXPECT_EQ(got.atomic_ack.original, want.atomic_ack.original);
  }
  if (info.has(kImmDt)) {
    EXPECT_EQ(got.imm, want.imm);
  }
  if (info.has(kIeth)) {
    EXPECT_EQ(got.ieth_rkey, want.ieth_rkey);
  }
  if (info.has(kDeth)) {
    EXPECT_EQ(got.deth.qkey, want.deth.qkey);
    EXPECT_EQ(got.deth.src_qp, want.deth.src_qp);
  }
  if (info.has(kXrcEth)) {
    EXPECT_EQ(got.xrc_srqn, want.xrc_srqn);
  }
}

TEST(WireVectors, FileCoversTheOpcodesAndBothIpVersions) {
  const auto vectors = load_vectors();
  ASSERT_GE(vectors.size(), 20u);
  std::set<uint64_t> opcodes;
  std::set<uint64_t> pads;
  int v4 = 0, v6 = 0, frames = 0;
  uint16_t headers = 0;
  for (const auto& v : vectors) {
    opcodes.insert(v.num("opcode"));
    pads.insert(v.num("pad"));
    (v.num("ipv6") ? v6 : v4)++;
    frames += v.fields.at("layer") == "eth";
    headers |= opcode_info(static_cast<uint8_t>(v.num("opcode"))).headers;
  }
  EXPECT_GE(v4, 5);
  EXPECT_GE(v6, 5);
  EXPECT_GE(frames, 2);
  EXPECT_EQ(pads, (std::set<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(headers,
            kDeth | kReth | kAtomicEth | kAeth | kAtomicAckEth | kImmDt | kIeth | kCnpReserved);
  EXPECT_TRUE(opcodes.count(op::kCnp));
}

// scapy's bytes parse in uroce into the fields they were built from, and the ICRC checks.
TEST(WireVectors, ScapyPacketsParseWithMatchingFields) {
  for (const auto& v : load_vectors()) {
    SCOPED_TRACE(v.name);
    const std::vector<uint8_t> bytes = v.hex("bytes");
    const bool frame = v.fields.at("layer") == "eth";
    RocePacket pkt;
    if (frame) {
      auto f = parse_frame(bytes);
      ASSERT_TRUE(f.ok()) << to_string(f.error());
      EXPECT_EQ(f->eth.vlan_tci.has_value(), v.snum("vlan") >= 0);
      if (f->eth.vlan_tci) {
        EXPECT_EQ(*f->eth.vlan_tci, v.num("vlan"));
      }
      pkt = f->packet;
    } else {
      auto p = parse_ip_packet(bytes);
      ASSERT_TRUE(p.ok()) << to_string(p.error());
      pkt = *p;
    }
    const IpEndpoints ep = endpoints_of(v);
    EXPECT_EQ(pkt.ipv6.has_value(), ep.ipv6);
    const size_t ip_at = frame ? kEthBytes + (v.snum("vlan") >= 0 ? kVlanBytes : 0) : 0;
    EXPECT_EQ(read_ecn(std::span(bytes).subspan(ip_at)), ep.ecn);
    if (pkt.ipv6) {
      EXPECT_EQ(pkt.ipv6->flow_label, ep.flow_label);
      EXPECT_EQ(pkt.ipv6->dscp, ep.dscp);
      EXPECT_EQ(pkt.ipv6->ecn, ep.ecn);
    } else {
      ASSERT_TRUE(pkt.ipv4.has_value());
      EXPECT_EQ(pkt.ipv4->dscp, ep.dscp);
      EXPECT_EQ(pkt.ipv4->ecn, ep.ecn);
      EXPECT_EQ(pkt.ipv4->identification, 0);
      EXPECT_TRUE(pkt.ipv4->dont_fragment);
    }
    EXPECT_EQ(pkt.udp.src_port, ep.udp_src_port);
    EXPECT_EQ(pkt.udp.dst_port, kRoceV2Port);
    EXPECT_EQ(pkt.icrc, v.num("icrc"));
    expect_headers_equal(v.name, headers_of(v), pkt.transport.hdr);
    const auto payload = v.hex("payload");
    EXPECT_EQ(std::vector<uint8_t>(pkt.transport.payload.begin(), pkt.transport.payload.end()),
              payload);
  }
}

// uroce builds scapy's bytes from the same fields. The IPv4 UDP checksum is the one difference:
// scapy fills it in, uroce sends 0 ("none", which IPv4 allows; RoCEv2 masks it out of the ICRC,
// and Linux fills it in for a UDP socket anyway). Over IPv6 both compute it.
TEST(WireVectors, UroceBuildsScapyBytes) {
  for (const auto& v : load_vectors()) {
    SCOPED_TRACE(v.name);
    std::vector<uint8_t> want = v.hex("bytes");
    const IpEndpoints ep = endpoints_of(v);
    std::vector<uint8_t> got(want.size() + 64);
    uint32_t n = 0;
    uint32_t eth_len = 0;
    if (v.fields.at("layer") == "eth") {
      Ethernet eth;
      const auto dst = v.hex("eth_dst"), src = v.hex("eth_src");
      std::copy(dst.begin(), dst.end(), eth.dst.begin());
      std::copy(src.begin(), src.end(), eth.src.begin());
      if (v.snum("vlan") >= 0) eth.vlan_tci = static_cast<uint16_t>(v.num("vlan"));
      eth.ethertype = ep.ipv6 ? kEthertypeIpv6 : kEthertypeIpv4;
      eth_len = write_ethernet(eth, got);
    }
    const auto payload = v.hex("payload");
    n = build_ip_packet(ep, headers_of(v), payload, std::span(got).subspan(eth_len));
    ASSERT_EQ(eth_len + n, want.size());
    got.resize(eth_len + n);
    const uint32_t udp_csum = eth_len + (ep.ipv6 ? kIpv6Bytes : kIpv4Bytes) + 6;
    ASSERT_EQ(got.size(), want.size());
    if (ep.ipv6) {
      // IPv6 requires the UDP checksum, so uroce computes it: the bytes match exactly.
      EXPECT_EQ(got, want);
    } else {
      EXPECT_EQ(got[udp_csum], 0);
      EXPECT_EQ(got[udp_csum + 1], 0);
      want[udp_csum] = want[udp_csum + 1] = 0;
      EXPECT_EQ(got, want);
    }

    // The UDP-socket path computes the same ICRC without the IP header in hand.
    std::vector<uint8_t> udp_payload(want.size());
    const uint32_t m = build_udp_payload(ep, headers_of(v), payload, udp_payload);
    ASSERT_EQ(m, want.size() - udp_csum - 2);
    EXPECT_TRUE(
        std::equal(udp_payload.begin(), udp_payload.begin() + m, want.begin() + udp_csum + 2));
    auto parsed = parse_udp_payload(ep, std::span(want).subspan(udp_csum + 2));
    ASSERT_TRUE(parsed.ok()) << to_string(parsed.error());
    expect_headers_equal(v.name, headers_of(v), parsed->hdr);
  }
}

// ---- RoCE v1: EtherType 0x8915, GRH, BTH .. ICRC (annex A16), from roce_v1_scapy.txt ----

Gid gid_of(const Vector& v, const std::string& k) {
  const auto bytes = v.hex(k);
  Gid g{};
  EXPECT_EQ(bytes.size(), g.size()) << v.name << ": " << k;
  std::copy_n(bytes.begin(), std::min(bytes.size(), g.size()), g.begin());
  return g;
}

Grh grh_of(const Vector& v) {
  Grh g;
  g.traffic_class = static_cast<uint8_t>(v.num("tclass"));
  g.flow_label = static_cast<uint32_t>(v.num("flow"));
  g.hop_limit = static_cast<uint8_t>(v.num("hop"));
  g.sgid = gid_of(v, "sgid");
  g.dgid = gid_of(v, "dgid");
  return g;
}

bool is_frame(const Vector& v) {
  return v.fields.at("layer") == "v1eth";
}

TEST(WireV1Vectors, FileCoversTheHeadersPadsAndFrames) {
  const auto vectors = load_vectors("roce_v1_scapy.txt");
  ASSERT_GE(vectors.size(), 20u);
  std::set<uint64_t> pads, tclasses;
  std::set<std::string> sgids;
  int frames = 0, tagged = 0;
  uint16_t headers = 0;
  for (const auto& v : vectors) {
    pads.insert(v.num("pad"));
    tclasses.insert(v.num("tclass"));
    sgids.insert(v.fields.at("sgid"));
    if (is_frame(v)) {
      ++frames;
      tagged += v.snum("vlan") >= 0;
    }
    headers |= opcode_info(static_cast<uint8_t>(v.num("opcode"))).headers;
  }
  EXPECT_EQ(pads, (std::set<uint64_t>{0, 1, 2, 3}));
  EXPECT_GE(tclasses.size(), 3u);
  EXPECT_GE(sgids.size(), 2u);  // IPv4-mapped and IPv6 GIDs
  EXPECT_GE(frames, 3);
  EXPECT_GE(tagged, 2);
  EXPECT_EQ(headers, kDeth | kXrcEth | kReth | kAtomicEth | kAeth | kAtomicAckEth | kImmDt | kIeth);
}

// scapy's v1 packets and frames parse in uroce into the fields they were built from, ICRC
// included.
TEST(WireV1Vectors, ScapyPacketsParseWithMatchingFields) {
  for (const auto& v : load_vectors("roce_v1_scapy.txt")) {
    SCOPED_TRACE(v.name);
    const std::vector<uint8_t> bytes = v.hex("bytes");
    RoceV1Packet pkt;
    if (is_frame(v)) {
      auto f = parse_v1_frame(bytes);
      ASSERT_TRUE(f.ok()) << to_string(f.error());
      const auto dst = v.hex("eth_dst"), src = v.hex("eth_src");
      EXPECT_TRUE(std::equal(dst.begin(), dst.end(), f->eth.dst.begin()));
      EXPECT_TRUE(std::equal(src.begin(), src.end(), f->eth.src.begin()));
      EXPECT_EQ(f->eth.ethertype, kEthertypeRoceV1);
      EXPECT_EQ(f->eth.vlan_tci.has_value(), v.snum("vlan") >= 0);
      if (f->eth.vlan_tci) {
        EXPECT_EQ(*f->eth.vlan_tci, v.num("vlan"));
      }
      pkt = f->packet;
    } else {
      auto p = parse_v1_packet(bytes);
      ASSERT_TRUE(p.ok()) << to_string(p.error());
      pkt = *p;
    }
    const Grh want = grh_of(v);
    EXPECT_EQ(pkt.grh.traffic_class, want.traffic_class);
    EXPECT_EQ(pkt.grh.flow_label, want.flow_label);
    EXPECT_EQ(pkt.grh.hop_limit, want.hop_limit);
    EXPECT_EQ(pkt.grh.next_header, kGrhNextHeaderIba);
    EXPECT_EQ(pkt.grh.sgid, want.sgid);
    EXPECT_EQ(pkt.grh.dgid, want.dgid);
    const size_t l2 = is_frame(v) ? kEthBytes + (v.snum("vlan") >= 0 ? kVlanBytes : 0) : 0;
    EXPECT_EQ(pkt.grh.payload_length, bytes.size() - l2 - kGrhBytes);
    EXPECT_EQ(pkt.icrc, v.num("icrc"));
    expect_headers_equal(v.name, headers_of(v), pkt.transport.hdr);
    const auto payload = v.hex("payload");
    EXPECT_EQ(std::vector<uint8_t>(pkt.transport.payload.begin(), pkt.transport.payload.end()),
              payload);
  }
}

// uroce builds scapy's bytes exactly from the same fields (no UDP checksum to differ in v1).
TEST(WireV1Vectors, UroceBuildsScapyBytes) {
  for (const auto& v : load_vectors("roce_v1_scapy.txt")) {
    SCOPED_TRACE(v.name);
    const std::vector<uint8_t> want = v.hex("bytes");
    std::vector<uint8_t> got(want.size() + 64);
    uint32_t l2 = 0;
    if (is_frame(v)) {
      Ethernet eth;
      const auto dst = v.hex("eth_dst"), src = v.hex("eth_src");
      std::copy(dst.begin(), dst.end(), eth.dst.begin());
      std::copy(src.begin(), src.end(), eth.src.begin());
      if (v.snum("vlan") >= 0) eth.vlan_tci = static_cast<uint16_t>(v.num("vlan"));
      eth.ethertype = kEthertypeRoceV1;
      l2 = write_ethernet(eth, got);
    }
    const uint32_t n =
        build_v1_packet(grh_of(v), headers_of(v), v.hex("payload"), std::span(got).subspan(l2));
    ASSERT_GT(n, 0u);
    got.resize(l2 + n);
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace uroce::wire
