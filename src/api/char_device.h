#pragma once
// The character-device node that middleware looks for before it uses a verbs device.
//
// UCX (uct_ib_device_is_accessible) lists an IB device only if /dev/infiniband/<dev_name> stats as
// a character device the process may read and write. uroce has no kernel module, so nothing is
// ever opened through that node: `uroce setup` makes it a symlink to /dev/null, which grants
// nothing that /dev/null does not already grant everyone. Every uroce device carries the same
// dev_name, so one node serves whatever UROCE_DEVICES or devices.conf configures later.
namespace uroce::api {

inline constexpr const char* kCharDeviceDir = "/dev/infiniband";
inline constexpr const char* kCharDeviceName = "uroce";
inline constexpr const char* kCharDevicePath = "/dev/infiniband/uroce";
inline constexpr const char* kCharDeviceTarget = "/dev/null";

}  // namespace uroce::api
