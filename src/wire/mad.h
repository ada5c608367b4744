#pragma once
// Management datagrams (IBA vol. 1 chapter 13) and the communication manager's messages (chapter
// 12) that travel in them, plus the two rdma_cm conventions layered on the CM: the service-ID
// layout (port space and port) and the IP header at the front of a REQ's or SIDR_REQ's private
// data. Every field is read and written at its explicit byte and bit offset (docs/cm.md lists
// them); nothing is cast onto a buffer.
//
// A CM MAD is 256 bytes: the 24-byte common MAD header and 232 bytes of CM message. On RoCEv2 it
// is the payload of a UD SEND ONLY to QPN 1 (the GSI QP) with Q_Key 0x80010000.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>

#include "common/result.h"

namespace uroce::wire {

inline constexpr uint32_t kMadBytes = 256, kMadHeaderBytes = 24, kMadDataBytes = 232;
inline constexpr uint8_t kMadBaseVersion = 1;
inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint8_t kMadMethodSend = 0x03;  // every CM message uses Send
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkey = 0x80010000;

// The common MAD header (IBA 13.4.2). `method` is the 7-bit method; `response` the R bit above it.
struct MadHeader {
  uint8_t base_version = kMadBaseVersion;
  uint8_t mgmt_class = kMgmtClassCm;
  uint8_t class_version = kCmClassVersion;
  bool response = false;
  uint8_t method = kMadMethodSend;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t transaction_id = 0;
  uint16_t attribute_id = 0;
  // In a REQ, REP or SIDR_REP: the sender's ECE options (Enhanced Connection Establishment, IBA
  // comment 9434, as Linux's CM; docs/cm.md); 0 in the other CM messages.
  uint32_t attribute_modifier = 0;

  bool operator==(const MadHeader&) const = default;
};

// CM attribute IDs (IBA table 104).
namespace cm_attr {
inline constexpr uint16_t kClassPortInfo = 0x0001, kReq = 0x0010, kMra = 0x0011, kRej = 0x0012,
                          kRep = 0x0013, kRtu = 0x0014, kDreq = 0x0015, kDrep = 0x0016,
                          kSidrReq = 0x0017, kSidrRep = 0x0018, kLap = 0x0019, kApr = 0x001a;
}

// Private data sizes, fixed by the message layouts.
inline constexpr uint32_t kReqPrivateBytes = 92, kMraPrivateBytes = 222, kRejPrivateBytes = 148,
                          kRepPrivateBytes = 196, kRtuPrivateBytes = 224, kDreqPrivateBytes = 220,
                          kDrepPrivateBytes = 224, kSidrReqPrivateBytes = 216,
                          kSidrRepPrivateBytes = 136;
inline constexpr uint32_t kRejAriBytes = 72, kSidrRepInfoBytes = 72;

// REQ transport service type (byte 43, bits 2:1).
enum class CmTransport : uint8_t { kRc = 0, kUc = 1, kRd = 2, kExtended = 3 };
// The REQ's extended transport type under CmTransport::kExtended (IBA 12.6.5, Linux's
// cm_req_set_qp_type): 1 = XRC.
inline constexpr uint8_t kExtendedTransportXrc = 1;

// One path of a REQ (primary or alternate), bytes 52..95 or 96..139 of the message.
struct CmPath {
  uint16_t local_lid = 0xffff;  // RoCE: permissive LID, the GIDs address the path
  uint16_t remote_lid = 0xffff;
  std::array<uint8_t, 16> local_gid{};
  std::array<uint8_t, 16> remote_gid{};
  uint32_t flow_label = 0;  // 20 bits
  uint8_t packet_rate = 0;  // 6 bits
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;  // 4 bits
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;  // 5 bits

  bool operator==(const CmPath&) const = default;
};

struct CmReq {
  uint32_t local_comm_id = 0;
  uint32_t vendor_id = 0;  // 24 bits at byte 5: ECE (its options are the attribute modifier)
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;  // 24 bits
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;  // 24 bits
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;                // 24 bits
  uint8_t remote_cm_response_timeout = 0;  // 5 bits: 4.096 us * 2^n
  CmTransport transport = CmTransport::kRc;
  bool end_to_end_flow_control = false;
  uint32_t starting_psn = 0;              // 24 bits
  uint8_t local_cm_response_timeout = 0;  // 5 bits
  uint8_t retry_count = 0;                // 3 bits
  uint16_t pkey = 0xffff;
  uint8_t path_mtu = 0;  // 4 bits, the IBA MTU enum (1 = 256 .. 5 = 4096)
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  uint8_t extended_transport = 0;  // 3 bits
  CmPath primary;
  CmPath alternate;
  bool sap_supported = false;
  std::array<uint8_t, kReqPrivateBytes> private_data{};

  bool operator==(const CmReq&) const = default;
};

// Which message an MRA or REJ answers (2 bits).
enum class CmMessageRef : uint8_t { kReq = 0, kRep = 1, kLap = 2, kOther = 3 };

struct CmMra {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  CmMessageRef message_mraed = CmMessageRef::kReq;
  uint8_t service_timeout = 0;  // 5 bits: the extra time asked for, 4.096 us * 2^n
  std::array<uint8_t, kMraPrivateBytes> private_data{};

  bool operator==(const CmMra&) const = default;
};

// REJ reasons used here (IBA table 109).
namespace rej_reason {
inline constexpr uint16_t kNoQp = 1, kNoEec = 2, kNoResources = 3, kTimeout = 4,
                          kUnsupportedReq = 5, kInvalidCommId = 6, kInvalidCommInstance = 7,
                          kInvalidServiceId = 8, kInvalidTransportType = 9, kStaleConn = 10,
                          kRdcNotExist = 11, kConsumerDefined = 28, kInvalidClassVersion = 31,
                          kVendorOptionNotSupported = 35;
}

struct CmRej {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  CmMessageRef message_rejected = CmMessageRef::kReq;
  uint8_t reject_info_length = 0;  // 7 bits, at most kRejAriBytes
  uint16_t reason = 0;
  std::array<uint8_t, kRejAriBytes> ari{};
  std::array<uint8_t, kRejPrivateBytes> private_data{};

  bool operator==(const CmRej&) const = default;
};

struct CmRep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;   // 24 bits
  uint32_t local_eecn = 0;  // 24 bits
  uint32_t starting_psn = 0;
  // 24 bits: ECE, its bytes after the QPN, the EECN and the PSN (bytes 15, 19, 23: high to low).
  uint32_t vendor_id = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;   // 5 bits
  uint8_t failover_accepted = 0;  // 2 bits
  bool end_to_end_flow_control = false;
  uint8_t rnr_retry_count = 0;  // 3 bits
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, kRepPrivateBytes> private_data{};

  bool operator==(const CmRep&) const = default;
};

struct CmRtu {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kRtuPrivateBytes> private_data{};

  bool operator==(const CmRtu&) const = default;
};

struct CmDreq {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;  // 24 bits: the receiver's QPN
  std::array<uint8_t, kDreqPrivateBytes> private_data{};

  bool operator==(const CmDreq&) const = default;
};

struct CmDrep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kDrepPrivateBytes> private_data{};

  bool operator==(const CmDrep&) const = default;
};

struct CmSidrReq {
  uint32_t request_id = 0;
  uint16_t pkey = 0xffff;
  uint64_t service_id = 0;
  std::array<uint8_t, kSidrReqPrivateBytes> private_data{};

  bool operator==(const CmSidrReq&) const = default;
};

// SIDR_REP status (IBA table 121).
namespace sidr_status {
inline constexpr uint8_t kValid = 0, kServiceIdNotSupported = 1, kRejected = 2, kNoQp = 3,
                         kRedirect = 4, kUnsupportedVersion = 5;
}

struct CmSidrRep {
  uint32_t request_id = 0;
  uint8_t status = sidr_status::kValid;
  uint8_t info_length = 0;  // at most kSidrRepInfoBytes
  uint32_t qpn = 0;         // 24 bits
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  uint32_t vendor_id = 0;  // 24 bits: ECE, its upper 16 at byte 6, its low 8 at byte 11
  std::array<uint8_t, kSidrRepInfoBytes> info{};
  std::array<uint8_t, kSidrRepPrivateBytes> private_data{};

  bool operator==(const CmSidrRep&) const = default;
};

using CmMessage =
    std::variant<CmReq, CmMra, CmRej, CmRep, CmRtu, CmDreq, CmDrep, CmSidrReq, CmSidrRep>;

// The attribute ID that carries each message.
uint16_t cm_attribute_id(const CmMessage& m);
std::string_view cm_message_name(const CmMessage& m);

struct CmMad {
  MadHeader header;  // attribute_id is set from the message when built
  CmMessage message;

  bool operator==(const CmMad&) const = default;
};

enum class MadError : uint8_t {
  kBadLength,             // not exactly kMadBytes
  kBadBaseVersion,        // base version != 1
  kNotCm,                 // management class != CM
  kBadClassVersion,       // CM class version != 2
  kBadMethod,             // not Send, or the response bit set
  kUnsupportedAttribute,  // ClassPortInfo, LAP, APR or an unknown attribute ID
  kBadField,              // a length field past its area (REJ ARI, SIDR_REP info)
  kTruncated,             // an rdma_cm header or private data shorter than its layout
  kBadCmaVersion,         // rdma_cm header version != 0
  kBadIpVersion,          // rdma_cm header IP version neither 4 nor 6
  kNotRdmaServiceId,      // service ID outside rdma_cm's 0x00000000_01xx_xxxx range
};
std::string_view to_string(MadError e);

template <typename T>
using MadResult = Result<T, MadError>;

// Parses a whole MAD: the header must say CM (class 7, versions 1 and 2, method Send) and the
// attribute one of the nine messages above. Reserved bits are ignored, as IBA 13.4.2 asks.
MadResult<CmMad> parse_cm_mad(std::span<const uint8_t> bytes);
// Parses only the common header (any class).
MadResult<MadHeader> parse_mad_header(std::span<const uint8_t> bytes);

// Writes the 256-byte MAD: the header with attribute_id taken from the message, reserved bits 0.
void build_cm_mad(const CmMad& mad, std::span<uint8_t, kMadBytes> out);
std::array<uint8_t, kMadBytes> build_cm_mad(const CmMad& mad);

// ---- rdma_cm conventions ------------------------------------------------------------------

// Port spaces (rdma/rdma_cma.h RDMA_PS_*) and rdma_cm's service ID: 0x0000000001 | ps | port.
enum class RdmaPortSpace : uint8_t { kIpoib = 0x02, kIb = 0x3f, kTcp = 0x06, kUdp = 0x11 };
inline constexpr uint64_t kRdmaServiceIdPrefix = 0x0000000001000000ull;
constexpr uint64_t rdma_service_id(RdmaPortSpace ps, uint16_t port) {
  return kRdmaServiceIdPrefix | uint64_t{static_cast<uint8_t>(ps)} << 16 | port;
}
struct RdmaServiceId {
  RdmaPortSpace port_space = RdmaPortSpace::kTcp;
  uint16_t port = 0;

  bool operator==(const RdmaServiceId&) const = default;
};
// kNotRdmaServiceId when the prefix differs or the port space is not one of the four.
MadResult<RdmaServiceId> parse_rdma_service_id(uint64_t service_id);

// The kernel's struct cma_hdr at the front of REQ and SIDR_REQ private data: version (0), IP
// version in the upper nibble, the active side's source port, then source and destination
// addresses of 16 bytes each. An IPv4 address fills the last 4 of its 16 bytes and the kernel
// leaves the 12 before it zero; the parser takes the last 4 whatever precedes them.
inline constexpr uint32_t kCmaHeaderBytes = 36;
inline constexpr uint8_t kCmaVersion = 0x00;
struct CmaHeader {
  uint8_t ip_version = 4;  // 4 or 6
  uint16_t src_port = 0;
  std::array<uint8_t, 16> src{};  // IPv4: bytes 12..15
  std::array<uint8_t, 16> dst{};

  static CmaHeader ipv4(std::array<uint8_t, 4> src, std::array<uint8_t, 4> dst, uint16_t port);
  std::array<uint8_t, 4> src_ipv4() const { return {src[12], src[13], src[14], src[15]}; }
  std::array<uint8_t, 4> dst_ipv4() const { return {dst[12], dst[13], dst[14], dst[15]}; }

  bool operator==(const CmaHeader&) const = default;
};
MadResult<CmaHeader> parse_cma_header(std::span<const uint8_t> private_data);
// Writes kCmaHeaderBytes; an IPv4 header gets its 12 pad bytes zeroed. `out` must hold them.
void write_cma_header(const CmaHeader& h, std::span<uint8_t> out);

}  // namespace uroce::wire
