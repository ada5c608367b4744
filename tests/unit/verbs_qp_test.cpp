// The QP state machine and its attribute masks (IBA 10.3.1 table 91 / ibv_modify_qp(3)), the
// state rules of post_send/post_recv, what reaches the transport, flushing on ERR, and CQ overrun
// turning into QP_FATAL. The transport is the fake of verbs_test_support.h.
#include <gtest/gtest.h>

#include <bit>
#include <set>
#include <vector>

#include "verbs/cq.h"
#include "verbs/device.h"
#include "verbs/qp.h"
#include "verbs_test_support.h"

namespace uroce::verbs {
namespace {

using testing::FakeWorld;
using testing::good_attr;
using S = QpState;
using T = QpType;

constexpr uint32_t kAllMaskBits = (1u << 21) - 1;  // every ibv_qp_attr_mask bit up to DEST_QPN

const uint32_t kRcInit = kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags;
const uint32_t kUdInit = kQpState | kQpPkeyIndex | kQpPort | kQpQkey;
const uint32_t kRcRtr =
    kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
const uint32_t kUcRtr = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
const uint32_t kRcRts =
    kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;

uint32_t init_mask(T t) {
  return t == T::kUd ? kUdInit : kRcInit;
}
uint32_t rtr_mask(T t) {
  return t == T::kRc ? kRcRtr : t == T::kUc ? kUcRtr : kQpState;
}
uint32_t rts_mask(T t) {
  return t == T::kRc ? kRcRts : kQpState | kQpSqPsn;
}

// Drives a fresh QP to `target` along the usual path.
void drive(QueuePair& qp, S target) {
  const T t = qp.type();
  auto step = [&](S s, uint32_t mask) { ASSERT_EQ(qp.modify(good_attr(s), mask), 0); };
  if (target == S::kReset) return;
  if (target == S::kErr) return step(S::kErr, kQpState);
  step(S::kInit, init_mask(t));
  if (target == S::kInit) return;
  step(S::kRtr, rtr_mask(t));
  if (target == S::kRtr) return;
  step(S::kRts, rts_mask(t));
  if (target == S::kRts) return;
  if (target == S::kSqd) return step(S::kSqd, kQpState);
  ASSERT_EQ(target, S::kSqe);
}

TEST(VerbsQp, MaskValuesEqualIbverbs) {
  // ibv_qp_attr_mask values (verbs.h); the ABI relies on them being equal.
  EXPECT_EQ(kQpState, 1u);
  EXPECT_EQ(kQpAv, 128u);
  EXPECT_EQ(kQpSqPsn, 65536u);
  EXPECT_EQ(kQpDestQpn, 1u << 20);
  EXPECT_EQ(kQpRateLimit, 1u << 25);
}

TEST(VerbsQp, UsualPathForEveryTypeReachesRtsAndConfiguresTheTransport) {
  for (T t : {T::kRc, T::kUc, T::kUd}) {
    FakeWorld w;
    auto qp = w.qp(t);
    EXPECT_EQ(qp->state(), S::kReset);
    drive(*qp, S::kRts);
    EXPECT_EQ(qp->state(), S::kRts);
    auto& f = w.fake(*qp);
    EXPECT_EQ(f.states, (std::vector<S>{S::kInit, S::kRtr, S::kRts}));
    if (t != T::kUd) {
      EXPECT_EQ(f.config.dest_qpn, 0x42u);
      EXPECT_EQ(f.config.path_mtu_bytes, 1024u);
      EXPECT_EQ(f.config.rq_psn, Psn(100));
      EXPECT_EQ(f.config.sq_psn, Psn(200));
      EXPECT_EQ(f.config.path.dgid, gid_from_ipv4({10, 0, 0, 2}));
      EXPECT_EQ(f.config.path.udp_src_port & 0xc000, 0xc000);
    } else {
      EXPECT_EQ(f.config.qkey, 0x11111111u);
    }
    if (t == T::kRc) {
      EXPECT_EQ(f.config.max_rd_atomic, 4);
      EXPECT_EQ(f.config.max_dest_rd_atomic, 4);
      EXPECT_EQ(f.config.timeout, 14);
      EXPECT_EQ(f.config.min_rnr_timer, 12);
    }
    QpAttr q = qp->query();
    EXPECT_EQ(q.qp_state, S::kRts);
    EXPECT_EQ(q.sq_psn, 200u);
  }
}

// The GID table's v1 entry picks RoCE v1 for the path (AddressVector::roce_v1), only on a link
// that writes Ethernet frames; the v2 entry never does.
TEST(VerbsQp, RoceV1GidIndexChoosesV1OnALinkThatCarriesIt) {
  for (bool writes_frames : {false, true}) {
    FakeWorld w;
    w.link.writes_frames = writes_frames;
    auto qp = w.qp(T::kRc);
    drive(*qp, S::kInit);
    QpAttr a = good_attr(S::kRtr);
    a.ah_attr.grh.sgid_index = kGidIndexRoceV1;
    EXPECT_EQ(qp->modify(a, kRcRtr), writes_frames ? 0 : EINVAL);
    EXPECT_EQ(qp->state(), writes_frames ? S::kRtr : S::kInit);
    if (writes_frames) {
      EXPECT_TRUE(w.fake(*qp).config.path.roce_v1);
      EXPECT_EQ(qp->query().ah_attr.grh.sgid_index, kGidIndexRoceV1);
    }

    AhAttr ah = good_attr(S::kRtr).ah_attr;
    auto v2 = make_address_vector(ah, *w.device, 1, 2);
    ASSERT_TRUE(v2.ok());
    EXPECT_FALSE(v2->roce_v1);
    ah.grh.sgid_index = kGidIndexRoceV1;
    auto v1 = make_address_vector(ah, *w.device, 1, 2);
    EXPECT_EQ(v1.ok(), writes_frames);
    if (writes_frames) {
      EXPECT_TRUE(v1->roce_v1);
      EXPECT_EQ(v1->dgid, gid_from_ipv4({10, 0, 0, 2}));
    } else {
      EXPECT_EQ(v1.error(), EINVAL);
    }
    auto handle = w.pd->create_ah(ah);
    EXPECT_EQ(handle.ok(), writes_frames);
    if (writes_frames) {
      EXPECT_TRUE((*handle)->av().roce_v1);
    } else {
      EXPECT_EQ(handle.error(), EINVAL);
    }
  }
}

// A v1 path to a peer off the link's segment is refused with EHOSTUNREACH at modify_qp(RTR) and
// create_ah (not accepted and then lost packet by packet); the same peer over v2 is accepted.
TEST(VerbsQp, RoceV1PeerOffTheSegmentIsUnreachable) {
  FakeWorld w;
  w.link.writes_frames = true;
  w.link.off_segment = w.link.peer_gid;
  auto qp = w.qp(T::kRc);
  drive(*qp, S::kInit);
  QpAttr a = good_attr(S::kRtr);
  a.ah_attr.grh.sgid_index = kGidIndexRoceV1;
  EXPECT_EQ(qp->modify(a, kRcRtr), EHOSTUNREACH);
  EXPECT_EQ(qp->state(), S::kInit);
  AhAttr ah = a.ah_attr;
  auto handle = w.pd->create_ah(ah);
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.error(), EHOSTUNREACH);
  // Another peer on the segment is reachable over v1.
  ah.grh.dgid = gid_from_ipv4({10, 0, 0, 3});
  EXPECT_TRUE(w.pd->create_ah(ah).ok());
  // RoCEv2 is routable: the off-segment peer is accepted.
  a.ah_attr.grh.sgid_index = 0;
  EXPECT_EQ(qp->modify(a, kRcRtr), 0);
  EXPECT_EQ(qp->state(), S::kRtr);
  EXPECT_FALSE(w.fake(*qp).config.path.roce_v1);
}

// Every transition the table allows, for every type, with exactly its required mask: legal. Then
// each required bit left out, and each bit the transition does not accept added: EINVAL, and
// the QP is left as it was.
TEST(VerbsQp, EveryLegalTransitionAndItsMaskRules) {
  int legal = 0, rejected = 0;
  for (T t : {T::kRc, T::kUc, T::kUd}) {
    for (int from_i = 0; from_i <= 6; ++from_i) {
      for (int to_i = 0; to_i <= 6; ++to_i) {
        const S from = static_cast<S>(from_i), to = static_cast<S>(to_i);
        if (from == S::kSqe) continue;  // not reachable by modify; the transport enters it
        TransitionMasks m = transition_masks(from, to, t);
        FakeWorld w;
        auto qp = w.qp(t);
        drive(*qp, from);
        ASSERT_EQ(qp->state(), from);
        const size_t transport_calls = w.fake(*qp).states.size();
        const uint32_t req = m.required | kQpState;
        if (!m.valid) {
          EXPECT_EQ(qp->modify(good_attr(to), kAllMaskBits), EINVAL);
          EXPECT_EQ(qp->modify(good_attr(to), kQpState), EINVAL)
              << int(t) << " " << from_i << "->" << to_i;
          EXPECT_EQ(qp->state(), from);
          ++rejected;
          continue;
        }
        for (uint32_t bit : std::vector<uint32_t>{
                 kQpPkeyIndex, kQpPort, kQpAccessFlags, kQpQkey, kQpAv, kQpPathMtu, kQpDestQpn,
                 kQpRqPsn, kQpMaxDestRdAtomic, kQpMinRnrTimer, kQpSqPsn, kQpTimeout, kQpRetryCnt,
                 kQpRnrRetry, kQpMaxQpRdAtomic}) {
          if (m.required & bit) {
            EXPECT_EQ(qp->modify(good_attr(to), req & ~bit), EINVAL) << bit;
            ++rejected;
          } else if (!(m.optional & bit)) {
            EXPECT_EQ(qp->modify(good_attr(to), req | bit), EINVAL) << bit;
            ++rejected;
          }
        }
        for (uint32_t bit : {uint32_t{kQpCap}, uint32_t{kQpRateLimit}}) {
          EXPECT_EQ(qp->modify(good_attr(to), req | bit), EINVAL);
        }
        EXPECT_EQ(qp->state(), from);
        EXPECT_EQ(w.fake(*qp).states.size(), transport_calls);  // nothing reached the transport
        QpAttr a = good_attr(to);
        a.cur_qp_state = from;
        EXPECT_EQ(qp->modify(a, req), 0) << int(t) << " " << from_i << "->" << to_i;
        EXPECT_EQ(qp->state(), to);
        ++legal;
      }
    }
  }
  // RESET, ERR from every state (7 x 2, minus SQE's) plus the table rows, per type.
  EXPECT_GT(legal, 50);
  EXPECT_GT(rejected, 100);
}

TEST(VerbsQp, TableMatchesIbvModifyQpForTheNamedTransitions) {
  EXPECT_EQ(transition_masks(S::kReset, S::kInit, T::kRc).required | kQpState, kRcInit);
  EXPECT_EQ(transition_masks(S::kReset, S::kInit, T::kUd).required | kQpState, kUdInit);
  EXPECT_EQ(transition_masks(S::kInit, S::kRtr, T::kRc).required | kQpState, kRcRtr);
  EXPECT_EQ(transition_masks(S::kRtr, S::kRts, T::kRc).required | kQpState, kRcRts);
  EXPECT_EQ(transition_masks(S::kInit, S::kRtr, T::kUd).required, 0u);
  EXPECT_FALSE(transition_masks(S::kReset, S::kRtr, T::kRc).valid);
  EXPECT_FALSE(transition_masks(S::kInit, S::kRts, T::kRc).valid);
  EXPECT_FALSE(transition_masks(S::kRtr, S::kSqd, T::kRc).valid);
  EXPECT_FALSE(transition_masks(S::kErr, S::kRts, T::kRc).valid);
  EXPECT_FALSE(transition_masks(S::kSqe, S::kRts, T::kRc).valid);
  EXPECT_TRUE(transition_masks(S::kSqe, S::kRts, T::kUc).valid);
  EXPECT_TRUE(transition_masks(S::kRts, S::kRts, T::kRc).valid);
  EXPECT_FALSE(transition_masks(S::kRtr, S::kRtr, T::kRc).valid);
}

TEST(VerbsQp, BadValuesAreEinvalAndLeaveTheQpUnchanged) {
  struct Case {
    const char* what;
    S from;
    uint32_t mask;
    void (*spoil)(QpAttr&);
  };
  const Case cases[] = {
      {"port 2", S::kReset, kRcInit, [](QpAttr& a) { a.port_num = 2; }},
      {"pkey index 1", S::kReset, kRcInit, [](QpAttr& a) { a.pkey_index = 1; }},
      {"mtu above the port's", S::kInit, kRcRtr, [](QpAttr& a) { a.path_mtu = Mtu::k4096; }},
      {"mtu 0", S::kInit, kRcRtr, [](QpAttr& a) { a.path_mtu = static_cast<Mtu>(0); }},
      {"no GRH", S::kInit, kRcRtr, [](QpAttr& a) { a.ah_attr.is_global = false; }},
      {"zero dgid", S::kInit, kRcRtr, [](QpAttr& a) { a.ah_attr.grh.dgid = {}; }},
      // The RoCE v1 entry on a link that cannot carry v1 (FakeLink as the UDP link).
      {"sgid index 1 (v1)", S::kInit, kRcRtr, [](QpAttr& a) { a.ah_attr.grh.sgid_index = 1; }},
      {"sgid index 2", S::kInit, kRcRtr, [](QpAttr& a) { a.ah_attr.grh.sgid_index = 2; }},
      {"flow label > 20 bits", S::kInit, kRcRtr,
       [](QpAttr& a) { a.ah_attr.grh.flow_label = 1u << 20; }},
      {"dest qpn > 24 bits", S::kInit, kRcRtr, [](QpAttr& a) { a.dest_qp_num = 1u << 24; }},
      {"dest rd atomic > max", S::kInit, kRcRtr, [](QpAttr& a) { a.max_dest_rd_atomic = 17; }},
      {"min rnr timer 32", S::kInit, kRcRtr, [](QpAttr& a) { a.min_rnr_timer = 32; }},
      {"timeout 32", S::kRtr, kRcRts, [](QpAttr& a) { a.timeout = 32; }},
      {"retry 8", S::kRtr, kRcRts, [](QpAttr& a) { a.retry_cnt = 8; }},
      {"rnr retry 8", S::kRtr, kRcRts, [](QpAttr& a) { a.rnr_retry = 8; }},
      {"rd atomic > max", S::kRtr, kRcRts, [](QpAttr& a) { a.max_rd_atomic = 17; }},
      {"wrong current state", S::kRtr, kRcRts | kQpCurState,
       [](QpAttr& a) { a.cur_qp_state = S::kInit; }},
  };
  for (const Case& c : cases) {
    FakeWorld w;
    auto qp = w.qp(T::kRc);
    drive(*qp, c.from);
    QpAttr before = qp->query();
    S next = c.from == S::kReset ? S::kInit : c.from == S::kInit ? S::kRtr : S::kRts;
    QpAttr a = good_attr(next);
    a.cur_qp_state = c.from;
    c.spoil(a);
    EXPECT_EQ(qp->modify(a, c.mask), EINVAL) << c.what;
    EXPECT_EQ(qp->state(), c.from) << c.what;
    QpAttr after = qp->query();
    EXPECT_EQ(after.dest_qp_num, before.dest_qp_num) << c.what;
    EXPECT_EQ(after.port_num, before.port_num) << c.what;
    EXPECT_EQ(after.timeout, before.timeout) << c.what;
    // The same request unspoilt succeeds.
    QpAttr good = good_attr(next);
    good.cur_qp_state = c.from;
    EXPECT_EQ(qp->modify(good, c.mask), 0) << c.what;
  }
}

TEST(VerbsQp, AccessBitsThatOnlyMrsUseAreDroppedNotRefused) {
  FakeWorld w;
  auto qp = w.qp(T::kRc);
  QpAttr a = good_attr(S::kInit);
  constexpr uint32_t kOnDemand = 1u << 6, kHugeTlb = 1u << 7, kZeroBased = 1u << 5;
  a.qp_access_flags = transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic | kOnDemand |
                      kHugeTlb | kZeroBased;
  ASSERT_EQ(qp->modify(a, kRcInit), 0);
  EXPECT_EQ(qp->query().qp_access_flags,
            transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic);
  EXPECT_EQ(w.fake(*qp).config.qp_access_flags,
            transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic);
}

TEST(VerbsQp, PsnsAreKeptTo24Bits) {
  FakeWorld w;
  auto qp = w.qp(T::kRc);
  drive(*qp, S::kInit);
  QpAttr a = good_attr(S::kRtr);
  a.rq_psn = 0xab123456;
  ASSERT_EQ(qp->modify(a, kRcRtr), 0);
  EXPECT_EQ(qp->query().rq_psn, 0x123456u);
}

TEST(VerbsQp, ModifyWithoutStateChangesAttributesInPlace) {
  FakeWorld w;
  auto qp = w.qp(T::kRc);
  drive(*qp, S::kRts);
  QpAttr a = good_attr(S::kRts);
  a.min_rnr_timer = 3;
  ASSERT_EQ(qp->modify(a, kQpMinRnrTimer), 0);
  EXPECT_EQ(qp->query().min_rnr_timer, 3);
  EXPECT_EQ(w.fake(*qp).config.min_rnr_timer, 3);
  EXPECT_EQ(qp->modify(a, kQpTimeout), EINVAL);  // not modifiable in RTS
  EXPECT_EQ(qp->state(), S::kRts);
}

TEST(VerbsQp, PostSendNeedsRtsAndPostRecvNeedsInit) {
  FakeWorld w;
  auto qp = w.qp(T::kRc);
  transport::SendWr s;
  transport::RecvWr r;
  EXPECT_EQ(qp->post_send(s), EINVAL);  // RESET
  EXPECT_EQ(qp->post_recv(r), EINVAL);  // RESET
  drive(*qp, S::kInit);
  EXPECT_EQ(qp->post_send(s), EINVAL);
  EXPECT_EQ(qp->post_recv(r), 0);
  ASSERT_EQ(qp->modify(good_attr(S::kRtr), kRcRtr), 0);
  EXPECT_EQ(qp->post_send(s), EINVAL);
  EXPECT_EQ(qp->post_recv(r), 0);
  ASSERT_EQ(qp->modify(good_attr(S::kRts), kRcRts), 0);
  EXPECT_EQ(qp->post_send(s), 0);
  EXPECT_EQ(w.fake(*qp).sends.size(), 1u);
  EXPECT_EQ(w.fake(*qp).recvs.size(), 2u);
}

TEST(VerbsQp, PostListReportsTheFirstBadRequest) {
  FakeWorld w;
  auto qp = w.qp(T::kRc);
  drive(*qp, S::kRts);
  std::vector<transport::Sge> too_many(5);
  std::vector<transport::SendWr> wrs(4);
  wrs[2].sg_list = too_many;  // more SGEs than max_send_sge
  size_t bad = 99;
  EXPECT_EQ(qp->post_send(wrs, &bad), EINVAL);
  EXPECT_EQ(bad, 2u);
  EXPECT_EQ(w.fake(*qp).sends.size(), 2u);
}

TEST(VerbsQp, MovingToErrFlushesOutstandingWorkInOrder) {
  FakeWorld w;
  auto qp = w.qp(T::kRc);
  drive(*qp, S::kRts);
  for (uint64_t id = 1; id <= 5; ++id) {
    transport::SendWr s;
    s.wr_id = id;
    ASSERT_EQ(qp->post_send(s), 0);
    transport::RecvWr r;
    r.wr_id = 100 + id;
    ASSERT_EQ(qp->post_recv(r), 0);
  }
  ASSERT_EQ(qp->modify(good_attr(S::kErr), kQpState), 0);
  std::array<transport::Completion, 16> out;
  ASSERT_EQ(w.cq->poll(out), 10u);
  std::vector<uint64_t> sends, recvs;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(out[i].status, transport::WcStatus::kWrFlushErr);
    (out[i].opcode == transport::WcOpcode::kRecv ? recvs : sends).push_back(out[i].wr_id);
  }
  EXPECT_EQ(sends, (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(recvs, (std::vector<uint64_t>{101, 102, 103, 104, 105}));
  // In ERR a post completes at once with a flush error.
  transport::SendWr s;
  s.wr_id = 6;
  EXPECT_EQ(qp->post_send(s), 0);
  ASSERT_EQ(w.cq->poll(out), 1u);
  EXPECT_EQ(out[0].wr_id, 6u);
  EXPECT_EQ(out[0].status, transport::WcStatus::kWrFlushErr);
  // Counters saw the flushes.
  uint64_t req_flush = 0;
  for (const Counter& c : qp->counters())
    if (c.name == "req_cqe_flush_error") req_flush = c.value;
  EXPECT_EQ(req_flush, 6u);
}

TEST(VerbsQp, CqOverrunMovesTheQpToErrWithQpFatal) {
  FakeWorld w;
  auto small = std::move(w.ctx->create_cq(2).value());
  auto qp = w.qp(T::kRc, small.get());
  drive(*qp, S::kRts);
  for (uint64_t id = 0; id < 3; ++id) {
    transport::SendWr s;
    s.wr_id = id;
    ASSERT_EQ(qp->post_send(s), 0);
  }
  w.device->progress(0);  // the fake completes all three: the third overruns
  EXPECT_EQ(qp->state(), S::kErr);
  std::vector<EventType> events;
  while (auto e = w.ctx->async_events().get()) events.push_back(e->type);
  EXPECT_EQ(events, (std::vector<EventType>{EventType::kCqErr, EventType::kQpFatal}));
  qp.reset();
}

TEST(VerbsQp, CreateQpValidatesCapsAndCqs) {
  FakeWorld w;
  QpInitAttr a;
  a.send_cq = a.recv_cq = w.cq.get();
  a.cap.max_send_wr = w.device->attr().max_qp_wr + 1;
  EXPECT_EQ(w.pd->create_qp(a).error(), EINVAL);
  a.cap = {};
  a.cap.max_send_sge = transport::kMaxSge + 1;
  EXPECT_EQ(w.pd->create_qp(a).error(), EINVAL);
  a.cap = {};
  a.cap.max_inline_data = 100000;
  EXPECT_EQ(w.pd->create_qp(a).error(), EINVAL);
  a.cap = {};
  a.recv_cq = nullptr;
  EXPECT_EQ(w.pd->create_qp(a).error(), EINVAL);
  a.recv_cq = w.cq.get();
  a.qp_type = static_cast<QpType>(7);
  EXPECT_EQ(w.pd->create_qp(a).error(), EINVAL);
  // A CQ of another context.
  auto ctx2 = std::move(w.device->open().value());
  auto cq2 = std::move(ctx2->create_cq(4).value());
  a.qp_type = QpType::kRc;
  a.send_cq = cq2.get();
  EXPECT_EQ(w.pd->create_qp(a).error(), EINVAL);
  a.send_cq = w.cq.get();
  auto qp = w.pd->create_qp(a);
  ASSERT_TRUE(qp.ok());
  EXPECT_EQ(w.cq->users(), 2u);  // send and receive
  EXPECT_EQ(w.pd->users(), 1u);
  qp.value().reset();
  EXPECT_EQ(w.cq->users(), 0u);
  EXPECT_EQ(w.pd->users(), 0u);
}

TEST(VerbsQp, QpNumbersAreDistinctAndAvoidTheSpecialQps) {
  DeviceConfig cfg;
  cfg.attr.max_qp = 8;
  FakeWorld w(cfg);
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::set<uint32_t> seen;
  for (int i = 0; i < 8; ++i) {
    qps.push_back(w.qp());
    EXPECT_EQ(qps.back()->qp_num(), 0x11u + i);
    EXPECT_LT(qps.back()->qp_num(), 1u << 24);
    EXPECT_TRUE(seen.insert(qps.back()->qp_num()).second);
  }
  QpInitAttr a;
  a.send_cq = a.recv_cq = w.cq.get();
  EXPECT_EQ(w.pd->create_qp(a).error(), ENOMEM);  // max_qp
}

// Queues a completion of QP `qpn` as a finished work request would.
void push(CompletionQueue& cq, uint32_t qpn, uint64_t wr_id) {
  transport::Completion c;
  c.qp_num = qpn;
  c.wr_id = wr_id;
  ASSERT_TRUE(cq.push(c));
}

// Moving a QP to RESET removes its completions from its CQs (as mlx5 does), others' stay in order.
TEST(VerbsQp, ResetPurgesTheQpsCompletionsFromBothCqs) {
  FakeWorld w;
  auto rcq = std::move(w.ctx->create_cq(16).value());
  auto qp = w.qp(T::kRc, w.cq.get(), rcq.get());
  auto other = w.qp(T::kRc, w.cq.get(), rcq.get());
  drive(*qp, S::kRts);
  push(*w.cq, qp->qp_num(), 1);
  push(*w.cq, other->qp_num(), 2);
  push(*w.cq, qp->qp_num(), 3);
  push(*w.cq, other->qp_num(), 4);
  push(*rcq, qp->qp_num(), 5);
  push(*rcq, other->qp_num(), 6);
  ASSERT_EQ(qp->modify(good_attr(S::kReset), kQpState), 0);
  std::vector<transport::Completion> out(8);
  ASSERT_EQ(w.cq->poll(out), 2u);
  EXPECT_EQ(out[0].wr_id, 2u);
  EXPECT_EQ(out[1].wr_id, 4u);
  ASSERT_EQ(rcq->poll(out), 1u);
  EXPECT_EQ(out[0].wr_id, 6u);
  // The ring still works after the purge: a push and poll go through in order.
  push(*w.cq, other->qp_num(), 7);
  ASSERT_EQ(w.cq->poll(out), 1u);
  EXPECT_EQ(out[0].wr_id, 7u);
}

// Destroying a QP removes its completions from its CQs too (mlx5 cleans both CQs on destroy);
// a program that drains a shared CQ after closing one connection (libfabric's ofi_rxm) must not
// find the dead QP's receives there.
TEST(VerbsQp, DestroyPurgesTheQpsCompletionsFromBothCqs) {
  FakeWorld w;
  auto rcq = std::move(w.ctx->create_cq(16).value());
  auto qp = w.qp(T::kRc, w.cq.get(), rcq.get());
  auto other = w.qp(T::kRc, w.cq.get(), rcq.get());
  push(*w.cq, qp->qp_num(), 1);
  push(*w.cq, other->qp_num(), 2);
  push(*rcq, qp->qp_num(), 3);
  push(*rcq, other->qp_num(), 4);
  push(*rcq, qp->qp_num(), 5);
  qp.reset();
  std::vector<transport::Completion> out(8);
  ASSERT_EQ(w.cq->poll(out), 1u);
  EXPECT_EQ(out[0].wr_id, 2u);
  ASSERT_EQ(rcq->poll(out), 1u);
  EXPECT_EQ(out[0].wr_id, 4u);
}

}  // namespace
}  // namespace uroce::verbs
