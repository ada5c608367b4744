// RoCE v1 frames as the raw and AF_XDP links build them (RawLink::build_frame), read back by
// scapy: one frame per v1 opcode in the table (RC, UC, UD, XRC), with and without 802.1Q, every
// pad count, IPv4-mapped and IPv6 GIDs. The test writes each frame with the fields it was built
// from, and scripts/gen-wire-vectors.py --check-v1 dissects it with scapy's GRH and BTH layers,
// compares every field, checks the ICRC by its own annex A16 code and rebuilds the bytes in scapy.
// The other direction (scapy's bytes parsed by uroce) is tests/unit/wire_vectors_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "link/raw_link.h"
#include "wire/packet.h"

namespace uroce::link {
namespace {

const char* const kPython = "/usr/bin/python3";

bool have_scapy() {
  const std::string cmd = std::string(kPython) + " -c 'import scapy.contrib.roce' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

std::string hex(std::span<const uint8_t> bytes) {
  static const char* const kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s.empty() ? "-" : s;
}

struct Checked {
  int rc = -1;
  std::string output;
};

// Runs the checker on `file`; its exit status and what it printed.
Checked run_checker(const std::string& file) {
  const std::string cmd = std::string(kPython) + " " + UROCE_SOURCE_DIR +
                          "/scripts/gen-wire-vectors.py --check-v1 '" + file + "' 2>&1";
  Checked c;
  std::FILE* f = popen(cmd.c_str(), "r");
  if (!f) return c;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) c.output += buf;
  const int status = pclose(f);
  c.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return c;
}

struct Built {
  std::string block;           // the vector's lines, without its bytes
  std::vector<uint8_t> frame;  // what build_frame wrote
};

// The frame for opcode `op`, its fields varied by `i`; the block lists the fields from the
// inputs, not from parsing the frame.
Built build(uint8_t op, int i) {
  const wire::OpcodeInfo& info = wire::opcode_info(op);
  wire::TransportHeaders h;
  h.bth.opcode = op;
  h.bth.solicited = i % 2;
  h.bth.mig_req = (i / 2) % 2;
  h.bth.pkey = static_cast<uint16_t>(0xffff - i);
  h.bth.dest_qp = static_cast<uint32_t>(0x10000 * i + 0x123) & 0xffffff;
  h.bth.ack_req = info.is_request() && i % 3 == 0;
  h.bth.psn = Psn(static_cast<uint32_t>(0xfffff0 + i * 0x1111) & 0xffffff);
  h.reth = {0x00007f0000000000ull + static_cast<uint64_t>(i) * 0x1001,
            0xcafe0000u + static_cast<uint32_t>(i), 4096u * static_cast<uint32_t>(i + 1)};
  h.aeth = {static_cast<uint8_t>(i % 4 == 0 ? 0x1f : 0x60 + i % 4), static_cast<uint32_t>(i)};
  h.atomic = {0x8000u + 8u * static_cast<uint64_t>(i), static_cast<uint32_t>(0x99 + i),
              0x1111222233334444ull + static_cast<uint64_t>(i), 0x5555666677778888ull};
  h.atomic_ack.original = 0xfeedfacecafebeefull ^ static_cast<uint64_t>(i);
  h.imm = 0xdead0000u | static_cast<uint32_t>(i);
  h.ieth_rkey = 0x1234ab00u | static_cast<uint32_t>(i);
  h.deth = {0x80010000u + static_cast<uint32_t>(i), static_cast<uint32_t>(0xabcde + i)};
  h.xrc_srqn = static_cast<uint32_t>(0x00ab00 + i);

  std::vector<uint8_t> payload(info.payload ? static_cast<size_t>((i * 7) % 23) : 0);
  for (size_t k = 0; k < payload.size(); ++k) payload[k] = static_cast<uint8_t>(0x41 + i + k);
  const uint8_t pad = info.payload ? wire::pad_for(static_cast<uint32_t>(payload.size())) : 0;
  h.bth.pad_count = pad;

  wire::AddressVector av;
  const bool v6 = i % 3 == 1;
  av.dgid = v6 ? Gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(i)}
               : gid_from_ipv4({198, 18, 0, 2});
  const Gid local =
      v6 ? Gid{0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1} : gid_from_ipv4({198, 18, 0, 1});
  av.traffic_class = static_cast<uint8_t>((i * 9) % 64) << 2;
  av.flow_label = static_cast<uint32_t>(i * 0x3333) & 0xfffff;
  av.hop_limit = static_cast<uint8_t>(i % 2 ? 1 : 64);
  av.service_level = static_cast<uint8_t>(i % 5 == 0 ? 0 : i % 8);
  av.roce_v1 = true;

  wire::TxPacket pkt;
  pkt.header_len = wire::write_transport_headers(h, pkt.header);
  // Two gather parts, as a message crossing two scatter/gather entries is sent.
  const size_t half = payload.size() / 2;
  pkt.payload[0] = std::span<const uint8_t>(payload).first(half);
  pkt.payload[1] = std::span<const uint8_t>(payload).subspan(half);
  pkt.payload_parts = 2;
  pkt.payload_len = static_cast<uint32_t>(payload.size());
  pkt.pad = pad;
  pkt.dest = &av;

  const Mac src{2, 0, 0, 0, 0, 1}, dst{2, 0, 0, 0, 0, static_cast<uint8_t>(2 + i)};
  // Untagged, VLAN 100, and a priority tag (VLAN 0) in turn.
  const std::optional<uint16_t> vlan =
      i % 3 == 0 ? std::nullopt : std::optional<uint16_t>(i % 3 == 1 ? 100 : 0);
  Built b;
  b.frame.resize(RawLink::kMaxFrameBytes);
  const uint32_t n = RawLink::build_frame(pkt, local, src, dst, vlan, false, true, b.frame);
  EXPECT_GT(n, 0u) << info.name;
  b.frame.resize(n);

  std::ostringstream o;
  o << "layer v1eth\neth_dst " << hex(dst) << "\neth_src " << hex(src) << "\nvlan ";
  if (vlan) {
    const int pcp = av.service_level != 0 ? av.service_level : av.traffic_class >> 5;
    o << (pcp << 13 | *vlan);
  } else {
    o << -1;
  }
  o << "\ntclass " << int{av.traffic_class} << "\nflow " << av.flow_label << "\nhop "
    << int{av.hop_limit} << "\nsgid " << hex(local) << "\ndgid " << hex(av.dgid);
  o << "\nopcode " << int{op} << "\nse " << h.bth.solicited << "\nmigreq " << h.bth.mig_req
    << "\npad " << int{pad} << "\npkey " << h.bth.pkey << "\nfecn 0\nbecn 0\ndqpn " << h.bth.dest_qp
    << "\nackreq " << h.bth.ack_req << "\npsn " << h.bth.psn.value();
  if (info.has(wire::kReth))
    o << "\nreth_va " << h.reth.va << "\nreth_rkey " << h.reth.rkey << "\nreth_len "
      << h.reth.dma_length;
  if (info.has(wire::kAeth))
    o << "\naeth_syndrome " << int{h.aeth.syndrome} << "\naeth_msn " << h.aeth.msn;
  if (info.has(wire::kAtomicEth))
    o << "\natomic_va " << h.atomic.va << "\natomic_rkey " << h.atomic.rkey << "\natomic_swap "
      << h.atomic.swap_add << "\natomic_cmp " << h.atomic.compare;
  if (info.has(wire::kAtomicAckEth)) o << "\natomic_orig " << h.atomic_ack.original;
  if (info.has(wire::kImmDt)) o << "\nimm " << h.imm;
  if (info.has(wire::kIeth)) o << "\nieth_rkey " << h.ieth_rkey;
  if (info.has(wire::kDeth)) o << "\ndeth_qkey " << h.deth.qkey << "\ndeth_srcqp " << h.deth.src_qp;
  if (info.has(wire::kXrcEth)) o << "\nxrc_srqn " << h.xrc_srqn;
  o << "\npayload " << hex(payload);
  if (n >= wire::kIcrcBytes) {
    const uint8_t* c = b.frame.data() + n - wire::kIcrcBytes;
    o << "\nicrc "
      << (uint32_t{c[0]} | uint32_t{c[1]} << 8 | uint32_t{c[2]} << 16 | uint32_t{c[3]} << 24);
  }
  b.block = o.str() + "\n";
  return b;
}

std::string temp_path(const char* what) {
  return testing::TempDir() + "wire_scapy_v1_" + what + "_" + std::to_string(getpid()) + ".txt";
}

TEST(WireScapyV1, ScapyReadsEveryV1FrameTheLinkBuilds) {
  if (!have_scapy())
    GTEST_SKIP() << kPython << " cannot import scapy.contrib.roce (Debian package python3-scapy)";
  const std::string path = temp_path("frames");
  std::ofstream out(path);
  int frames = 0;
  for (int code = 0; code < 256; ++code) {
    const auto op = static_cast<uint8_t>(code);
    const wire::OpcodeInfo& info = wire::opcode_info(op);
    if (!info.valid() || info.service == wire::Service::kCnp) continue;
    const Built b = build(op, frames);
    out << "\n[" << info.name << "]\n" << b.block << "bytes " << hex(b.frame) << "\n";
    ++frames;
  }
  out.close();
  // RC 23, UC 12, UD 2, XRC 23 (IBA table 38 and annex A14).
  EXPECT_EQ(frames, 60);
  const Checked c = run_checker(path);
  EXPECT_EQ(c.rc, 0) << c.output;
  EXPECT_EQ(c.output, "checked " + std::to_string(frames) + " v1 packets, 0 failed\n");
  std::remove(path.c_str());
}

// The checker can fail: a payload byte changed after the ICRC was computed, and a field listed
// other than it was built, are both reported.
TEST(WireScapyV1, CheckerReportsABadIcrcAndAWrongField) {
  if (!have_scapy())
    GTEST_SKIP() << kPython << " cannot import scapy.contrib.roce (Debian package python3-scapy)";
  const std::string path = temp_path("tampered");
  std::ofstream out(path);
  Built corrupted = build(wire::op::kRcSendOnly, 3);  // untagged, 21 bytes of payload
  corrupted.frame[wire::kEthBytes + wire::kGrhBytes + wire::kBthBytes] ^= 0x01;
  out << "\n[corrupted]\n" << corrupted.block << "bytes " << hex(corrupted.frame) << "\n";
  Built wrong = build(wire::op::kRcWriteOnly, 4);
  const auto at = wrong.block.find("\ndqpn ");
  ASSERT_NE(at, std::string::npos);
  wrong.block.insert(at + 6, "9");  // dqpn 9<the real one>
  out << "\n[wrong_field]\n" << wrong.block << "bytes " << hex(wrong.frame) << "\n";
  out.close();
  const Checked c = run_checker(path);
  EXPECT_EQ(c.rc, 1) << c.output;
  EXPECT_NE(c.output.find("corrupted: AssertionError: ICRC"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("wrong_field: dqpn: file 9"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("checked 2 v1 packets, 2 failed"), std::string::npos) << c.output;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace uroce::link
