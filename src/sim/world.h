#pragma once
// A world of real uroce verbs Devices on the switched fabric, in virtual time: every host of a
// SwitchFabric gets a FabricLink and a Device, flows are RC QP pairs that move RDMA WRITEs whose
// bytes are checked at the end, and a sampler records queues and rates. The experiments
// (tools/sim/experiments.h) and the lab tests (tests/sim/lab_*.cpp) are built on it.
//
// The NIC model: a device pulls work from its QPs only while its host's NIC queue holds less than
// `nic_fifo_bytes` (a NIC's transmit FIFO), so a PFC pause on the host link backs up into the
// QPs instead of overflowing the fabric's host queue.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fabric/event_loop.h"
#include "fabric/fabric_link.h"
#include "fabric/switch_fabric.h"
#include "fabric/topology.h"
#include "sim/nic_fifo_gate.h"
#include "sim/synthetic_memory.h"
#include "sim/world_core.h"
#include "transport/congestion.h"
#include "transport/qp.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/qp.h"

namespace uroce::simlab {

struct WorldConfig {
  uint64_t seed = 1;
  transport::CongestionConfig cc;  // every QP's congestion control
  uint32_t path_mtu = 1024;        // 256..4096
  uint8_t data_dscp = 26;          // priority 3: the lossless class by default
  uint64_t nic_fifo_bytes = 16 * 1024;
  uint32_t message_bytes = 64 * 1024;  // a flow is a sequence of WRITEs of this size
  uint32_t max_outstanding = 16;       // WRITEs posted and not completed, per flow
  Nanos sample_ns = 2'000;
  Nanos time_limit_ns = 200'000'000;
  uint64_t step_limit = 50'000'000;
  // Every QP's loss recovery and PSN window (0 = the transport's default window).
  transport::LossRecovery loss_recovery = transport::LossRecovery::kGoBackN;
  uint32_t max_psn_window = 0;
  // How every QP packetizes an RC WRITE (transport::WriteSegments; the verbs default is one WRITE
  // ONLY per MTU, each with a RETH).
  transport::WriteSegments write_segments = transport::WriteSegments::kPerPacket;
  // Flows read and write synthetic memory (sim/synthetic_memory.h) instead of buffers of their
  // size: bytes generated on send and checked where they land, nothing resident per flow.
  bool synthetic_memory = false;
  // The fabric's links neither compute nor check the ICRC (FabricLink::set_trusted_wire: the
  // simulated wire corrupts no bytes), two CRC passes per packet saved. Changes no packet's
  // timing or fate; payload is still checked where it lands with synthetic memory. With synthetic
  // memory too, payload crosses the fabric by reference (FabricLink::set_payload_reference).
  bool trusted_wire = false;
  // Bounds of the event queue and the fabric's packet pools (World::create).
  size_t max_events = size_t{1} << 22;
  size_t max_packets = size_t{1} << 20;
  size_t max_payload_buffers = size_t{1} << 18;
  // Per device: completion queue entries and memory-key slots (a large world's hosts each need a
  // few; both are allocated up front).
  uint32_t cq_entries = 16384;
  uint32_t max_mr = 4096;
  uint32_t max_mw = 4096;
};

struct FlowSpec {
  fabric::HostId src = 0, dst = 0;
  uint64_t bytes = 1 << 20;
  Nanos start_ns = 0;
  // RoCE v1 (a GRH, no IP or UDP; the GID table's v1 entry as the QPs' sgid_index): switched at
  // L2 only, so both hosts must be on one switch, else add_flow fails (EHOSTUNREACH at the path).
  bool roce_v1 = false;
};

struct FlowResult {
  FlowSpec spec;
  Nanos done_ns = kNever;  // when the last WRITE completed at the sender
  bool verified = false;   // every byte at the destination is what the source sent
  uint64_t errors = 0;     // completions that were not success
  transport::QpCounters sender, receiver;
  uint64_t final_rate_bps = 0;  // the sender's pacer rate at the end (0 = unpaced)
};

struct Sample {
  Nanos t = 0;
  std::vector<uint64_t> queue_bytes;  // one per watched port (priority of data)
  std::vector<uint64_t> rate_bps;     // one per flow: the sender's pacer rate (0 = unpaced)
  std::vector<uint64_t> rx_bytes;     // one per flow: payload bytes the receiver QP took so far
  // Running totals, so any interval's count is a difference of two samples.
  std::vector<uint64_t> port_tx_bytes;  // one per watched port: wire bytes sent, every priority
  std::vector<uint64_t> cnps_received;  // one per flow: CNPs the sender took
  std::vector<uint64_t> rate_cuts;      // one per flow: the sender's DCQCN rate cuts
  uint64_t pause_frames = 0;            // the fabric's pause frames so far
};

struct RunResult {
  bool ok = true;
  std::string failure;
  Nanos end_ns = 0;
  uint64_t steps = 0;
  std::vector<FlowResult> flows;
  std::vector<Sample> samples;
  fabric::FabricCounters fabric;
  uint64_t link_tx_errors = 0, link_rx_drops = 0;
  uint64_t link_tx_by_reference = 0;  // packets whose payload crossed as a descriptor
  uint64_t device_passes = 0;         // progress passes, over all devices
  // Synthetic memory: bytes that landed somewhere other than where they were read from, over all
  // devices (0 in a correct run), and bytes checked.
  uint64_t synthetic_mismatched_bytes = 0, synthetic_checked_bytes = 0;
  uint64_t synthetic_refused = 0;  // accesses larger than the scratch (a message) refused
};

class World {
 public:
  // Takes a fabric that is already built and finalized (topology.h), hosts addressed host_gid(i).
  World(const WorldConfig& config, std::unique_ptr<fabric::EventLoop> loop,
        std::unique_ptr<fabric::SwitchFabric> fabric);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Builds a fabric from a topology spec (finalized) and the world on it; error: the message.
  static Result<std::unique_ptr<World>, std::string> create(const WorldConfig& config,
                                                            const fabric::TopologySpec& topo);

  fabric::SwitchFabric& fabric() { return *fabric_; }
  fabric::EventLoop& loop() { return *loop_; }
  // A port whose data-priority egress queue the sampler records.
  void watch_port(fabric::PortId port) { watched_.push_back(port); }
  // The switch port that sends to host `h` (the last hop).
  fabric::PortId port_to_host(fabric::HostId h) const;
  // Adds a flow (before run()). Returns its index, or -1 if the hosts or size are invalid.
  int add_flow(const FlowSpec& flow);
  // Runs until every flow is done and verified, or a bound is hit (reported in the result).
  RunResult run();

 private:
  struct Node;
  struct Flow;
  bool setup_flow(Flow& f, std::string* error);
  void post_more(Flow& f);
  void poll_completions(Node& n, Nanos now);
  void sample(Nanos now);

  WorldConfig config_;
  std::unique_ptr<fabric::EventLoop> loop_;
  std::unique_ptr<fabric::SwitchFabric> fabric_;
  std::unique_ptr<sim::WorldCore> core_;
  std::unique_ptr<sim::SyntheticMemory> synthetic_;  // with config_.synthetic_memory
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Flow>> flows_;
  std::vector<fabric::PortId> watched_;
  // run(): flows by (start, index), the first not yet started, and how many are not done.
  std::vector<size_t> start_order_;
  size_t next_start_ = 0;
  size_t flows_left_ = 0;
  RunResult result_;
  // poll_completions' batch, kept here: an array of this size made per device pass cost as much
  // as the polling (its elements are initialised).
  std::array<transport::Completion, 64> polled_;
};

// Jain's fairness index of `x`: (sum x)^2 / (n * sum x^2); 1 = all equal.
double jain_index(const std::vector<double>& x);

}  // namespace uroce::simlab
