#pragma once
// Attribute structures and enums of the verbs objects. Each mirrors its libibverbs counterpart
// field for field and value for value (ibv_qp_attr_mask, ibv_event_type, ibv_mtu, ibv_port_state,
// ibv_qp_attr, ibv_ah_attr, ibv_device_attr, ibv_port_attr), so the ABI layer converts by copying
// fields and static_cast, never by translating meanings.
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "common/types.h"
#include "transport/qp.h"

namespace uroce::verbs {

using transport::QpCapabilities;
using transport::QpState;
using transport::QpType;

// == ibv_qp_attr_mask.
enum QpAttrMask : uint32_t {
  kQpState = 1u << 0,
  kQpCurState = 1u << 1,
  kQpEnSqdAsyncNotify = 1u << 2,
  kQpAccessFlags = 1u << 3,
  kQpPkeyIndex = 1u << 4,
  kQpPort = 1u << 5,
  kQpQkey = 1u << 6,
  kQpAv = 1u << 7,
  kQpPathMtu = 1u << 8,
  kQpTimeout = 1u << 9,
  kQpRetryCnt = 1u << 10,
  kQpRnrRetry = 1u << 11,
  kQpRqPsn = 1u << 12,
  kQpMaxQpRdAtomic = 1u << 13,
  kQpAltPath = 1u << 14,
  kQpMinRnrTimer = 1u << 15,
  kQpSqPsn = 1u << 16,
  kQpMaxDestRdAtomic = 1u << 17,
  kQpPathMigState = 1u << 18,
  kQpCap = 1u << 19,
  kQpDestQpn = 1u << 20,
  kQpRateLimit = 1u << 25,
};

// == ibv_mtu.
enum class Mtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };
constexpr uint32_t mtu_bytes(Mtu m) {
  return 128u << static_cast<uint8_t>(m);
}
// The inverse of mtu_bytes: nullopt for a size that is no IB MTU.
constexpr std::optional<Mtu> mtu_from_bytes(uint32_t bytes) {
  for (Mtu m : {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096}) {
    if (mtu_bytes(m) == bytes) return m;
  }
  return std::nullopt;
}

// A completion status by its IBV_WC_* name without the prefix ("RETRY_EXC_ERR"), for logs and
// the command line. ibv_wc_status_str(3)'s sentences ("transport retry counter exceeded") are the
// ABI's (api/ibverbs/misc.cpp), which covers statuses this enum does not have.
constexpr const char* wc_status_name(transport::WcStatus s) {
  constexpr const char* kNames[] = {
      "SUCCESS",          "LOC_LEN_ERR",       "LOC_QP_OP_ERR",     "LOC_EEC_OP_ERR",
      "LOC_PROT_ERR",     "WR_FLUSH_ERR",      "MW_BIND_ERR",       "BAD_RESP_ERR",
      "LOC_ACCESS_ERR",   "REM_INV_REQ_ERR",   "REM_ACCESS_ERR",    "REM_OP_ERR",
      "RETRY_EXC_ERR",    "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",  "REM_INV_RD_REQ_ERR",
      "REM_ABORT_ERR",    "INV_EECN_ERR",      "INV_EEC_STATE_ERR", "FATAL_ERR",
      "RESP_TIMEOUT_ERR", "GENERAL_ERR"};
  const auto i = static_cast<size_t>(s);
  return i < std::size(kNames) ? kNames[i] : "UNKNOWN";
}

// == ibv_port_state.
enum class PortState : uint8_t { kNop = 0, kDown = 1, kInit = 2, kArmed = 3, kActive = 4 };

// == ibv_event_type.
enum class EventType : uint8_t {
  kCqErr = 0,
  kQpFatal = 1,
  kQpReqErr = 2,
  kQpAccessErr = 3,
  kCommEst = 4,
  kSqDrained = 5,
  kPathMig = 6,
  kPathMigErr = 7,
  kDeviceFatal = 8,
  kPortActive = 9,
  kPortErr = 10,
  kLidChange = 11,
  kPkeyChange = 12,
  kSmChange = 13,
  kSrqErr = 14,
  kSrqLimitReached = 15,
  kQpLastWqeReached = 16,
  kClientReregister = 17,
  kGidChange = 18,
};

// == ibv_atomic_cap.
enum class AtomicCap : uint8_t { kNone = 0, kHca = 1, kGlob = 2 };
// == ibv_link_layer.
inline constexpr uint8_t kLinkLayerEthernet = 2;

// The GID table: one address, two entries. Index 0 is the RoCEv2 GID and index 1 the RoCE v1 GID
// of the same value. Linux puts v1 first for each address, but programs (ibv_rc_pingpong -g 0,
// perftest -x 0, pyverbs' first-GID choice) use index 0 and must keep working over the UDP link,
// which cannot carry v1 (docs/ibverbs.md, "GID table").
enum class GidType : uint8_t { kRoceV1 = 0, kRoceV2 = 1 };  // == enum ibv_gid_type_sysfs
inline constexpr int kGidIndexRoceV2 = 0;
inline constexpr int kGidIndexRoceV1 = 1;
inline constexpr int kGidTableLen = 2;
constexpr GidType gid_type_at(int index) {
  return index == kGidIndexRoceV1 ? GidType::kRoceV1 : GidType::kRoceV2;
}

// == ibv_global_route.
struct GlobalRoute {
  Gid dgid{};
  uint32_t flow_label = 0;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
};

// == ibv_ah_attr. RoCE needs a GRH: is_global must be set (as on every RoCE NIC).
struct AhAttr {
  GlobalRoute grh;
  uint16_t dlid = 0;
  uint8_t sl = 0;
  uint8_t src_path_bits = 0;
  uint8_t static_rate = 0;
  bool is_global = true;
  uint8_t port_num = 1;
};

// == ibv_qp_attr.
struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  uint8_t path_mig_state = 0;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCapabilities cap;
  AhAttr ah_attr;
  AhAttr alt_ah_attr;
  uint16_t pkey_index = 0;
  uint16_t alt_pkey_index = 0;
  uint8_t en_sqd_async_notify = 0;
  uint8_t sq_draining = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t port_num = 1;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint8_t alt_port_num = 0;
  uint8_t alt_timeout = 0;
  uint32_t rate_limit = 0;
};

class CompletionQueue;
class SharedReceiveQueue;
class XrcDomain;

// == ibv_qp_init_attr (less qp_context, which the ABI layer keeps).
struct QpInitAttr {
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  SharedReceiveQueue* srq = nullptr;
  // XRC target QPs (kXrcRecv) only: the domain whose XRC SRQs it serves. Set by
  // XrcDomain::create_qp.
  XrcDomain* xrcd = nullptr;
  QpCapabilities cap;
  QpType qp_type = QpType::kRc;
  bool sq_sig_all = false;
  // uroce extensions, not in ibv_qp_init_attr (the ABI fills them from the environment): DCQCN
  // on this RC/UC QP (off by default, as before it existed) and how it recovers lost packets
  // (selective repeat must be chosen on both ends). Passed to the transport at every configure.
  transport::CongestionConfig congestion;
  transport::LossRecovery loss_recovery = transport::LossRecovery::kGoBackN;
  transport::WriteSegments write_segments = transport::WriteSegments::kPerPacket;  // RC WRITEs
  // Unacknowledged PSNs the requester may have in flight (RC); 0 keeps the transport's default.
  // Selective repeat wants about one bandwidth-delay product (transport/README.md).
  uint32_t max_psn_window = 0;
};

// == ibv_srq_attr.
struct SrqAttr {
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t srq_limit = 0;
};
// == ibv_srq_attr_mask.
enum SrqAttrMask : uint32_t { kSrqMaxWr = 1u << 0, kSrqLimit = 1u << 1 };

// The subset of ibv_device_attr uroce fills in (same names; the rest are zero).
struct DeviceAttr {
  std::string fw_ver = "uroce 0.1";
  uint64_t node_guid = 0;
  uint64_t sys_image_guid = 0;
  uint64_t max_mr_size = 1ull << 40;
  uint64_t page_size_cap = 4096;
  uint32_t vendor_id = 0;
  uint32_t vendor_part_id = 0;
  uint32_t hw_ver = 1;
  uint32_t max_qp = 1024;
  uint32_t max_qp_wr = 4096;
  uint32_t device_cap_flags = 0;
  uint32_t max_sge = transport::kMaxSge;
  uint32_t max_sge_rd = transport::kMaxSge;
  uint32_t max_cq = 1024;
  uint32_t max_cqe = 1u << 20;
  uint32_t max_mr = 4096;
  uint32_t max_pd = 1024;
  uint32_t max_qp_rd_atom = 16;
  uint32_t max_res_rd_atom = 16 * 1024;
  uint32_t max_qp_init_rd_atom = 16;
  AtomicCap atomic_cap = AtomicCap::kHca;
  uint32_t max_mw = 4096;  // memory windows, type 1 and type 2 (bound to a QP, "2B")
  uint32_t max_ah = 4096;
  uint32_t max_srq = 256;
  uint32_t max_srq_wr = 4096;
  uint32_t max_srq_sge = transport::kMaxSge;
  // Multicast (ibv_attach_mcast): groups the device has QPs attached to, QPs per group, and
  // attachments over all groups. Each group is one more socket on a UDP link (link::UdpLink
  // bounds them again, at kMaxGroups).
  uint32_t max_mcast_grp = 32;
  uint32_t max_mcast_qp_attach = 16;
  uint32_t max_total_mcast_qp_attach = 128;
  uint32_t max_xrcd = 64;  // XRC domains open on the device (libibverbs has no field for it)
  // Target QPs one XRC domain may parent (not in ibv_device_attr; uroce's bound).
  uint32_t max_xrcd_target_qps = 256;
  uint64_t max_dm_size = 256 * 1024;  // device memory (ibv_alloc_dm), all allocations together
  uint32_t max_inline_data = 256;     // not in ibv_device_attr; bounds QpCapabilities
  uint16_t max_pkeys = 1;
  uint8_t phys_port_cnt = 1;
};

// The subset of ibv_port_attr uroce fills in.
struct PortAttr {
  PortState state = PortState::kActive;
  Mtu max_mtu = Mtu::k4096;
  Mtu active_mtu = Mtu::k1024;
  int gid_tbl_len = kGidTableLen;
  uint32_t port_cap_flags = 0;
  uint32_t max_msg_sz = 1u << 31;
  uint16_t pkey_tbl_len = 1;
  uint8_t active_width = 2;   // 4x (ibv encoding)
  uint8_t active_speed = 32;  // EDR, 25 Gb/s per lane: 4x = 100 Gb/s (ibv encoding)
  uint8_t phys_state = 5;     // LinkUp
  uint8_t link_layer = kLinkLayerEthernet;
};

// One named counter. Names follow rdma-core's hw_counters (mlx5 naming) where one exists.
struct Counter {
  // How a device combines one counter over its QPs. Event counts add up, and a destroyed QP's
  // stay in the total; a gauge (a current value, e.g. a DCQCN rate) covers live QPs only: their
  // sum (kGaugeSum) or the smallest non-zero one (kGaugeMin, 0 = none).
  enum class Kind : uint8_t { kCount, kGaugeSum, kGaugeMin };
  std::string_view name;
  uint64_t value = 0;
  Kind kind = Kind::kCount;
};

}  // namespace uroce::verbs
