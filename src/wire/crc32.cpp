#include "wire/crc32.h"

#include <immintrin.h>
#include <isa-l/crc.h>

#include <array>
#include <cstring>

namespace uroce::wire {
namespace {

// AVX-512 with VPCLMULQDQ: where crc32_copy() folds in one pass, and where ISA-L picks its own
// AVX-512 CRC.
bool detect_avx512_clmul() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
#else
  return false;
#endif
}

const bool kAvx512Clmul = detect_avx512_clmul();

// ISA-L's AVX-512 CRC returns without a vzeroupper, leaving the upper halves of the vector
// registers in use, and the SSE code after it pays for that state: in profiles of a 64 KiB
// WRITE's receiver, the first SSE load after the ICRC check carried about a sixth of the
// process's samples. Clearing the state is one instruction per call.
uint32_t isal_crc32(uint32_t running, const uint8_t* bytes, size_t len) {
  const uint32_t crc = crc32_gzip_refl(running, bytes, len);
#if defined(__x86_64__)
  if (kAvx512Clmul) asm volatile("vzeroupper");
#endif
  return crc;
}

}  // namespace

uint32_t crc32(uint32_t running, std::span<const uint8_t> bytes) {
  if (bytes.empty()) return running;  // callers pass empty pads and tails; skip the call's setup
  return isal_crc32(running, bytes.data(), bytes.size());
}

namespace {

// The folding constants of the reflected CRC-32 (polynomial 0x104C11DB7): moving a 128-bit lane
// D bits further along the message multiplies its low 64 bits by fold_constant(D + 32) and its
// high 64 bits by fold_constant(D - 32) (carry-less, the bit-reflected x^e mod P shifted left
// by one for the reflected product). Computed, not tabled, so every distance comes from one rule.
constexpr uint64_t fold_constant(uint32_t e) {
  uint64_t r = 1;
  for (uint32_t i = 0; i < e; ++i) {
    r <<= 1;
    if (r & (uint64_t{1} << 32)) r ^= 0x104C11DB7ull;
  }
  uint64_t reflected = 0;
  for (int b = 0; b < 32; ++b)
    if (r & (uint64_t{1} << b)) reflected |= uint64_t{1} << (31 - b);
  return reflected << 1;
}
// The constants every lane of a zmm register needs to fold by `bytes` (low, high pairs).
struct FoldBy {
  uint64_t lo, hi;
};
constexpr FoldBy fold_by(uint32_t bytes) {
  return {fold_constant(bytes * 8 + 32), fold_constant(bytes * 8 - 32)};
}
constexpr FoldBy kFold256 = fold_by(256), kFold192 = fold_by(192), kFold128 = fold_by(128),
                 kFold64 = fold_by(64);
// Checked against the constants published for the 64- and 16-byte folds.
static_assert(fold_by(64).lo == 0x154442bd4 && fold_by(64).hi == 0x1c6e41596);
static_assert(fold_by(16).lo == 0x1751997d0 && fold_by(16).hi == 0x0ccaa009e);

constexpr size_t kFusedBlock = 256;  // four zmm registers per step
// Below this the fused pass's fixed cost (the final fold and one short CRC call) eats its gain
// (bench/wire_bench BM_Crc32Copy against BM_Crc32ThenCopy; docs/performance.md).
constexpr size_t kFusedMin = 2048;

#if defined(__x86_64__)
#define UROCE_FUSED_TARGET __attribute__((target("avx512f,vpclmulqdq")))

UROCE_FUSED_TARGET inline __m512i fold(__m512i acc, __m512i k, __m512i next) {
  const __m512i lo = _mm512_clmulepi64_epi128(acc, k, 0x00);
  const __m512i hi = _mm512_clmulepi64_epi128(acc, k, 0x11);
  return _mm512_ternarylogic_epi64(lo, hi, next, 0x96);  // lo ^ hi ^ next
}

UROCE_FUSED_TARGET inline __m512i constants(FoldBy f) {
  return _mm512_set_epi64(static_cast<long long>(f.hi), static_cast<long long>(f.lo),
                          static_cast<long long>(f.hi), static_cast<long long>(f.lo),
                          static_cast<long long>(f.hi), static_cast<long long>(f.lo),
                          static_cast<long long>(f.hi), static_cast<long long>(f.lo));
}

// Copies and folds the first len - len % 256 bytes (len >= 256) into four 64-byte accumulators,
// folds those into one and hands back the 64 bytes whose CRC (from a zero state, no inversion)
// equals that of the folded bytes from state `state`: CRC-32 is linear, so the state XORed into
// the first four bytes and the folding (each 64 bytes moved to the end by multiplication)
// keep the remainder.
UROCE_FUSED_TARGET size_t copy_fold(uint32_t state, uint8_t* dst, const uint8_t* src, size_t len,
                                    uint8_t* out64) {
  __m512i a0 = _mm512_loadu_si512(src), a1 = _mm512_loadu_si512(src + 64),
          a2 = _mm512_loadu_si512(src + 128), a3 = _mm512_loadu_si512(src + 192);
  _mm512_storeu_si512(dst, a0);
  _mm512_storeu_si512(dst + 64, a1);
  _mm512_storeu_si512(dst + 128, a2);
  _mm512_storeu_si512(dst + 192, a3);
  a0 = _mm512_xor_si512(a0, _mm512_maskz_set1_epi32(1, static_cast<int>(state)));
  const __m512i k256 = constants(kFold256);
  size_t done = kFusedBlock;
  for (; done + kFusedBlock <= len; done += kFusedBlock) {
    const __m512i d0 = _mm512_loadu_si512(src + done), d1 = _mm512_loadu_si512(src + done + 64),
                  d2 = _mm512_loadu_si512(src + done + 128),
                  d3 = _mm512_loadu_si512(src + done + 192);
    _mm512_storeu_si512(dst + done, d0);
    _mm512_storeu_si512(dst + done + 64, d1);
    _mm512_storeu_si512(dst + done + 128, d2);
    _mm512_storeu_si512(dst + done + 192, d3);
    a0 = fold(a0, k256, d0);
    a1 = fold(a1, k256, d1);
    a2 = fold(a2, k256, d2);
    a3 = fold(a3, k256, d3);
  }
  __m512i acc = fold(a0, constants(kFold192), a3);
  acc = _mm512_xor_si512(
      acc, fold(a1, constants(kFold128), fold(a2, constants(kFold64), _mm512_setzero_si512())));
  _mm512_storeu_si512(out64, acc);
  return done;
}
#endif

}  // namespace

bool crc32_copy_fused() {
  return kAvx512Clmul;
}

uint32_t crc32_copy(uint32_t running, uint8_t* dst, std::span<const uint8_t> src) {
#if defined(__x86_64__)
  if (kAvx512Clmul && src.size() >= kFusedMin) {
    // ISA-L's CRC keeps the state inverted (crc32_gzip_refl(r, ...) runs from ~r); the 64
    // folded bytes go through it from a zero state, and the tail after them continues.
    alignas(64) std::array<uint8_t, 64> folded;
    const size_t done = copy_fold(~running, dst, src.data(), src.size(), folded.data());
    const uint32_t crc = isal_crc32(~0u, folded.data(), folded.size());
    const size_t rest = src.size() - done;
    std::memcpy(dst + done, src.data() + done, rest);
    return crc32(crc, src.subspan(done));
  }
#endif
  if (!src.empty()) std::memcpy(dst, src.data(), src.size());
  return crc32(running, src);
}
}  // namespace uroce::wire
