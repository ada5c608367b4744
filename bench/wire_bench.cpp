// Wire codec micro-benchmarks: parse and build of a 4 KiB RDMA WRITE packet, and the CRC-32 that
// the ICRC costs, ISA-L against zlib. Run: build/release/bench/wire_bench
#include <benchmark/benchmark.h>

#include <array>
#include <cstring>
#include <vector>

#include "wire/crc32.h"
#include "wire/packet.h"

#ifdef UROCE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace uroce::wire {
namespace {

constexpr uint32_t kPayloadBytes = 4096;

TransportHeaders write_headers() {
  TransportHeaders h;
  h.bth.opcode = op::kRcWriteOnly;
  h.bth.dest_qp = 0x11;
  h.bth.psn = Psn(1234);
  h.bth.ack_req = true;
  h.reth = {0x7f0000000000, 0x1234, kPayloadBytes};
  return h;
}

IpEndpoints endpoints(bool v6) {
  IpEndpoints ep;
  ep.ipv6 = v6;
  ep.src = {10, 0, 0, 1};
  ep.dst = {10, 0, 0, 2};
  if (v6) ep.src[0] = ep.dst[0] = 0xfd;
  return ep;
}

void BM_BuildIpPacket4K(benchmark::State& state) {
  const bool v6 = state.range(0);
  const std::vector<uint8_t> payload(kPayloadBytes, 0x5a);
  std::vector<uint8_t> out(kPayloadBytes + 128);
  const TransportHeaders h = write_headers();
  for (auto _ : state) {
    benchmark::DoNotOptimize(build_ip_packet(endpoints(v6), h, payload, out));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kPayloadBytes);
  state.SetLabel(v6 ? "IPv6 (with UDP checksum)" : "IPv4");
}
BENCHMARK(BM_BuildIpPacket4K)->Arg(0)->Arg(1);

void BM_ParseIpPacket4K(benchmark::State& state) {
  const bool v6 = state.range(0);
  const std::vector<uint8_t> payload(kPayloadBytes, 0x5a);
  std::vector<uint8_t> pkt(kPayloadBytes + 128);
  pkt.resize(build_ip_packet(endpoints(v6), write_headers(), payload, pkt));
  for (auto _ : state) {
    auto p = parse_ip_packet(pkt);
    if (!p.ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(p);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kPayloadBytes);
  state.SetLabel(v6 ? "IPv6" : "IPv4");
}
BENCHMARK(BM_ParseIpPacket4K)->Arg(0)->Arg(1);

// The headers alone: what a link that checked the ICRC elsewhere pays per packet.
void BM_ParseTransportHeaders(benchmark::State& state) {
  std::vector<uint8_t> bytes(kMaxTransportHeaderBytes + kPayloadBytes);
  const uint32_t n = write_transport_headers(write_headers(), bytes);
  bytes.resize(n + kPayloadBytes);
  for (auto _ : state) {
    auto p = parse_transport(bytes);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_ParseTransportHeaders);

void BM_WriteTransportHeaders(benchmark::State& state) {
  std::array<uint8_t, kMaxTransportHeaderBytes> out{};
  const TransportHeaders h = write_headers();
  for (auto _ : state) {
    benchmark::DoNotOptimize(write_transport_headers(h, out));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_WriteTransportHeaders);

void BM_Crc32Isal(benchmark::State& state) {
  const std::vector<uint8_t> buf(static_cast<size_t>(state.range(0)), 0xa5);
  for (auto _ : state) benchmark::DoNotOptimize(crc32(0, buf));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32Isal)->Arg(64)->Arg(4096)->Arg(65536);

// What the sender's link does per packet's payload: a CRC pass and a copy, against the one-pass
// crc32_copy (fused where the CPU has AVX-512 VPCLMULQDQ). The source is one of 64 buffers in
// turn, so it comes from L2 rather than L1 as registered memory would.
void copy_and_crc(benchmark::State& state, bool fused) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<std::vector<uint8_t>> src(64, std::vector<uint8_t>(n, 0xa5));
  std::vector<uint8_t> dst(n);
  size_t i = 0;
  for (auto _ : state) {
    const std::span<const uint8_t> from = src[i++ % src.size()];
    uint32_t crc;
    if (fused) {
      crc = crc32_copy(0, dst.data(), from);
    } else {
      crc = crc32(0, from);
      std::memcpy(dst.data(), from.data(), n);
    }
    benchmark::DoNotOptimize(crc);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  state.SetLabel(fused && crc32_copy_fused() ? "fused" : "memcpy+crc32");
}
void BM_Crc32ThenCopy(benchmark::State& state) {
  copy_and_crc(state, false);
}
void BM_Crc32Copy(benchmark::State& state) {
  copy_and_crc(state, true);
}
BENCHMARK(BM_Crc32ThenCopy)->Arg(1024)->Arg(2048)->Arg(4096);
BENCHMARK(BM_Crc32Copy)->Arg(1024)->Arg(2048)->Arg(4096);

#ifdef UROCE_HAVE_ZLIB
void BM_Crc32Zlib(benchmark::State& state) {
  const std::vector<uint8_t> buf(static_cast<size_t>(state.range(0)), 0xa5);
  for (auto _ : state)
    benchmark::DoNotOptimize(::crc32(0, buf.data(), static_cast<uInt>(buf.size())));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32Zlib)->Arg(64)->Arg(4096)->Arg(65536);
#endif

}  // namespace
}  // namespace uroce::wire

BENCHMARK_MAIN();
