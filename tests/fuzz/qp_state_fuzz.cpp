// Stateful fuzzing of a device (docs/security.md): each input is a sequence of steps played
// against one verbs device with RC (go-back-N and selective repeat), UC and UD QPs connected to a
// peer address, registered memory with guard bytes around it, posted receives and outstanding
// READs and atomics of its own. A step is a hand-shaped packet (opcode, QP, PSN near the one
// expected, keys and addresses near the real ones, payload), raw bytes, a post, or time passing.
// Invariants, checked after every step and at the end:
//   - no crash, no sanitizer report, no hang (every loop here is bounded; libFuzzer's -timeout);
//   - no byte outside the ranges the QPs may write changed (the guards, and the region registered
//     without write rights);
//   - the device totals stay within their caps, and return to 0 once the QPs are destroyed;
//   - every datagram the link took is accounted for (parsed or counted malformed).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "unit/verbs_test_support.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/qp.h"
#include "wire/packet.h"

namespace {

using namespace uroce;
using transport::QpState;
using transport::QpType;

constexpr size_t kRegion = 2048, kGuard = 256;
// The arena: guard, region 0 (every right), guard, region 1 (remote read only: nothing may write
// it), guard, region 2 (local write: receives and the device's own READ/atomic results), guard.
constexpr size_t kArena = 4 * kGuard + 3 * kRegion;
constexpr size_t region_at(int r) {
  return kGuard + static_cast<size_t>(r) * (kRegion + kGuard);
}
constexpr uint32_t kPsn = 0xfffff0;  // close to the wrap
const Gid kSelf = gid_from_ipv4({10, 0, 0, 1});
const Gid kPeer = gid_from_ipv4({10, 0, 0, 2});
const Gid kStranger = gid_from_ipv4({10, 0, 0, 3});

uint8_t guard_byte(size_t i) {
  return static_cast<uint8_t>(0xa5 ^ i);
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "qp_state_fuzz: invariant broken: %s\n", what);
  std::abort();
}

class Reader {
 public:
  Reader(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  bool empty() const { return i_ >= n_; }
  uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
  uint32_t u32() { return u16() | static_cast<uint32_t>(u16()) << 16; }
  std::span<const uint8_t> bytes(size_t n) {
    n = std::min(n, n_ - std::min(i_, n_));
    std::span<const uint8_t> s(d_ + i_, n);
    i_ += n;
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_, i_ = 0;
};

struct World {
  verbs::testing::PairLink link{kSelf}, peer{kPeer};
  std::unique_ptr<verbs::Device> dev;
  std::unique_ptr<verbs::Context> ctx;
  std::unique_ptr<verbs::ProtectionDomain> pd;
  std::unique_ptr<verbs::CompletionQueue> cq;
  std::vector<uint8_t> arena = std::vector<uint8_t>(kArena);
  std::array<std::unique_ptr<verbs::MemoryRegion>, 3> mr;
  std::array<std::unique_ptr<verbs::QueuePair>, 4> qp;  // RC go-back-N, RC SR, UC, UD
  Nanos now = 0;
  uint64_t injected = 0;

  World() {
    link.connect(peer);
    peer.connect(link);
    verbs::DeviceConfig config;
    config.totals.reorder_bytes = 64 * 1024;  // small caps, so inputs reach them
    config.totals.pending_responses = 6;
    dev = std::make_unique<verbs::Device>(link, std::move(config));
    ctx = std::move(dev->open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(1024).value());
    for (size_t i = 0; i < kArena; ++i) arena[i] = guard_byte(i);
    const uint32_t rights[3] = {transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                                    transport::kAccessRemoteRead | transport::kAccessRemoteAtomic,
                                transport::kAccessRemoteRead, transport::kAccessLocalWrite};
    for (int r = 0; r < 3; ++r)
      mr[r] = std::move(pd->reg_mr(arena.data() + region_at(r), kRegion, rights[r]).value());
    for (int i = 0; i < 4; ++i) {
      verbs::QpInitAttr a;
      a.send_cq = a.recv_cq = cq.get();
      a.cap.max_send_wr = 8;
      a.cap.max_recv_wr = 8;
      a.cap.max_send_sge = a.cap.max_recv_sge = 2;
      a.qp_type = i < 2 ? QpType::kRc : i == 2 ? QpType::kUc : QpType::kUd;
      if (i == 1) a.loss_recovery = transport::LossRecovery::kSelectiveRepeat;
      qp[i] = std::move(pd->create_qp(a).value());
      connect(*qp[i], a.qp_type);
      for (int k = 0; k < 4; ++k) post_recv(i, static_cast<uint8_t>(k));
    }
  }
  ~World() {
    for (auto& q : qp) q.reset();
    // What the QPs held for their peers is given back with them.
    const verbs::Device& d = *dev;
    for (const verbs::Counter& c : d.counters())
      if ((c.name == "sr_reorder_bytes_held" || c.name == "responses_queued") && c.value != 0)
        fail("a device total did not return to 0 when its QPs were destroyed");
    for (auto& m : mr) m.reset();
    cq.reset();
    pd.reset();
    ctx.reset();
  }

  void connect(verbs::QueuePair& q, QpType type) {
    verbs::QpAttr a;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.qkey = 0x11111111;
    a.qp_access_flags = transport::kAccessRemoteWrite | transport::kAccessRemoteRead |
                        transport::kAccessRemoteAtomic;
    uint32_t mask = verbs::kQpState | verbs::kQpPkeyIndex | verbs::kQpPort;
    mask |= type == QpType::kUd ? verbs::kQpQkey : verbs::kQpAccessFlags;
    if (q.modify(a, mask) != 0) fail("INIT");
    a.qp_state = QpState::kRtr;
    a.path_mtu = verbs::Mtu::k256;
    a.dest_qp_num = 0x42;
    a.rq_psn = kPsn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = true;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.dgid = kPeer;
    mask = verbs::kQpState;
    if (type != QpType::kUd)
      mask |= verbs::kQpAv | verbs::kQpPathMtu | verbs::kQpDestQpn | verbs::kQpRqPsn;
    if (type == QpType::kRc) mask |= verbs::kQpMaxDestRdAtomic | verbs::kQpMinRnrTimer;
    if (q.modify(a, mask) != 0) fail("RTR");
    a.qp_state = QpState::kRts;
    a.sq_psn = kPsn;
    a.timeout = 1;
    a.retry_cnt = 2;
    a.rnr_retry = 2;
    a.max_rd_atomic = 4;
    mask = verbs::kQpState | verbs::kQpSqPsn;
    if (type == QpType::kRc)
      mask |= verbs::kQpTimeout | verbs::kQpRetryCnt | verbs::kQpRnrRetry | verbs::kQpMaxQpRdAtomic;
    if (q.modify(a, mask) != 0) fail("RTS");
  }

  uint64_t va(int r, uint32_t off) const {
    return reinterpret_cast<uint64_t>(arena.data() + region_at(r)) + off;
  }
  void post_recv(int i, uint8_t sel) {
    // Two SGEs in region 2, placed by `sel`; region 0 is the other half of the choices.
    const int r = sel & 1 ? 0 : 2;
    const uint32_t off = (sel >> 1) * 64 % (kRegion - 512);
    transport::Sge s[2] = {{va(r, off), 100, mr[r]->lkey()},
                           {va(r, off + 200), 300, mr[r]->lkey()}};
    transport::RecvWr wr;
    wr.wr_id = sel;
    wr.sg_list = {s, 2};
    (void)qp[i]->post_recv(wr);
  }
  void post_send(int i, Reader& in) {
    const uint8_t kind = in.u8();
    const uint32_t off = in.u16() % (kRegion - 64);
    transport::Sge s{va(2, off), static_cast<uint32_t>(1 + in.u8() % 64), mr[2]->lkey()};
    transport::SendWr wr;
    wr.wr_id = kind;
    wr.flags = transport::kSendSignaled;
    wr.sg_list = {&s, 1};
    wr.remote_addr = 0x10000 + (in.u8() & 0xf8);
    wr.rkey = 0x1234;
    wr.compare_add = 1;
    static constexpr transport::WrOpcode kOps[] = {
        transport::WrOpcode::kRdmaRead, transport::WrOpcode::kAtomicFetchAdd,
        transport::WrOpcode::kAtomicCompareSwap, transport::WrOpcode::kRdmaWrite,
        transport::WrOpcode::kSend};
    wr.opcode = kOps[kind % 5];
    if (wr.opcode == transport::WrOpcode::kAtomicFetchAdd ||
        wr.opcode == transport::WrOpcode::kAtomicCompareSwap) {
      s.addr = va(2, off & ~7u);
      s.length = 8;
    }
    if (i == 3) return;  // UD needs an address handle; its sends are not what this fuzzes
    (void)qp[i]->post_send(wr);
  }

  // A packet shaped from the input: fields near what the QP expects, so that most reach the
  // checks past the header, some get through, and the rest probe each check's edge.
  void shaped_packet(Reader& in) {
    const uint8_t which = in.u8();
    const int i = which & 3;
    const uint8_t opcode = static_cast<uint8_t>((i == 2   ? 0x20
                                                 : i == 3 ? 0x60
                                                          : 0) +
                                                in.u8() % 0x18);
    if (!wire::opcode_info(opcode).valid()) return;
    wire::TransportHeaders h;
    h.bth.opcode = opcode;
    h.bth.dest_qp = which & 0x80 ? in.u32() & 0xffffff : qp[i]->qp_num();
    h.bth.psn = Psn(kPsn + static_cast<int8_t>(in.u8()));
    h.bth.ack_req = (which & 0x40) != 0;
    const uint8_t keysel = in.u8();
    const int r = keysel % 3;
    const uint32_t rkey = keysel & 0x80 ? in.u32() : mr[r]->rkey();
    const uint64_t addr = keysel & 0x40 ? (static_cast<uint64_t>(in.u32()) << 32 | in.u32())
                                        : va(r, 0) + static_cast<int16_t>(in.u16());
    const uint32_t len = keysel & 0x20 ? in.u32() : in.u16() % 4096;
    h.reth = {addr, rkey, len};
    h.atomic = {addr, rkey, 0x0101010101010101ull * in.u8(), in.u8()};
    h.aeth = (keysel & 0x10) ? wire::Aeth::nak(in.u8() & 0xffffff, wire::NakCode(in.u8() % 5))
                             : wire::Aeth::ack(in.u8());
    h.atomic_ack.original = 0xeeeeeeeeeeeeeeee;
    h.imm = 0x1234;
    h.ieth_rkey = keysel & 0x08 ? mr[r]->rkey() : in.u32();
    h.deth = {keysel & 0x04 ? 0x11111111u : in.u32(), 0x99};
    const bool has_payload = wire::opcode_info(opcode).payload;
    const std::span<const uint8_t> payload =
        has_payload ? in.bytes(in.u16() % 600) : std::span<const uint8_t>();
    h.bth.pad_count = wire::pad_for(static_cast<uint32_t>(payload.size()));
    std::vector<uint8_t> b(wire::kMaxTransportHeaderBytes);
    b.resize(wire::write_transport_headers(h, b));
    b.insert(b.end(), payload.begin(), payload.end());
    b.resize(b.size() + h.bth.pad_count, 0);
    // Mostly from the path; sometimes from a stranger (the path check drops it).
    link.inject(std::move(b), which & 0x20 ? kStranger : kPeer, kSelf);
    ++injected;
  }

  void step(Nanos advance) {
    now += advance;
    dev->progress(now);
    peer.poll([](const wire::RxPacket&) {}, 1 << 20);  // what the device sent: discarded
    std::array<transport::Completion, 64> wc;
    while (cq->poll(wc) > 0) {
    }
    check();
  }

  void check() {
    // Guards and the read-only region: never written.
    for (size_t i = 0; i < kArena; ++i) {
      const bool writable = (i >= region_at(0) && i < region_at(0) + kRegion) ||
                            (i >= region_at(2) && i < region_at(2) + kRegion);
      if (!writable && arena[i] != guard_byte(i)) fail("a byte outside the permitted ranges");
    }
    uint64_t link_rx = 0, malformed = 0;
    for (const verbs::Counter& c : dev->counters()) {
      if (c.name == "sr_reorder_bytes_held" && c.value > 64 * 1024) fail("reorder total");
      if (c.name == "responses_queued" && c.value > 6) fail("response total");
      if (c.name == "link_rx_packets") link_rx = c.value;
      if (c.name == "link_rx_malformed_drops") malformed = c.value;
    }
    if (link_rx + malformed > injected) fail("the link counted more datagrams than it was given");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World w;
  Reader in(data, size);
  for (int steps = 0; steps < 256 && !in.empty(); ++steps) {
    const uint8_t kind = in.u8();
    switch (kind % 8) {
      case 0: {  // raw transport bytes
        const uint8_t to = in.u8();
        std::span<const uint8_t> raw = in.bytes(in.u8() + 12u);
        std::vector<uint8_t> b(raw.begin(), raw.end());
        if (b.size() >= 8) {  // aim it at a real QP most of the time
          const uint32_t qpn = w.qp[to & 3]->qp_num();
          b[5] = static_cast<uint8_t>(qpn >> 16), b[6] = static_cast<uint8_t>(qpn >> 8),
          b[7] = static_cast<uint8_t>(qpn);
        }
        w.link.inject(std::move(b), kPeer, kSelf);
        ++w.injected;
        break;
      }
      case 1:
        w.post_send(in.u8() & 3, in);
        break;
      case 2:
        w.post_recv(in.u8() & 3, in.u8());
        break;
      case 3:
        w.step(static_cast<Nanos>(in.u16()) * 1000);  // up to 65 ms: timers fire
        break;
      default:
        w.shaped_packet(in);
        break;
    }
    w.step(1000);
  }
  for (int i = 0; i < 16; ++i) w.step(4'000'000);
  const uint64_t drained = w.link.counters().rx_packets + w.link.counters().rx_drop_malformed;
  if (drained != w.injected) fail("a datagram the link took is unaccounted for");
  return 0;
}
