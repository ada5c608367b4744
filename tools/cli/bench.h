#pragma once
// `uroce bench`: perftest's RC tests (ib_{write,read,send,atomic}_{bw,lat}) over uroce, with the
// connection data exchanged over TCP (core/oob.h). The client drives; the server follows the
// client's parameters, serves each message size and verifies what landed in its memory.
#include <cstdint>
#include <string>
#include <vector>

#include "api/uroce.h"
#include "core/oob.h"

namespace uroce::tools {

struct BenchOptions {
  std::string address;  // our RoCE (and TCP) address
  std::string peer;     // client: the server's address
  uint16_t port = kDefaultOobPort;
  BenchParams params;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  int accept_timeout_s = 60;
  int stall_timeout_s = 30;  // no completion for this long ends the run (a hang guard)
  // Client, bandwidth: ask for a completion on every cq_mod-th request only (perftest's
  // --cq-mod); a completion then stands for the requests before it too. At most the depth.
  uint32_t cq_mod = 1;
  std::string json_path;  // "-" = stdout instead of the table
  std::string pcap_path;
  std::string link = "udp";    // link::parse_link_kind: udp | raw | xdp
  bool roce_v1 = false;        // raw link: send RoCE v1 frames
  int vlan_id = -1;            // raw link: 802.1Q VLAN ID (0: priority tag only); -1: untagged
  bool raw_unbatched = false;  // raw link: a system call per frame
  bool xdp_zero_copy = false;  // xdp link: XDP_ZEROCOPY
  bool xdp_generic = false;    // xdp link: generic (skb) mode XDP
  std::string stats_path;      // counters of both sides, "side.name value" per line
  bool print_counters = false;
  bool quiet = false;
  // Each side applies its own (--cc, --line-rate, --recovery): congestion control may differ
  // between the ends, loss recovery must not (selective repeat on both or neither).
  CongestionConfig congestion;
  LossRecovery loss_recovery = LossRecovery::kGoBackN;
  // How this side's RDMA WRITEs go on the wire (transport/qp.h WriteSegments; either end accepts
  // both).
  WriteSegments write_segments = WriteSegments::kPerPacket;
  uint32_t max_psn_window = 0;  // --window: unacknowledged packets in flight; 0 = default
  // Client, bandwidth: every `interval_s` seconds (0 = never) a row of the Gb/s completed in the
  // interval and the QP's DCQCN rate, in the table and in the JSON's "intervals".
  double interval_s = 0;
};

// Exit codes: 0 ok; 1 usage or setup; 2 out-of-band failure; 3 a work request failed;
// 4 data verification failed; 5 stalled.
int run_bench_server(const BenchOptions& o);
int run_bench_client(const BenchOptions& o);
// Both sides in one command: the server in a child process on `peer`, the client here on
// `address`.
int run_bench_demo(const BenchOptions& o);

// Bytes each side registers for `p` (both sides compute the same layout).
uint64_t bench_buffer_bytes(const BenchParams& p);

}  // namespace uroce::tools
