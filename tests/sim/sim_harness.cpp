#include "sim/sim_harness.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/psn.h"
#include "fabric/event_loop.h"
#include "fabric/lossy_network.h"
#include "fabric/sim_link.h"
#include "sim/world_core.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/qp.h"
#include "wire/packet.h"

namespace uroce::sim {
namespace {

using fabric::EventLoop;
using fabric::LossyNetwork;
using fabric::Rng;
using transport::Completion;
using transport::Sge;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WrOpcode;
namespace v = verbs;

// ---- Bounds -------------------------------------------------------------------------------------

constexpr Nanos kVirtualTimeBound = 500'000'000;  // 0.5 s: a clean run needs well under 10 ms
constexpr uint64_t kDriverStepBound = 400'000;
constexpr uint64_t kSameTimeStepBound = 20'000;  // progress passes without the clock moving
constexpr size_t kGuardBytes = 64;               // outside every MR, never touched
constexpr size_t kGapBytes = 8;                  // between buffers inside an MR, never touched
constexpr size_t kTailReserve = 64;              // end of the WRITE MR: only bad requests aim here
constexpr uint32_t kSharedCounters = 2;          // fetch-add words every QP of a node shares
constexpr uint32_t kCqEntries = 1024;

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// Initial memory content: a function of (seed, node, arena, offset), so a stray write of any
// value shows up, and two runs of a seed start from the same bytes.
uint8_t initial_byte(uint64_t seed, int node, int arena, size_t off) {
  uint64_t s = seed ^ (uint64_t(node) << 56) ^ (uint64_t(arena) << 48) ^ (off / 8);
  return static_cast<uint8_t>(fabric::splitmix64(s) >> (8 * (off % 8)));
}

// ---- Memory -------------------------------------------------------------------------------------

// One registered buffer of a node with guards on both sides and a model of what it must hold.
enum Arena { kSrc, kDst, kRd, kLocal, kRecv, kAtomic, kArenaCount };
const char* const kArenaNames[kArenaCount] = {"src", "dst", "rd", "local", "recv", "atomic"};
const uint32_t kArenaAccess[kArenaCount] = {
    transport::kAccessLocalWrite, transport::kAccessLocalWrite | transport::kAccessRemoteWrite,
    transport::kAccessRemoteRead, transport::kAccessLocalWrite,
    transport::kAccessLocalWrite, transport::kAccessLocalWrite | transport::kAccessRemoteAtomic,
};

struct Region {
  std::vector<uint8_t> mem;        // [guard | MR | guard]
  std::vector<uint8_t> expect;     // what mem must hold at the end
  std::vector<uint8_t> dont_care;  // 1: an operation that failed may or may not have written here
  std::vector<int> owner;          // op id that last set `expect` here (for messages), or -1
  size_t mr_len = 0;
  size_t bump = 0;  // next free byte inside the MR
  uint64_t iova = 0;
  std::unique_ptr<v::MemoryRegion> mr;
  // Remotely accessible arenas also get a type 1 memory window over the whole MR with the MR's
  // remote rights: odd-numbered ops address the arena through it (the same verdict for every
  // request, good or bad, so the model does not change). Destroyed before the MR.
  std::unique_ptr<v::MemoryWindow> mw;
  uint32_t window_rkey = 0;

  uint8_t* at(size_t mr_off) { return mem.data() + kGuardBytes + mr_off; }
  uint64_t va(size_t mr_off) const { return iova + mr_off; }
  // A fresh buffer, 8-byte aligned, with a gap before it. The caller sized the MR for it.
  size_t alloc(size_t len) {
    size_t off = (bump + kGapBytes + 7) & ~size_t{7};
    bump = off + len;
    return off;
  }
  void set_expect(size_t mr_off, const uint8_t* bytes, size_t len, int op) {
    if (len == 0) return;  // bytes may be null then
    std::memcpy(expect.data() + kGuardBytes + mr_off, bytes, len);
    std::fill_n(owner.begin() + static_cast<ptrdiff_t>(kGuardBytes + mr_off), len, op);
  }
  void set_dont_care(size_t mr_off, size_t len) {
    std::fill_n(dont_care.begin() + static_cast<ptrdiff_t>(kGuardBytes + mr_off), len, 1);
  }
};

// ---- The workload
// ---------------------------------------------------------------------------------

enum class Bad : uint8_t { kNone, kRkey, kBeyondEnd, kBeforeStart, kNoPermission };
const char* to_string(Bad b) {
  switch (b) {
    case Bad::kNone:
      return "none";
    case Bad::kRkey:
      return "bad-rkey";
    case Bad::kBeyondEnd:
      return "beyond-end";
    case Bad::kBeforeStart:
      return "before-start";
    case Bad::kNoPermission:
      return "no-permission";
  }
  return "?";
}
const char* to_string(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
      return "WRITE";
    case WrOpcode::kRdmaWriteWithImm:
      return "WRITE_IMM";
    case WrOpcode::kSend:
      return "SEND";
    case WrOpcode::kSendWithImm:
      return "SEND_IMM";
    case WrOpcode::kRdmaRead:
      return "READ";
    case WrOpcode::kAtomicCompareSwap:
      return "CMP_SWAP";
    case WrOpcode::kAtomicFetchAdd:
      return "FETCH_ADD";
    default:
      return "?";
  }
}

bool consumes_recv(WrOpcode op) {
  return op == WrOpcode::kSend || op == WrOpcode::kSendWithImm || op == WrOpcode::kRdmaWriteWithImm;
}
bool is_atomic(WrOpcode op) {
  return op == WrOpcode::kAtomicCompareSwap || op == WrOpcode::kAtomicFetchAdd;
}

struct Op {
  int id = 0;
  int conn = 0;
  int req = 0, resp = 0;  // node indices
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t len = 0;
  Bad bad = Bad::kNone;
  bool inline_data = false;
  std::vector<Sge> sges;         // requester-local buffers (gather, or READ/atomic scatter)
  std::vector<size_t> sge_offs;  // their offsets in the requester's arena
  Arena local_arena = kSrc;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  Arena remote_arena = kDst;
  size_t remote_off = 0;  // in remote_arena (may point outside the MR for bad ranges)
  uint32_t imm = 0;
  uint64_t compare = 0, swap_add = 0;
  uint32_t atomic_word = 0;      // word index in the responder's atomic arena
  uint64_t expect_original = 0;  // CMP_SWAP: the model's value at posting time
  std::vector<uint8_t> payload;  // what the message carries (SEND/WRITE): the gathered bytes
  int recv = -1;                 // the RECV posted for it
  // Outcome.
  bool posted = false, completed = false, recv_matched = false;
  WcStatus status = WcStatus::kSuccess;
  uint64_t original = 0;  // atomics: the value the completion returned
};

struct Recv {
  int id = 0;
  int node = 0;
  size_t off = 0;
  uint32_t len = 0;
  bool completed = false;
  int matched_op = -1;
};

// One side of a connection: a QP and what it must complete, in order.
struct QpEnd {
  int node = 0, conn = 0;
  std::unique_ptr<v::QueuePair> qp;
  std::deque<int> sq;        // op ids, posting order
  std::deque<int> rq;        // recv ids, posting order
  std::deque<int> incoming;  // ops from the peer that consume a RECV here, posting order
  // RECVs held back (late_recvs worlds) with the time each is posted: FIFO, times nondecreasing,
  // so buffers still pair with messages in order while senders meet RNR NAKs meanwhile.
  std::deque<std::pair<int, Nanos>> held;
  bool sq_broken = false;  // an error completion seen: only flushes may follow
  bool rq_flushed = false;
  uint32_t cas_word = 0;       // this QP's compare-and-swap word at the peer
  uint64_t cas_model = 0;      // what that word holds once every CMP_SWAP posted so far ran
  bool cas_ambiguous = false;  // a CMP_SWAP ended unsuccessfully: its effect is unknown
};

struct Node {
  int index = 0;
  // Members in construction order; destroyed in reverse (children before parents).
  std::unique_ptr<fabric::SimLink> link;
  std::unique_ptr<v::Device> dev;
  WorldCore::ParticipantId device = 0;  // in the world core
  std::unique_ptr<v::Context> ctx;
  std::unique_ptr<v::ProtectionDomain> pd;
  std::unique_ptr<v::CompletionQueue> scq, rcq;
  Region arena[kArenaCount];
  std::map<uint32_t, QpEnd*> by_qpn;
  // Shared fetch-add counters: completed adds, and adds whose execution is unknown.
  uint64_t fa_sum[kSharedCounters] = {};
  uint64_t fa_ambiguous[kSharedCounters] = {};
  std::vector<uint64_t> fa_originals[kSharedCounters];
};

struct Conn {
  int a = 0, b = 0;
  bool poison = false;  // carries one deliberately bad request; a -> b only
  QpEnd end[2];
};

struct WorldParams {
  int nodes = 2;
  bool ipv6 = false;
  v::Mtu mtu = v::Mtu::k1024;
  int conns_per_pair = 1;
  int wrs_per_node = 24;
  double poison_prob = 0.3;
  fabric::PathParams path;
  uint8_t timeout = 4;
  uint8_t max_rd_atomic = 4;
  uint32_t first_psn_hint = 0;
  Nanos post_gap_ns = 4000;
  Nanos late_recv_ns = 0;  // RECVs posted up to this long after their message: RNR NAKs
  uint32_t sr_window = 0;  // selective repeat: the requester's max_psn_window (0 = default)
};

class World {
 public:
  World(uint64_t seed, const SimOptions& opt);
  SimResult run();

 private:
  // Drawing.
  void draw_params();
  void plan();
  void plan_op(Op& op, Rng& rng);
  // Building.
  bool build();
  bool connect(Conn& c);
  // Running: the poster acts first in a round, then the devices, then the checker.
  void poster_act(Nanos now);
  void checker_act();
  bool post_due();
  bool post(Op& op);
  bool post_recv_for(Op& op);
  bool post_recv(QpEnd& e, const Recv& rv);
  // Posts held RECVs that are due; returns the earliest time one is still held (kNever if none).
  Nanos release_held();
  void poll_all();
  bool on_send_completion(Node& n, const Completion& c);
  bool on_recv_completion(Node& n, const Completion& c);
  void settle(Op& op);
  bool all_sends_done() const;
  bool all_recvs_done() const;
  void flush_all();
  void final_checks();
  bool fail(const std::string& what);  // records the first failure; returns false
  std::string op_str(const Op& op) const;
  void trace_completion(int node, const Completion& c);
  void inject_end_fault();

  uint64_t seed_;
  SimOptions opt_;
  WorldParams p_;
  Rng wl_rng_;   // the workload's own stream: changing the network doesn't change the workload
  Rng rnr_rng_;  // late RECVs
  Rng sr_rng_;   // selective repeat: window and (mixed worlds) each QP end's mode
  EventLoop loop_;
  LossyNetwork net_;
  WorldCore core_;
  WorldCore::ParticipantId poster_ = 0, checker_ = 0;
  enum Phase { kWork, kFlush, kDone } phase_ = kWork;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Conn> conns_;
  std::vector<Op> ops_;
  std::vector<Recv> recvs_;
  bool fault_done_ = false;
  size_t next_post_ = 0;
  Nanos next_post_at_ = 0;
  SimResult result_;
};

uint64_t sub_seed(uint64_t seed, uint64_t stream) {
  uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ull);
  return fabric::splitmix64(s);
}

fabric::NetworkConfig net_config() {
  fabric::NetworkConfig c;
  c.max_endpoints = 8;
  c.max_in_flight = 4096;
  c.inbox_packets = 1024;
  return c;
}

World::World(uint64_t seed, const SimOptions& opt)
    : seed_(seed),
      opt_(opt),
      wl_rng_(sub_seed(seed, 1)),
      rnr_rng_(sub_seed(seed, 3)),
      sr_rng_(sub_seed(seed, 5)),
      loop_(sub_seed(seed, 2), size_t{1} << 16),
      net_(loop_, net_config()),
      core_(loop_) {
  draw_params();
}

void World::draw_params() {
  Rng& r = wl_rng_;
  p_.nodes = opt_.nodes > 0 ? opt_.nodes : static_cast<int>(r.between(2, 3));
  p_.ipv6 = r.chance(0.3);
  static constexpr v::Mtu kMtus[] = {v::Mtu::k256, v::Mtu::k512, v::Mtu::k1024, v::Mtu::k4096};
  p_.mtu = kMtus[r.below(4)];
  p_.conns_per_pair = static_cast<int>(r.between(1, 2));
  p_.wrs_per_node = opt_.wrs_per_node > 0 ? opt_.wrs_per_node : static_cast<int>(r.between(8, 24));
  p_.max_rd_atomic = static_cast<uint8_t>(r.between(1, 4));
  // A PSN near the 24-bit wrap now and then, so sequence arithmetic wraps inside a run.
  p_.first_psn_hint = r.chance(0.25) ? Psn::kMask - static_cast<uint32_t>(r.below(64))
                                     : static_cast<uint32_t>(r.below(Psn::kMask));
  p_.post_gap_ns = r.between(0, 8000);
  fabric::PathParams& path = p_.path;
  path.delay_ns = r.between(500, 5000);
  path.jitter_ns = r.chance(0.5) ? r.between(0, 2000) : 0;
  path.rate_bps = r.chance(0.5) ? uint64_t{25'000'000'000} << r.below(3) : 0;
  // A third of the worlds are clean; the rest lose up to 10%, and may duplicate, reorder and
  // corrupt on top.
  const bool lossy = r.chance(2.0 / 3);
  path.loss = opt_.loss >= 0 ? opt_.loss : lossy ? r.unit() * 0.10 : 0;
  path.duplicate = lossy && r.chance(0.5) ? r.unit() * 0.03 : 0;
  path.reorder = lossy && r.chance(0.5) ? r.unit() * 0.05 : 0;
  path.reorder_delay_ns = r.between(1000, 20000);
  path.corrupt = lossy && r.chance(0.5) ? r.unit() * 0.02 : 0;
  // Local ACK timeout 4.096 us * 2^t (IBA 9.7.6.1.3): just above the worst round trip.
  p_.timeout = static_cast<uint8_t>(r.between(3, 6));
  if (opt_.fault == Fault::kBlackHole) p_.timeout = 0;  // 0: never time out (IBA 9.7.6.1.3)
  // From a stream of its own, so adding it left the other draws (and the worlds that findings
  // name by seed) as they were.
  p_.late_recv_ns = rnr_rng_.chance(0.2) ? rnr_rng_.between(1000, 40'000) : 0;
  if (opt_.recovery != Recovery::kGoBackN) {
    // Windows from a few packets (the window gate binds all the time) to the default (the reorder
    // buffer's size binds).
    static constexpr uint32_t kWindows[] = {4, 16, 64, 0};
    p_.sr_window = kWindows[sr_rng_.below(4)];
  }
  result_.config =
      format("nodes=%d ipv%d mtu=%u conns/pair=%d wrs/node=%d rd_atomic=%u psn0=%06x delay=%" PRIu64
             "ns jitter=%" PRIu64 "ns rate=%" PRIu64
             "Gb/s loss=%.3f dup=%.3f reorder=%.3f corrupt=%.3f "
             "timeout=%u late_recv=%" PRIu64 "ns",
             p_.nodes, p_.ipv6 ? 6 : 4, v::mtu_bytes(p_.mtu), p_.conns_per_pair, p_.wrs_per_node,
             p_.max_rd_atomic, p_.first_psn_hint, path.delay_ns, path.jitter_ns,
             path.rate_bps / 1'000'000'000, path.loss, path.duplicate, path.reorder, path.corrupt,
             p_.timeout, p_.late_recv_ns);
  if (opt_.recovery != Recovery::kGoBackN)
    result_.config += format(" recovery=%s window=%u", to_string(opt_.recovery), p_.sr_window);
}

// Whether retries may legitimately run out (RETRY_EXC_ERR) on a connection. Loss and corruption
// can always do it (enough drops in a row). On the connection with a bad request the responder
// goes to ERR after its NAK, so reordering or duplication alone can do it too: a response that
// arrived out of order is discarded, and its retransmitted request now meets a dead responder.
bool retry_exc_allowed(const fabric::PathParams& p, bool poison) {
  if (p.loss > 0 || p.corrupt > 0) return true;
  return poison && (p.jitter_ns > 0 || p.reorder > 0 || p.duplicate > 0);
}

std::string World::op_str(const Op& op) const {
  return format("op#%d %s len=%u conn=%d %d->%d bad=%s", op.id, to_string(op.opcode), op.len,
                op.conn, op.req, op.resp, to_string(op.bad));
}

bool World::fail(const std::string& what) {
  if (!result_.ok) return false;  // the first failure is the one worth reading
  result_.ok = false;
  result_.failure = format("t=%" PRIu64 "ns: ", loop_.now()) + what;
  return false;
}

// ---- Planning (no verbs yet: only sizes and shapes) --------------------------------------------

void World::plan() {
  Rng& r = wl_rng_;
  for (int a = 0; a < p_.nodes; ++a) {
    for (int b = a + 1; b < p_.nodes; ++b) {
      for (int k = 0; k < p_.conns_per_pair; ++k) {
        Conn c;
        c.a = a;
        c.b = b;
        c.end[0].node = a;
        c.end[1].node = b;
        conns_.push_back(std::move(c));
      }
    }
  }
  for (size_t i = 0; i < conns_.size(); ++i) {
    conns_[i].end[0].conn = conns_[i].end[1].conn = static_cast<int>(i);
  }
  if (r.chance(p_.poison_prob)) {
    // One more connection that carries a bad request: its QPs end in the error state, so it is
    // kept apart from the connections whose every request must succeed.
    Conn c;
    c.a = static_cast<int>(r.below(static_cast<uint64_t>(p_.nodes)));
    c.b = (c.a + 1 + static_cast<int>(r.below(static_cast<uint64_t>(p_.nodes - 1)))) % p_.nodes;
    c.poison = true;
    c.end[0].node = c.a;
    c.end[1].node = c.b;
    c.end[0].conn = c.end[1].conn = static_cast<int>(conns_.size());
    conns_.push_back(std::move(c));
  }
  const int total = p_.wrs_per_node * p_.nodes;
  int poison_bad_at = -1;
  std::vector<int> poison_ops;
  for (int i = 0; i < total; ++i) {
    Op op;
    op.id = i;
    const bool to_poison = conns_.back().poison && r.chance(0.25);
    if (to_poison) {
      op.conn = static_cast<int>(conns_.size() - 1);
      op.req = conns_[op.conn].a;
      op.resp = conns_[op.conn].b;
      poison_ops.push_back(i);
    } else {
      const size_t healthy = conns_.size() - (conns_.back().poison ? 1 : 0);
      op.conn = static_cast<int>(r.below(healthy));
      const bool forward = r.chance(0.5);
      op.req = forward ? conns_[op.conn].a : conns_[op.conn].b;
      op.resp = forward ? conns_[op.conn].b : conns_[op.conn].a;
    }
    ops_.push_back(std::move(op));
  }
  if (!poison_ops.empty()) poison_bad_at = poison_ops[r.below(poison_ops.size())];
  for (Op& op : ops_) {
    if (op.id == poison_bad_at) {
      static constexpr Bad kBads[] = {Bad::kRkey, Bad::kBeyondEnd, Bad::kBeforeStart,
                                      Bad::kNoPermission};
      op.bad = kBads[r.below(4)];
    }
    plan_op(op, r);
  }
}

void World::plan_op(Op& op, Rng& r) {
  static constexpr WrOpcode kOps[] = {WrOpcode::kSend,          WrOpcode::kSendWithImm,
                                      WrOpcode::kRdmaWrite,     WrOpcode::kRdmaWriteWithImm,
                                      WrOpcode::kRdmaRead,      WrOpcode::kAtomicCompareSwap,
                                      WrOpcode::kAtomicFetchAdd};
  if (op.bad != Bad::kNone) {
    // Bad requests are one-sided: WRITE, READ or an atomic.
    static constexpr WrOpcode kBadOps[] = {WrOpcode::kRdmaWrite, WrOpcode::kRdmaRead,
                                           WrOpcode::kAtomicFetchAdd};
    op.opcode = kBadOps[r.below(3)];
  } else {
    op.opcode = kOps[r.below(7)];
  }
  const uint32_t mtu = v::mtu_bytes(p_.mtu);
  if (is_atomic(op.opcode)) {
    op.len = 8;
  } else {
    // Zero, tiny, around one MTU, and up to four MTUs.
    switch (r.below(4)) {
      case 0:
        op.len = static_cast<uint32_t>(r.below(2)) * static_cast<uint32_t>(r.below(4));
        break;
      case 1:
        op.len = static_cast<uint32_t>(r.between(1, 64));
        break;
      case 2:
        op.len = static_cast<uint32_t>(r.between(mtu - 3, mtu + 3));
        break;
      default:
        op.len = static_cast<uint32_t>(r.between(1, 4 * mtu));
        break;
    }
    // Bad requests carry 16..64 bytes: never zero (a zero-length request checks no key, IBA
    // 9.7.4.1.5), and never more than the guards hold, so even a wrong write stays in our memory.
    if (op.bad != Bad::kNone) op.len = static_cast<uint32_t>(r.between(16, kGuardBytes));
  }
  op.imm = static_cast<uint32_t>(r.next());
  op.inline_data = (op.opcode == WrOpcode::kSend || op.opcode == WrOpcode::kSendWithImm ||
                    op.opcode == WrOpcode::kRdmaWrite) &&
                   op.len <= 64 && r.chance(0.3);
  op.compare = r.next();
  op.swap_add = op.opcode == WrOpcode::kAtomicFetchAdd ? r.between(1, 1000) : r.next();
  op.atomic_word = static_cast<uint32_t>(r.below(kSharedCounters));
}

// ---- Building ---------------------------------------------------------------------------------

void print_packet(LossyNetwork::TapEvent e, fabric::EndpointId from, fabric::EndpointId to,
                  std::span<const uint8_t> bytes, Nanos now) {
  static constexpr const char* kEvents[] = {"sent", "LOST", "dup", "CORRUPT", "deliver", "DROP"};
  const auto pkt = wire::parse_ip_packet(bytes);
  if (!pkt) {
    std::printf("  t=%" PRIu64 " pkt %s %u->%u unparsable (%s)\n", now,
                kEvents[static_cast<int>(e)], from, to,
                std::string(wire::to_string(pkt.error())).c_str());
    return;
  }
  const wire::TransportHeaders& h = pkt->transport.hdr;
  const wire::OpcodeInfo& info = pkt->transport.info();
  std::printf("  t=%" PRIu64 " pkt %s %u->%u %s qp=%u psn=%06x len=%zu", now,
              kEvents[static_cast<int>(e)], from, to, std::string(info.name).c_str(), h.bth.dest_qp,
              h.bth.psn.value(), pkt->transport.payload.size());
  if (info.has(wire::kAeth)) std::printf(" aeth=%02x msn=%u", h.aeth.syndrome, h.aeth.msn);
  std::printf("\n");
}

bool World::build() {
  net_.set_all_paths(p_.path);
  if (opt_.verbose) net_.set_tap(print_packet);
  // Arena sizes from the plan: every buffer gets its own bytes plus a gap.
  std::vector<std::array<size_t, kArenaCount>> need(static_cast<size_t>(p_.nodes));
  for (auto& n : need) n.fill(kGapBytes + 8);
  for (const Op& op : ops_) {
    auto& rq = need[static_cast<size_t>(op.req)];
    auto& rs = need[static_cast<size_t>(op.resp)];
    const size_t l = op.len + kGapBytes + 8;
    if (op.bad != Bad::kNone) {
      // Its own target in the MR it may not use (no-permission), whichever that is.
      rs[kDst] += l;
      rs[kRd] += l;
    }
    switch (op.opcode) {
      case WrOpcode::kSend:
      case WrOpcode::kSendWithImm:
        rq[kSrc] += l + 4 * (kGapBytes + 8);
        rs[kRecv] += l + 64 + 4 * (kGapBytes + 8);
        break;
      case WrOpcode::kRdmaWrite:
      case WrOpcode::kRdmaWriteWithImm:
        rq[kSrc] += l + 4 * (kGapBytes + 8);
        rs[kDst] += l;
        rs[kRecv] += 64 + kGapBytes + 8;
        break;
      case WrOpcode::kRdmaRead:
        rq[kLocal] += l + 4 * (kGapBytes + 8);
        rs[kRd] += l;
        break;
      default:
        rq[kLocal] += l;
        break;
    }
  }
  // Atomic words: the shared counters, then one CMP_SWAP word per QP.
  for (auto& n : need) n[kAtomic] = (kSharedCounters + conns_.size() * 2) * 8;
  // The remotely accessible MRs end in a reserved tail only out-of-range requests aim at.
  for (auto& n : need) {
    n[kDst] += kTailReserve;
    n[kRd] += kTailReserve;
    n[kAtomic] += kTailReserve;
  }

  poster_ = core_.add_actor([this](Nanos now) { poster_act(now); });
  for (int i = 0; i < p_.nodes; ++i) {
    auto node = std::make_unique<Node>();
    node->index = i;
    Gid gid{};
    if (p_.ipv6) {
      gid = {0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(i + 1)};
    } else {
      gid = gid_from_ipv4({10, 0, 0, static_cast<uint8_t>(i + 1)});
    }
    auto link = fabric::SimLink::create(net_, gid);
    if (!link) return fail("SimLink::create failed");
    node->link = std::move(*link);
    v::DeviceConfig cfg;
    cfg.name = format("sim%d", i);
    cfg.port.active_mtu = v::Mtu::k4096;
    // The real transport, named explicitly: the harness tests it, whatever the default is.
    cfg.transport_factory = v::default_transport_factory();
    node->dev = std::make_unique<v::Device>(*node->link, cfg);
    node->device = core_.add_device(*node->dev, [this](Nanos) { core_.wake_now(checker_); });
    net_.set_arrival_notify(node->link->endpoint(), &core_.waker(node->device),
                            WorldCore::kWakeKind);
    auto ctx = node->dev->open();
    if (!ctx) return fail("Device::open failed");
    node->ctx = std::move(*ctx);
    auto pd = node->ctx->alloc_pd();
    if (!pd) return fail("alloc_pd failed");
    node->pd = std::move(*pd);
    auto scq = node->ctx->create_cq(kCqEntries);
    auto rcq = node->ctx->create_cq(kCqEntries);
    if (!scq || !rcq) return fail("create_cq failed");
    node->scq = std::move(*scq);
    node->rcq = std::move(*rcq);
    for (int a = 0; a < kArenaCount; ++a) {
      Region& reg = node->arena[a];
      reg.mr_len = (need[static_cast<size_t>(i)][static_cast<size_t>(a)] + 7) & ~size_t{7};
      const size_t total = reg.mr_len + 2 * kGuardBytes;
      reg.mem.resize(total);
      for (size_t k = 0; k < total; ++k) reg.mem[k] = initial_byte(seed_, i, a, k);
      reg.expect = reg.mem;
      reg.dont_care.assign(total, 0);
      reg.owner.assign(total, -1);
      // Fixed I/O addresses (not host pointers), so packets are the same in every run.
      reg.iova = (uint64_t{0x10} + static_cast<uint64_t>(a)) << 40 | uint64_t(i) << 32;
      const uint32_t remote_rights = kArenaAccess[a] & v::kMwAccessMask;
      auto mr = node->pd->reg_mr(
          reg.at(0), reg.mr_len, reg.iova,
          kArenaAccess[a] | (remote_rights ? uint32_t{transport::kAccessMwBind} : 0u));
      if (!mr) return fail(format("reg_mr(%s) failed: %d", kArenaNames[a], mr.error()));
      reg.mr = std::move(*mr);
      if (remote_rights != 0) {
        auto mw = node->pd->alloc_mw(v::MwType::kType1);
        if (!mw) return fail(format("alloc_mw(%s) failed: %d", kArenaNames[a], mw.error()));
        reg.mw = std::move(*mw);
        reg.window_rkey = v::next_window_key(reg.mw->rkey());
        const transport::MwBindInfo bind{reg.mw->rkey(), reg.window_rkey, reg.mr->lkey(),
                                         reg.iova,       reg.mr_len,      remote_rights};
        if (node->pd->bind_mw(bind, 0) != WcStatus::kSuccess)
          return fail(format("bind_mw(%s) failed", kArenaNames[a]));
      }
    }
    nodes_.push_back(std::move(node));
  }
  checker_ = core_.add_actor([this](Nanos) { checker_act(); });
  for (Conn& c : conns_) {
    if (!connect(c)) return false;
  }
  return true;
}

bool World::connect(Conn& c) {
  Rng& r = wl_rng_;
  for (QpEnd& e : c.end) {
    Node& n = *nodes_[static_cast<size_t>(e.node)];
    v::QpInitAttr init;
    init.send_cq = n.scq.get();
    init.recv_cq = n.rcq.get();
    init.qp_type = transport::QpType::kRc;
    init.cap.max_send_wr = 128;
    init.cap.max_recv_wr = 128;
    init.cap.max_send_sge = 4;
    init.cap.max_recv_sge = 4;
    init.cap.max_inline_data = 64;
    // Drawn in creation order, so each end's mode is what it was when a factory drew it.
    const bool sr = opt_.recovery == Recovery::kSelectiveRepeat ||
                    (opt_.recovery == Recovery::kMixed && sr_rng_.chance(0.5));
    init.loss_recovery =
        sr ? transport::LossRecovery::kSelectiveRepeat : transport::LossRecovery::kGoBackN;
    init.max_psn_window = p_.sr_window;
    auto qp = n.pd->create_qp(init);
    if (!qp) return fail(format("create_qp failed: %d", qp.error()));
    e.qp = std::move(*qp);
    n.by_qpn[e.qp->qp_num()] = &e;
  }
  for (int s = 0; s < 2; ++s) {
    QpEnd& me = c.end[s];
    QpEnd& peer = c.end[1 - s];
    Node& pn = *nodes_[static_cast<size_t>(peer.node)];
    // My CMP_SWAP word lives at the peer.
    me.cas_word = kSharedCounters + static_cast<uint32_t>(c.end[0].conn * 2 + s);
    uint64_t v0;
    std::memcpy(&v0, pn.arena[kAtomic].at(me.cas_word * 8), 8);
    me.cas_model = v0;
  }
  const uint32_t psn[2] = {(p_.first_psn_hint + static_cast<uint32_t>(r.below(8))) & Psn::kMask,
                           static_cast<uint32_t>(r.below(Psn::kMask))};
  for (int s = 0; s < 2; ++s) {
    QpEnd& me = c.end[s];
    QpEnd& peer = c.end[1 - s];
    v::QpAttr a;
    a.qp_state = v::QpState::kInit;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = transport::kAccessRemoteWrite | transport::kAccessRemoteRead |
                        transport::kAccessRemoteAtomic;
    int rc = me.qp->modify(a, v::kQpState | v::kQpPkeyIndex | v::kQpPort | v::kQpAccessFlags);
    if (rc != 0) return fail(format("modify to INIT: %d", rc));
    a.qp_state = v::QpState::kRtr;
    a.path_mtu = p_.mtu;
    a.dest_qp_num = peer.qp->qp_num();
    a.rq_psn = psn[1 - s];
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = true;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = nodes_[static_cast<size_t>(peer.node)]->dev->gid();
    a.ah_attr.grh.sgid_index = 0;
    a.ah_attr.grh.hop_limit = 64;
    rc = me.qp->modify(a, v::kQpState | v::kQpAv | v::kQpPathMtu | v::kQpDestQpn | v::kQpRqPsn |
                              v::kQpMaxDestRdAtomic | v::kQpMinRnrTimer);
    if (rc != 0) return fail(format("modify to RTR: %d", rc));
  }
  for (int s = 0; s < 2; ++s) {
    v::QpAttr a;
    a.qp_state = v::QpState::kRts;
    a.timeout = p_.timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.sq_psn = psn[s];
    a.max_rd_atomic = p_.max_rd_atomic;
    const int rc = c.end[s].qp->modify(a, v::kQpState | v::kQpTimeout | v::kQpRetryCnt |
                                              v::kQpRnrRetry | v::kQpSqPsn | v::kQpMaxQpRdAtomic);
    if (rc != 0) return fail(format("modify to RTS: %d", rc));
  }
  return true;
}

// ---- Posting ----------------------------------------------------------------------------------

// Splits [off, off+len) of the requester's arena into 1..3 SGEs with gaps between them.
void make_sges(Op& op, Region& reg, Rng& r) {
  const uint32_t parts =
      op.len == 0 ? 1 : static_cast<uint32_t>(r.between(1, std::min(3u, op.len)));
  uint32_t left = op.len;
  for (uint32_t i = 0; i < parts; ++i) {
    const uint32_t n =
        i + 1 == parts ? left : static_cast<uint32_t>(r.between(1, left - (parts - 1 - i)));
    const size_t off = reg.alloc(n);
    op.sges.push_back(Sge{reg.va(off), n, reg.mr->lkey()});
    op.sge_offs.push_back(off);
    left -= n;
  }
}

bool World::post_recv_for(Op& op) {
  Node& rn = *nodes_[static_cast<size_t>(op.resp)];
  Conn& c = conns_[static_cast<size_t>(op.conn)];
  QpEnd& re = c.end[c.a == op.resp ? 0 : 1];
  Region& reg = rn.arena[kRecv];
  Recv rv;
  rv.id = static_cast<int>(recvs_.size());
  rv.node = op.resp;
  const bool is_send = op.opcode != WrOpcode::kRdmaWriteWithImm;
  rv.len = (is_send ? op.len : 0) + static_cast<uint32_t>(wl_rng_.below(64));
  rv.off = reg.alloc(rv.len);
  re.incoming.push_back(op.id);
  op.recv = rv.id;
  recvs_.push_back(rv);
  ++result_.stats.wrs;
  if (p_.late_recv_ns > 0) {
    Nanos at = loop_.now() + rnr_rng_.between(0, p_.late_recv_ns);
    if (!re.held.empty()) at = std::max(at, re.held.back().second);
    re.held.emplace_back(rv.id, at);
    return true;
  }
  return post_recv(re, rv);
}

bool World::post_recv(QpEnd& e, const Recv& rv) {
  const Region& reg = nodes_[static_cast<size_t>(rv.node)]->arena[kRecv];
  const Sge sge{reg.va(rv.off), rv.len, reg.mr->lkey()};
  transport::RecvWr wr;
  wr.wr_id = static_cast<uint64_t>(rv.id);
  wr.sg_list = {&sge, rv.len == 0 ? size_t{0} : size_t{1}};
  const int rc = e.qp->post_recv(wr);
  if (rc != 0) return fail(format("post_recv %d: %d", rv.id, rc));
  core_.wake_now(nodes_[static_cast<size_t>(rv.node)]->device);
  e.rq.push_back(rv.id);
  return true;
}

Nanos World::release_held() {
  Nanos next = kNever;
  for (Conn& c : conns_) {
    for (QpEnd& e : c.end) {
      while (!e.held.empty() && e.held.front().second <= loop_.now()) {
        if (!post_recv(e, recvs_[static_cast<size_t>(e.held.front().first)])) return kNever;
        e.held.pop_front();
      }
      if (!e.held.empty()) next = std::min(next, e.held.front().second);
    }
  }
  return next;
}

bool World::post(Op& op) {
  Node& n = *nodes_[static_cast<size_t>(op.req)];
  Node& rn = *nodes_[static_cast<size_t>(op.resp)];
  Conn& c = conns_[static_cast<size_t>(op.conn)];
  QpEnd& me = c.end[c.a == op.req ? 0 : 1];
  Rng& r = wl_rng_;
  transport::SendWr wr;
  wr.wr_id = static_cast<uint64_t>(op.id);
  wr.opcode = op.opcode;
  wr.flags = transport::kSendSignaled | (op.inline_data ? uint32_t{transport::kSendInline} : 0u);
  wr.imm = op.imm;
  switch (op.opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm: {
      op.local_arena = kSrc;
      make_sges(op, n.arena[kSrc], r);
      for (size_t i = 0; i < op.sges.size(); ++i) {
        const uint8_t* p = n.arena[kSrc].at(op.sge_offs[i]);
        op.payload.insert(op.payload.end(), p, p + op.sges[i].length);
        // Inline data is read through process addresses, not keys (IBV_SEND_INLINE).
        if (op.inline_data) op.sges[i].addr = reinterpret_cast<uintptr_t>(p);
      }
      break;
    }
    case WrOpcode::kRdmaRead:
      op.local_arena = kLocal;
      make_sges(op, n.arena[kLocal], r);
      break;
    default: {
      op.local_arena = kLocal;
      const size_t off = n.arena[kLocal].alloc(8);
      op.sges.push_back(Sge{n.arena[kLocal].va(off), 8, n.arena[kLocal].mr->lkey()});
      op.sge_offs.push_back(off);
      break;
    }
  }
  // The remote side.
  if (op.opcode == WrOpcode::kRdmaWrite || op.opcode == WrOpcode::kRdmaWriteWithImm) {
    op.remote_arena = kDst;
    op.remote_off = rn.arena[kDst].alloc(op.len);
  } else if (op.opcode == WrOpcode::kRdmaRead) {
    op.remote_arena = kRd;
    op.remote_off = rn.arena[kRd].alloc(op.len);
  } else if (op.opcode == WrOpcode::kAtomicFetchAdd) {
    op.remote_arena = kAtomic;
    op.remote_off = size_t{op.atomic_word} * 8;
  } else if (op.opcode == WrOpcode::kAtomicCompareSwap) {
    op.remote_arena = kAtomic;
    op.atomic_word = me.cas_word;
    op.remote_off = size_t{me.cas_word} * 8;
    // Most compares match the model (the swap happens); some don't (it must not).
    if (r.chance(0.7)) op.compare = me.cas_model;
    op.expect_original = me.cas_model;
    if (op.compare == me.cas_model) me.cas_model = op.swap_add;
  }
  // Out-of-range requests straddle an end of the MR the opcode would use: up to 32 bytes on the
  // far side lie in the guard, the rest in the reserved tail (end) or the first buffer (start).
  const size_t straddle = std::min<size_t>(op.len / 2, kTailReserve / 2) & ~size_t{7};
  switch (op.bad) {
    case Bad::kNone:
    case Bad::kRkey:
      break;
    case Bad::kBeyondEnd:
      op.remote_off = rn.arena[op.remote_arena].mr_len - straddle;
      break;
    case Bad::kBeforeStart:
      op.remote_off = 0 - (straddle + 8);
      break;
    case Bad::kNoPermission:
      // WRITE into the read-only MR, READ from the write-only MR, atomics on the write-only MR.
      op.remote_arena = op.opcode == WrOpcode::kRdmaWrite ? kRd : kDst;
      op.remote_off = rn.arena[op.remote_arena].alloc(op.len);
      break;
  }
  Region& remote = rn.arena[op.remote_arena];
  op.remote_addr = remote.iova + op.remote_off;  // wraps below iova for kBeforeStart, by design
  op.rkey = op.id % 2 == 1 && remote.mw ? remote.window_rkey : remote.mr->rkey();
  if (op.bad == Bad::kRkey) op.rkey ^= static_cast<uint32_t>(r.between(1, 0xffffffff));
  wr.sg_list = {op.sges.data(), op.len == 0 ? size_t{0} : op.sges.size()};
  wr.remote_addr = op.remote_addr;
  wr.rkey = op.rkey;
  wr.compare_add = op.opcode == WrOpcode::kAtomicFetchAdd ? op.swap_add : op.compare;
  wr.swap = op.swap_add;
  if (consumes_recv(op.opcode) && !post_recv_for(op)) return false;
  const int rc = me.qp->post_send(wr);
  if (rc != 0) return fail(format("post_send %s: %d", op_str(op).c_str(), rc));
  core_.wake_now(n.device);
  me.sq.push_back(op.id);
  op.posted = true;
  ++result_.stats.wrs;
  if (opt_.verbose) {
    std::printf("  t=%" PRIu64 " post %s qp=%u raddr=%" PRIx64 " rkey=%08x\n", loop_.now(),
                op_str(op).c_str(), me.qp->qp_num(), op.remote_addr, op.rkey);
  }
  return true;
}

bool World::post_due() {
  if (next_post_ >= ops_.size() || loop_.now() < next_post_at_) return false;
  const uint64_t burst = wl_rng_.between(1, 4);
  for (uint64_t i = 0; i < burst && next_post_ < ops_.size(); ++i) {
    if (!post(ops_[next_post_++])) return false;
  }
  next_post_at_ = loop_.now() + wl_rng_.between(0, p_.post_gap_ns);
  return true;
}

// ---- Completions --------------------------------------------------------------------------------

void World::trace_completion(int node, const Completion& c) {
  loop_.trace(uint64_t(node) << 56 ^ c.wr_id);
  loop_.trace(uint64_t(c.status) << 40 ^ uint64_t(c.opcode) << 32 ^ c.byte_len);
  ++result_.stats.completions;
  switch (c.status) {
    case WcStatus::kSuccess:
      ++result_.stats.success;
      break;
    case WcStatus::kRemAccessErr:
      ++result_.stats.rem_access_err;
      break;
    case WcStatus::kRetryExcErr:
      ++result_.stats.retry_exc_err;
      break;
    case WcStatus::kWrFlushErr:
      ++result_.stats.flushed;
      break;
    default:
      break;
  }
  if (opt_.verbose) {
    std::printf("  t=%" PRIu64 " node%d completion wr_id=%" PRIu64
                " status=%d opcode=%d len=%u "
                "qp=%u\n",
                loop_.now(), node, c.wr_id, static_cast<int>(c.status), static_cast<int>(c.opcode),
                c.byte_len, c.qp_num);
  }
}

WcOpcode expected_send_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCompareSwap:
      return WcOpcode::kCompareSwap;
    case WrOpcode::kAtomicFetchAdd:
      return WcOpcode::kFetchAdd;
    default:
      return WcOpcode::kSend;
  }
}

bool World::on_send_completion(Node& n, const Completion& c) {
  trace_completion(n.index, c);
  auto it = n.by_qpn.find(c.qp_num);
  if (it == n.by_qpn.end()) return fail(format("send completion for unknown qp %u", c.qp_num));
  QpEnd& e = *it->second;
  if (e.sq.empty() || e.sq.front() != static_cast<int>(c.wr_id)) {
    return fail(format("send completion wr_id=%" PRIu64 " on qp %u, expected %s", c.wr_id, c.qp_num,
                       e.sq.empty() ? "none" : op_str(ops_[e.sq.front()]).c_str()));
  }
  e.sq.pop_front();
  Op& op = ops_[c.wr_id];
  if (op.completed) return fail("completed twice: " + op_str(op));
  op.completed = true;
  op.status = c.status;
  const bool may_run_out = retry_exc_allowed(p_.path, conns_[static_cast<size_t>(op.conn)].poison);
  const std::string who = op_str(op) + format(" status=%d", static_cast<int>(c.status));
  if (e.sq_broken) {
    if (c.status != WcStatus::kWrFlushErr) return fail("after an error, not a flush: " + who);
  } else if (op.bad != Bad::kNone) {
    // A key that fails its checks (IBA 10.6.3: wrong R_Key, range outside the MR, missing rights)
    // draws a Remote Access Error NAK (IBA 9.7.5.1, table 42), which the requester completes as
    // REM_ACCESS_ERR. If that NAK was lost, retries into the dead responder run out instead.
    if (c.status != WcStatus::kRemAccessErr &&
        !(may_run_out && c.status == WcStatus::kRetryExcErr)) {
      return fail("bad request did not fail with REM_ACCESS_ERR: " + who);
    }
    e.sq_broken = true;
  } else if (c.status == WcStatus::kRetryExcErr && may_run_out) {
    e.sq_broken = true;
  } else if (c.status != WcStatus::kSuccess) {
    return fail("unexpected status: " + who);
  }
  if (c.status != WcStatus::kSuccess && c.status != WcStatus::kWrFlushErr &&
      e.qp->state() != v::QpState::kErr) {
    return fail("QP not in ERR after an error completion: " + who);
  }
  if (c.status == WcStatus::kWrFlushErr && e.qp->state() != v::QpState::kErr) {
    return fail("flush completion while the QP is not in ERR: " + who);
  }
  if (c.status == WcStatus::kSuccess && c.opcode != expected_send_opcode(op.opcode)) {
    return fail(format("completion opcode %d for ", static_cast<int>(c.opcode)) + who);
  }
  if (c.status == WcStatus::kSuccess && is_atomic(op.opcode)) {
    std::memcpy(&op.original, n.arena[kLocal].at(op.sge_offs[0]), 8);
  }
  settle(op);
  return true;
}

// Applies a completed operation to the memory model.
void World::settle(Op& op) {
  Node& req = *nodes_[static_cast<size_t>(op.req)];
  Node& resp = *nodes_[static_cast<size_t>(op.resp)];
  const bool ok = op.status == WcStatus::kSuccess;
  Region& local = req.arena[op.local_arena];
  Region& remote = resp.arena[op.remote_arena];
  if (op.bad != Bad::kNone) {
    // A bad request must not touch anything: its target keeps its initial bytes in the model.
    // Its local buffer too: no data came back. (A flushed bad request never ran either.)
    return;
  }
  switch (op.opcode) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      if (ok) {
        remote.set_expect(op.remote_off, op.payload.data(), op.len, op.id);
      } else {
        remote.set_dont_care(op.remote_off, op.len);
      }
      break;
    case WrOpcode::kRdmaRead: {
      size_t at = 0;
      for (size_t i = 0; i < op.sges.size() && op.len > 0; ++i) {
        if (ok) {
          local.set_expect(op.sge_offs[i], remote.expect.data() + kGuardBytes + op.remote_off + at,
                           op.sges[i].length, op.id);
        } else {
          local.set_dont_care(op.sge_offs[i], op.sges[i].length);
        }
        at += op.sges[i].length;
      }
      break;
    }
    case WrOpcode::kAtomicCompareSwap: {
      Conn& c = conns_[static_cast<size_t>(op.conn)];
      QpEnd& me = c.end[c.a == op.req ? 0 : 1];
      if (!ok) {
        local.set_dont_care(op.sge_offs[0], 8);
        // Even a flushed CMP_SWAP may have reached the responder before the QP failed.
        me.cas_ambiguous = true;
        remote.set_dont_care(op.remote_off, 8);
        break;
      }
      // Per-QP chain: only this QP touches the word, and a QP's atomics run in order, so the
      // original is exactly the model's value when it was posted (a replayed duplicate that ran
      // twice would return the swapped value instead: IBA 9.7.5.1.3, C9-72.1).
      if (!me.cas_ambiguous && op.original != op.expect_original) {
        fail(format("CMP_SWAP returned %016" PRIx64 ", model says %016" PRIx64 ": ", op.original,
                    op.expect_original) +
             op_str(op));
      }
      local.set_expect(op.sge_offs[0], reinterpret_cast<const uint8_t*>(&op.original), 8, op.id);
      const uint64_t now_value = op.original == op.compare ? op.swap_add : op.original;
      remote.set_expect(op.remote_off, reinterpret_cast<const uint8_t*>(&now_value), 8, op.id);
      break;
    }
    case WrOpcode::kAtomicFetchAdd:
      remote.set_dont_care(op.remote_off, 8);  // checked by the sums in final_checks()
      if (ok) {
        local.set_expect(op.sge_offs[0], reinterpret_cast<const uint8_t*>(&op.original), 8, op.id);
        resp.fa_sum[op.atomic_word] += op.swap_add;
        resp.fa_originals[op.atomic_word].push_back(op.original);
      } else {
        local.set_dont_care(op.sge_offs[0], 8);
        resp.fa_ambiguous[op.atomic_word] += op.swap_add;
      }
      break;
    default:
      break;
  }
}

bool World::on_recv_completion(Node& n, const Completion& c) {
  trace_completion(n.index, c);
  auto it = n.by_qpn.find(c.qp_num);
  if (it == n.by_qpn.end()) return fail(format("recv completion for unknown qp %u", c.qp_num));
  QpEnd& e = *it->second;
  if (e.rq.empty() || e.rq.front() != static_cast<int>(c.wr_id)) {
    return fail(format("recv completion wr_id=%" PRIu64 " on qp %u, expected %d", c.wr_id, c.qp_num,
                       e.rq.empty() ? -1 : e.rq.front()));
  }
  e.rq.pop_front();
  Recv& rv = recvs_[c.wr_id];
  if (rv.completed) return fail(format("recv %d completed twice", rv.id));
  rv.completed = true;
  Region& reg = n.arena[kRecv];
  if (c.status == WcStatus::kWrFlushErr) {
    if (e.qp->state() != v::QpState::kErr) return fail("recv flushed while the QP is not in ERR");
    e.rq_flushed = true;
    reg.set_dont_care(rv.off, rv.len);  // a flushed buffer's content is undefined
    return true;
  }
  if (c.status != WcStatus::kSuccess) {
    return fail(format("recv %d completed with status %d", rv.id, static_cast<int>(c.status)));
  }
  if (e.rq_flushed) return fail(format("recv %d succeeded after a flush", rv.id));
  // RECVs are consumed in order by the messages in the order the peer posted them (IBA 9.5).
  if (e.incoming.empty()) return fail(format("recv %d completed with no message sent", rv.id));
  Op& op = ops_[static_cast<size_t>(e.incoming.front())];
  e.incoming.pop_front();
  op.recv_matched = true;
  rv.matched_op = op.id;
  const bool with_imm =
      op.opcode == WrOpcode::kSendWithImm || op.opcode == WrOpcode::kRdmaWriteWithImm;
  const WcOpcode want =
      op.opcode == WrOpcode::kRdmaWriteWithImm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
  const std::string who = format("recv %d for ", rv.id) + op_str(op);
  if (c.opcode != want) return fail(format("opcode %d, ", static_cast<int>(c.opcode)) + who);
  if (with_imm != ((c.wc_flags & transport::kWcWithImm) != 0)) return fail("imm flag: " + who);
  if (with_imm && c.imm_or_invalidated_rkey != op.imm) {
    return fail(format("imm %08x != %08x: ", c.imm_or_invalidated_rkey, op.imm) + who);
  }
  if (op.opcode != WrOpcode::kRdmaWriteWithImm) {
    if (c.byte_len != op.len) return fail(format("byte_len %u: ", c.byte_len) + who);
    if (op.len > 0) reg.set_expect(rv.off, op.payload.data(), op.len, op.id);
  }
  return true;
}

void World::poll_all() {
  Completion wc[32];
  for (auto& np : nodes_) {
    for (size_t got; (got = np->scq->poll(wc)) > 0;) {
      for (size_t i = 0; i < got; ++i) {
        if (!fault_done_ && opt_.fault == Fault::kLostCompletion) {
          fault_done_ = true;
          continue;
        }
        on_send_completion(*np, wc[i]);
        if (!fault_done_ && opt_.fault == Fault::kDuplicateCompletion) {
          fault_done_ = true;
          on_send_completion(*np, wc[i]);
        }
      }
    }
    for (size_t got; (got = np->rcq->poll(wc)) > 0;) {
      for (size_t i = 0; i < got; ++i) on_recv_completion(*np, wc[i]);
    }
  }
}

bool World::all_sends_done() const {
  if (next_post_ < ops_.size()) return false;
  for (const Conn& c : conns_)
    for (const QpEnd& e : c.end)
      if (!e.sq.empty() || !e.held.empty()) return false;
  return true;
}

bool World::all_recvs_done() const {
  for (const Conn& c : conns_)
    for (const QpEnd& e : c.end)
      if (!e.rq.empty()) return false;
  return true;
}

void World::flush_all() {
  // Every send is done; moving each QP to ERR flushes the RECVs nobody used (IBA 10.3.1), so
  // every posted RECV completes too and "exactly once" covers them.
  for (Conn& c : conns_) {
    for (QpEnd& e : c.end) {
      v::QpAttr a;
      a.qp_state = v::QpState::kErr;
      const int rc = e.qp->modify(a, v::kQpState);
      if (rc != 0) fail(format("modify to ERR: %d", rc));
    }
  }
}

void World::final_checks() {
  // Every message the requester saw succeed consumed a RECV that completed successfully.
  for (const Op& op : ops_) {
    if (!op.completed) fail("never completed: " + op_str(op));
    if (consumes_recv(op.opcode) && op.status == WcStatus::kSuccess && !op.recv_matched) {
      fail("message succeeded but its RECV never did: " + op_str(op));
    }
  }
  for (const Recv& rv : recvs_) {
    if (!rv.completed) fail(format("recv %d never completed", rv.id));
  }
  for (size_t ni = 0; ni < nodes_.size(); ++ni) {
    Node& n = *nodes_[ni];
    // Shared fetch-add counters: exactly the completed adds, plus any subset of the ambiguous.
    for (uint32_t w = 0; w < kSharedCounters; ++w) {
      uint64_t initial, final_value;
      std::memcpy(&initial, n.arena[kAtomic].expect.data() + kGuardBytes + w * 8, 8);
      std::memcpy(&final_value, n.arena[kAtomic].at(w * 8), 8);
      const uint64_t delta = final_value - initial;
      if (delta < n.fa_sum[w] || delta > n.fa_sum[w] + n.fa_ambiguous[w]) {
        fail(format("node%zu counter %u: added %" PRIu64 ", completed adds sum to %" PRIu64
                    " (+%" PRIu64 " unknown)",
                    ni, w, delta, n.fa_sum[w], n.fa_ambiguous[w]));
      }
      auto& o = n.fa_originals[w];
      std::sort(o.begin(), o.end());
      if (std::adjacent_find(o.begin(), o.end()) != o.end()) {
        fail(format("node%zu counter %u: two FETCH_ADDs returned the same original", ni, w));
      }
    }
    for (int a = 0; a < kArenaCount; ++a) {
      Region& reg = n.arena[a];
      for (size_t k = 0; k < reg.mem.size(); ++k) {
        if (reg.dont_care[k] || reg.mem[k] == reg.expect[k]) continue;
        const ptrdiff_t mr_off = static_cast<ptrdiff_t>(k) - static_cast<ptrdiff_t>(kGuardBytes);
        std::string owner = reg.owner[k] >= 0 ? op_str(ops_[static_cast<size_t>(reg.owner[k])])
                                              : std::string("no operation (guard or untouched)");
        // Name the op whose target covers this byte, if any, to tell a misplaced write from a
        // missing one.
        for (const Op& op : ops_) {
          if (op.resp == static_cast<int>(ni) && op.remote_arena == a &&
              mr_off >= static_cast<ptrdiff_t>(op.remote_off) &&
              mr_off < static_cast<ptrdiff_t>(op.remote_off + op.len)) {
            owner +=
                "; target of " + op_str(op) + format(" status=%d", static_cast<int>(op.status));
          }
        }
        fail(format("node%zu %s[%td] (iova %" PRIx64 ") is %02x, expected %02x; ", ni,
                    kArenaNames[a], mr_off, reg.iova + static_cast<uint64_t>(mr_off), reg.mem[k],
                    reg.expect[k]) +
             owner);
        break;
      }
      for (size_t k = 0; k < reg.mem.size(); ++k) {
        if (!reg.dont_care[k]) ++result_.stats.bytes_checked;
      }
      uint64_t h = 0;
      for (size_t k = 0; k < reg.mem.size(); k += 8) {
        uint64_t w = 0;
        std::memcpy(&w, reg.mem.data() + k, std::min<size_t>(8, reg.mem.size() - k));
        h = h * 31 + w;
      }
      loop_.trace(h);
    }
  }
}

void World::inject_end_fault() {
  Node& n = *nodes_.front();
  switch (opt_.fault) {
    case Fault::kStrayWrite:
      n.arena[kDst].at(n.arena[kDst].mr_len)[3] ^= 0x40;
      break;
    case Fault::kDoubleAtomic: {
      // Far more than any sum of adds whose outcome is unknown (each is at most 1000).
      uint64_t v;
      std::memcpy(&v, n.arena[kAtomic].at(0), 8);
      v += uint64_t{1} << 40;
      std::memcpy(n.arena[kAtomic].at(0), &v, 8);
      break;
    }
    case Fault::kWrongData:
      for (const Op& op : ops_) {
        if (op.opcode == WrOpcode::kRdmaWrite && op.status == WcStatus::kSuccess && op.len > 0) {
          nodes_[static_cast<size_t>(op.resp)]->arena[kDst].at(op.remote_off)[op.len - 1] ^= 1;
          break;
        }
      }
      break;
    default:
      break;
  }
}

void World::poster_act(Nanos now) {
  core_.wake_now(checker_);
  Nanos next = kNever;
  if (phase_ == kWork) {
    // A burst posted: every device gets another pass at this instant, after the one it gets now.
    if (post_due()) core_.round_at(now);
    next = release_held();
  }
  if (opt_.fault == Fault::kBlackHole && !fault_done_ && next_post_ * 2 >= ops_.size()) {
    fault_done_ = true;
    fabric::PathParams dead = p_.path;
    dead.loss = 1.0;
    net_.set_all_paths(dead);
  }
  if (phase_ == kWork && next_post_ < ops_.size()) next = std::min(next, next_post_at_);
  if (next != kNever) core_.wake(poster_, next);
}

void World::checker_act() {
  poll_all();
  if (phase_ == kWork && all_sends_done()) {
    flush_all();
    phase_ = kFlush;
    core_.wake_all_devices();
  } else if (phase_ == kFlush && all_recvs_done()) {
    phase_ = kDone;
    core_.stop();
  }
}

SimResult World::run() {
  plan();
  if (!build()) return result_;
  WorldCore::Limits limits;
  limits.time = kVirtualTimeBound;
  limits.rounds = kDriverStepBound;
  limits.rounds_at_one_time = kSameTimeStepBound;
  core_.wake(poster_, loop_.now());
  const WorldCore::Outcome out = core_.run([this](Nanos) { return result_.ok; }, limits);
  switch (out.end) {
    case WorldCore::End::kRoundLimit:
      fail(format("driver step bound hit (%" PRIu64 " steps): livelock?", kDriverStepBound));
      break;
    case WorldCore::End::kStalled:
      fail("virtual time stopped moving: progress() keeps returning now");
      break;
    case WorldCore::End::kIdle:
      fail("deadlock: work outstanding but no device deadline and no packet in flight");
      break;
    case WorldCore::End::kTimeLimit:
      fail(format("virtual time bound: next wake-up at %" PRIu64 "ns", out.next));
      break;
    case WorldCore::End::kDone:
    case WorldCore::End::kStopped:
      break;
  }
  // A round the hook refused (after a failure) never ran.
  result_.stats.driver_steps = out.end == WorldCore::End::kDone ? out.rounds - 1 : out.rounds;
  result_.stats.virtual_ns = loop_.now();
  if (result_.ok) {
    // Nothing may complete twice: after the end, the CQs stay empty.
    for (auto& n : nodes_) n->dev->progress(loop_.now());
    poll_all();
    inject_end_fault();
    final_checks();
  }
  if (!result_.ok) {
    for (const Op& op : ops_) {
      if (op.posted && !op.completed) {
        result_.failure += "\n  outstanding: " + op_str(op);
      }
    }
  }
  const fabric::NetworkCounters& nc = net_.counters();
  result_.stats.packets_sent = nc.sent;
  result_.stats.packets_lost = nc.lost;
  result_.stats.packets_corrupted = nc.corrupted;
  result_.stats.packets_duplicated = nc.duplicated;
  result_.trace_hash = loop_.trace_hash();
  for (auto& n : nodes_) {
    // Device totals cover the QPs destroyed during the run too.
    for (const v::Counter& c : n->dev->counters()) {
      if (c.name == "retransmitted_packets") result_.stats.retransmitted += c.value;
      if (c.name == "retransmitted_bytes") result_.stats.retransmitted_bytes += c.value;
      if (c.name == "sr_ooo_held") result_.stats.ooo_buffered += c.value;
      if (c.name == "sr_ooo_dropped") result_.stats.ooo_dropped += c.value;
    }
  }
  // Tear down children before parents (QPs, then MRs, CQs, PD, context, device).
  for (Conn& c : conns_)
    for (QpEnd& e : c.end) e.qp.reset();
  return result_;
}

}  // namespace

SimResult run_world(uint64_t seed, const SimOptions& options) {
  World w(seed, options);
  return w.run();
}

const char* to_string(Recovery r) {
  switch (r) {
    case Recovery::kGoBackN:
      return "gbn";
    case Recovery::kSelectiveRepeat:
      return "sr";
    case Recovery::kMixed:
      return "mixed";
  }
  return "?";
}

std::string replay_command(uint64_t seed, Recovery recovery) {
  return format("UROCE_SIM_SEED=%" PRIu64
                " UROCE_SIM_RECOVERY=%s"
                " UROCE_SIM_VERBOSE=1 build/release/tests/uroce_sim_tests "
                "--gtest_filter='Sim.ManySeeds'",
                seed, to_string(recovery));
}

}  // namespace uroce::sim
