#pragma once
// Synthetic memory for worlds too large to hold their data: registered regions whose content is a
// function of the I/O address, so a world of hundreds of hosts moving gigabytes needs no buffers.
//
// The region is a real MR (keys, bounds and rights are checked by the PD as for any other) over a
// span of reserved, inaccessible address space (`SyntheticMemory::base()`): nothing is resident,
// and a stray access to it faults instead of passing silently. The transport still runs its own
// code; only the memory it reaches changes, through `SyntheticAccess`, the MemoryAccess a QP is
// created with:
//  - a read (gather for a send, a READ response, a key check) returns bytes generated for the
//    addresses asked for: `synthetic_byte(iova)`;
//  - a write (placing a WRITE or a SEND, a READ result) lands in a buffer that holds the expected
//    bytes, and is compared with them before the next access or at `settle()`: every byte that
//    differs is counted in `mismatched_bytes()` instead of being stored.
// A world that gives the sender's MR and the receiver's the same I/O addresses thus checks that
// every byte lands where the sender read it from. What a synthetic region cannot check is what a
// model of a whole buffer would (bytes never written): count the bytes placed for that.
//
// Only accesses that can move bytes are materialized: the transport moves at most one packet's
// payload per access (a gather part, a placement, a READ response's part, an atomic), so an access
// longer than `kSyntheticPlacementBytes` is a key check (a WRITE's or READ's whole message, at
// post time or on its first packet) and gets the region's own inaccessible pointer: nothing is
// generated or compared for it, and a transport that did use it would fault, not pass.
//
// Not thread-safe; one per device, used from its progress pass (the world core's thread).
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fabric/fabric_link.h"
#include "transport/types.h"

namespace uroce::sim {

// Byte `iova` of every synthetic region. Words of 8 bytes are a bijection of the word's address,
// so a byte placed at any other address than the one it was read from differs (up to one chance
// in 256 per byte within a word).
// (An odd multiplier makes the map one to one; consecutive words differ by a constant, so a
// buffer is generated with one add per word.)
// The largest payload of one packet (the largest path MTU) plus a UD receive's 40-byte GRH.
inline constexpr uint32_t kSyntheticPlacementBytes = 4096 + 40;
inline constexpr uint64_t kSyntheticStep = 0x9e3779b97f4a7c15ull;
inline constexpr uint64_t kSyntheticMask = 0x6a09e667f3bcc909ull;
inline uint64_t synthetic_word(uint64_t word_index) {
  return (word_index * kSyntheticStep) ^ kSyntheticMask;
}
inline uint8_t synthetic_byte(uint64_t iova) {
  return static_cast<uint8_t>(synthetic_word(iova >> 3) >> (8 * (iova & 7)));
}
// Writes the synthetic bytes of [iova, iova + out.size()) to `out`.
void fill_synthetic(uint64_t iova, std::span<uint8_t> out);
// How many bytes of `bytes` differ from the synthetic bytes of [iova, ...).
uint64_t count_synthetic_mismatches(uint64_t iova, std::span<const uint8_t> bytes);

// The reserved address space synthetic MRs are registered over (shared by every device of a world:
// the MRs differ by I/O address, not by host address).
class SyntheticAccess;
// Also the fabric's PayloadReference: a packet's payload read from a synthetic region (one of the
// last reads) is described by its I/O address, and rebuilt from it on arrival.
class SyntheticMemory final : public fabric::PayloadReference {
 public:
  // Reserves `bytes` of inaccessible address space (nothing resident), or the largest half,
  // quarter, ... of it the address space grants (size()); aborts below 1 GiB, which only a 32-bit
  // address space would make it do. Materialized accesses (at most kSyntheticPlacementBytes)
  // larger than `max_access_bytes` to a synthetic region fail with kOutOfBounds (counted in
  // refused()); a world passes its message size.
  SyntheticMemory(size_t bytes, size_t max_access_bytes);
  ~SyntheticMemory() override;
  SyntheticMemory(const SyntheticMemory&) = delete;
  SyntheticMemory& operator=(const SyntheticMemory&) = delete;

  uint8_t* base() const { return base_; }
  size_t size() const { return size_; }
  bool contains(const uint8_t* p) const { return p >= base_ && p < base_ + size_; }
  // Compares the last write's landing buffer with what it should hold (any device's).
  void settle();

  bool describe(const uint8_t* p, size_t len, uint64_t* iova) const override;
  void materialize(uint64_t iova, std::span<uint8_t> out) const override {
    fill_synthetic(iova, out);
  }
  void prepare_copy(const uint8_t* p, size_t len) const override;
  // Reads left unwritten until a link copies them (prepare_copy): for a world whose every link
  // carries payload by reference (fabric::FabricLink::set_payload_reference with this), where a
  // read's bytes are otherwise generated only to be described by their address. The transport
  // itself never reads a gathered payload; a link without the reference would send garbage, and
  // the receiver's check would count it.
  void set_lazy_reads(bool lazy) { lazy_reads_ = lazy; }
  std::span<uint8_t> rebuild_buffer() const override { return rebuild_; }

 private:
  friend class SyntheticAccess;
  uint8_t* base_ = nullptr;
  size_t size_ = 0;
  // Scratch shared by every device of the world (one thread): reads come from a ring, so the
  // spans of one packet's gather list (valid during its transmit) stay intact while later parts
  // are generated; writes land in one buffer, checked before the next access.
  std::vector<uint8_t> read_ring_;
  size_t read_pos_ = 0;
  // The last reads into the ring (a packet's gather list is among them when it is sent).
  struct Read {
    uint8_t* at = nullptr;
    size_t len = 0;
    uint64_t iova = 0;
  };
  // The newest of the last reads holding all of [p, p + len) with unchanged bytes, or null.
  const Read* read_holding(const uint8_t* p, size_t len) const;
  bool lazy_reads_ = false;
  static constexpr size_t kReadsKept = 32;
  std::array<Read, kReadsKept> reads_{};
  size_t reads_next_ = 0;
  std::vector<uint8_t> landing_;
  mutable std::vector<uint8_t> rebuild_;  // FabricLink::rebuild's, for every link of the world
  uint64_t landing_iova_ = 0;
  size_t landing_len_ = 0;                 // 0: nothing pending
  SyntheticAccess* landing_by_ = nullptr;  // whose write it is
};

// The MemoryAccess a QP gets in a world with synthetic regions: the PD's checks, then synthetic
// bytes for any pointer the PD returns inside `memory`'s reservation; any other MR is passed
// through untouched.
class SyntheticAccess final : public transport::MemoryAccess {
 public:
  SyntheticAccess(transport::MemoryAccess& inner, SyntheticMemory& memory)
      : inner_(inner), memory_(memory) {}

  Result<uint8_t*, transport::KeyError> local(uint32_t lkey, uint64_t addr, uint32_t length,
                                              uint32_t access) override;
  Result<uint8_t*, transport::KeyError> remote(uint32_t rkey, uint64_t addr, uint32_t length,
                                               uint32_t access, uint32_t qpn) override;
  bool invalidate(uint32_t rkey, uint32_t qpn, bool remote) override {
    return inner_.invalidate(rkey, qpn, remote);
  }
  transport::WcStatus bind_mw(const transport::MwBindInfo& bind, uint32_t qpn) override {
    return inner_.bind_mw(bind, qpn);
  }

  void settle() { memory_.settle(); }
  uint64_t mismatched_bytes() const { return mismatched_; }
  uint64_t bytes_generated() const { return generated_; }
  uint64_t bytes_checked() const { return checked_; }
  uint64_t refused() const { return refused_; }
  uint64_t key_checks() const { return key_checks_; }  // accesses not materialized (above)
  transport::MemoryAccess& inner() { return inner_; }

 private:
  Result<uint8_t*, transport::KeyError> substitute(Result<uint8_t*, transport::KeyError> r,
                                                   uint64_t addr, uint32_t length, bool write);

  friend class SyntheticMemory;
  transport::MemoryAccess& inner_;
  SyntheticMemory& memory_;
  uint64_t mismatched_ = 0, generated_ = 0, checked_ = 0, refused_ = 0, key_checks_ = 0;
};

}  // namespace uroce::sim
