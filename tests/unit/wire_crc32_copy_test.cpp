// wire::crc32_copy: the one-pass copy and CRC gives the bytes and the CRC that a memcpy and
// wire::crc32 give, for lengths around the fused path's threshold and its 256-byte steps, any
// alignment and any running CRC. (Where the CPU lacks AVX-512 VPCLMULQDQ both are the fallback.)
#include <cpuid.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "wire/crc32.h"

namespace uroce::wire {
namespace {

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

TEST(Crc32Copy, MatchesCrc32AndCopiesForEveryLengthAndAlignment) {
  const std::vector<uint8_t> src = pattern(9000, 7);
  for (size_t len : {0,    1,    4,    63,   255,  256,  257,  1000, 1024, 2047, 2048,
                     2049, 2303, 2304, 2305, 4095, 4096, 4097, 4100, 8192, 8999}) {
    for (size_t src_off : {0, 1, 3}) {
      if (src_off + len > src.size()) continue;
      for (uint32_t running : {0u, 0xffffffffu, 0x12345678u}) {
        const std::span<const uint8_t> in(src.data() + src_off, len);
        std::vector<uint8_t> out(len + 5, 0xee);
        const uint32_t got = crc32_copy(running, out.data() + 1, in);
        EXPECT_EQ(got, crc32(running, in)) << "len " << len << " offset " << src_off;
        EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin() + 1)) << "len " << len;
        EXPECT_EQ(out[0], 0xee);
        EXPECT_EQ(out[len + 1], 0xee);
      }
    }
  }
}

TEST(Crc32Copy, ContinuesAcrossPieces) {
  // A packet's ICRC runs over headers, then payload pieces, then the pad: the fused pieces must
  // chain like crc32 does.
  const std::vector<uint8_t> src = pattern(5000, 11);
  std::vector<uint8_t> out(src.size());
  uint32_t crc = crc32(0, std::span(src).first(12));
  std::copy_n(src.begin(), 12, out.begin());
  crc = crc32_copy(crc, out.data() + 12, std::span(src).subspan(12, 4096));
  crc = crc32_copy(crc, out.data() + 4108, std::span(src).subspan(4108));
  EXPECT_EQ(crc, crc32(0, src));
  EXPECT_EQ(out, src);
}

// Which register state components are in use (XGETBV with ECX=1, where the CPU has it): bit 2 is
// the upper halves of ymm0-15, bit 6 the upper halves of zmm0-15, the state that makes every SSE
// instruction after it slower. Returns nullopt where the CPU cannot say.
std::optional<uint64_t> vector_state_in_use() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || (a & (1u << 2)) == 0) return std::nullopt;
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return uint64_t{hi} << 32 | lo;
}

TEST(Crc32, LeavesNoUpperVectorStateInUse) {
  // ISA-L's AVX-512 CRC returns with it dirty; wire::crc32 clears it (docs/performance.md).
  const std::vector<uint8_t> src = pattern(4096, 5);
  std::vector<uint8_t> out(src.size());
  for (size_t len : {64, 1024, 4096}) {
    const uint32_t crc = crc32(0, std::span(src).first(len));
    const std::optional<uint64_t> in_use = vector_state_in_use();
    if (!in_use) GTEST_SKIP() << "XGETBV(1) not available";
    EXPECT_EQ(*in_use & (1u << 2 | 1u << 6), 0u) << "after crc32 of " << len << " bytes";
    EXPECT_EQ(crc32_copy(0, out.data(), std::span(src).first(len)), crc);
    EXPECT_EQ(*vector_state_in_use() & (1u << 2 | 1u << 6), 0u) << "after crc32_copy " << len;
  }
}

}  // namespace
}  // namespace uroce::wire
