#include "cli/node.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace uroce::tools {

Nanos monotonic_ns() {
  return api::ProgressEngine::now_ns();
}

std::string gid_to_string(const Gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, gid.data(), text, sizeof text);
  return text;
}

std::unique_ptr<Node> Node::open(const NodeOptions& options, std::string& error) {
  std::unique_ptr<Node> n(new Node(options));
  api::NicOptions no;
  const auto kind = api::parse_link_kind(options.link);
  if (!kind) {
    error = "unknown link '" + options.link + "' (udp, raw, xdp)";
    return nullptr;
  }
  no.link.kind = *kind;
  no.link.address = options.address;
  no.link.raw.roce_v1 = options.roce_v1;
  if (options.vlan_id >= 0) no.link.raw.vlan_id = static_cast<uint16_t>(options.vlan_id);
  if (options.raw_unbatched) {
    no.link.raw.mmsg = false;
    no.link.raw.tx_batch = 1;
  }
  no.link.xdp.zero_copy = options.xdp_zero_copy;
  no.link.xdp.generic_mode = options.xdp_generic;
  no.link.pcap_path = options.pcap_path;
  no.device.name = "uroce0";
  no.device.port.active_mtu = Mtu::k4096;
  no.device.transmit_before_receive =
      true;  // a real-time link: posts leave before the next receive
  // The benchmark's one thread makes every call on the device (no engine thread, no other thread
  // of the tool touches it), so the device's and its objects' locks can do nothing, as libmlx5's
  // MLX5_SINGLE_THREADED allows a program that promises the same.
  no.device.single_threaded = true;
  // Busy-poll while packets flow and a little after: sleeping after every batch makes the sender
  // pay a wake-up per batch (an IPI, a VM exit under a hypervisor), a large share of a WRITE
  // client's CPU (docs/performance.md, "Tuning behind the code's constants"). No yield phase: the
  // process has one thread, and the peer process has the other core. No engine thread either:
  // pump().
  no.progress.spin_ns = 100'000;
  no.progress.yield_ns = 0;
  no.progress.yield_on_empty_spin = true;
  no.start_engine = false;
  no.qp_defaults.congestion = options.congestion;
  no.qp_defaults.loss_recovery = options.loss_recovery;
  no.qp_defaults.write_segments = options.write_segments;
  auto nic = api::open_nic(no, &error);
  if (!nic) return nullptr;
  n->nic_ = std::move(*nic);
  auto fail = [&](const char* what, int err) {
    error = std::string(what) + ": " + std::strerror(err);
    return nullptr;
  };
  auto ctx = n->nic_->device().open();
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
  uint32_t access =
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  auto mr = n->pd_->reg_mr(n->buf_.get(), options.buffer_bytes, access);
  if (!mr) return fail("reg_mr", mr.error());
  n->mr_ = std::move(*mr);
  QpInitAttr qa;
  qa.send_cq = n->cq_.get();
  qa.recv_cq = n->cq_.get();
  qa.cap.max_send_wr = options.depth;
  qa.cap.max_recv_wr = options.recv_depth;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = 0;
  apply_qp_defaults(n->nic_->qp_defaults(), qa);
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
  nic_.reset();
}

ConnInfo Node::local_info() const {
  ConnInfo c;
  c.qpn = qp_->qp_num();
  c.psn = psn_;
  c.rkey = mr_->rkey();
  c.addr = mr_->iova();
  c.length = opt_.buffer_bytes;
  c.gid = nic_->device().gid();
  return c;
}

std::string Node::gid_string() const {
  return gid_to_string(nic_->device().gid());
}

int Node::connect(const ConnInfo& remote) {
  remote_ = remote;
  ConnectOptions o;
  o.path_mtu = mtu_from_bytes(opt_.mtu).value_or(Mtu::k1024);
  o.max_rd_atomic = opt_.max_rd_atomic;
  o.max_dest_rd_atomic = opt_.max_rd_atomic;
  o.timeout = opt_.timeout;
  o.retry_cnt = opt_.retry_cnt;
  o.rnr_retry = opt_.rnr_retry;
  o.min_rnr_timer = 1;  // 0.01 ms: the bench reposts receives quickly (IBA table 45)
  return uroce::connect(*qp_, psn_, {remote.gid, remote.qpn, remote.psn}, o);
}

int Node::post_one_sge(SendWr wr, uint64_t offset, uint32_t length, bool signaled) {
  Sge sge{mr_->iova() + offset, length, mr_->lkey()};
  wr.flags = signaled ? uint32_t{kSendSignaled} : 0u;
  wr.sg_list = {&sge, length ? 1u : 0u};
  return qp_->post_send(wr);
}

int Node::post_write(uint64_t wr_id, uint64_t offset, uint32_t length, uint64_t remote_offset,
                     bool signaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kRdmaWrite;
  wr.remote_addr = remote_.addr + remote_offset;
  wr.rkey = remote_.rkey;
  return post_one_sge(wr, offset, length, signaled);
}

int Node::post_read(uint64_t wr_id, uint64_t offset, uint32_t length, uint64_t remote_offset,
                    bool signaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kRdmaRead;
  wr.remote_addr = remote_.addr + remote_offset;
  wr.rkey = remote_.rkey;
  return post_one_sge(wr, offset, length, signaled);
}

int Node::post_send(uint64_t wr_id, uint64_t offset, uint32_t length, bool signaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kSend;
  return post_one_sge(wr, offset, length, signaled);
}

int Node::post_recv(uint64_t wr_id, uint64_t offset, uint32_t length) {
  Sge sge{mr_->iova() + offset, length, mr_->lkey()};
  RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = {&sge, length ? 1u : 0u};
  return qp_->post_recv(wr);
}

int Node::post_fetch_add(uint64_t wr_id, uint64_t offset, uint64_t remote_offset, uint64_t add,
                         bool signaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = WrOpcode::kAtomicFetchAdd;
  wr.remote_addr = remote_.addr + remote_offset;
  wr.rkey = remote_.rkey;
  wr.compare_add = add;
  return post_one_sge(wr, offset, 8, signaled);
}

}  // namespace uroce::tools
