// Strings, rate conversions, fork support, and the entry points uroce does not implement. Each
// unsupported verb fails the way rdma-core's defaults do (EOPNOTSUPP, or NULL with errno set), so
// a program that probes a feature gets a clean "no".
#include "api/ibverbs/abi.h"

using uroce::abi::fail;

namespace {

struct RateRow {
  ibv_rate rate;
  int mult;  // of 2.5 Gb/s; -1 where the rate is not a multiple (FDR, EDR lane rates)
  int mbps;
};
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},      {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},      {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},     {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},     {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},   {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},     {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},   {IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},   {IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},   {IBV_RATE_28_GBPS, -1, 28125},
    {IBV_RATE_50_GBPS, -1, 53125},     {IBV_RATE_400_GBPS, -1, 425000},
    {IBV_RATE_600_GBPS, -1, 637500},   {IBV_RATE_800_GBPS, -1, 850000},
    {IBV_RATE_1200_GBPS, -1, 1275000},
};

bool fork_initialized = false;

}  // namespace

UROCE_IBV_EXPORT int ibv_rate_to_mult(ibv_rate rate) {
  for (const RateRow& r : kRates) {
    if (r.rate == rate) return r.mult;
  }
  return -1;
}

UROCE_IBV_EXPORT ibv_rate mult_to_ibv_rate(int mult) {
  for (const RateRow& r : kRates) {
    if (r.mult == mult) return r.rate;
  }
  return IBV_RATE_MAX;
}

UROCE_IBV_EXPORT int ibv_rate_to_mbps(ibv_rate rate) {
  for (const RateRow& r : kRates) {
    if (r.rate == rate) return r.mbps;
  }
  return -1;
}

UROCE_IBV_EXPORT ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow& r : kRates) {
    if (r.mbps == mbps) return r.rate;
  }
  return IBV_RATE_MAX;
}

UROCE_IBV_EXPORT const char* ibv_wc_status_str(ibv_wc_status status) {
  static const char* const kNames[] = {
      "success",
      "local length error",
      "local QP operation error",
      "local EE context operation error",
      "local protection error",
      "Work Request Flushed Error",
      "memory management operation error",
      "bad response error",
      "local access error",
      "remote invalid request error",
      "remote access error",
      "remote operation error",
      "transport retry counter exceeded",
      "RNR retry counter exceeded",
      "local RDD violation error",
      "remote invalid RD request",
      "aborted error",
      "invalid EE context number",
      "invalid EE context state",
      "fatal error",
      "response timeout error",
      "general error",
      "TM error",
      "TM Rendezvous Request Error",
  };
  auto i = static_cast<size_t>(status);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "unknown";
}

UROCE_IBV_EXPORT const char* ibv_event_type_str(ibv_event_type event) {
  static const char* const kNames[] = {
      "CQ error",
      "local work queue catastrophic error",
      "invalid request local work queue error",
      "local access violation work queue error",
      "communication established",
      "send queue drained",
      "path migrated",
      "path migration request error",
      "local catastrophic error",
      "port active",
      "port error",
      "LID change",
      "P_Key change",
      "SM change",
      "SRQ catastrophic error",
      "SRQ limit reached",
      "last WQE reached",
      "client reregistration",
      "GID table change",
      "WQ fatal",
  };
  auto i = static_cast<size_t>(event);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "unknown";
}

UROCE_IBV_EXPORT const char* ibv_node_type_str(ibv_node_type node_type) {
  switch (node_type) {
    case IBV_NODE_CA:
      return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH:
      return "InfiniBand switch";
    case IBV_NODE_ROUTER:
      return "InfiniBand router";
    case IBV_NODE_RNIC:
      return "iWARP NIC";
    case IBV_NODE_USNIC:
      return "usNIC";
    case IBV_NODE_USNIC_UDP:
      return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED:
      return "unspecified";
    default:
      return "unknown";
  }
}

UROCE_IBV_EXPORT const char* ibv_port_state_str(ibv_port_state port_state) {
  switch (port_state) {
    case IBV_PORT_NOP:
      return "no state change (NOP)";
    case IBV_PORT_DOWN:
      return "down";
    case IBV_PORT_INIT:
      return "init";
    case IBV_PORT_ARMED:
      return "armed";
    case IBV_PORT_ACTIVE:
      return "active";
    case IBV_PORT_ACTIVE_DEFER:
      return "active defer";
    default:
      return "unknown";
  }
}

// uroce pins nothing and maps no device memory, so fork() needs no preparation: registered
// memory is ordinary process memory. These keep rdma-core's contract (0 on success).
UROCE_IBV_EXPORT int ibv_fork_init(void) {
  fork_initialized = true;
  return 0;
}
UROCE_IBV_EXPORT ibv_fork_status ibv_is_fork_initialized(void) {
  return fork_initialized ? IBV_FORK_ENABLED : IBV_FORK_DISABLED;
}
UROCE_IBV_EXPORT int ibv_dontfork_range(void*, size_t) {
  return 0;
}
UROCE_IBV_EXPORT int ibv_dofork_range(void*, size_t) {
  return 0;
}

// Provider registration belongs to rdma-core's plugin loader, which uroce replaces.
UROCE_IBV_EXPORT void ibv_register_driver(const char*, void*) {}

// ---- Not supported ------------------------------------------------------------------------

UROCE_IBV_EXPORT ibv_context* ibv_import_device(int) {
  return fail<ibv_context>(EOPNOTSUPP);
}
UROCE_IBV_EXPORT ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  return fail<ibv_pd>(EOPNOTSUPP);
}
UROCE_IBV_EXPORT void ibv_unimport_pd(ibv_pd*) {}
UROCE_IBV_EXPORT ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  return fail<ibv_mr>(EOPNOTSUPP);
}
UROCE_IBV_EXPORT void ibv_unimport_mr(ibv_mr*) {}
UROCE_IBV_EXPORT ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  return fail<ibv_dm>(EOPNOTSUPP);
}
UROCE_IBV_EXPORT void ibv_unimport_dm(ibv_dm*) {}
UROCE_IBV_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return fail<ibv_mr>(EOPNOTSUPP);
}
UROCE_IBV_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}
UROCE_IBV_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}
// There is no Ethernet header below uroce's UDP socket, so no MAC to resolve.
UROCE_IBV_EXPORT int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t*, uint16_t*) {
  return EOPNOTSUPP;
}
