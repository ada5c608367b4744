#include <gtest/gtest.h>

#include <vector>

#include "core/pattern.h"
#include "core/sizes.h"

namespace uroce::tools {
namespace {

TEST(BenchSizes, Parse) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("64K"), 65536u);
  EXPECT_EQ(parse_size("64k"), 65536u);
  EXPECT_EQ(parse_size("8M"), 8u << 20);
  EXPECT_EQ(parse_size("8MiB"), 8u << 20);
  EXPECT_EQ(parse_size("1KB"), 1024u);
  EXPECT_EQ(parse_size("2G"), uint64_t{2} << 30);
  EXPECT_FALSE(parse_size("3G"));  // over the 2^31 IBA message limit
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("K"));
  EXPECT_FALSE(parse_size("12Q"));
  EXPECT_FALSE(parse_size("12Mx"));
  EXPECT_FALSE(parse_size("-1"));
  EXPECT_FALSE(parse_size("99999999999999999999999"));
}

TEST(BenchSizes, SweepLikePerftestAll) {
  auto s = size_sweep(kSweepMinBytes, kSweepMaxBytes);
  ASSERT_EQ(s.size(), 23u);  // 2^1 .. 2^23
  EXPECT_EQ(s.front(), 2u);
  EXPECT_EQ(s.back(), 8u << 20);
  for (size_t i = 1; i < s.size(); ++i) EXPECT_EQ(s[i], 2 * s[i - 1]);
}

TEST(BenchSizes, SweepFromZeroAndOddBounds) {
  auto s = size_sweep(0, 8);
  EXPECT_EQ(s, (std::vector<uint64_t>{0, 1, 2, 4, 8}));
  EXPECT_EQ(size_sweep(3, 20), (std::vector<uint64_t>{4, 8, 16}));
  EXPECT_TRUE(size_sweep(9, 8).empty());
}

TEST(BenchSizes, Format) {
  EXPECT_EQ(format_size(65536), "64K");
  EXPECT_EQ(format_size(8u << 20), "8M");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(0), "0");
}

TEST(BenchPattern, RoundTripAtAnyOffset) {
  for (uint64_t base : {0u, 1u, 7u, 8u, 4093u}) {
    std::vector<uint8_t> buf(1031);
    fill_pattern(buf, 42, base);
    EXPECT_EQ(find_mismatch(buf, 42, base), -1) << base;
    for (size_t i = 0; i < buf.size(); i += 97) ASSERT_EQ(buf[i], pattern_byte(42, base + i));
  }
}

TEST(BenchPattern, CatchesCorruptionSeedAndShift) {
  std::vector<uint8_t> buf(4096);
  fill_pattern(buf, 7);
  buf[1234] ^= 0x10;
  EXPECT_EQ(find_mismatch(buf, 7), 1234);
  buf[1234] ^= 0x10;
  EXPECT_EQ(find_mismatch(buf, 7), -1);
  EXPECT_NE(find_mismatch(buf, 8), -1);     // another run's data
  EXPECT_NE(find_mismatch(buf, 7, 8), -1);  // the right data at the wrong offset
  std::vector<uint8_t> zeros(64);
  EXPECT_EQ(find_mismatch(zeros, 7), find_mismatch(zeros, 7));  // deterministic
  EXPECT_NE(find_mismatch(zeros, 7), -1);
}

}  // namespace
}  // namespace uroce::tools
