#pragma once
// Standard topologies on a SwitchFabric, built in code or from a one-line text description:
//
//   star hosts=8 rate=100G delay=1us
//   dumbbell left=4 right=4 rate=100G bottleneck=40G delay=1us
//   fattree k=8 rate=100G delay=1us buffer=12MB kmin=100KB kmax=400KB pmax=0.2 ber=1e-12
//
// The same in JSON: {"shape": "star", "hosts": 8, "rate": "100G", "delay": "1us"} (see
// parse_topology_json). Keys are optional except the shape's own (hosts, left/right, k). Sizes take
// K/M/G suffixes (bytes for buffers, bits per second for rates: "100G" is 100 Gb/s), times
// ns/us/ms. '#' starts a comment. Hosts get the IPv4-mapped GIDs 10.0.x.y in host order.
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "fabric/switch_fabric.h"

namespace uroce::fabric {

struct Topology {
  std::vector<HostId> hosts;
  std::vector<NodeId> switches;  // star: [sw]; dumbbell: [left, right]; fat tree: edge, agg, core
};

struct TopologySpec {
  enum class Shape { kStar, kDumbbell, kFatTree } shape = Shape::kStar;
  uint32_t hosts = 2;            // star
  uint32_t left = 1, right = 1;  // dumbbell
  uint32_t k = 4;                // fat tree: k pods, k^3/4 hosts, 5k^2/4 switches
  LinkParams link;               // host links and fabric links
  uint64_t bottleneck_bps = 0;   // dumbbell's switch-to-switch link; 0 = link.rate_bps
  SwitchParams sw;
};

// Parses the text form, or the JSON form when the text starts with '{'; the error is a message
// naming the bad token.
Result<TopologySpec, std::string> parse_topology(std::string_view text);
// The JSON form: one object with "shape" and the text form's keys, e.g.
//   {"shape": "fattree", "k": 8, "rate": "100G", "delay": "1us", "buffer": "12MB",
//    "kmin": 102400, "kmax": "400KB", "pmax": 0.2, "ecn": true}
// A string value takes the text form's suffixes; a number is in base units (b/s, ns, bytes); a
// boolean is 1/0. Unknown keys are errors.
Result<TopologySpec, std::string> parse_topology_json(std::string_view text);

Topology build_star(SwitchFabric& f, uint32_t hosts, const LinkParams& link,
                    const SwitchParams& sw = {});
Topology build_dumbbell(SwitchFabric& f, uint32_t left, uint32_t right, const LinkParams& link,
                        const LinkParams& bottleneck, const SwitchParams& sw = {});
// k-ary fat tree (Al-Fares et al., SIGCOMM 2008): k even, 4 <= k <= 64.
Topology build_fat_tree(SwitchFabric& f, uint32_t k, const LinkParams& link,
                        const SwitchParams& sw = {});
// Builds and finalizes. The error is a message (bad shape, or the buffer can't hold headroom).
Result<Topology, std::string> build_topology(SwitchFabric& f, const TopologySpec& spec);

Gid host_gid(uint32_t index);

}  // namespace uroce::fabric
