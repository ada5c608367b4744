// Multicast over real UDP links (docs/ibverbs.md, "Multicast"): UD QPs attached to an IPv4 group
// on two devices (127.0.151.1 and .2), a UD send to QPN 0xFFFFFF reaching every attached QP of
// each device with a matching Q_Key, exactly once, and nothing else; the attachment bounds of
// ibv_attach_mcast; the link's bound on groups joined.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "link/udp_link.h"
#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/mr.h"
#include "verbs/qp.h"

namespace uroce::verbs {
namespace {

using transport::QpState;

constexpr uint32_t kQkey = 0x01234567;  // RDMA_UDP_QKEY
constexpr uint32_t kSlotBytes = 2048;   // one receive: GRH + a datagram of up to 1 KiB MTU
constexpr uint32_t kRecvsPerQp = 8;

Gid group_gid(uint8_t c, uint8_t d) {
  return gid_from_ipv4({239, 151, c, d});
}

// One device on a UDP link with UD QPs, each with kRecvsPerQp receives posted, and one CQ.
struct Node {
  std::unique_ptr<link::UdpLink> link;
  std::unique_ptr<Device> dev;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<uint8_t> buf;
  std::unique_ptr<MemoryRegion> mr;
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::map<uint32_t, uint32_t> received;  // successful receive completions by QPN

  explicit Node(const std::string& addr, DeviceConfig config = {})
      : buf(size_t{16} * kRecvsPerQp * kSlotBytes) {
    link::UdpLinkOptions o;
    o.address = addr;
    auto l = link::UdpLink::open(o);
    if (!l.ok()) {
      ADD_FAILURE() << "open " << addr << ": " << std::strerror(l.error());
      return;
    }
    link = std::move(*l);
    dev = std::make_unique<Device>(*link, std::move(config));
    ctx = std::move(dev->open().value());
    pd = std::move(ctx->alloc_pd().value());
    cq = std::move(ctx->create_cq(1024).value());
    mr = std::move(pd->reg_mr(buf.data(), buf.size(), transport::kAccessLocalWrite).value());
  }
  ~Node() {
    qps.clear();
    mr.reset();
    cq.reset();
    pd.reset();
    ctx.reset();
    dev.reset();
  }

  QueuePair& add_qp(uint32_t qkey = kQkey, QpType type = QpType::kUd) {
    QpInitAttr init;
    init.qp_type = type;
    init.send_cq = init.recv_cq = cq.get();
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = kRecvsPerQp;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    qps.push_back(std::move(pd->create_qp(init).value()));
    QueuePair& qp = *qps.back();
    if (type != QpType::kUd) return qp;
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.qkey = qkey;
    EXPECT_EQ(qp.modify(a, kQpState | kQpPkeyIndex | kQpPort | kQpQkey), 0);
    a.qp_state = QpState::kRtr;
    EXPECT_EQ(qp.modify(a, kQpState), 0);
    a.qp_state = QpState::kRts;
    EXPECT_EQ(qp.modify(a, kQpState | kQpSqPsn), 0);
    const size_t index = qps.size() - 1;
    for (uint32_t r = 0; r < kRecvsPerQp; ++r) {
      const transport::Sge sge{reinterpret_cast<uint64_t>(slot(index, r)), kSlotBytes, mr->lkey()};
      EXPECT_EQ(qp.post_recv(transport::RecvWr{index * 100 + r, {&sge, 1}}), 0);
    }
    return qp;
  }
  uint8_t* slot(size_t qp_index, uint32_t r) {
    return buf.data() + (qp_index * kRecvsPerQp + r) * kSlotBytes;
  }

  void poll_cq() {
    std::array<transport::Completion, 32> wc;
    for (size_t n; (n = cq->poll(wc)) != 0;)
      for (size_t i = 0; i < n; ++i) {
        if (wc[i].opcode != transport::WcOpcode::kRecv) continue;
        EXPECT_EQ(wc[i].status, transport::WcStatus::kSuccess);
        ++received[wc[i].qp_num];
      }
  }
  uint64_t counter(std::string_view name) const {
    for (const Counter& c : dev->counters())
      if (c.name == name) return c.value;
    ADD_FAILURE() << "no counter " << name;
    return 0;
  }
};

// Runs passes of both devices until `done` holds, at most `passes` (a lost datagram fails the
// test instead of hanging it).
template <typename Done>
bool pump(Node& a, Node& b, Done done, int passes = 5000) {
  Nanos now = 0;
  for (int i = 0; i < passes; ++i) {
    now += 1000;
    a.dev->progress(now);
    b.dev->progress(now);
    a.poll_cq();
    b.poll_cq();
    if (done()) return true;
    if (i > 100) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

TEST(VerbsMulticast, DeliversToEveryAttachedQpWithItsQkeyOnEachDevice) {
  Node a("127.0.151.1"), b("127.0.151.2");
  ASSERT_TRUE(a.dev && b.dev);
  const Gid group = group_gid(1, 1);
  QueuePair& sender = a.add_qp();       // not attached
  QueuePair& a_member = a.add_qp();     // the sender's device, attached
  QueuePair& a_bystander = a.add_qp();  // the sender's device, not attached
  QueuePair& b1 = b.add_qp();
  QueuePair& b2 = b.add_qp();
  QueuePair& b3 = b.add_qp();
  QueuePair& b_wrong_qkey = b.add_qp(kQkey + 1);
  QueuePair& b_bystander = b.add_qp();
  for (QueuePair* qp : {&a_member, &b1, &b2, &b3, &b_wrong_qkey})
    ASSERT_EQ(qp->attach_mcast(group), 0);
  // The RoCE v1 form names the same group (one attachment, attaching twice is a no-op).
  Gid v1_form = group;
  v1_form[0] = 0xff;
  v1_form[1] = 0x0e;
  ASSERT_EQ(b1.attach_mcast(v1_form), 0);
  EXPECT_EQ(a.link->groups_joined(), 1u);
  EXPECT_EQ(b.link->groups_joined(), 1u);

  AhAttr ah;
  ah.grh.dgid = group;
  auto handle = std::move(a.pd->create_ah(ah).value());
  std::vector<uint8_t> message(100);
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<uint8_t>(i);
  auto msg_mr =
      std::move(a.pd->reg_mr(message.data(), message.size(), transport::kAccessLocalWrite).value());
  constexpr uint32_t kMessages = 3;
  for (uint32_t m = 0; m < kMessages; ++m) {
    const transport::Sge sge{reinterpret_cast<uint64_t>(message.data()),
                             static_cast<uint32_t>(message.size()), msg_mr->lkey()};
    transport::SendWr wr;
    wr.wr_id = m;
    wr.sg_list = {&sge, 1};
    wr.ah = &handle->av();
    wr.remote_qpn = kMulticastQpn;
    wr.remote_qkey = kQkey;
    ASSERT_EQ(sender.post_send(wr), 0);
  }

  auto got = [](Node& n, QueuePair& qp) { return n.received[qp.qp_num()]; };
  ASSERT_TRUE(pump(a, b,
                   [&] {
                     return got(a, a_member) == kMessages && got(b, b1) == kMessages &&
                            got(b, b2) == kMessages && got(b, b3) == kMessages;
                   }))
      << "a_member " << got(a, a_member) << " b1 " << got(b, b1) << " b2 " << got(b, b2) << " b3 "
      << got(b, b3);
  // Each device handed every packet to each attached QP in the same pass, so nothing else is
  // still on its way.
  pump(
      a, b, [] { return false; }, 200);
  EXPECT_EQ(got(a, a_member), kMessages);
  EXPECT_EQ(got(b, b1), kMessages);  // attached twice, delivered once
  EXPECT_EQ(got(b, b2), kMessages);
  EXPECT_EQ(got(b, b3), kMessages);
  EXPECT_EQ(got(b, b_wrong_qkey), 0u);
  EXPECT_EQ(got(a, sender), 0u);
  EXPECT_EQ(got(a, a_bystander), 0u);
  EXPECT_EQ(got(b, b_bystander), 0u);
  EXPECT_EQ(b.counter("rx_mcast_packets"), kMessages);
  EXPECT_EQ(b.counter("rx_mcast_deliveries"), 4 * kMessages);  // the wrong Q_Key's included
  EXPECT_EQ(a.counter("rx_mcast_packets"), kMessages);         // looped back to its own host
  EXPECT_EQ(a.counter("rx_mcast_deliveries"), kMessages);
  EXPECT_EQ(b.link->stats().rx_group_datagrams, kMessages);
  EXPECT_EQ(b.link->counters().rx_drop_bad_icrc, 0u);

  // The GRH space of a receive holds the IPv4 header (its last 20 bytes): the sender's address
  // and the group's; the payload follows intact.
  const uint8_t* first = b.slot(0, 0);  // b1 is b's first QP
  EXPECT_EQ(std::memcmp(first + 32, a.dev->gid().data() + 12, 4), 0);
  EXPECT_EQ(std::memcmp(first + 36, group.data() + 12, 4), 0);
  EXPECT_EQ(std::memcmp(first + 40, message.data(), message.size()), 0);

  // Detached, a QP gets nothing more; the last QP out leaves the group on the link.
  for (QueuePair* qp : {&b1, &b2, &b3}) ASSERT_EQ(qp->detach_mcast(group), 0);
  EXPECT_EQ(b.link->groups_joined(), 1u);
  ASSERT_EQ(b_wrong_qkey.detach_mcast(group), 0);
  EXPECT_EQ(b.link->groups_joined(), 0u);
  EXPECT_EQ(b1.detach_mcast(group), EINVAL);
}

TEST(VerbsMulticast, AttachmentsAreBoundedAndChecked) {
  DeviceConfig config;
  config.attr.max_mcast_grp = 2;
  config.attr.max_mcast_qp_attach = 2;
  config.attr.max_total_mcast_qp_attach = 4;
  Node n("127.0.151.3", config);
  ASSERT_TRUE(n.dev);
  QueuePair& q1 = n.add_qp();
  QueuePair& q2 = n.add_qp();
  QueuePair& q3 = n.add_qp();
  const Gid g1 = group_gid(2, 1), g2 = group_gid(2, 2), g3 = group_gid(2, 3);
  EXPECT_EQ(q1.attach_mcast(g1), 0);
  EXPECT_EQ(q2.attach_mcast(g1), 0);
  EXPECT_EQ(q3.attach_mcast(g1), ENOMEM);  // max_mcast_qp_attach
  EXPECT_EQ(q1.attach_mcast(g2), 0);
  EXPECT_EQ(q3.attach_mcast(g3), ENOMEM);  // max_mcast_grp
  EXPECT_EQ(q2.attach_mcast(g2), 0);
  EXPECT_EQ(q3.attach_mcast(g2), ENOMEM);  // max_total_mcast_qp_attach (and the group's)
  EXPECT_EQ(n.link->groups_joined(), 2u);

  // Not a UD QP, not a group, an IPv6 group.
  QueuePair& rc = n.add_qp(kQkey, QpType::kRc);
  EXPECT_EQ(rc.attach_mcast(g1), EINVAL);
  EXPECT_EQ(q3.attach_mcast(gid_from_ipv4({10, 0, 0, 1})), EINVAL);
  Gid all_nodes{};
  all_nodes[0] = 0xff;
  all_nodes[1] = 0x02;
  all_nodes[15] = 1;
  EXPECT_EQ(q3.attach_mcast(all_nodes), EOPNOTSUPP);
  EXPECT_EQ(q3.detach_mcast(g1), EINVAL);

  // Destroying a QP detaches it everywhere: g2 loses its last member but q2's.
  n.qps[0].reset();  // q1
  EXPECT_EQ(n.link->groups_joined(), 2u);
  EXPECT_EQ(q3.attach_mcast(g1), 0);
  n.qps[1].reset();  // q2: g2 empties, and the link leaves it
  EXPECT_EQ(n.link->groups_joined(), 1u);
  EXPECT_EQ(q3.attach_mcast(g3), 0);
  EXPECT_EQ(n.link->groups_joined(), 2u);
}

TEST(UdpLinkMulticast, JoinsAreBounded) {
  link::UdpLinkOptions o;
  o.address = "127.0.151.4";
  auto l = link::UdpLink::open(o);
  ASSERT_TRUE(l.ok());
  link::UdpLink& link = **l;
  const int listening_fd = link.wait_fd();
  for (uint32_t i = 0; i < link::UdpLink::kMaxGroups; ++i)
    ASSERT_EQ(link.join_group(group_gid(3, static_cast<uint8_t>(i))), 0) << i;
  EXPECT_NE(link.wait_fd(), listening_fd);  // an epoll set of every socket
  EXPECT_EQ(link.join_group(group_gid(4, 0)), ENOMEM);
  EXPECT_EQ(link.join_group(group_gid(3, 0)), EEXIST);
  EXPECT_EQ(link.leave_group(group_gid(4, 0)), ENOENT);
  EXPECT_EQ(link.join_group(gid_from_ipv4({10, 0, 0, 1})), EOPNOTSUPP);
  EXPECT_EQ(link.leave_group(group_gid(3, 0)), 0);
  EXPECT_EQ(link.join_group(group_gid(4, 0)), 0);
  EXPECT_EQ(link.groups_joined(), link::UdpLink::kMaxGroups);
}

}  // namespace
}  // namespace uroce::verbs
