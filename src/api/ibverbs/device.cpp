// Devices, contexts and the ibv_query_* family.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "api/char_device.h"
#include "api/ibverbs/abi.h"
#include "api/ibverbs/context_state.h"
#include "link/interface_mtu.h"
#include "transport/qp_context.h"

// The header turns these names into macros or inline wrappers; the exported functions are the
// targets of those wrappers and need the plain names.
#undef ibv_query_port

namespace uroce::abi {
namespace {

// Every Device ever listed. Bounded: a device with a name and address seen before is reused, and
// at most kMaxRegistered distinct ones are created per process.
constexpr size_t kMaxRegistered = 4 * kMaxDevices;
std::mutex registry_mu;
std::vector<std::unique_ptr<DeviceConfig>> registry_configs;
std::vector<std::unique_ptr<Device>> registry;

// The made-up sysfs root: as in rdma-core, ibdev_path is <root>/class/infiniband/<name>, and
// ibv_get_sysfs_path names the root, so paths built from either meet in sysfs_answer.
constexpr const char* kSysfsRoot = "/uroce";
constexpr const char* kSysfsPrefix = "/uroce/class/infiniband/";

// The port's active MTU: what the interface serving the device's address can carry.
ibv_mtu mtu_for(const DeviceConfig& cfg) {
  const auto mtu = verbs::mtu_from_bytes(link::roce_mtu_for(cfg.gid)).value_or(verbs::Mtu::k256);
  return static_cast<ibv_mtu>(mtu);
}

// A GUID built from the address (like a NIC's EUI-64 from its MAC): stable across runs and
// distinct per configured address.
__be64 guid_for(const DeviceConfig& cfg) {
  const uint8_t* a = cfg.gid.data() + 12;
  uint8_t b[8] = {0x02, 0x00, a[0], 0xff, 0xfe, a[1], a[2], a[3]};
  if (!cfg.ipv4) {
    uint32_t h = 2166136261u;  // FNV-1a of the IPv6 address
    for (uint8_t x : cfg.gid) h = (h ^ x) * 16777619u;
    b[2] = static_cast<uint8_t>(h >> 24);
    b[5] = static_cast<uint8_t>(h >> 16);
    b[6] = static_cast<uint8_t>(h >> 8);
    b[7] = static_cast<uint8_t>(h);
  }
  __be64 g;
  std::memcpy(&g, b, 8);
  return g;
}

Device* find_or_create(const DeviceConfig& cfg) {
  for (auto& d : registry) {
    if (d->config->name == cfg.name && d->config->gid == cfg.gid) return d.get();
  }
  if (registry.size() >= kMaxRegistered) return nullptr;
  auto c = std::make_unique<DeviceConfig>(cfg);
  auto d = std::make_unique<Device>();
  std::memset(&d->dev, 0, sizeof d->dev);
  d->dev.node_type = IBV_NODE_CA;
  d->dev.transport_type = IBV_TRANSPORT_IB;  // RoCE reports the IB transport
  std::snprintf(d->dev.name, sizeof d->dev.name, "%s", c->name.c_str());
  // One dev_name for all devices: the node `uroce setup` makes (api/char_device.h) then covers
  // any device configured later.
  std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "%s", api::kCharDeviceName);
  std::snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "%s/class/infiniband_verbs/%s", kSysfsRoot,
                d->dev.dev_name);
  std::snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "%s%s", kSysfsPrefix, c->name.c_str());
  d->config = c.get();
  d->guid = guid_for(*c);
  d->active_mtu = mtu_for(*c);
  registry_configs.push_back(std::move(c));
  registry.push_back(std::move(d));
  return registry.back().get();
}

bool config_warned = false;

Context* checked(ibv_context* c) {
  return c ? from(c) : nullptr;
}

// ibv_devinfo reads board_id through ibv_read_sysfs_file(ibdev_path, ...); uroce devices have no
// sysfs directory, so the library answers for the made-up path itself.
bool sysfs_answer(const char* dir, const char* file, std::string* out) {
  size_t n = std::strlen(kSysfsPrefix);
  if (std::strncmp(dir, kSysfsPrefix, n) != 0) return false;
  if (std::strcmp(file, "board_id") == 0) {
    *out = "uroce";
  } else if (std::strcmp(file, "node_type") == 0) {
    *out = "1: CA";
  } else if (std::strcmp(file, "fw_ver") == 0) {
    *out = "0.1.0";
  } else if (std::strcmp(file, "ports/1/link_layer") == 0) {
    *out = "Ethernet";
  } else if (std::strncmp(file, "ports/1/gid_attrs/types/", 24) == 0) {
    // What ibv_query_gid_type says of each entry, in the kernel's words.
    char* end = nullptr;
    long index = std::strtol(file + 24, &end, 10);
    if (end == file + 24 || *end != '\0' || index < 0 || index >= Limits::kGidTableLen) {
      out->clear();
    } else {
      *out = uroce::verbs::gid_type_at(static_cast<int>(index)) == uroce::verbs::GidType::kRoceV1
                 ? "IB/RoCE v1"
                 : "RoCE v2";
    }
  } else {
    out->clear();
    return true;  // our device, but no such attribute
  }
  return true;
}

}  // namespace

void fill_device_attr(const Device& d, ibv_device_attr* a) {
  std::memset(a, 0, sizeof *a);
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "0.1.0");
  a->node_guid = d.guid;
  a->sys_image_guid = d.guid;
  a->max_mr_size = uint64_t{1} << 40;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = 0xffffff;  // no IEEE OUI: a software device, as Linux rxe reports
  a->vendor_part_id = 0;
  a->hw_ver = 0;
  a->max_qp = Limits::kMaxQp;
  a->max_qp_wr = Limits::kMaxQpWr;
  // Memory windows: type 1 and type 2 bound to a QP ("2B", IBA 10.6.7.2.2).
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID |
                        IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_CURR_QP_STATE_MOD |
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
  a->max_sge = Limits::kMaxSge;
  a->max_sge_rd = Limits::kMaxSge;
  a->max_cq = Limits::kMaxCq;
  a->max_cqe = Limits::kMaxCqe;
  a->max_mr = Limits::kMaxMr;
  a->max_mw = Limits::kMaxMw;
  a->max_pd = Limits::kMaxPd;
  a->max_qp_rd_atom = Limits::kMaxRdAtom;
  a->max_res_rd_atom = Limits::kMaxRdAtom * Limits::kMaxQp;
  a->max_qp_init_rd_atom = Limits::kMaxRdAtom;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ah = Limits::kMaxAh;
  a->max_srq = Limits::kMaxSrq;
  a->max_srq_wr = Limits::kMaxSrqWr;
  a->max_srq_sge = Limits::kMaxSge;
  a->max_mcast_grp = Limits::kMaxMcastGrp;
  a->max_mcast_qp_attach = Limits::kMaxMcastQpAttach;
  a->max_total_mcast_qp_attach = Limits::kMaxTotalMcastQpAttach;
  a->max_pkeys = Limits::kPkeyTableLen;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
}

void fill_port_attr(const Device& d, ibv_port_attr* a) {
  std::memset(a, 0, sizeof *a);
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = d.active_mtu;
  a->gid_tbl_len = Limits::kGidTableLen;
  a->port_cap_flags = IBV_PORT_CM_SUP;
  a->max_msg_sz = Limits::kMaxMsgSize;
  a->pkey_tbl_len = Limits::kPkeyTableLen;
  a->max_vl_num = 1;
  a->active_width = 2;   // 4X
  a->active_speed = 32;  // 25 Gb/s per lane: reported as 100 Gb/s; uroce has no fixed rate
  a->phys_state = 5;     // LinkUp
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

}  // namespace uroce::abi

using namespace uroce::abi;

UROCE_IBV_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  ConfigResult cfg = load_device_config();
  std::lock_guard lock(registry_mu);
  if (!cfg.errors.empty() && !config_warned) {
    // Once per process: a tool that lists devices repeatedly should not repeat the warning.
    config_warned = true;
    for (const std::string& e : cfg.errors) {
      std::fprintf(stderr, "uroce: %s: %s\n", cfg.source.c_str(), e.c_str());
    }
  }
  auto** list = static_cast<ibv_device**>(calloc(cfg.devices.size() + 1, sizeof(ibv_device*)));
  if (!list) return fail<ibv_device*>(ENOMEM);
  int n = 0;
  for (const DeviceConfig& c : cfg.devices) {
    Device* d = find_or_create(c);
    if (!d) {
      std::fprintf(stderr, "uroce: device registry full (%zu); ignoring %s\n", kMaxRegistered,
                   c.name.c_str());
      continue;
    }
    list[n++] = &d->dev;
  }
  if (num_devices) *num_devices = n;
  return list;
}

UROCE_IBV_EXPORT void ibv_free_device_list(ibv_device** list) {
  free(list);
}

UROCE_IBV_EXPORT const char* ibv_get_device_name(ibv_device* device) {
  return device ? device->name : nullptr;
}

UROCE_IBV_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
  return device ? from(device)->guid : 0;
}

UROCE_IBV_EXPORT int ibv_get_device_index(ibv_device* device) {
  if (!device) return -1;
  std::lock_guard lock(registry_mu);
  for (size_t i = 0; i < registry.size(); ++i) {
    if (&registry[i]->dev == device) return static_cast<int>(i);
  }
  return -1;
}

UROCE_IBV_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (!device) return fail<ibv_context>(EINVAL);
  auto* ctx = static_cast<Context*>(calloc(1, sizeof(Context)));
  if (!ctx) return fail<ibv_context>(ENOMEM);
  ctx->device = from(device);
  ibv_context& ic = ctx->vctx.context;
  ic.device = device;
  ic.abi_compat = __VERBS_ABI_IS_EXTENDED;
  ctx->vctx.sz = sizeof(verbs_context);
  ic.num_comp_vectors = 1;
  pthread_mutex_init(&ic.mutex, nullptr);
  int err = 0;
  ctx->state = ContextState::create(ctx, &err);
  if (!ctx->state) {
    pthread_mutex_destroy(&ic.mutex);
    free(ctx);
    return fail<ibv_context>(err ? err : ENOMEM);
  }
  ic.cmd_fd = ctx->state->cmd_fd();
  ic.async_fd = ctx->state->async_fd();
  install_ops(&ctx->vctx);
  return &ic;
}

UROCE_IBV_EXPORT int ibv_close_device(ibv_context* context) {
  Context* ctx = checked(context);
  if (!ctx) return EINVAL;
  // What the program left behind goes with the context, as the kernel reclaims it for a
  // hardware NIC (perftest's ib_send_bw client leaves a CQ).
  ctx->state->destroy_all();
  if (ctx->state->verbs() && ctx->state->verbs()->users() != 0) {
    // An object that refused to go (cannot happen with destroy_all's order): keep the state
    // rather than free objects the verbs layer still links to.
    std::fprintf(stderr, "uroce: %s: %u objects outlive their context; leaking it\n",
                 ctx->device->config->name.c_str(), ctx->state->verbs()->users());
    return 0;
  }
  ContextState::destroy(ctx->state);
  pthread_mutex_destroy(&context->mutex);
  free(ctx);
  return 0;
}

UROCE_IBV_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  Context* ctx = checked(context);
  if (!ctx || !attr) return EINVAL;
  fill_device_attr(*ctx->device, attr);
  return 0;
}

// The pre-1.1 ABI's struct ends at `flags`; old callers pass that smaller struct here, so this
// writes only that prefix. New callers reach query_port_ex through verbs_context (the header's
// ___ibv_query_port).
UROCE_IBV_EXPORT int ibv_query_port(ibv_context* context, uint8_t port_num,
                                    struct _compat_ibv_port_attr* port_attr) {
  Context* ctx = checked(context);
  if (!ctx || !port_attr) return EINVAL;
  if (port_num != 1) return EINVAL;
  ibv_port_attr full;
  fill_port_attr(*ctx->device, &full);
  std::memcpy(port_attr, &full, offsetof(ibv_port_attr, port_cap_flags2));
  return 0;
}

UROCE_IBV_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port_num, int index,
                                   ibv_gid* gid) {
  Context* ctx = checked(context);
  if (!ctx || !gid || port_num != 1) return EINVAL;
  if (index < 0 || index >= Limits::kGidTableLen) return EINVAL;
  std::memcpy(gid->raw, ctx->device->config->gid.data(), 16);
  return 0;
}

UROCE_IBV_EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                       ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  Context* ctx = checked(context);
  if (!ctx || !entry || flags != 0) return EINVAL;
  if (entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  if (port_num != 1 || gid_index >= static_cast<uint32_t>(Limits::kGidTableLen)) return EINVAL;
  std::memset(entry, 0, sizeof *entry);
  std::memcpy(entry->gid.raw, ctx->device->config->gid.data(), 16);
  entry->gid_index = gid_index;
  entry->port_num = port_num;
  entry->gid_type =
      uroce::verbs::gid_type_at(static_cast<int>(gid_index)) == uroce::verbs::GidType::kRoceV1
          ? IBV_GID_TYPE_ROCE_V1
          : IBV_GID_TYPE_ROCE_V2;
  entry->ndev_ifindex = 0;
  return 0;
}

UROCE_IBV_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries,
                                              size_t max_entries, uint32_t flags,
                                              size_t entry_size) {
  Context* ctx = checked(context);
  if (!ctx || !entries || flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  if (max_entries < static_cast<size_t>(Limits::kGidTableLen)) return -EINVAL;
  // entry_size may exceed ours (a newer header): entries are that far apart.
  auto* at = reinterpret_cast<uint8_t*>(entries);
  for (int i = 0; i < Limits::kGidTableLen; ++i) {
    int rc =
        _ibv_query_gid_ex(context, 1, static_cast<uint32_t>(i),
                          reinterpret_cast<ibv_gid_entry*>(at + i * entry_size), 0, entry_size);
    if (rc) return -rc;
  }
  return Limits::kGidTableLen;
}

// IBVERBS_PRIVATE_34; driver.h's enum ibv_gid_type_sysfs: 0 = IB/RoCE v1, 1 = RoCE v2.
UROCE_IBV_EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                        int* type) {
  Context* ctx = checked(context);
  if (!ctx || !type || port_num != 1) return EINVAL;
  if (index >= static_cast<unsigned>(Limits::kGidTableLen)) return EINVAL;
  *type = static_cast<int>(uroce::verbs::gid_type_at(static_cast<int>(index)));
  return 0;
}

UROCE_IBV_EXPORT int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index,
                                    __be16* pkey) {
  Context* ctx = checked(context);
  if (!ctx || !pkey || port_num != 1) return EINVAL;
  if (index < 0 || index >= Limits::kPkeyTableLen) return EINVAL;
  *pkey = htons(Limits::kDefaultPkey);
  return 0;
}

UROCE_IBV_EXPORT int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  Context* ctx = checked(context);
  if (!ctx || port_num != 1) return -EINVAL;
  // Full and limited membership of the default partition both match entry 0 (IBA 10.9.3).
  if ((ntohs(pkey) & uroce::transport::kPkeyBaseMask) ==
      (Limits::kDefaultPkey & uroce::transport::kPkeyBaseMask))
    return 0;
  return -ENOENT;
}

UROCE_IBV_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf,
                                         size_t size) {
  if (!dir || !file || !buf || size == 0) return -1;
  std::string answer;
  if (sysfs_answer(dir, file, &answer)) {
    if (answer.empty()) {
      errno = ENOENT;
      return -1;
    }
    std::snprintf(buf, size, "%s", answer.c_str());
    return static_cast<int>(std::strlen(buf));
  }
  // A real sysfs path: behave as rdma-core does (read, strip the trailing newline).
  std::string path = std::string(dir) + "/" + file;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size);
  close(fd);
  if (n <= 0) return -1;
  if (static_cast<size_t>(n) == size) --n;
  buf[n] = '\0';
  if (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
  return static_cast<int>(n);
}

UROCE_IBV_EXPORT const char* ibv_get_sysfs_path() {
  return kSysfsRoot;
}

// IBVERBS_PRIVATE_UROCE: the connection manager of an open context's device, for the drop-in
// librdmacm (docs/cm.md), or null with errno when the device's NIC did not start.
UROCE_IBV_EXPORT uroce::cm::CmService* uroce_private_cm(ibv_context* context) {
  Context* ctx = checked(context);
  if (!ctx) {
    errno = EINVAL;
    return nullptr;
  }
  if (int err = ctx->state->open_error()) {
    errno = err;
    return nullptr;
  }
  return &ctx->state->runtime()->cm();
}
