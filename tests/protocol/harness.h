#pragma once
// Test doubles for driving one or two TransportQps by hand: a key table over std::vector
// buffers, completion queues that record, a sink that captures (and re-parses) every packet,
// and builders for hand-made request/response packets.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "transport/qp.h"
#include "transport/recv_queue.h"
#include "wire/packet.h"

namespace uroce::transport::test {

class FakeMemory : public MemoryAccess {
 public:
  struct Region {
    uint32_t key = 0;
    uint64_t va = 0;
    std::vector<uint8_t> data;
    uint32_t access = 0;
    bool valid = true;
    bool invalidatable = true;
    uint8_t* at(uint64_t addr) { return data.data() + (addr - va); }
  };

  // Registers `size` zeroed bytes; the key is both lkey and rkey.
  Region& add(uint32_t size, uint32_t access) {
    auto r = std::make_unique<Region>();
    r->key = next_key_++;
    r->va = 0x100000000ull * r->key;
    r->data.assign(size, 0);
    r->access = access;
    regions_.push_back(std::move(r));
    return *regions_.back();
  }

  Result<uint8_t*, KeyError> local(uint32_t lkey, uint64_t addr, uint32_t length,
                                   uint32_t access) override {
    ++local_calls;
    return lookup(lkey, addr, length, access);
  }
  Result<uint8_t*, KeyError> remote(uint32_t rkey, uint64_t addr, uint32_t length, uint32_t access,
                                    uint32_t qpn) override {
    ++remote_calls;
    last_remote_qpn = qpn;
    return lookup(rkey, addr, length, access);
  }
  bool invalidate(uint32_t rkey, uint32_t, bool) override {
    for (auto& r : regions_)
      if (r->key == rkey && r->valid && r->invalidatable) {
        r->valid = false;
        invalidated.push_back(rkey);
        return true;
      }
    return false;
  }
  // Records each bind; the window rules are the verbs layer's (tests/unit/verbs_mw_test.cpp).
  WcStatus bind_mw(const MwBindInfo& b, uint32_t qpn) override {
    binds.push_back({b, qpn});
    return bind_status;
  }
  std::vector<std::pair<MwBindInfo, uint32_t>> binds;
  WcStatus bind_status = WcStatus::kSuccess;
  uint32_t last_remote_qpn = 0;

  std::vector<uint32_t> invalidated;
  int local_calls = 0, remote_calls = 0;

 private:
  Result<uint8_t*, KeyError> lookup(uint32_t key, uint64_t addr, uint32_t length, uint32_t access) {
    for (auto& r : regions_) {
      if (r->key != key) continue;
      if (!r->valid) return Err(KeyError::kInvalidated);
      if (addr < r->va || addr + length > r->va + r->data.size())
        return Err(KeyError::kOutOfBounds);
      if ((r->access & access) != access) return Err(KeyError::kAccessDenied);
      return r->at(addr);
    }
    return Err(KeyError::kNoSuchKey);
  }
  std::vector<std::unique_ptr<Region>> regions_;
  uint32_t next_key_ = 1;
};

class FakeCq : public CompletionSink {
 public:
  explicit FakeCq(size_t capacity = 1 << 20) : capacity_(capacity) {}
  bool push(const Completion& c) override {
    if (entries.size() >= capacity_) {
      ++overruns;
      return false;
    }
    entries.push_back(c);
    return true;
  }
  std::deque<Completion> entries;
  int overruns = 0;
  Completion pop() {
    EXPECT_FALSE(entries.empty());
    if (entries.empty()) return {};
    Completion c = entries.front();
    entries.pop_front();
    return c;
  }

 private:
  size_t capacity_;
};

// A packet held with its own storage, as it would come out of the link.
struct Packet {
  wire::TransportHeaders hdr;
  std::vector<uint8_t> payload;
  bool ce = false;
  bool flush_after = false;  // the sender's TxPacket asked the link to send what it has queued
  const wire::AddressVector* dest = nullptr;
  RxPacket rx() const {
    RxPacket p;
    p.hdr = &hdr;
    p.payload = payload;
    p.sgid = gid_from_ipv4({10, 0, 0, 1});
    p.dgid = gid_from_ipv4({10, 0, 0, 2});
    p.udp_src_port = 0xc000;
    p.ce = ce;
    return p;
  }
  uint8_t opcode() const { return hdr.bth.opcode; }
  uint32_t psn() const { return hdr.bth.psn.value(); }
};

// Captures what a QP transmits, going through the codec both ways so the bytes are checked too.
class CaptureSink : public PacketSink {
 public:
  void transmit(const TxPacket& t) override {
    std::vector<uint8_t> bytes(t.header.begin(), t.header.begin() + t.header_len);
    for (uint32_t i = 0; i < t.payload_parts; ++i)
      bytes.insert(bytes.end(), t.payload[i].begin(), t.payload[i].end());
    EXPECT_EQ(bytes.size(), t.header_len + t.payload_len);
    bytes.insert(bytes.end(), t.pad, 0);
    auto parsed = wire::parse_transport(bytes);
    ASSERT_TRUE(parsed.ok()) << wire::to_string(parsed.error());
    Packet p;
    p.hdr = parsed->hdr;
    p.payload.assign(parsed->payload.begin(), parsed->payload.end());
    p.dest = t.dest;
    p.flush_after = t.flush_after;
    packets.push_back(std::move(p));
  }
  std::deque<Packet> packets;
  Packet pop() {
    EXPECT_FALSE(packets.empty());
    if (packets.empty()) return {};
    Packet p = std::move(packets.front());
    packets.pop_front();
    return p;
  }
};

// Builds a request or response by hand.
inline Packet make_packet(uint8_t opcode, uint32_t psn, std::vector<uint8_t> payload = {},
                          uint32_t dest_qp = 1) {
  Packet p;
  p.hdr.bth.opcode = opcode;
  p.hdr.bth.psn = Psn(psn);
  p.hdr.bth.dest_qp = dest_qp;
  p.hdr.bth.pad_count = wire::pad_for(static_cast<uint32_t>(payload.size()));
  p.payload = std::move(payload);
  return p;
}

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed = 1) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return v;
}

// Single-SGE send work requests over one local region, to the peer's 0x5000 / rkey 0x99. Keeps
// every SGE it made alive, because a SendWr points at its gather list.
class WrMaker {
 public:
  explicit WrMaker(FakeMemory::Region*& buf) : buf_(buf) {}
  SendWr operator()(uint64_t id, WrOpcode opcode, uint32_t len, uint32_t flags = kSendSignaled) {
    sges_.push_back(std::make_unique<Sge>(Sge{buf_->va, len, buf_->key}));
    SendWr w;
    w.wr_id = id;
    w.opcode = opcode;
    w.flags = flags;
    w.sg_list = std::span<const Sge>(sges_.back().get(), 1);
    w.remote_addr = 0x5000;
    w.rkey = 0x99;
    return w;
  }

 private:
  FakeMemory::Region*& buf_;
  std::vector<std::unique_ptr<Sge>> sges_;
};

// One QP with its own memory, CQs and sink.
struct Endpoint {
  explicit Endpoint(QpType type = QpType::kRc, uint32_t qpn = 1, QpCapabilities caps = {},
                    RecvQueue* srq = nullptr)
      : send_cq(), recv_cq() {
    qp = TransportQp::create(type, qpn, caps, memory, send_cq, recv_cq, srq);
  }
  FakeMemory memory;
  FakeCq send_cq, recv_cq;
  CaptureSink out;
  std::unique_ptr<TransportQp> qp;

  void bring_up(QpConfig cfg) {
    qp->set_state(QpState::kInit);
    qp->configure(cfg);
    qp->set_state(QpState::kRtr);
    qp->set_state(QpState::kRts);
  }
  size_t run(Nanos now, size_t budget = 1000) { return qp->transmit(now, out, budget); }
  void deliver(const Packet& p, Nanos now = 0) { qp->receive(p.rx(), now); }
  int post_recv(uint64_t wr_id, const FakeMemory::Region& r, uint32_t len, uint32_t off = 0) {
    Sge s{r.va + off, len, r.key};
    RecvWr wr{wr_id, std::span<const Sge>(&s, 1)};
    return qp->post_recv(wr);
  }
};

}  // namespace uroce::transport::test
