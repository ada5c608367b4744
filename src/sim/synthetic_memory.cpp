#include "sim/synthetic_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "link/ip_packet_io.h"

namespace uroce::sim {

using transport::KeyError;

namespace {

// Whole words: `words` words from word index `first` to `out` (fill), or whether any of `in`
// differs (differ). Scalar here; the AVX2 versions below do 8 words per step with the same map.
void fill_words_scalar(uint64_t first, uint8_t* out, size_t words) {
  uint64_t acc = first * kSyntheticStep;
  for (size_t i = 0; i < words; ++i, acc += kSyntheticStep) {
    const uint64_t w = acc ^ kSyntheticMask;
    std::memcpy(out + 8 * i, &w, 8);
  }
}

bool words_differ_scalar(uint64_t first, const uint8_t* in, size_t words) {
  uint64_t acc = first * kSyntheticStep;
  uint64_t any = 0;
  for (size_t i = 0; i < words; ++i, acc += kSyntheticStep) {
    uint64_t w;
    std::memcpy(&w, in + 8 * i, 8);
    any |= w ^ acc ^ kSyntheticMask;
  }
  return any != 0;
}

#if defined(__x86_64__)
#define UROCE_SYNTHETIC_TARGET __attribute__((target("avx2")))
using Words4 = uint64_t __attribute__((vector_size(32)));

UROCE_SYNTHETIC_TARGET void fill_words_avx2(uint64_t first, uint8_t* out, size_t words) {
  const uint64_t a = first * kSyntheticStep;
  Words4 acc0 = {a, a + kSyntheticStep, a + 2 * kSyntheticStep, a + 3 * kSyntheticStep};
  Words4 acc1 = acc0 + 4 * kSyntheticStep;
  size_t i = 0;
  for (; i + 8 <= words; i += 8) {
    const Words4 x = acc0 ^ kSyntheticMask, y = acc1 ^ kSyntheticMask;
    std::memcpy(out + 8 * i, &x, 32);
    std::memcpy(out + 8 * i + 32, &y, 32);
    acc0 += 8 * kSyntheticStep;
    acc1 += 8 * kSyntheticStep;
  }
  fill_words_scalar(first + i, out + 8 * i, words - i);
}

UROCE_SYNTHETIC_TARGET bool words_differ_avx2(uint64_t first, const uint8_t* in, size_t words) {
  const uint64_t a = first * kSyntheticStep;
  Words4 acc0 = {a, a + kSyntheticStep, a + 2 * kSyntheticStep, a + 3 * kSyntheticStep};
  Words4 acc1 = acc0 + 4 * kSyntheticStep;
  Words4 any = {};
  size_t i = 0;
  for (; i + 8 <= words; i += 8) {
    Words4 x, y;
    std::memcpy(&x, in + 8 * i, 32);
    std::memcpy(&y, in + 8 * i + 32, 32);
    any |= (x ^ acc0 ^ kSyntheticMask) | (y ^ acc1 ^ kSyntheticMask);
    acc0 += 8 * kSyntheticStep;
    acc1 += 8 * kSyntheticStep;
  }
  return (any[0] | any[1] | any[2] | any[3]) != 0 ||
         words_differ_scalar(first + i, in + 8 * i, words - i);
}
#endif

bool detect_avx2() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

const bool kAvx2 = detect_avx2();

void fill_words(uint64_t first, uint8_t* out, size_t words) {
#if defined(__x86_64__)
  if (kAvx2) return fill_words_avx2(first, out, words);
#endif
  fill_words_scalar(first, out, words);
}

bool words_differ(uint64_t first, const uint8_t* in, size_t words) {
#if defined(__x86_64__)
  if (kAvx2) return words_differ_avx2(first, in, words);
#endif
  return words_differ_scalar(first, in, words);
}

}  // namespace

void fill_synthetic(uint64_t iova, std::span<uint8_t> out) {
  size_t i = 0;
  // Unaligned head and tail byte by byte, whole words in between.
  for (; i < out.size() && ((iova + i) & 7) != 0; ++i) out[i] = synthetic_byte(iova + i);
  const size_t words = (out.size() - i) / 8;
  fill_words((iova + i) >> 3, out.data() + i, words);
  for (i += 8 * words; i < out.size(); ++i) out[i] = synthetic_byte(iova + i);
}

uint64_t count_synthetic_mismatches(uint64_t iova, std::span<const uint8_t> bytes) {
  uint64_t bad = 0;
  size_t i = 0;
  for (; i < bytes.size() && ((iova + i) & 7) != 0; ++i)
    bad += bytes[i] != synthetic_byte(iova + i);
  const size_t words = (bytes.size() - i) / 8;
  // First a pass that only detects, then the byte count where something differs.
  if (words_differ((iova + i) >> 3, bytes.data() + i, words)) {
    uint64_t acc = ((iova + i) >> 3) * kSyntheticStep;
    for (size_t w = 0; w < words; ++w, acc += kSyntheticStep) {
      uint64_t got;
      std::memcpy(&got, bytes.data() + i + 8 * w, 8);
      const uint64_t diff = got ^ acc ^ kSyntheticMask;
      for (int b = 0; b < 8; ++b) bad += (diff >> (8 * b) & 0xff) != 0;
    }
  }
  for (i += 8 * words; i < bytes.size(); ++i) bad += bytes[i] != synthetic_byte(iova + i);
  return bad;
}

SyntheticMemory::SyntheticMemory(size_t bytes, size_t max_access_bytes)
    : size_(bytes),
      read_ring_(2 * std::min<size_t>(max_access_bytes, kSyntheticPlacementBytes) + 16 * 4096),
      landing_(std::min<size_t>(max_access_bytes, kSyntheticPlacementBytes)),
      rebuild_(link::kMaxIpPacketBytes) {
  // Halving on refusal: an address space with a cap (valgrind's is 32 GiB) still gets the largest
  // reservation it grants (not below 1 GiB), and size() says how much that is.
  void* p;
  for (;;) {
    p = mmap(nullptr, size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED || size_ <= (size_t{1} << 30)) break;
    size_ /= 2;
  }
  UROCE_CHECK(p != MAP_FAILED);
  base_ = static_cast<uint8_t*>(p);
}

SyntheticMemory::~SyntheticMemory() {
  munmap(base_, size_);
}

Result<uint8_t*, KeyError> SyntheticAccess::local(uint32_t lkey, uint64_t addr, uint32_t length,
                                                  uint32_t access) {
  settle();
  const bool write = (access & transport::kAccessLocalWrite) != 0;
  return substitute(inner_.local(lkey, addr, length, access), addr, length, write);
}

Result<uint8_t*, KeyError> SyntheticAccess::remote(uint32_t rkey, uint64_t addr, uint32_t length,
                                                   uint32_t access, uint32_t qpn) {
  settle();
  const bool write =
      (access & (transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic)) != 0;
  return substitute(inner_.remote(rkey, addr, length, access, qpn), addr, length, write);
}

Result<uint8_t*, KeyError> SyntheticAccess::substitute(Result<uint8_t*, KeyError> r, uint64_t addr,
                                                       uint32_t length, bool write) {
  if (!r.ok() || length == 0 || !memory_.contains(*r)) return r;
  if (length > kSyntheticPlacementBytes) {
    ++key_checks_;
    return r;
  }
  SyntheticMemory& m = memory_;
  if (length > m.landing_.size()) {
    ++refused_;
    return Err(KeyError::kOutOfBounds);
  }
  if (write) {
    // Holds the expected bytes already, so a check that writes nothing (a key check) passes.
    fill_synthetic(addr, {m.landing_.data(), length});
    m.landing_iova_ = addr;
    m.landing_len_ = length;
    m.landing_by_ = this;
    return m.landing_.data();
  }
  if (m.read_pos_ + length > m.read_ring_.size()) m.read_pos_ = 0;
  uint8_t* out = m.read_ring_.data() + m.read_pos_;
  m.read_pos_ += length;
  if (!m.lazy_reads_) {
    fill_synthetic(addr, {out, length});
    generated_ += length;
  }
  m.reads_[m.reads_next_] = {out, length, addr};
  m.reads_next_ = (m.reads_next_ + 1) % SyntheticMemory::kReadsKept;
  return out;
}

const SyntheticMemory::Read* SyntheticMemory::read_holding(const uint8_t* p, size_t len) const {
  // Newest first: a later read may have reused an older one's bytes in the ring.
  for (size_t i = 1; i <= kReadsKept; ++i) {
    const Read& r = reads_[(reads_next_ + kReadsKept - i) % kReadsKept];
    if (r.at != nullptr && p >= r.at && p + len <= r.at + r.len) return &r;
    // Any read overlapping [p, p + len) other than one holding it all means the bytes changed.
    if (r.at != nullptr && p < r.at + r.len && r.at < p + len) return nullptr;
  }
  return nullptr;
}

bool SyntheticMemory::describe(const uint8_t* p, size_t len, uint64_t* iova) const {
  const Read* r = read_holding(p, len);
  if (r == nullptr) return false;
  *iova = r->iova + static_cast<uint64_t>(p - r->at);
  return true;
}

void SyntheticMemory::prepare_copy(const uint8_t* p, size_t len) const {
  if (!lazy_reads_ || len == 0) return;
  const Read* r = read_holding(p, len);
  if (r == nullptr) return;
  const size_t at = static_cast<size_t>(p - r->at);
  fill_synthetic(r->iova + at, {r->at + at, len});
}

void SyntheticMemory::settle() {
  if (landing_len_ == 0) return;
  landing_by_->mismatched_ +=
      count_synthetic_mismatches(landing_iova_, {landing_.data(), landing_len_});
  landing_by_->checked_ += landing_len_;
  landing_len_ = 0;
}

}  // namespace uroce::sim
