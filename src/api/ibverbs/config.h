#pragma once
// Which devices the drop-in libibverbs shows and which address each one binds.
//
// Sources, first match wins:
//   1. $UROCE_DEVICES: "name=address[,name=address...]", e.g. "uroce0=127.0.0.1".
//   2. The file named by $UROCE_CONFIG, else /etc/uroce/devices.conf: one "name address" or
//      "name=address" per line; '#' starts a comment.
//   3. Nothing configured: one device, uroce0 on 127.0.0.1.
// Addresses are IPv4 or IPv6 literals; the device's GID 0 is the RoCEv2 GID of the address.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "api/uroce.h"
#include "common/types.h"

namespace uroce::abi {

inline constexpr size_t kMaxDevices = 16;
inline constexpr size_t kMaxDeviceNameLen = 63;  // IBV_SYSFS_NAME_MAX - 1
inline constexpr const char* kDefaultConfigPath = "/etc/uroce/devices.conf";

struct DeviceConfig {
  std::string name;
  std::string address;  // as written, for messages
  Gid gid{};
  bool ipv4 = false;
};

struct ConfigResult {
  std::vector<DeviceConfig> devices;
  std::vector<std::string> errors;  // one line per rejected entry, for the caller to report
  std::string source;               // "UROCE_DEVICES", a file path, or "default"
};

// Parses the "name=address,..." form. Rejected entries (bad name, bad address, duplicate name
// or address, more than kMaxDevices) are listed in `errors`; the rest are kept.
ConfigResult parse_device_list(std::string_view text);
// Parses the file form.
ConfigResult parse_config_file(std::string_view text);
// Applies the precedence above, reading the environment and the file system.
ConfigResult load_device_config();

// Congestion control and loss recovery for every QP this process creates, from UROCE_CC,
// UROCE_CC_LINE_GBPS, UROCE_CC_CNP_INTERVAL_US and UROCE_LOSS_RECOVERY (api/uroce.h). Read once;
// a bad value is reported once on stderr and its default kept.
const QpTransportOptions& qp_transport_options();

}  // namespace uroce::abi
