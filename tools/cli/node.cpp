#include "cli/node.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>

#include "wire/packet.h"

namespace uroce::tools {

using transport::Sge;
using transport::WrOpcode;

Nanos monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000u + static_cast<Nanos>(ts.tv_nsec);
}

std::string gid_to_string(const Gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, gid.data(), text, sizeof text);
  return text;
}

const char* wc_status_name(transport::WcStatus s) {
  // ibv_wc_status_str's spellings, by IBV_WC_* name.
  static constexpr const char* kNames[] = {
      "SUCCESS",          "LOC_LEN_ERR",       "LOC_QP_OP_ERR",     "LOC_EEC_OP_ERR",
      "LOC_PROT_ERR",     "WR_FLUSH_ERR",      "MW_BIND_ERR",       "BAD_RESP_ERR",
      "LOC_ACCESS_ERR",   "REM_INV_REQ_ERR",   "REM_ACCESS_ERR",    "REM_OP_ERR",
      "RETRY_EXC_ERR",    "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",  "REM_INV_RD_REQ_ERR",
      "REM_ABORT_ERR",    "INV_EECN_ERR",      "INV_EEC_STATE_ERR", "FATAL_ERR",
      "RESP_TIMEOUT_ERR", "GENERAL_ERR"};
  auto i = static_cast<size_t>(s);
  return i < std::size(kNames) ? kNames[i] : "UNKNOWN";
}

namespace {

// A link that copies every frame it sends and receives into a pcap file, as full IP packets
// (wire::build_ip_packet recomputes the ICRC, which equals the one on the wire). It wraps the UDP
// link rather than changing it, so capture costs nothing when it is off.
class CaptureLink final : public link::Link {
 public:
  CaptureLink(std::unique_ptr<link::Link> inner, wire::PcapWriter& pcap)
      : inner_(std::move(inner)), pcap_(pcap) {}
  Gid local_gid() const override { return inner_->local_gid(); }
  void flush() override { inner_->flush(); }
  int wait_fd() const override { return inner_->wait_fd(); }
  const link::LinkCounters& counters() const override { return inner_->counters(); }

  void transmit(const wire::TxPacket& p) override {
    if (p.dest != nullptr) {
      // Contiguous BTH .. pad, so the codec can parse what the transport built.
      scratch_.assign(p.header.begin(), p.header.begin() + p.header_len);
      for (uint32_t i = 0; i < p.payload_parts; ++i)
        scratch_.insert(scratch_.end(), p.payload[i].begin(), p.payload[i].end());
      scratch_.insert(scratch_.end(), p.pad, 0);
      auto t = wire::parse_transport(scratch_);
      if (t) {
        // Every packet leaves the UDP link from port 4791 (see udp_link.h), with the address
        // vector's DSCP and hop limit (0: the default, 64 on Linux) and ECT(0) unless not ECN
        // capable.
        auto ep = wire::endpoints_from_gids(local_gid(), p.dest->dgid, wire::kRoceV2Port);
        ep.dscp = static_cast<uint8_t>(p.dest->traffic_class >> 2);
        ep.ecn = p.ect ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
        if (p.dest->hop_limit != 0) ep.hop_limit = p.dest->hop_limit;
        write(ep, t->hdr, t->payload);
      }
    }
    inner_->transmit(p);
  }

  size_t poll(const link::RxHandler& handler, size_t budget) override {
    return inner_->poll(
        [&](const wire::RxPacket& rx) {
          if (rx.hdr != nullptr) {
            // As received: a switch's CE mark shows in the capture.
            auto ep = wire::endpoints_from_gids(rx.sgid, rx.dgid, rx.udp_src_port);
            wire::set_traffic_class(ep, rx.traffic_class);
            ep.hop_limit = rx.hop_limit;
            write(ep, *rx.hdr, rx.payload);
          }
          handler(rx);
        },
        budget);
  }

 private:
  void write(const wire::IpEndpoints& ep, const wire::TransportHeaders& hdr,
             std::span<const uint8_t> payload) {
    frame_.resize(payload.size() + 256);
    uint32_t n = wire::build_ip_packet(ep, hdr, payload, frame_);
    if (n > 0) pcap_.write_ip_packet({frame_.data(), n}, monotonic_ns());
  }
  std::unique_ptr<link::Link> inner_;
  wire::PcapWriter& pcap_;
  std::vector<uint8_t> scratch_, frame_;
};

verbs::Mtu mtu_enum(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return verbs::Mtu::k256;
    case 512:
      return verbs::Mtu::k512;
    case 2048:
      return verbs::Mtu::k2048;
    case 4096:
      return verbs::Mtu::k4096;
    default:
      return verbs::Mtu::k1024;
  }
}

}  // namespace

std::unique_ptr<Node> Node::open(const NodeOptions& options, std::string& error) {
  std::unique_ptr<Node> n(new Node(options));
  link::UdpLinkOptions lo;
  lo.address = options.address;
  auto udp = link::UdpLink::open(lo);
  if (!udp) {
    error = "cannot open UDP port 4791 on " + options.address + ": " + std::strerror(udp.error());
    return nullptr;
  }
  n->link_ = std::move(*udp);
  if (!options.pcap_path.empty()) {
    if (int err = n->pcap_.open(options.pcap_path)) {
      error = "cannot write " + options.pcap_path + ": " + std::strerror(err);
      return nullptr;
    }
    n->link_ = std::make_unique<CaptureLink>(std::move(n->link_), n->pcap_);
  }
  verbs::DeviceConfig dc;
  dc.name = "uroce0";
  dc.port.active_mtu = verbs::Mtu::k4096;
  dc.transmit_before_receive = true;  // a real-time link: posts leave before the next receive
  // The transport engines themselves (verbs' default factory may be empty in test builds).
  dc.transport_factory = [](verbs::QpType type, uint32_t qpn, const verbs::QpCapabilities& caps,
                            transport::MemoryAccess& memory, transport::CompletionSink& send_cq,
                            transport::CompletionSink& recv_cq, transport::RecvQueue* srq) {
    return transport::TransportQp::create(type, qpn, caps, memory, send_cq, recv_cq, srq);
  };
  n->device_ = std::make_unique<verbs::Device>(*n->link_, dc);
  // Busy-poll while packets flow and a little after: sleeping after every batch makes the sender
  // pay a wake-up per batch (an IPI, a VM exit under a hypervisor), which cost the client of a
  // WRITE run about a sixth of its CPU (docs/performance.md). No yield phase: the process has
  // one thread, and the peer process has the other core.
  api::ProgressOptions po;
  po.spin_ns = 100'000;
  po.yield_ns = 0;
  po.yield_on_empty_spin = true;
  n->engine_ = std::make_unique<api::ProgressEngine>(*n->device_, po);
  auto fail = [&](const char* what, int err) {
    error = std::string(what) + ": " + std::strerror(err);
    return nullptr;
  };
  auto ctx = n->device_->open();
  if (!ctx) return fail("open device", ctx.error());
  n->ctx_ = std::move(*ctx);
  auto pd = n->ctx_->alloc_pd();
  if (!pd) return fail("alloc_pd", pd.error());
  n->pd_ = std::move(*pd);
  auto cq = n->ctx_->create_cq(options.depth + options.recv_depth);
  if (!cq) return fail("create_cq", cq.error());
  n->cq_ = std::move(*cq);
  // Zeroed memory, so a run never reads what an earlier allocation left behind.
  n->buf_.reset(new (std::nothrow) uint8_t[options.buffer_bytes]());
  if (!n->buf_) return fail("buffer", ENOMEM);
  uint32_t access = transport::kAccessLocalWrite | transport::kAccessRemoteWrite |
                    transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;
  auto mr = n->pd_->reg_mr(n->buf_.get(), options.buffer_bytes, access);
  if (!mr) return fail("reg_mr", mr.error());
  n->mr_ = std::move(*mr);
  verbs::QpInitAttr qa;
  qa.send_cq = n->cq_.get();
  qa.recv_cq = n->cq_.get();
  qa.cap.max_send_wr = options.depth;
  qa.cap.max_recv_wr = options.recv_depth;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = 0;
  qa.congestion = options.congestion;
  qa.loss_recovery = options.loss_recovery;
  qa.write_segments = options.write_segments;
  qa.max_psn_window = options.max_psn_window;
  auto qp = n->pd_->create_qp(qa);
  if (!qp) return fail("create_qp", qp.error());
  n->qp_ = std::move(*qp);
  n->psn_ = std::random_device{}() & 0xffffff;
  return n;
}

Node::~Node() {
  // Children before parents (verbs/device.h).
  qp_.reset();
  mr_.reset();
  cq_.reset();
  pd_.reset();
  ctx_.reset();
  engine_.reset();
  device_.reset();
}

ConnInfo Node::local_info() const {
  ConnInfo c;
  c.qpn = qp_->qp_num();
  c.psn = psn_;
  c.rkey = mr_->rkey();
  c.addr = mr_->iova();
  c.length = opt_.buffer_bytes;
  c.gid = device_->gid();
  return c;
}

std::string Node::gid_string() const {
  return gid_to_string(device_->gid());
}

int Node::connect(const ConnInfo& remote) {
  remote_ = remote;
  verbs::QpAttr a;
  a.qp_state = verbs::QpState::kInit;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags =
      transport::kAccessRemoteWrite | transport::kAccessRemoteRead | transport::kAccessRemoteAtomic;
  if (int err = qp_->modify(
          a, verbs::kQpState | verbs::kQpPkeyIndex | verbs::kQpPort | verbs::kQpAccessFlags))
    return err;
  a.qp_state = verbs::QpState::kRtr;
  a.path_mtu = mtu_enum(opt_.mtu);
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = opt_.max_rd_atomic;
  a.min_rnr_timer = 1;  // 0.01 ms: the bench reposts receives quickly (IBA table 45)
  a.ah_attr.is_global = true;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.dgid = remote.gid;
  a.ah_attr.grh.sgid_index = 0;
  a.ah_attr.grh.hop_limit = 64;
  if (int err =
          qp_->modify(a, verbs::kQpState | verbs::kQpAv | verbs::kQpPathMtu | verbs::kQpDestQpn |
                             verbs::kQpRqPsn | verbs::kQpMaxDestRdAtomic | verbs::kQpMinRnrTimer))
    return err;
  a.qp_state = verbs::QpState::kRts;
  a.timeout = opt_.timeout;
  a.retry_cnt = opt_.retry_cnt;
  a.rnr_retry = opt_.rnr_retry;
  a.sq_psn = psn_;
  a.max_rd_atomic = opt_.max_rd_atomic;
  return qp_->modify(a, verbs::kQpState | verbs::kQpTimeout | verbs::kQpRetryCnt |
                            verbs::kQpRnrRetry | verbs::kQpSqPsn | verbs::kQpMaxQpRdAtomic);
}

int Node::post_write(uint64_t wr_id, uint64_t offset, uint32_t length, uint64_t remote_offset,
                     bool signaled) {
  Sge sge{mr_->iova() + offset, length, mr_->lkey()};
  transport::SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.flags = signaled ? uint32_t{transport::kSendSignaled} : 0u;
  wr.sg_list = {&sge, length ? 1u : 0u};
  wr.remote_addr = remote_.addr + remote_offset;
  wr.rkey = remote_.rkey;
  return qp_->post_send(wr);
}

int Node::post_read(uint64_t wr_id, uint64_t offset, uint32_t length, uint64_t remote_offset) {
  Sge sge{mr_->iova() + offset, length, mr_->lkey()};
  transport::SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kRdmaRead;
  wr.flags = transport::kSendSignaled;
  wr.sg_list = {&sge, length ? 1u : 0u};
  wr.remote_addr = remote_.addr + remote_offset;
  wr.rkey = remote_.rkey;
  return qp_->post_send(wr);
}

int Node::post_send(uint64_t wr_id, uint64_t offset, uint32_t length) {
  Sge sge{mr_->iova() + offset, length, mr_->lkey()};
  transport::SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kSend;
  wr.flags = transport::kSendSignaled;
  wr.sg_list = {&sge, length ? 1u : 0u};
  return qp_->post_send(wr);
}

int Node::post_recv(uint64_t wr_id, uint64_t offset, uint32_t length) {
  Sge sge{mr_->iova() + offset, length, mr_->lkey()};
  transport::RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = {&sge, length ? 1u : 0u};
  return qp_->post_recv(wr);
}

int Node::post_fetch_add(uint64_t wr_id, uint64_t offset, uint64_t remote_offset, uint64_t add) {
  Sge sge{mr_->iova() + offset, 8, mr_->lkey()};
  transport::SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kAtomicFetchAdd;
  wr.flags = transport::kSendSignaled;
  wr.sg_list = {&sge, 1};
  wr.remote_addr = remote_.addr + remote_offset;
  wr.rkey = remote_.rkey;
  wr.compare_add = add;
  return qp_->post_send(wr);
}

}  // namespace uroce::tools
