// Topologies in JSON (fabric/topology.h): the same keys as the text form, the same results, and
// errors that name what is wrong.
#include <gtest/gtest.h>

#include "fabric/topology.h"

namespace uroce::fabric {
namespace {

void expect_same(const TopologySpec& a, const TopologySpec& b) {
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.hosts, b.hosts);
  EXPECT_EQ(a.left, b.left);
  EXPECT_EQ(a.right, b.right);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.link.rate_bps, b.link.rate_bps);
  EXPECT_EQ(a.link.delay_ns, b.link.delay_ns);
  EXPECT_DOUBLE_EQ(a.link.bit_error_rate, b.link.bit_error_rate);
  EXPECT_EQ(a.bottleneck_bps, b.bottleneck_bps);
  EXPECT_EQ(a.sw.buffer_bytes, b.sw.buffer_bytes);
  EXPECT_EQ(a.sw.ecn.kmin_bytes, b.sw.ecn.kmin_bytes);
  EXPECT_EQ(a.sw.ecn.kmax_bytes, b.sw.ecn.kmax_bytes);
  EXPECT_DOUBLE_EQ(a.sw.ecn.pmax, b.sw.ecn.pmax);
  EXPECT_EQ(a.sw.ecn.enabled, b.sw.ecn.enabled);
  EXPECT_EQ(a.sw.xoff_bytes, b.sw.xoff_bytes);
  EXPECT_EQ(a.sw.lossless_mask, b.sw.lossless_mask);
}

TEST(FabricTopologyJson, MeansWhatTheTextFormMeans) {
  auto text = parse_topology(
      "fattree k=8 rate=100G delay=1.5us buffer=12MB kmin=100KB kmax=400KB pmax=0.2 ber=1e-12 "
      "ecn=0 xoff=300KB lossless=8");
  ASSERT_TRUE(text.ok()) << text.error();
  // Strings with suffixes, and numbers in base units (b/s, ns, bytes), mixed.
  auto json = parse_topology(R"({
      "shape": "fattree", "k": 8, "rate": "100G", "delay": 1500, "buffer": "12MB",
      "kmin": 102400, "kmax": "400KB", "pmax": 0.2, "ber": 1e-12, "ecn": false,
      "xoff": "300KB", "lossless": 8})");
  ASSERT_TRUE(json.ok()) << json.error();
  expect_same(*json, *text);

  auto d = parse_topology_json(
      R"({"shape": "dumbbell", "left": 3, "right": 2, "rate": 40e9, "bottleneck": "10G"})");
  ASSERT_TRUE(d.ok()) << d.error();
  expect_same(*d, *parse_topology("dumbbell left=3 right=2 rate=40G bottleneck=10G"));

  // And it builds: a star of 4 from JSON is a star of 4.
  EventLoop loop(1);
  SwitchFabric f(loop);
  auto t = build_topology(f, *parse_topology(R"( {"shape": "star", "hosts": 4} )"));
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t->hosts.size(), 4u);
  EXPECT_EQ(t->switches.size(), 1u);
}

TEST(FabricTopologyJson, RejectsWhatItCannotMean) {
  for (const char* bad : {
           "{",                                       // not JSON
           "[1, 2]",                                  // not an object
           R"({"hosts": 4})",                         // no shape
           R"({"shape": "ring"})",                    // unknown shape
           R"({"shape": 3})",                         // shape not a string
           R"({"shape": "star", "hosts": -1})",       // negative count
           R"({"shape": "star", "hosts": 2.5})",      // fractional count
           R"({"shape": "star", "rate": "fast"})",    // bad suffix
           R"({"shape": "star", "colour": "blue"})",  // unknown key
           R"({"shape": "star", "rate": null})",      // null
           R"({"shape": "star", "rate": ["100G"]})",  // array
           R"({"shape": "fattree", "pmax": 2})",      // out of range
       }) {
    auto r = parse_topology(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_FALSE(r.error().empty());
    }
  }
  auto r = parse_topology_json(R"({"shape": "star", "colour": "blue"})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("colour"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace uroce::fabric
