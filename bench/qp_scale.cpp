// qp_scale: many connected RC QPs on one device pair, in process (two verbs devices on an
// in-memory wire, no sockets). For each QP count it creates the QPs on both devices, connects
// them, sends 8-byte RDMA WRITEs round-robin over all of them and prints the message rate and
// the resident memory the QPs cost. A benchmark, not a test (bench/README.md).
//
//   qp_scale [counts (default 1,1000,10000,100000)] [messages per count (default 200000)]
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "link/link.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/qp.h"
#include "wire/packet.h"

namespace {

using namespace uroce;

// One end of a lossless in-memory wire: transmit() serialises the packet, the peer's poll()
// parses it back.
class MemLink : public link::Link {
 public:
  explicit MemLink(Gid gid) : gid_(gid) {}
  void connect(MemLink& peer) { peer_ = &peer; }
  Gid local_gid() const override { return gid_; }
  void transmit(const wire::TxPacket& p) override {
    std::vector<uint8_t> bytes(p.header.begin(), p.header.begin() + p.header_len);
    for (uint32_t i = 0; i < p.payload_parts; ++i)
      bytes.insert(bytes.end(), p.payload[i].begin(), p.payload[i].end());
    bytes.resize(bytes.size() + p.pad, 0);
    ++counters_.tx_packets;
    peer_->inbox_.push_back(std::move(bytes));
  }
  void flush() override {}
  size_t poll(const link::RxHandler& handler, size_t budget) override {
    size_t n = 0;
    while (n < budget && !inbox_.empty()) {
      std::vector<uint8_t> bytes = std::move(inbox_.front());
      inbox_.pop_front();
      ++n;
      auto parsed = wire::parse_transport(bytes);
      if (!parsed) continue;
      wire::RxPacket rx;
      rx.hdr = &parsed->hdr;
      rx.payload = parsed->payload;
      rx.sgid = peer_->gid_;
      rx.dgid = gid_;
      ++counters_.rx_packets;
      handler(rx);
    }
    return n;
  }
  const link::LinkCounters& counters() const override { return counters_; }

 private:
  Gid gid_;
  MemLink* peer_ = nullptr;
  std::deque<std::vector<uint8_t>> inbox_;
  link::LinkCounters counters_;
};

// A device counter (verbs::Device::counters()), 0 if the device has none by that name.
uint64_t device_counter(const verbs::Device& dev, std::string_view name) {
  for (const verbs::Counter& c : dev.counters())
    if (c.name == name) return c.value;
  return 0;
}

uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%lu %lu", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return uint64_t{resident} * 4096;
}

struct Side {
  MemLink link;
  std::unique_ptr<verbs::Device> dev;
  std::unique_ptr<verbs::Context> ctx;
  std::unique_ptr<verbs::ProtectionDomain> pd;
  std::unique_ptr<verbs::CompletionQueue> cq;
  std::vector<uint8_t> buf = std::vector<uint8_t>(4096);
  std::unique_ptr<verbs::MemoryRegion> mr;
  std::vector<std::unique_ptr<verbs::QueuePair>> qps;

  Side(Gid gid, uint32_t max_qp) : link(gid) {
    verbs::DeviceConfig config;
    config.attr.max_qp = max_qp;
    dev = std::make_unique<verbs::Device>(link, std::move(config));
    ctx = std::move(dev->open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(4096).value());
    mr = std::move(pd->reg_mr(buf.data(), buf.size(),
                              transport::kAccessLocalWrite | transport::kAccessRemoteWrite)
                       .value());
  }
  ~Side() {
    qps.clear();
    mr.reset();
    cq.reset();
    pd.reset();
    ctx.reset();
  }
};

bool connect(verbs::QueuePair& q, uint32_t dest_qpn, Gid dgid) {
  verbs::QpAttr a;
  a.qp_state = transport::QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = transport::kAccessRemoteWrite;
  if (q.modify(a, verbs::kQpState | verbs::kQpPkeyIndex | verbs::kQpPort | verbs::kQpAccessFlags))
    return false;
  a.qp_state = transport::QpState::kRtr;
  a.path_mtu = verbs::Mtu::k1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 1;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = true;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.dgid = dgid;
  if (q.modify(a, verbs::kQpState | verbs::kQpAv | verbs::kQpPathMtu | verbs::kQpDestQpn |
                      verbs::kQpRqPsn | verbs::kQpMaxDestRdAtomic | verbs::kQpMinRnrTimer))
    return false;
  a.qp_state = transport::QpState::kRts;
  a.sq_psn = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return q.modify(a, verbs::kQpState | verbs::kQpSqPsn | verbs::kQpTimeout | verbs::kQpRetryCnt |
                         verbs::kQpRnrRetry | verbs::kQpMaxQpRdAtomic) == 0;
}

void run(uint32_t n, uint64_t messages) {
  const Gid ga = gid_from_ipv4({10, 0, 0, 1}), gb = gid_from_ipv4({10, 0, 0, 2});
  const uint64_t rss0 = resident_bytes();
  Side a(ga, n), b(gb, n);
  a.link.connect(b.link);
  b.link.connect(a.link);
  const uint64_t rss1 = resident_bytes();
  verbs::QpInitAttr init;
  init.send_cq = a.cq.get();
  init.recv_cq = a.cq.get();
  init.cap.max_send_wr = 16;  // what a QP of a many-connection server asks for
  init.cap.max_recv_wr = 16;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < n; ++i) {
    auto qa = a.pd->create_qp(init);
    init.send_cq = init.recv_cq = b.cq.get();
    auto qb = b.pd->create_qp(init);
    init.send_cq = init.recv_cq = a.cq.get();
    if (!qa.ok() || !qb.ok()) {
      std::printf("%u QPs: create failed at %u: %d\n", n, i, qa.ok() ? qb.error() : qa.error());
      return;
    }
    a.qps.push_back(std::move(*qa));
    b.qps.push_back(std::move(*qb));
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (!connect(*a.qps[i], b.qps[i]->qp_num(), gb) ||
        !connect(*b.qps[i], a.qps[i]->qp_num(), ga)) {
      std::printf("%u QPs: connect failed at %u\n", n, i);
      return;
    }
  }
  const double setup_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t rss2 = resident_bytes();

  // Round-robin 8-byte WRITEs, each signaled, in batches that fit the CQ.
  transport::Sge s{reinterpret_cast<uint64_t>(a.buf.data()), 8, a.mr->lkey()};
  transport::SendWr wr;
  wr.opcode = transport::WrOpcode::kRdmaWrite;
  wr.flags = transport::kSendSignaled;
  wr.sg_list = {&s, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(b.buf.data());
  wr.rkey = b.mr->rkey();
  std::array<transport::Completion, 256> wc;
  constexpr uint32_t kBatch = 1024;
  uint64_t done = 0, posted = 0, failed = 0;
  uint32_t cursor = 0;
  Nanos now = 0;
  auto visits = [&] {
    return device_counter(*a.dev, "progress_qp_visits") +
           device_counter(*b.dev, "progress_qp_visits");
  };
  // The connection's modifies left every QP ready; a first pass finds them idle, so that the
  // count below is the WRITEs' alone.
  a.dev->progress(0);
  b.dev->progress(0);
  const uint64_t visits0 = visits();
  const auto t1 = std::chrono::steady_clock::now();
  while (done < messages) {
    // At most a send queue's worth per QP in flight.
    const uint64_t batch =
        std::min<uint64_t>({kBatch, messages - posted, uint64_t{init.cap.max_send_wr} * n});
    for (uint64_t k = 0; k < batch; ++k) {
      wr.wr_id = posted++;
      if (a.qps[cursor]->post_send(wr) != 0) ++failed;
      cursor = cursor + 1 == n ? 0 : cursor + 1;
    }
    const uint64_t want = done + batch;
    for (int pass = 0; done < want && pass < 1'000'000; ++pass) {
      now += 1000;
      a.dev->progress(now);
      b.dev->progress(now);
      size_t got;
      while ((got = a.cq->poll(wc)) > 0) {
        for (size_t i = 0; i < got; ++i) failed += wc[i].status != transport::WcStatus::kSuccess;
        done += got;
      }
    }
    if (done < want) {
      std::printf("%u QPs: stalled at %llu of %llu\n", n, static_cast<unsigned long long>(done),
                  static_cast<unsigned long long>(want));
      return;
    }
  }
  const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const uint64_t qp_bytes = rss2 > rss1 ? rss2 - rss1 : 0;
  // QP turns of both devices' passes per WRITE: what a message costs in scheduling, whatever
  // the machine's load (0 from a build without the counter).
  const double visits_per_write = static_cast<double>(visits() - visits0) / messages;
  std::printf(
      "%7u QPs: %6.3f Mpps (%llu WRITEs, %llu failed, %.2f QP visits per WRITE), setup %.2f s "
      "(%.0f QP pairs/s), resident %.1f MiB for %u QPs on each of 2 devices = %.0f bytes per QP "
      "(devices %.1f MiB)\n",
      n, static_cast<double>(messages) / run_s * 1e-6, static_cast<unsigned long long>(done),
      static_cast<unsigned long long>(failed), visits_per_write, setup_s, n / setup_s,
      qp_bytes / 1048576.0, n, static_cast<double>(qp_bytes) / (2.0 * n),
      (rss1 - rss0) / 1048576.0);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint32_t> counts = {1, 1000, 10000, 100000};
  if (argc > 1) {
    counts.clear();
    std::stringstream ss(argv[1]);
    std::string item;
    while (std::getline(ss, item, ',')) counts.push_back(static_cast<uint32_t>(std::stoul(item)));
  }
  const uint64_t messages = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 200'000;
  for (uint32_t n : counts) run(n, messages);
  return 0;
}
