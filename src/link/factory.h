#pragma once
// Extension point: a new link kind (docs/architecture.md).
// The one place a link is chosen by configuration. Everything that opens a NIC on a real network
// (api::open_nic, and through it the libibverbs ABI and the `uroce` command line) comes here, so a
// new kind of link (raw Ethernet, AF_XDP, an intra-host channel) plugs in with a LinkKind value, a
// name in parse_link_kind/link_kind_name and a case in open_link, and nothing in its callers.
//
// The fabric's links (fabric_link.h, sim_link.h) are not here: they belong to a simulated network
// in virtual time and are built by the simulator that owns it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "link/link.h"
#include "link/raw_link.h"
#include "link/udp_link.h"
#include "link/xdp_link.h"

namespace uroce::link {

enum class LinkKind : uint8_t {
  kUdp,  // RoCEv2 over UDP sockets (udp_link.h)
  kRaw,  // RoCEv2 or RoCE v1 in Ethernet frames over an AF_PACKET socket (raw_link.h); root
  kXdp,  // the same frames over an AF_XDP socket and an XDP program (xdp_link.h); root
};

// "udp" -> kUdp, "raw" -> kRaw, "xdp" -> kXdp; nullopt for a name no kind has.
std::optional<LinkKind> parse_link_kind(std::string_view name);
const char* link_kind_name(LinkKind kind);

struct LinkOptions {
  LinkKind kind = LinkKind::kUdp;
  std::string address;  // the local IPv4 or IPv6 address, which becomes the device's GID
  // kUdp's tuning; `address` above overrides udp.address.
  UdpLinkOptions udp;
  // kRaw's, and kXdp's frame settings (interface, VLAN, RoCE v1, batches); `address` above
  // overrides raw.address.
  RawLinkOptions raw;
  // kXdp's own (queue, UMEM and ring sizes, zero copy); its `frames` is replaced by `raw`.
  XdpLinkOptions xdp;
  // Non-empty: wrap the link in a CaptureLink (capture_link.h) writing this pcap file.
  std::string pcap_path;
};

// Opens the link `options` describe. Errors are errno values: the link's own (udp_link.h:
// EINVAL for a bad or wildcard address, EADDRINUSE, EADDRNOTAVAIL, ...), EINVAL for a kind this
// build does not know, EPROTONOSUPPORT for kXdp in a build without it (UROCE_XDP=OFF), or the error
// of creating the capture file. `error`, when given, gets a sentence for a user ("cannot open UDP
// port 4791 on 10.0.0.1: Address already in use").
Result<std::unique_ptr<Link>> open_link(const LinkOptions& options, std::string* error = nullptr);

}  // namespace uroce::link
