#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "core/oob.h"
#include "core/report.h"

namespace uroce::tools {
namespace {

TEST(BenchReport, BwRowHasPerftestColumns) {
  BandwidthSummary b{65536, 5000, 92.346, 92.331, 11006.2, 0.176108, 0.1};
  std::string cols = format_bw_columns();
  EXPECT_NE(cols.find("#bytes"), std::string::npos);
  EXPECT_NE(cols.find("BW peak[Gb/sec]"), std::string::npos);
  EXPECT_NE(cols.find("BW average[MB/sec]"), std::string::npos);
  EXPECT_NE(cols.find("MsgRate[Mpps]"), std::string::npos);
  std::string row = format_bw_row(b);
  EXPECT_NE(row.find(" 65536 "), std::string::npos);
  EXPECT_NE(row.find("92.35"), std::string::npos);
  EXPECT_NE(row.find("92.33"), std::string::npos);
  EXPECT_NE(row.find("0.176108"), std::string::npos);
}

TEST(BenchReport, LatRowAndTitle) {
  LatencySummary l{1000, 1.5, 2.0, 2.25, 9.0, 12.0, 20.0, 0.5};
  std::string row = format_lat_row(8, l);
  for (const char* s : {"1.50", "2.00", "2.25", "9.00", "12.00", "20.00", "0.50"})
    EXPECT_NE(row.find(s), std::string::npos) << s;
  RunInfo info;
  info.test = "write";
  info.mode = "lat";
  EXPECT_EQ(banner_title(info), "RDMA_Write Latency Test");
  info.test = "send";
  info.mode = "bw";
  EXPECT_EQ(banner_title(info), "Send BW Test");
}

TEST(BenchReport, JsonShapeAndEscaping) {
  Json j;
  j.begin_object().field("name", "a\"b\\c\n").field("n", uint64_t{3}).field("ok", true);
  j.field("x", 0.5).field("bad", 1.0 / 0.0);
  j.begin_array("rows");
  json_bw(j, BandwidthSummary{2, 10, 1, 1, 1, 1, 1});
  json_bw(j, BandwidthSummary{4, 10, 1, 1, 1, 1, 1});
  j.end_array().end_object();
  EXPECT_EQ(j.str().substr(0, 53), R"({"name":"a\"b\\c\n","n":3,"ok":true,"x":0.5,"bad":nul)");
  EXPECT_NE(j.str().find(R"("rows":[{"bytes":2,)"), std::string::npos);
  EXPECT_NE(j.str().find(R"(},{"bytes":4,)"), std::string::npos);
  EXPECT_EQ(j.str().back(), '}');
  EXPECT_EQ(Json::escape(std::string_view("\x01", 1)), "\\u0001");
}

TEST(BenchOob, PayloadCodecsRoundTrip) {
  ConnInfo c{0x123456, 0xabcdef, 0xdeadbeef, 0x7f0011223344, 8 << 20, {}};
  c.gid[15] = 9;
  auto back = decode_conn_info(encode(c));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->qpn, c.qpn);
  EXPECT_EQ(back->psn, c.psn);
  EXPECT_EQ(back->rkey, c.rkey);
  EXPECT_EQ(back->addr, c.addr);
  EXPECT_EQ(back->length, c.length);
  EXPECT_EQ(back->gid, c.gid);
  auto bad = encode(c);
  bad[0] = 1;  // QPN beyond 24 bits
  EXPECT_FALSE(decode_conn_info(bad));
  EXPECT_FALSE(decode_conn_info(std::vector<uint8_t>(47)));

  BenchParams p;
  p.test = BenchTest::kAtomic;
  p.mode = BenchMode::kLatency;
  p.verify = false;
  p.sizes = {0, 2, 8 << 20};
  p.iterations = 77;
  p.buffer_bytes = 1 << 24;
  auto q = decode_bench_params(encode(p));
  ASSERT_TRUE(q);
  EXPECT_EQ(q->test, p.test);
  EXPECT_EQ(q->mode, p.mode);
  EXPECT_FALSE(q->verify);
  EXPECT_EQ(q->sizes, p.sizes);
  EXPECT_EQ(q->iterations, 77u);
  EXPECT_EQ(q->buffer_bytes, p.buffer_bytes);
  // What the server would have to allocate or loop over is bounded.
  using Mutation = void (*)(BenchParams&);
  const Mutation mutations[] = {
      [](BenchParams& b) { b.sizes = {kMaxBenchMessageBytes + 1}; },
      [](BenchParams& b) { b.sizes.clear(); },
      [](BenchParams& b) { b.depth = 0; },
      [](BenchParams& b) { b.depth = kMaxBenchDepth + 1; },
      [](BenchParams& b) { b.mtu = 1000; },
      [](BenchParams& b) { b.iterations = kMaxBenchIterations + 1; },
  };
  for (Mutation bad_params : mutations) {
    BenchParams b = p;
    bad_params(b);
    EXPECT_EQ(validate(b), EINVAL);
    EXPECT_FALSE(decode_bench_params(encode(b)));
  }
  auto trunc = encode(p);
  trunc.pop_back();
  EXPECT_FALSE(decode_bench_params(trunc));
  auto badtest = encode(p);
  badtest[0] = 9;
  EXPECT_FALSE(decode_bench_params(badtest));

  Step s{3, 1, 4096, 1000};
  auto s2 = decode_step(encode(s));
  ASSERT_TRUE(s2);
  EXPECT_EQ(s2->index, 3u);
  EXPECT_EQ(s2->iterations, 1000u);
  StepAck a{3, 0, -1};
  auto a2 = decode_step_ack(encode(a));
  ASSERT_TRUE(a2);
  EXPECT_EQ(a2->mismatch_at, -1);
}

TEST(BenchOob, ExchangeOverLoopbackTcp) {
  auto l = OobListener::listen("127.0.0.1", 0);
  ASSERT_TRUE(l);
  uint16_t port = l->port();
  ASSERT_NE(port, 0);
  std::thread server([&] {
    auto ch = l->accept(5000);
    ASSERT_TRUE(ch);
    auto m = ch->expect(OobType::kConnInfo, 5000);
    ASSERT_TRUE(m);
    auto c = decode_conn_info(m->payload);
    ASSERT_TRUE(c);
    c->qpn += 1;
    EXPECT_EQ(ch->send(OobType::kConnInfo, encode(*c)), 0);
    const char text[] = "no such test";
    EXPECT_EQ(ch->send(OobType::kError, {reinterpret_cast<const uint8_t*>(text), 12}), 0);
  });
  auto ch = OobChannel::connect("127.0.0.1", port, 5000);
  ASSERT_TRUE(ch);
  ConnInfo c{17, 1, 2, 3, 4, {}};
  ASSERT_EQ(ch->send(OobType::kConnInfo, encode(c)), 0);
  auto m = ch->expect(OobType::kConnInfo, 5000);
  ASSERT_TRUE(m);
  EXPECT_EQ(decode_conn_info(m->payload)->qpn, 18u);
  auto e = ch->expect(OobType::kReady, 5000);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error(), ECONNABORTED);
  EXPECT_EQ(ch->last_peer_error(), "no such test");
  server.join();
  auto closed = ch->recv(2000);  // the server's end is gone
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error(), ECONNRESET);
}

TEST(BenchOob, TimeoutsAndGarbage) {
  auto l = OobListener::listen("127.0.0.1", 0);
  ASSERT_TRUE(l);
  auto none = l->accept(50);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), ETIMEDOUT);
  auto ch = OobChannel::connect("127.0.0.1", l->port(), 2000);
  ASSERT_TRUE(ch);
  auto srv = l->accept(2000);
  ASSERT_TRUE(srv);
  auto silent = ch->recv(50);
  ASSERT_FALSE(silent);
  EXPECT_EQ(silent.error(), ETIMEDOUT);
  // A peer that is not speaking our protocol is rejected by the magic check.
  const char junk[] = "GET / HTTP/1.1\r\n";
  ASSERT_EQ(::write(srv->fd(), junk, sizeof junk - 1), static_cast<ssize_t>(sizeof junk - 1));
  auto bad = ch->recv(2000);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), EPROTO);
  EXPECT_FALSE(OobChannel::connect("not-an-address", 1, 10));
}

TEST(BenchOob, ConnectGivesUpWhenNobodyListens) {
  uint16_t port;
  {
    auto l = OobListener::listen("127.0.0.1", 0);
    ASSERT_TRUE(l);
    port = l->port();
  }
  auto ch = OobChannel::connect("127.0.0.1", port, 200);
  ASSERT_FALSE(ch);
  EXPECT_EQ(ch.error(), ECONNREFUSED);
}

}  // namespace
}  // namespace uroce::tools
