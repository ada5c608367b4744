#include "wire/mad.h"

#include <cstring>

#include "common/bytes.h"

namespace uroce::wire {
namespace {

// Bits of one byte, counted as IBA counts them: offset 0 is the most significant bit.
uint8_t get_bits(const uint8_t* p, unsigned offset, unsigned width) {
  return static_cast<uint8_t>((p[0] >> (8 - offset - width)) & ((1u << width) - 1));
}
void put_bits(uint8_t* p, unsigned offset, unsigned width, unsigned value) {
  const unsigned shift = 8 - offset - width;
  const unsigned mask = ((1u << width) - 1) << shift;
  p[0] = static_cast<uint8_t>((p[0] & ~mask) | ((value << shift) & mask));
}

template <size_t N>
void get_bytes(const uint8_t* p, std::array<uint8_t, N>& out) {
  std::memcpy(out.data(), p, N);
}
template <size_t N>
void put_bytes(uint8_t* p, const std::array<uint8_t, N>& in) {
  std::memcpy(p, in.data(), N);
}

// Offsets below are from the start of the CM message, byte 24 of the MAD.
constexpr uint32_t kReqPrimaryPath = 52, kReqAlternatePath = 96, kReqPrivate = 140;
constexpr uint32_t kMraPrivate = 10, kRejAri = 12, kRejPrivate = 84, kRepPrivate = 36,
                   kRtuPrivate = 8, kDreqPrivate = 12, kDrepPrivate = 8, kSidrReqPrivate = 16,
                   kSidrRepInfo = 24, kSidrRepPrivate = 96;
static_assert(kReqPrivate + kReqPrivateBytes == kMadDataBytes);
static_assert(kMraPrivate + kMraPrivateBytes == kMadDataBytes);
static_assert(kRejPrivate + kRejPrivateBytes == kMadDataBytes);
static_assert(kRejAri + kRejAriBytes == kRejPrivate);
static_assert(kRepPrivate + kRepPrivateBytes == kMadDataBytes);
static_assert(kRtuPrivate + kRtuPrivateBytes == kMadDataBytes);
static_assert(kDreqPrivate + kDreqPrivateBytes == kMadDataBytes);
static_assert(kDrepPrivate + kDrepPrivateBytes == kMadDataBytes);
static_assert(kSidrReqPrivate + kSidrReqPrivateBytes == kMadDataBytes);
static_assert(kSidrRepPrivate + kSidrRepPrivateBytes == kMadDataBytes);
static_assert(kSidrRepInfo + kSidrRepInfoBytes == kSidrRepPrivate);

// A path: LIDs, GIDs, then flow label (20 bits) / packet rate (low 6 bits of the same word),
// traffic class, hop limit, SL (4) and subnet local (1), local ACK timeout (upper 5 bits).
void get_path(const uint8_t* p, CmPath& path) {
  path.local_lid = load_be16(p + 0);
  path.remote_lid = load_be16(p + 2);
  get_bytes(p + 4, path.local_gid);
  get_bytes(p + 20, path.remote_gid);
  path.flow_label = load_be32(p + 36) >> 12;
  path.packet_rate = get_bits(p + 39, 2, 6);
  path.traffic_class = p[40];
  path.hop_limit = p[41];
  path.sl = get_bits(p + 42, 0, 4);
  path.subnet_local = get_bits(p + 42, 4, 1);
  path.local_ack_timeout = get_bits(p + 43, 0, 5);
}
void put_path(uint8_t* p, const CmPath& path) {
  store_be16(p + 0, path.local_lid);
  store_be16(p + 2, path.remote_lid);
  put_bytes(p + 4, path.local_gid);
  put_bytes(p + 20, path.remote_gid);
  store_be32(p + 36, (path.flow_label & 0xfffff) << 12);
  put_bits(p + 39, 2, 6, path.packet_rate);
  p[40] = path.traffic_class;
  p[41] = path.hop_limit;
  put_bits(p + 42, 0, 4, path.sl);
  put_bits(p + 42, 4, 1, path.subnet_local);
  put_bits(p + 43, 0, 5, path.local_ack_timeout);
}

CmReq get_req(const uint8_t* p) {
  CmReq m;
  m.local_comm_id = load_be32(p + 0);
  m.vendor_id = load_be24(p + 5);
  m.service_id = load_be64(p + 8);
  m.local_ca_guid = load_be64(p + 16);
  m.local_qkey = load_be32(p + 28);
  m.local_qpn = load_be24(p + 32);
  m.responder_resources = p[35];
  m.local_eecn = load_be24(p + 36);
  m.initiator_depth = p[39];
  m.remote_eecn = load_be24(p + 40);
  m.remote_cm_response_timeout = get_bits(p + 43, 0, 5);
  m.transport = static_cast<CmTransport>(get_bits(p + 43, 5, 2));
  m.end_to_end_flow_control = get_bits(p + 43, 7, 1);
  m.starting_psn = load_be24(p + 44);
  m.local_cm_response_timeout = get_bits(p + 47, 0, 5);
  m.retry_count = get_bits(p + 47, 5, 3);
  m.pkey = load_be16(p + 48);
  m.path_mtu = get_bits(p + 50, 0, 4);
  m.rdc_exists = get_bits(p + 50, 4, 1);
  m.rnr_retry_count = get_bits(p + 50, 5, 3);
  m.max_cm_retries = get_bits(p + 51, 0, 4);
  m.srq = get_bits(p + 51, 4, 1);
  m.extended_transport = get_bits(p + 51, 5, 3);
  get_path(p + kReqPrimaryPath, m.primary);
  get_path(p + kReqAlternatePath, m.alternate);
  m.sap_supported = get_bits(p + 139, 5, 1);
  get_bytes(p + kReqPrivate, m.private_data);
  return m;
}
void put_req(uint8_t* p, const CmReq& m) {
  store_be32(p + 0, m.local_comm_id);
  store_be24(p + 5, m.vendor_id);
  store_be64(p + 8, m.service_id);
  store_be64(p + 16, m.local_ca_guid);
  store_be32(p + 28, m.local_qkey);
  store_be24(p + 32, m.local_qpn);
  p[35] = m.responder_resources;
  store_be24(p + 36, m.local_eecn);
  p[39] = m.initiator_depth;
  store_be24(p + 40, m.remote_eecn);
  put_bits(p + 43, 0, 5, m.remote_cm_response_timeout);
  put_bits(p + 43, 5, 2, static_cast<unsigned>(m.transport));
  put_bits(p + 43, 7, 1, m.end_to_end_flow_control);
  store_be24(p + 44, m.starting_psn);
  put_bits(p + 47, 0, 5, m.local_cm_response_timeout);
  put_bits(p + 47, 5, 3, m.retry_count);
  store_be16(p + 48, m.pkey);
  put_bits(p + 50, 0, 4, m.path_mtu);
  put_bits(p + 50, 4, 1, m.rdc_exists);
  put_bits(p + 50, 5, 3, m.rnr_retry_count);
  put_bits(p + 51, 0, 4, m.max_cm_retries);
  put_bits(p + 51, 4, 1, m.srq);
  put_bits(p + 51, 5, 3, m.extended_transport);
  put_path(p + kReqPrimaryPath, m.primary);
  put_path(p + kReqAlternatePath, m.alternate);
  put_bits(p + 139, 5, 1, m.sap_supported);
  put_bytes(p + kReqPrivate, m.private_data);
}

CmMra get_mra(const uint8_t* p) {
  CmMra m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  m.message_mraed = static_cast<CmMessageRef>(get_bits(p + 8, 0, 2));
  m.service_timeout = get_bits(p + 9, 0, 5);
  get_bytes(p + kMraPrivate, m.private_data);
  return m;
}
void put_mra(uint8_t* p, const CmMra& m) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  put_bits(p + 8, 0, 2, static_cast<unsigned>(m.message_mraed));
  put_bits(p + 9, 0, 5, m.service_timeout);
  put_bytes(p + kMraPrivate, m.private_data);
}

CmRej get_rej(const uint8_t* p) {
  CmRej m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  m.message_rejected = static_cast<CmMessageRef>(get_bits(p + 8, 0, 2));
  m.reject_info_length = get_bits(p + 9, 0, 7);
  m.reason = load_be16(p + 10);
  get_bytes(p + kRejAri, m.ari);
  get_bytes(p + kRejPrivate, m.private_data);
  return m;
}
void put_rej(uint8_t* p, const CmRej& m) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  put_bits(p + 8, 0, 2, static_cast<unsigned>(m.message_rejected));
  put_bits(p + 9, 0, 7, m.reject_info_length);
  store_be16(p + 10, m.reason);
  put_bytes(p + kRejAri, m.ari);
  put_bytes(p + kRejPrivate, m.private_data);
}

CmRep get_rep(const uint8_t* p) {
  CmRep m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  m.local_qkey = load_be32(p + 8);
  m.local_qpn = load_be24(p + 12);
  m.local_eecn = load_be24(p + 16);
  m.starting_psn = load_be24(p + 20);
  m.vendor_id = uint32_t{p[15]} << 16 | uint32_t{p[19]} << 8 | p[23];
  m.responder_resources = p[24];
  m.initiator_depth = p[25];
  m.target_ack_delay = get_bits(p + 26, 0, 5);
  m.failover_accepted = get_bits(p + 26, 5, 2);
  m.end_to_end_flow_control = get_bits(p + 26, 7, 1);
  m.rnr_retry_count = get_bits(p + 27, 0, 3);
  m.srq = get_bits(p + 27, 3, 1);
  m.local_ca_guid = load_be64(p + 28);
  get_bytes(p + kRepPrivate, m.private_data);
  return m;
}
void put_rep(uint8_t* p, const CmRep& m) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  store_be32(p + 8, m.local_qkey);
  store_be24(p + 12, m.local_qpn);
  store_be24(p + 16, m.local_eecn);
  store_be24(p + 20, m.starting_psn);
  p[15] = uint8_t(m.vendor_id >> 16);
  p[19] = uint8_t(m.vendor_id >> 8);
  p[23] = uint8_t(m.vendor_id);
  p[24] = m.responder_resources;
  p[25] = m.initiator_depth;
  put_bits(p + 26, 0, 5, m.target_ack_delay);
  put_bits(p + 26, 5, 2, m.failover_accepted);
  put_bits(p + 26, 7, 1, m.end_to_end_flow_control);
  put_bits(p + 27, 0, 3, m.rnr_retry_count);
  put_bits(p + 27, 3, 1, m.srq);
  store_be64(p + 28, m.local_ca_guid);
  put_bytes(p + kRepPrivate, m.private_data);
}

CmRtu get_rtu(const uint8_t* p) {
  CmRtu m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  get_bytes(p + kRtuPrivate, m.private_data);
  return m;
}
void put_rtu(uint8_t* p, const CmRtu& m) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  put_bytes(p + kRtuPrivate, m.private_data);
}

CmDreq get_dreq(const uint8_t* p) {
  CmDreq m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  m.remote_qpn = load_be24(p + 8);
  get_bytes(p + kDreqPrivate, m.private_data);
  return m;
}
void put_dreq(uint8_t* p, const CmDreq& m) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  store_be24(p + 8, m.remote_qpn);
  put_bytes(p + kDreqPrivate, m.private_data);
}

CmDrep get_drep(const uint8_t* p) {
  CmDrep m;
  m.local_comm_id = load_be32(p + 0);
  m.remote_comm_id = load_be32(p + 4);
  get_bytes(p + kDrepPrivate, m.private_data);
  return m;
}
void put_drep(uint8_t* p, const CmDrep& m) {
  store_be32(p + 0, m.local_comm_id);
  store_be32(p + 4, m.remote_comm_id);
  put_bytes(p + kDrepPrivate, m.private_data);
}

CmSidrReq get_sidr_req(const uint8_t* p) {
  CmSidrReq m;
  m.request_id = load_be32(p + 0);
  m.pkey = load_be16(p + 4);
  m.service_id = load_be64(p + 8);
  get_bytes(p + kSidrReqPrivate, m.private_data);
  return m;
}
void put_sidr_req(uint8_t* p, const CmSidrReq& m) {
  store_be32(p + 0, m.request_id);
  store_be16(p + 4, m.pkey);
  store_be64(p + 8, m.service_id);
  put_bytes(p + kSidrReqPrivate, m.private_data);
}

CmSidrRep get_sidr_rep(const uint8_t* p) {
  CmSidrRep m;
  m.request_id = load_be32(p + 0);
  m.status = p[4];
  m.info_length = p[5];
  m.vendor_id = uint32_t{load_be16(p + 6)} << 8 | p[11];
  m.qpn = load_be24(p + 8);
  m.service_id = load_be64(p + 12);
  m.qkey = load_be32(p + 20);
  get_bytes(p + kSidrRepInfo, m.info);
  get_bytes(p + kSidrRepPrivate, m.private_data);
  return m;
}
void put_sidr_rep(uint8_t* p, const CmSidrRep& m) {
  store_be32(p + 0, m.request_id);
  p[4] = m.status;
  p[5] = m.info_length;
  store_be16(p + 6, uint16_t(m.vendor_id >> 8));
  store_be24(p + 8, m.qpn);
  p[11] = uint8_t(m.vendor_id);
  store_be64(p + 12, m.service_id);
  store_be32(p + 20, m.qkey);
  put_bytes(p + kSidrRepInfo, m.info);
  put_bytes(p + kSidrRepPrivate, m.private_data);
}

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace

uint16_t cm_attribute_id(const CmMessage& m) {
  return std::visit(Overloaded{
                        [](const CmReq&) { return cm_attr::kReq; },
                        [](const CmMra&) { return cm_attr::kMra; },
                        [](const CmRej&) { return cm_attr::kRej; },
                        [](const CmRep&) { return cm_attr::kRep; },
                        [](const CmRtu&) { return cm_attr::kRtu; },
                        [](const CmDreq&) { return cm_attr::kDreq; },
                        [](const CmDrep&) { return cm_attr::kDrep; },
                        [](const CmSidrReq&) { return cm_attr::kSidrReq; },
                        [](const CmSidrRep&) { return cm_attr::kSidrRep; },
                    },
                    m);
}

std::string_view cm_message_name(const CmMessage& m) {
  static constexpr std::string_view kNames[] = {"REQ",  "MRA",  "REJ",      "REP",     "RTU",
                                                "DREQ", "DREP", "SIDR_REQ", "SIDR_REP"};
  static_assert(std::size(kNames) == std::variant_size_v<CmMessage>);
  return kNames[m.index()];
}

std::string_view to_string(MadError e) {
  switch (e) {
    case MadError::kBadLength:
      return "MAD is not 256 bytes";
    case MadError::kBadBaseVersion:
      return "MAD base version is not 1";
    case MadError::kNotCm:
      return "management class is not CM";
    case MadError::kBadClassVersion:
      return "CM class version is not 2";
    case MadError::kBadMethod:
      return "CM method is not Send";
    case MadError::kUnsupportedAttribute:
      return "CM attribute not supported";
    case MadError::kBadField:
      return "CM length field past its area";
    case MadError::kTruncated:
      return "private data shorter than its layout";
    case MadError::kBadCmaVersion:
      return "rdma_cm header version is not 0";
    case MadError::kBadIpVersion:
      return "rdma_cm header IP version is neither 4 nor 6";
    case MadError::kNotRdmaServiceId:
      return "service ID is not an rdma_cm one";
  }
  return "unknown MAD error";
}

MadResult<MadHeader> parse_mad_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < kMadHeaderBytes) return Err(MadError::kBadLength);
  const uint8_t* p = bytes.data();
  MadHeader h;
  h.base_version = p[0];
  h.mgmt_class = p[1];
  h.class_version = p[2];
  h.response = get_bits(p + 3, 0, 1);
  h.method = get_bits(p + 3, 1, 7);
  h.status = load_be16(p + 4);
  h.class_specific = load_be16(p + 6);
  h.transaction_id = load_be64(p + 8);
  h.attribute_id = load_be16(p + 16);
  h.attribute_modifier = load_be32(p + 20);
  return h;
}

MadResult<CmMad> parse_cm_mad(std::span<const uint8_t> bytes) {
  if (bytes.size() != kMadBytes) return Err(MadError::kBadLength);
  auto header = parse_mad_header(bytes);
  if (!header) return Err(header.error());
  const MadHeader& h = *header;
  if (h.base_version != kMadBaseVersion) return Err(MadError::kBadBaseVersion);
  if (h.mgmt_class != kMgmtClassCm) return Err(MadError::kNotCm);
  if (h.class_version != kCmClassVersion) return Err(MadError::kBadClassVersion);
  if (h.response || h.method != kMadMethodSend) return Err(MadError::kBadMethod);
  const uint8_t* p = bytes.data() + kMadHeaderBytes;
  switch (h.attribute_id) {
    case cm_attr::kReq:
      return CmMad{h, get_req(p)};
    case cm_attr::kMra:
      return CmMad{h, get_mra(p)};
    case cm_attr::kRej: {
      CmRej m = get_rej(p);
      if (m.reject_info_length > kRejAriBytes) return Err(MadError::kBadField);
      return CmMad{h, m};
    }
    case cm_attr::kRep:
      return CmMad{h, get_rep(p)};
    case cm_attr::kRtu:
      return CmMad{h, get_rtu(p)};
    case cm_attr::kDreq:
      return CmMad{h, get_dreq(p)};
    case cm_attr::kDrep:
      return CmMad{h, get_drep(p)};
    case cm_attr::kSidrReq:
      return CmMad{h, get_sidr_req(p)};
    case cm_attr::kSidrRep: {
      CmSidrRep m = get_sidr_rep(p);
      if (m.info_length > kSidrRepInfoBytes) return Err(MadError::kBadField);
      return CmMad{h, m};
    }
    default:
      return Err(MadError::kUnsupportedAttribute);
  }
}

void build_cm_mad(const CmMad& mad, std::span<uint8_t, kMadBytes> out) {
  std::memset(out.data(), 0, out.size());
  uint8_t* p = out.data();
  const MadHeader& h = mad.header;
  p[0] = h.base_version;
  p[1] = h.mgmt_class;
  p[2] = h.class_version;
  put_bits(p + 3, 0, 1, h.response);
  put_bits(p + 3, 1, 7, h.method);
  store_be16(p + 4, h.status);
  store_be16(p + 6, h.class_specific);
  store_be64(p + 8, h.transaction_id);
  store_be16(p + 16, cm_attribute_id(mad.message));
  store_be32(p + 20, h.attribute_modifier);
  uint8_t* d = p + kMadHeaderBytes;
  std::visit(Overloaded{
                 [d](const CmReq& m) { put_req(d, m); },
                 [d](const CmMra& m) { put_mra(d, m); },
                 [d](const CmRej& m) { put_rej(d, m); },
                 [d](const CmRep& m) { put_rep(d, m); },
                 [d](const CmRtu& m) { put_rtu(d, m); },
                 [d](const CmDreq& m) { put_dreq(d, m); },
                 [d](const CmDrep& m) { put_drep(d, m); },
                 [d](const CmSidrReq& m) { put_sidr_req(d, m); },
                 [d](const CmSidrRep& m) { put_sidr_rep(d, m); },
             },
             mad.message);
}

std::array<uint8_t, kMadBytes> build_cm_mad(const CmMad& mad) {
  std::array<uint8_t, kMadBytes> out;
  build_cm_mad(mad, out);
  return out;
}

MadResult<RdmaServiceId> parse_rdma_service_id(uint64_t service_id) {
  if ((service_id & 0xffffffffff000000ull) != kRdmaServiceIdPrefix)
    return Err(MadError::kNotRdmaServiceId);
  const auto ps = static_cast<uint8_t>(service_id >> 16);
  switch (static_cast<RdmaPortSpace>(ps)) {
    case RdmaPortSpace::kIpoib:
    case RdmaPortSpace::kIb:
    case RdmaPortSpace::kTcp:
    case RdmaPortSpace::kUdp:
      return RdmaServiceId{static_cast<RdmaPortSpace>(ps), static_cast<uint16_t>(service_id)};
  }
  return Err(MadError::kNotRdmaServiceId);
}

CmaHeader CmaHeader::ipv4(std::array<uint8_t, 4> src, std::array<uint8_t, 4> dst, uint16_t port) {
  CmaHeader h;
  h.ip_version = 4;
  h.src_port = port;
  std::memcpy(h.src.data() + 12, src.data(), 4);
  std::memcpy(h.dst.data() + 12, dst.data(), 4);
  return h;
}

MadResult<CmaHeader> parse_cma_header(std::span<const uint8_t> private_data) {
  if (private_data.size() < kCmaHeaderBytes) return Err(MadError::kTruncated);
  const uint8_t* p = private_data.data();
  if (p[0] != kCmaVersion) return Err(MadError::kBadCmaVersion);
  CmaHeader h;
  h.ip_version = get_bits(p + 1, 0, 4);
  if (h.ip_version != 4 && h.ip_version != 6) return Err(MadError::kBadIpVersion);
  h.src_port = load_be16(p + 2);
  std::memcpy(h.src.data(), p + 4, 16);
  std::memcpy(h.dst.data(), p + 20, 16);
  return h;
}

void write_cma_header(const CmaHeader& h, std::span<uint8_t> out) {
  UROCE_CHECK(out.size() >= kCmaHeaderBytes);
  uint8_t* p = out.data();
  p[0] = kCmaVersion;
  p[1] = static_cast<uint8_t>(h.ip_version << 4);
  store_be16(p + 2, h.src_port);
  std::memcpy(p + 4, h.src.data(), 16);
  std::memcpy(p + 20, h.dst.data(), 16);
  if (h.ip_version == 4) {
    std::memset(p + 4, 0, 12);
    std::memset(p + 20, 0, 12);
  }
}

}  // namespace uroce::wire
