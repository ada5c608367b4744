#pragma once
// The C++ API of uroce: the verbs objects under short names, plus helpers that take std::span
// buffers and do the common multi-step jobs (registering a buffer, describing part of it as an
// SGE, bringing an RC/UC/UD QP up). A device on a real network comes from api::open_nic
// (api/nic.h).
//
// Conventions, the same everywhere:
//   - Objects are RAII: every create/alloc/reg/open returns std::unique_ptr<T> inside a Result, and
//     destroying the pointer is the verb's destroy/dealloc/dereg. Destroy children before parents
//     (verbs/device.h). Objects never move, so a pointer to one is stable for its lifetime (the
//     libibverbs ABI maps each ibv object onto one).
//   - Errors are errno values, exactly those the matching ibv_* call gives: a call that makes
//     something returns Result<T, int> (common/result.h), a call that only acts returns int (0 is
//     success). Work request failures arrive as completions with a WcStatus, as in verbs.
//   - Enum values equal libibverbs' (QpState, QpType, QpAttrMask, WcStatus, WrOpcode, Access, ...).
//   - Threading as in verbs/device.h: post, poll and modify from any thread; Device::progress()
//     from one thread (api::ProgressEngine runs it in real time; the simulator in virtual time).
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "verbs/attrs.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/event.h"
#include "verbs/mr.h"
#include "verbs/qp.h"

namespace uroce {

using transport::Access;
using transport::CcAlgorithm;
using transport::Completion;
using transport::CongestionConfig;
using transport::LossRecovery;
using transport::RecvWr;
using transport::SendWr;
using transport::Sge;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WriteSegments;
using transport::WrOpcode;
using enum transport::Access;
using enum transport::SendFlags;
using enum transport::WcFlags;
using verbs::AddressHandle;
using verbs::AhAttr;
using verbs::AsyncEvent;
using verbs::CompletionChannel;
using verbs::CompletionQueue;
using verbs::Context;
using verbs::Counter;
using verbs::Device;
using verbs::DeviceConfig;
using verbs::MemoryRegion;
using verbs::Mtu;
using verbs::mtu_bytes;
using verbs::mtu_from_bytes;
using verbs::ProtectionDomain;
using verbs::QpAttr;
using verbs::QpInitAttr;
using verbs::QpState;
using verbs::QpType;
using verbs::QueuePair;
using verbs::SharedReceiveQueue;
using verbs::wc_status_name;

// Registers `buffer` (iova = its address). See ProtectionDomain::reg_mr for the errors.
inline Result<std::unique_ptr<MemoryRegion>> reg_mr(ProtectionDomain& pd,
                                                    std::span<std::byte> buffer, uint32_t access) {
  return pd.reg_mr(buffer.data(), buffer.size(), access);
}

// An SGE for `part`, which must lie inside `mr` (EINVAL otherwise, or when longer than 4 GiB - 1,
// the largest SGE).
inline Result<Sge> sge(const MemoryRegion& mr, std::span<const std::byte> part) {
  const auto base = reinterpret_cast<uintptr_t>(mr.addr());
  const auto p = reinterpret_cast<uintptr_t>(part.data());
  if (p < base || p - base > mr.length() || part.size() > mr.length() - (p - base) ||
      part.size() > UINT32_MAX)
    return Err(EINVAL);
  return Sge{mr.iova() + (p - base), static_cast<uint32_t>(part.size()), mr.lkey()};
}

// Congestion control and loss recovery are chosen per QP when it is created, in QpInitAttr:
//
//   QpInitAttr init;  // ... CQs, caps
//   init.congestion.algorithm = CcAlgorithm::kDcqcnMlx5;  // DCQCN (docs/cc.md); kOff by default
//   init.congestion.line_rate_bps = 10e9;                  // where the rate starts and recovers to
//   init.loss_recovery = LossRecovery::kSelectiveRepeat;   // both ends must choose it
//   init.write_segments = WriteSegments::kPerMessage;      // FIRST/MIDDLE/LAST on the wire
//
// The names below are the ones the ABI's environment (UROCE_CC, UROCE_LOSS_RECOVERY) and
// `uroce bench --cc/--recovery` accept. "dcqcn" is the mlx5 parameter set, what a ConnectX NIC
// runs.
inline std::optional<CcAlgorithm> parse_cc_algorithm(std::string_view s) {
  if (s == "off" || s == "none") return CcAlgorithm::kOff;
  if (s == "dcqcn" || s == "dcqcn-mlx5" || s == "mlx5") return CcAlgorithm::kDcqcnMlx5;
  if (s == "dcqcn-paper" || s == "paper") return CcAlgorithm::kDcqcnPaper;
  if (s == "dcqcn-hpcc" || s == "hpcc") return CcAlgorithm::kDcqcnHpcc;
  return std::nullopt;
}
inline const char* cc_algorithm_name(CcAlgorithm a) {
  switch (a) {
    case CcAlgorithm::kOff:
      return "off";
    case CcAlgorithm::kDcqcnPaper:
      return "dcqcn-paper";
    case CcAlgorithm::kDcqcnMlx5:
      return "dcqcn-mlx5";
    case CcAlgorithm::kDcqcnHpcc:
      return "dcqcn-hpcc";
  }
  return "?";
}
inline std::optional<LossRecovery> parse_loss_recovery(std::string_view s) {
  if (s == "gbn" || s == "go-back-n") return LossRecovery::kGoBackN;
  if (s == "sr" || s == "selective-repeat") return LossRecovery::kSelectiveRepeat;
  return std::nullopt;
}
inline const char* loss_recovery_name(LossRecovery r) {
  return r == LossRecovery::kSelectiveRepeat ? "sr" : "gbn";
}
inline std::optional<WriteSegments> parse_write_segments(std::string_view s) {
  if (s == "packet") return WriteSegments::kPerPacket;
  if (s == "message") return WriteSegments::kPerMessage;
  return std::nullopt;
}
inline const char* write_segments_name(WriteSegments w) {
  return w == WriteSegments::kPerMessage ? "message" : "packet";
}

// The line rate the ABI and `uroce bench` give DCQCN unless told otherwise: about what one core of
// a software NIC moves, so a cut bites at once. Set it to the link's speed.
inline constexpr double kDefaultCcLineRateBps = 10e9;

// The per-QP choices a process makes through its environment (the ABI applies them to every QP it
// creates; docs/cc.md):
//   UROCE_CC=off|dcqcn|dcqcn-mlx5|dcqcn-paper|dcqcn-hpcc   (default off)
//   UROCE_CC_LINE_GBPS=<Gb/s>                    (default 10; 0.001 .. 1000)
//   UROCE_CC_CNP_INTERVAL_US=<us>                (default: the parameter set's; 0 .. 1000000)
//   UROCE_LOSS_RECOVERY=gbn|sr                   (default gbn)
//   UROCE_WRITE_SEGMENTS=packet|message          (default packet; transport/qp.h WriteSegments)
// A value that does not parse is skipped (the default stays) and described in `errors`.
struct QpTransportOptions {
  CongestionConfig congestion;
  LossRecovery loss_recovery = LossRecovery::kGoBackN;
  WriteSegments write_segments = WriteSegments::kPerPacket;
};
// Sets the QP's congestion control, loss recovery and WRITE segmentation to `o`'s.
inline void apply_qp_defaults(const QpTransportOptions& o, QpInitAttr& init) {
  init.congestion = o.congestion;
  init.loss_recovery = o.loss_recovery;
  init.write_segments = o.write_segments;
}
template <typename GetEnv = decltype(&std::getenv)>
QpTransportOptions qp_transport_options_from_env(std::vector<std::string>* errors,
                                                 GetEnv get = &std::getenv) {
  QpTransportOptions o;
  o.congestion.line_rate_bps = kDefaultCcLineRateBps;
  auto bad = [&](const char* var, const char* value, const char* why) {
    if (errors) errors->push_back(std::string(var) + "=" + value + ": " + why);
  };
  auto number = [](const char* text, double lo, double hi) -> std::optional<double> {
    char* end = nullptr;
    double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(v >= lo && v <= hi)) return std::nullopt;
    return v;
  };
  if (const char* v = get("UROCE_CC"); v && *v) {
    if (auto a = parse_cc_algorithm(v))
      o.congestion.algorithm = *a;
    else
      bad("UROCE_CC", v, "expected off, dcqcn, dcqcn-mlx5, dcqcn-paper or dcqcn-hpcc");
  }
  if (const char* v = get("UROCE_CC_LINE_GBPS"); v && *v) {
    if (auto g = number(v, 0.001, 1000))
      o.congestion.line_rate_bps = *g * 1e9;
    else
      bad("UROCE_CC_LINE_GBPS", v, "expected Gb/s between 0.001 and 1000");
  }
  if (const char* v = get("UROCE_CC_CNP_INTERVAL_US"); v && *v) {
    if (auto us = number(v, 0, 1e6))
      o.congestion.cnp_interval_ns = static_cast<Nanos>(*us * 1000);
    else
      bad("UROCE_CC_CNP_INTERVAL_US", v, "expected microseconds between 0 and 1000000");
  }
  if (const char* v = get("UROCE_LOSS_RECOVERY"); v && *v) {
    if (auto r = parse_loss_recovery(v))
      o.loss_recovery = *r;
    else
      bad("UROCE_LOSS_RECOVERY", v, "expected gbn or sr");
  }
  if (const char* v = get("UROCE_WRITE_SEGMENTS"); v && *v) {
    if (auto w = parse_write_segments(v))
      o.write_segments = *w;
    else
      bad("UROCE_WRITE_SEGMENTS", v, "expected packet or message");
  }
  return o;
}

// What one side of a connection tells the other (out of band) to connect an RC or UC QP.
struct Endpoint {
  Gid gid{};
  uint32_t qpn = 0;
  uint32_t psn = 0;  // the first PSN this side sends
};

struct ConnectOptions {
  Mtu path_mtu = Mtu::k1024;
  uint32_t access = transport::kAccessRemoteWrite | transport::kAccessRemoteRead |
                    transport::kAccessRemoteAtomic;  // what the peer may do to us
  uint8_t max_rd_atomic = 16;                        // READ/atomic we may have outstanding
  uint8_t max_dest_rd_atomic = 16;                   // READ/atomic of the peer we answer at once
  uint8_t timeout = 14;                              // 4.096 us * 2^timeout (IBA 9.7.6.1.3)
  uint8_t retry_cnt = transport::kMaxRetryCnt;
  uint8_t rnr_retry = transport::kRnrRetryForever;
  uint8_t min_rnr_timer = 12;
  uint8_t traffic_class = 0;
  uint32_t qkey = 0x11111111;  // UD only
};

// RESET -> INIT -> RTR -> RTS with the masks ibv_modify_qp(3) requires for the QP's type. For UD,
// `remote` is ignored (each send names its destination). 0 or the first failing modify's errno
// (the QP is left in the state reached).
inline int connect(QueuePair& qp, uint32_t local_psn, const Endpoint& remote,
                   const ConnectOptions& o = {}) {
  using namespace verbs;
  const QpType t = qp.type();
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.pkey_index = 0;
  a.qp_access_flags = o.access;
  a.qkey = o.qkey;
  uint32_t mask = kQpState | kQpPkeyIndex | kQpPort | (t == QpType::kUd ? kQpQkey : kQpAccessFlags);
  if (int err = qp.modify(a, mask)) return err;

  a.qp_state = QpState::kRtr;
  mask = kQpState;
  if (t != QpType::kUd) {
    a.path_mtu = o.path_mtu;
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote.psn;
    a.ah_attr.grh.dgid = remote.gid;
    a.ah_attr.grh.traffic_class = o.traffic_class;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (t == QpType::kRc) {
      a.max_dest_rd_atomic = o.max_dest_rd_atomic;
      a.min_rnr_timer = o.min_rnr_timer;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
  }
  if (int err = qp.modify(a, mask)) return err;

  a.qp_state = QpState::kRts;
  a.sq_psn = local_psn;
  mask = kQpState | kQpSqPsn;
  if (t == QpType::kRc) {
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.max_rd_atomic = o.max_rd_atomic;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  return qp.modify(a, mask);
}

}  // namespace uroce
