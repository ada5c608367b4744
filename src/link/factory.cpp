#include "link/factory.h"

#include <cerrno>
#include <cstring>

#include "link/capture_link.h"
#include "wire/pcap.h"

namespace uroce::link {

std::optional<LinkKind> parse_link_kind(std::string_view name) {
  if (name == "udp") return LinkKind::kUdp;
  if (name == "raw") return LinkKind::kRaw;
  if (name == "xdp") return LinkKind::kXdp;
  return std::nullopt;
}

const char* link_kind_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::kUdp:
      return "udp";
    case LinkKind::kRaw:
      return "raw";
    case LinkKind::kXdp:
      return "xdp";
  }
  return "?";
}

Result<std::unique_ptr<Link>> open_link(const LinkOptions& options, std::string* error) {
  auto fail = [&](int err, std::string sentence) -> Result<std::unique_ptr<Link>> {
    if (error) *error = std::move(sentence) + ": " + std::strerror(err);
    return Err(err);
  };
  std::unique_ptr<Link> link;
  switch (options.kind) {
    case LinkKind::kUdp: {
      UdpLinkOptions udp = options.udp;
      udp.address = options.address;
      std::string why;
      auto l = UdpLink::open(udp, &why);
      if (!l)
        return fail(l.error(), "cannot open UDP port " + std::to_string(udp.port) + " on " +
                                   udp.address +
                                   (udp.shared_address ? " shared with other processes" : "") +
                                   (why.empty() ? "" : " (" + why + ")"));
      link = std::move(*l);
      break;
    }
    case LinkKind::kRaw: {
      RawLinkOptions raw = options.raw;
      raw.address = options.address;
      auto l = RawLink::open(raw);
      if (!l) {
        const std::string where =
            raw.interface.empty() ? "the interface holding " + raw.address : raw.interface;
        return fail(l.error(), "cannot open a raw Ethernet link (AF_PACKET, needs root) on " +
                                   where + (raw.roce_v1 ? " for RoCE v1" : ""));
      }
      link = std::move(*l);
      break;
    }
    case LinkKind::kXdp: {
      XdpLinkOptions xdp = options.xdp;
      xdp.frames = options.raw;
      xdp.frames.address = options.address;
      const std::string where = xdp.frames.interface.empty()
                                    ? "the interface holding " + options.address
                                    : xdp.frames.interface;
#ifdef UROCE_HAVE_XDP
      std::string step;
      auto l = XdpLink::open(xdp, &step);
      if (!l)
        return fail(l.error(),
                    "cannot open an AF_XDP link (needs root and an interface that "
                    "takes an XDP program) on " +
                        where + (step.empty() ? "" : ": " + step));
      link = std::move(*l);
      break;
#else
      return fail(EPROTONOSUPPORT, "cannot open an AF_XDP link on " + where +
                                       ": this build has none (configured with UROCE_XDP=OFF)");
#endif
    }
  }
  if (!link)
    return fail(EINVAL, "unknown link kind " + std::to_string(static_cast<unsigned>(options.kind)));
  if (!options.pcap_path.empty()) {
    auto pcap = std::make_shared<wire::PcapWriter>();
    if (int err = pcap->open(options.pcap_path))
      return fail(err, "cannot write " + options.pcap_path);
    link = std::make_unique<CaptureLink>(std::move(link), std::move(pcap));
  }
  return link;
}

}  // namespace uroce::link
