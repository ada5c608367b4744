#pragma once
// The one opcode table (IBA 9.2 table 38 with the XRC opcodes of annex A14, plus the RoCEv2 CNP of
// annex A17). Parsing, building
// and validation all read it: which extension headers follow the BTH, whether a payload may follow,
// and the opcode's place in a message.
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace uroce::wire {

// Extension headers in the order they follow the BTH (IBA 9.2, figure 9): the offset of each is
// the sum of the sizes of the ones before it that the opcode carries.
// XRCETH (annex A14: 8 reserved bits, then the 24-bit XRC SRQ number) comes right after the BTH
// (and where RD/UD would have their RDETH/DETH), before RETH and AtomicETH.
enum Header : uint16_t {
  kDeth = 1u << 0,
  kXrcEth = 1u << 1,
  kReth = 1u << 2,
  kAtomicEth = 1u << 3,
  kAeth = 1u << 4,
  kAtomicAckEth = 1u << 5,
  kImmDt = 1u << 6,
  kIeth = 1u << 7,
  kCnpReserved = 1u << 8,
};
inline constexpr int kHeaderCount = 9;
inline constexpr std::array<uint8_t, kHeaderCount> kHeaderBytes = {8, 4, 16, 28, 4, 8, 4, 4, 16};
inline constexpr uint32_t kBthBytes = 12;
inline constexpr uint32_t kIcrcBytes = 4;
inline constexpr uint16_t kRoceV2Port = 4791;

constexpr uint32_t header_offset(uint16_t present, Header which) {
  uint32_t off = kBthBytes;
  for (int i = 0; i < kHeaderCount && (1u << i) != which; ++i)
    if (present & (1u << i)) off += kHeaderBytes[i];
  return off;
}
constexpr uint32_t headers_bytes(uint16_t present) {
  uint32_t n = kBthBytes;
  for (int i = 0; i < kHeaderCount; ++i)
    if (present & (1u << i)) n += kHeaderBytes[i];
  return n;
}

enum class Service : uint8_t { kRc, kUc, kUd, kCnp, kXrc };
enum class Place : uint8_t { kNone, kFirst, kMiddle, kLast, kOnly };
enum class Kind : uint8_t {
  kInvalid,
  kSend,
  kWrite,
  kReadRequest,
  kReadResponse,
  kAck,
  kAtomicAck,
  kCompareSwap,
  kFetchAdd,
  kCnp,
};

struct OpcodeInfo {
  std::string_view name;  // as in IBA table 38, e.g. "RC_SEND_FIRST"
  Service service = Service::kRc;
  Kind kind = Kind::kInvalid;
  Place place = Place::kNone;
  uint16_t headers = 0;  // Header bits
  bool payload = false;  // may carry payload (0 bytes allowed only where the spec allows it)
  uint32_t header_bytes = 0;
  // Where each extension header the opcode carries starts (header_offset(headers, h)), so that
  // the per-packet parse and build read it instead of summing the sizes before it.
  std::array<uint8_t, kHeaderCount> offsets{};

  constexpr bool valid() const { return kind != Kind::kInvalid; }
  constexpr uint32_t offset(Header h) const {
    return offsets[static_cast<size_t>(std::countr_zero(static_cast<unsigned>(h)))];
  }
  constexpr bool has(Header h) const { return (headers & h) != 0; }
  constexpr bool is_request() const {
    return kind == Kind::kSend || kind == Kind::kWrite || kind == Kind::kReadRequest ||
           kind == Kind::kCompareSwap || kind == Kind::kFetchAdd;
  }
  constexpr bool is_response() const {
    return kind == Kind::kReadResponse || kind == Kind::kAck || kind == Kind::kAtomicAck;
  }
  constexpr bool starts_message() const { return place == Place::kFirst || place == Place::kOnly; }
  constexpr bool ends_message() const { return place == Place::kLast || place == Place::kOnly; }
};

namespace op {
// RC
inline constexpr uint8_t kRcSendFirst = 0x00, kRcSendMiddle = 0x01, kRcSendLast = 0x02,
                         kRcSendLastImm = 0x03, kRcSendOnly = 0x04, kRcSendOnlyImm = 0x05,
                         kRcWriteFirst = 0x06, kRcWriteMiddle = 0x07, kRcWriteLast = 0x08,
                         kRcWriteLastImm = 0x09, kRcWriteOnly = 0x0a, kRcWriteOnlyImm = 0x0b,
                         kRcReadRequest = 0x0c, kRcReadResponseFirst = 0x0d,
                         kRcReadResponseMiddle = 0x0e, kRcReadResponseLast = 0x0f,
                         kRcReadResponseOnly = 0x10, kRcAck = 0x11, kRcAtomicAck = 0x12,
                         kRcCompareSwap = 0x13, kRcFetchAdd = 0x14, kRcSendLastInv = 0x16,
                         kRcSendOnlyInv = 0x17;
// UC: the RC opcode | 0x20 for the SEND and WRITE family.
inline constexpr uint8_t kUcBase = 0x20;
// XRC (annex A14, transport 0b101): the RC opcode | 0xa0, for every RC opcode. Requests carry an
// XRCETH; responses (READ responses, ACK, atomic ACK) do not.
inline constexpr uint8_t kXrcBase = 0xa0;
// UD
inline constexpr uint8_t kUdSendOnly = 0x64, kUdSendOnlyImm = 0x65;
// RoCEv2 congestion notification packet.
inline constexpr uint8_t kCnp = 0x81;
}  // namespace op

namespace detail {
// IBA table 38's names for the XRC opcodes, indexed by the RC opcode they mirror.
inline constexpr std::array<std::string_view, op::kRcSendOnlyInv + 1> kXrcNames = {
    "XRC_SEND_FIRST",
    "XRC_SEND_MIDDLE",
    "XRC_SEND_LAST",
    "XRC_SEND_LAST_WITH_IMMEDIATE",
    "XRC_SEND_ONLY",
    "XRC_SEND_ONLY_WITH_IMMEDIATE",
    "XRC_RDMA_WRITE_FIRST",
    "XRC_RDMA_WRITE_MIDDLE",
    "XRC_RDMA_WRITE_LAST",
    "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "XRC_RDMA_WRITE_ONLY",
    "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    "XRC_RDMA_READ_REQUEST",
    "XRC_RDMA_READ_RESPONSE_FIRST",
    "XRC_RDMA_READ_RESPONSE_MIDDLE",
    "XRC_RDMA_READ_RESPONSE_LAST",
    "XRC_RDMA_READ_RESPONSE_ONLY",
    "XRC_ACKNOWLEDGE",
    "XRC_ATOMIC_ACKNOWLEDGE",
    "XRC_CMP_SWAP",
    "XRC_FETCH_ADD",
    "",
    "XRC_SEND_LAST_WITH_INVALIDATE",
    "XRC_SEND_ONLY_WITH_INVALIDATE",
};
constexpr OpcodeInfo make(std::string_view name, Service s, Kind k, Place p, uint16_t h, bool pay) {
  OpcodeInfo info{name, s, k, p, h, pay, headers_bytes(h)};
  for (int i = 0; i < kHeaderCount; ++i)
    if (h & (1u << i)) info.offsets[i] = static_cast<uint8_t>(header_offset(h, Header(1u << i)));
  return info;
}
constexpr std::array<OpcodeInfo, 256> build_table() {
  std::array<OpcodeInfo, 256> t{};
  using enum Kind;
  using enum Place;
  constexpr Service rc = Service::kRc, uc = Service::kUc;
  t[op::kRcSendFirst] = make("RC_SEND_FIRST", rc, kSend, kFirst, 0, true);
  t[op::kRcSendMiddle] = make("RC_SEND_MIDDLE", rc, kSend, kMiddle, 0, true);
  t[op::kRcSendLast] = make("RC_SEND_LAST", rc, kSend, kLast, 0, true);
  t[op::kRcSendLastImm] = make("RC_SEND_LAST_WITH_IMMEDIATE", rc, kSend, kLast, kImmDt, true);
  t[op::kRcSendOnly] = make("RC_SEND_ONLY", rc, kSend, kOnly, 0, true);
  t[op::kRcSendOnlyImm] = make("RC_SEND_ONLY_WITH_IMMEDIATE", rc, kSend, kOnly, kImmDt, true);
  t[op::kRcWriteFirst] = make("RC_RDMA_WRITE_FIRST", rc, kWrite, kFirst, kReth, true);
  t[op::kRcWriteMiddle] = make("RC_RDMA_WRITE_MIDDLE", rc, kWrite, kMiddle, 0, true);
  t[op::kRcWriteLast] = make("RC_RDMA_WRITE_LAST", rc, kWrite, kLast, 0, true);
  t[op::kRcWriteLastImm] =
      make("RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", rc, kWrite, kLast, kImmDt, true);
  t[op::kRcWriteOnly] = make("RC_RDMA_WRITE_ONLY", rc, kWrite, kOnly, kReth, true);
  t[op::kRcWriteOnlyImm] =
      make("RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", rc, kWrite, kOnly, kReth | kImmDt, true);
  t[op::kRcReadRequest] = make("RC_RDMA_READ_REQUEST", rc, kReadRequest, kOnly, kReth, false);
  t[op::kRcReadResponseFirst] =
      make("RC_RDMA_READ_RESPONSE_FIRST", rc, kReadResponse, kFirst, kAeth, true);
  t[op::kRcReadResponseMiddle] =
      make("RC_RDMA_READ_RESPONSE_MIDDLE", rc, kReadResponse, kMiddle, 0, true);
  t[op::kRcReadResponseLast] =
      make("RC_RDMA_READ_RESPONSE_LAST", rc, kReadResponse, kLast, kAeth, true);
  t[op::kRcReadResponseOnly] =
      make("RC_RDMA_READ_RESPONSE_ONLY", rc, kReadResponse, kOnly, kAeth, true);
  t[op::kRcAck] = make("RC_ACKNOWLEDGE", rc, kAck, kOnly, kAeth, false);
  t[op::kRcAtomicAck] =
      make("RC_ATOMIC_ACKNOWLEDGE", rc, kAtomicAck, kOnly, kAeth | kAtomicAckEth, false);
  t[op::kRcCompareSwap] = make("RC_CMP_SWAP", rc, kCompareSwap, kOnly, kAtomicEth, false);
  t[op::kRcFetchAdd] = make("RC_FETCH_ADD", rc, kFetchAdd, kOnly, kAtomicEth, false);
  t[op::kRcSendLastInv] = make("RC_SEND_LAST_WITH_INVALIDATE", rc, kSend, kLast, kIeth, true);
  t[op::kRcSendOnlyInv] = make("RC_SEND_ONLY_WITH_INVALIDATE", rc, kSend, kOnly, kIeth, true);

  constexpr uint8_t b = op::kUcBase;
  t[b | op::kRcSendFirst] = make("UC_SEND_FIRST", uc, kSend, kFirst, 0, true);
  t[b | op::kRcSendMiddle] = make("UC_SEND_MIDDLE", uc, kSend, kMiddle, 0, true);
  t[b | op::kRcSendLast] = make("UC_SEND_LAST", uc, kSend, kLast, 0, true);
  t[b | op::kRcSendLastImm] = make("UC_SEND_LAST_WITH_IMMEDIATE", uc, kSend, kLast, kImmDt, true);
  t[b | op::kRcSendOnly] = make("UC_SEND_ONLY", uc, kSend, kOnly, 0, true);
  t[b | op::kRcSendOnlyImm] = make("UC_SEND_ONLY_WITH_IMMEDIATE", uc, kSend, kOnly, kImmDt, true);
  t[b | op::kRcWriteFirst] = make("UC_RDMA_WRITE_FIRST", uc, kWrite, kFirst, kReth, true);
  t[b | op::kRcWriteMiddle] = make("UC_RDMA_WRITE_MIDDLE", uc, kWrite, kMiddle, 0, true);
  t[b | op::kRcWriteLast] = make("UC_RDMA_WRITE_LAST", uc, kWrite, kLast, 0, true);
  t[b | op::kRcWriteLastImm] =
      make("UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", uc, kWrite, kLast, kImmDt, true);
  t[b | op::kRcWriteOnly] = make("UC_RDMA_WRITE_ONLY", uc, kWrite, kOnly, kReth, true);
  t[b | op::kRcWriteOnlyImm] =
      make("UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", uc, kWrite, kOnly, kReth | kImmDt, true);

  t[op::kUdSendOnly] = make("UD_SEND_ONLY", Service::kUd, kSend, kOnly, kDeth, true);
  t[op::kUdSendOnlyImm] =
      make("UD_SEND_ONLY_WITH_IMMEDIATE", Service::kUd, kSend, kOnly, kDeth | kImmDt, true);

  // XRC: the RC table moved to transport 0b101, with an XRCETH on every request.
  for (uint8_t rc_op = 0; rc_op <= op::kRcSendOnlyInv; ++rc_op) {
    const OpcodeInfo& r = t[rc_op];
    if (!r.valid()) continue;
    const uint16_t h = r.is_request() ? static_cast<uint16_t>(r.headers | kXrcEth) : r.headers;
    t[op::kXrcBase | rc_op] = make(kXrcNames[rc_op], Service::kXrc, r.kind, r.place, h, r.payload);
  }

  t[op::kCnp] = make("CNP", Service::kCnp, kCnp, kOnly, kCnpReserved, false);
  return t;
}
}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable = detail::build_table();

constexpr const OpcodeInfo& opcode_info(uint8_t opcode) {
  return kOpcodeTable[opcode];
}

static_assert(kOpcodeTable[op::kRcWriteOnlyImm].header_bytes == 12 + 16 + 4);
static_assert(kOpcodeTable[op::kRcAtomicAck].header_bytes == 12 + 4 + 8);
static_assert(kOpcodeTable[op::kCnp].header_bytes == 12 + 16);
static_assert(header_offset(kReth | kImmDt, kImmDt) == 12 + 16);
static_assert(kOpcodeTable[op::kXrcBase | op::kRcWriteOnlyImm].header_bytes == 12 + 4 + 16 + 4);
static_assert(kOpcodeTable[op::kXrcBase | op::kRcFetchAdd].header_bytes == 12 + 4 + 28);
static_assert(kOpcodeTable[op::kXrcBase | op::kRcAck].header_bytes == 12 + 4);
static_assert(header_offset(kXrcEth | kReth, kReth) == 12 + 4);
static_assert(kOpcodeTable[op::kRcWriteOnlyImm].offset(kImmDt) == 12 + 16);
static_assert(kOpcodeTable[op::kXrcBase | op::kRcWriteFirst].offset(kReth) == 12 + 4);
static_assert(kOpcodeTable[op::kRcAtomicAck].offset(kAtomicAckEth) == 12 + 4);

}  // namespace uroce::wire
