// Loads the stand-ins (libmlx5.so.1, libefa.so.1) and librdmacm.so.1 from the folder in argv[1]
// with RTLD_NOW and checks that they answer "not supported" the way rdma-core does for a device
// that is not theirs. Every further argument is a Debian library that links the stand-ins
// (UCX's modules, libfabric): it must load with RTLD_NOW, so none of its imports is missing,
// and bind to the stand-ins of argv[1], not to Debian's.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                     \
  do {                                       \
    if (!(cond)) {                           \
      fprintf(stderr, "FAIL: " __VA_ARGS__); \
      fprintf(stderr, "\n");                 \
      ++failures;                            \
    }                                        \
  } while (0)

static void* open_stand_in(const char* dir, const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(handle != NULL, "dlopen(%s, RTLD_NOW): %s", path, dlerror());
  return handle;
}

static void* symbol(void* handle, const char* name, const char* version) {
  void* address = version ? dlvsym(handle, name, version) : dlsym(handle, name);
  CHECK(address != NULL, "%s@%s not found", name, version ? version : "default");
  return address;
}

static void check_mlx5(void* lib) {
  bool (*is_supported)(struct ibv_device*) = symbol(lib, "mlx5dv_is_supported", "MLX5_1.8");
  if (is_supported) CHECK(!is_supported(NULL), "mlx5dv_is_supported returned true");

  int (*query_device)(struct ibv_context*, struct mlx5dv_context*) =
      symbol(lib, "mlx5dv_query_device", "MLX5_1.0");
  struct mlx5dv_context attrs;
  if (query_device) {
    int rc = query_device(NULL, &attrs);
    CHECK(rc == EOPNOTSUPP, "mlx5dv_query_device returned %d, want EOPNOTSUPP", rc);
  }
  // Both versions of mlx5dv_init_obj, as programs built before and after rdma-core 1.2 bind them.
  const char* init_obj_versions[] = {"MLX5_1.0", "MLX5_1.2"};
  for (int i = 0; i < 2; ++i) {
    int (*init_obj)(struct mlx5dv_obj*, uint64_t) =
        symbol(lib, "mlx5dv_init_obj", init_obj_versions[i]);
    if (init_obj) {
      int rc = init_obj(NULL, MLX5DV_OBJ_QP);
      CHECK(rc == EOPNOTSUPP, "mlx5dv_init_obj@%s returned %d", init_obj_versions[i], rc);
    }
  }
  struct ibv_context* (*open_device)(struct ibv_device*, struct mlx5dv_context_attr*) =
      symbol(lib, "mlx5dv_open_device", "MLX5_1.7");
  if (open_device) {
    errno = 0;
    CHECK(open_device(NULL, NULL) == NULL && errno == EOPNOTSUPP,
          "mlx5dv_open_device: want NULL with errno EOPNOTSUPP, errno %d", errno);
  }
  ssize_t (*get_event)(struct mlx5dv_devx_event_channel*, struct mlx5dv_devx_async_event_hdr*,
                       size_t) = symbol(lib, "mlx5dv_devx_get_event", "MLX5_1.11");
  if (get_event) {
    errno = 0;
    ssize_t rc = get_event(NULL, NULL, 0);
    CHECK(rc == -1 && errno == EOPNOTSUPP, "mlx5dv_devx_get_event: %zd errno %d", rc, errno);
  }
}

static void check_efa(void* lib) {
  int (*query_device)(struct ibv_context*, struct efadv_device_attr*, uint32_t) =
      symbol(lib, "efadv_query_device", "EFA_1.1");
  struct efadv_device_attr attrs;
  if (query_device) {
    int rc = query_device(NULL, &attrs, sizeof attrs);
    CHECK(rc == EOPNOTSUPP, "efadv_query_device returned %d, want EOPNOTSUPP", rc);
  }
  struct ibv_cq_ex* (*create_cq)(struct ibv_context*, struct ibv_cq_init_attr_ex*,
                                 struct efadv_cq_init_attr*, uint32_t) =
      symbol(lib, "efadv_create_cq", "EFA_1.2");
  if (create_cq) {
    errno = 0;
    CHECK(create_cq(NULL, NULL, NULL, 0) == NULL && errno == EOPNOTSUPP,
          "efadv_create_cq: want NULL with errno EOPNOTSUPP, errno %d", errno);
  }
}

static void check_rdmacm(void* lib) {
  // librdmacm works now (docs/cm.md): with the one device of UROCE_DEVICES, UCX's start-up calls
  // get a pollable channel and the device; what is not built yet still says EOPNOTSUPP.
  void* (*create_channel)(void) = symbol(lib, "rdma_create_event_channel", "RDMACM_1.0");
  void (*destroy_channel)(void*) = symbol(lib, "rdma_destroy_event_channel", "RDMACM_1.0");
  if (create_channel && destroy_channel) {
    int* channel = create_channel();  // struct rdma_event_channel { int fd; }
    CHECK(channel != NULL && *channel >= 0, "rdma_create_event_channel: errno %d", errno);
    if (channel) destroy_channel(channel);
  }
  struct ibv_context** (*get_devices)(int*) = symbol(lib, "rdma_get_devices", "RDMACM_1.0");
  void (*free_devices)(struct ibv_context**) = symbol(lib, "rdma_free_devices", "RDMACM_1.0");
  if (get_devices && free_devices) {
    int count = -1;
    struct ibv_context** list = get_devices(&count);
    CHECK(list != NULL && count == 1 && list[0] != NULL && list[1] == NULL,
          "rdma_get_devices: count %d", count);
    if (list) free_devices(list);
  }
  int (*init_qp_attr)(void*, void*, int*) = symbol(lib, "rdma_init_qp_attr", "RDMACM_1.2");
  if (init_qp_attr) {
    errno = 0;
    int rc = init_qp_attr(NULL, NULL, NULL);
    CHECK(rc == -1 && errno == EINVAL, "rdma_init_qp_attr: %d errno %d", rc, errno);
  }
  int (*join)(void*, void*, void*) = symbol(lib, "rdma_join_multicast", "RDMACM_1.0");
  if (join) {
    errno = 0;
    int rc = join(NULL, NULL, NULL);
    CHECK(rc == -1 && errno == EINVAL, "rdma_join_multicast: %d errno %d", rc, errno);
  }
  // rsockets are real (src/api/rdmacm/rsocket.cpp): a stream socket is a descriptor that closes,
  // and a descriptor that is not an rsocket is EBADF.
  int (*rsocket)(int, int, int) = symbol(lib, "rsocket", "RDMACM_1.0");
  int (*rclose)(int) = symbol(lib, "rclose", "RDMACM_1.0");
  if (rsocket && rclose) {
    errno = 0;
    int fd = rsocket(2 /* AF_INET */, 1 /* SOCK_STREAM */, 0);
    CHECK(fd >= 0, "rsocket: %d errno %d", fd, errno);
    if (fd >= 0) CHECK(rclose(fd) == 0, "rclose: errno %d", errno);
  }
  ssize_t (*rsend)(int, const void*, size_t, int) = symbol(lib, "rsend", "RDMACM_1.0");
  if (rsend) {
    errno = 0;
    ssize_t rc = rsend(0, "x", 1, 0);
    CHECK(rc == -1 && errno == EBADF, "rsend on stdin: %zd errno %d", rc, errno);
  }
}

// The consumers must have bound to the stand-ins loaded above (the loader reuses a loaded
// object with the same soname), never to a second copy such as Debian's.
struct loaded_copy_search {
  const char* dir;
  const char* name;
  int foreign_copies;
};

static int find_foreign_copy(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct loaded_copy_search* search = data;
  const char* base = strrchr(info->dlpi_name, '/');
  if (base == NULL || strcmp(base + 1, search->name) != 0) return 0;
  if (strncmp(info->dlpi_name, search->dir, strlen(search->dir)) != 0) {
    fprintf(stderr, "FAIL: %s loaded from %s\n", search->name, info->dlpi_name);
    ++search->foreign_copies;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <folder with the stand-ins> [Debian library...]\n", argv[0]);
    return 2;
  }
  const char* dir = argv[1];
  void* mlx5 = open_stand_in(dir, "libmlx5.so.1");
  void* efa = open_stand_in(dir, "libefa.so.1");
  void* rdmacm = open_stand_in(dir, "librdmacm.so.1");
  if (mlx5) check_mlx5(mlx5);
  if (efa) check_efa(efa);
  if (rdmacm) check_rdmacm(rdmacm);

  for (int i = 2; i < argc; ++i) {
    void* consumer = dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL);
    CHECK(consumer != NULL, "dlopen(%s, RTLD_NOW): %s", argv[i], dlerror());
    if (consumer == NULL) continue;
    printf("loaded %s\n", argv[i]);
  }
  const char* stand_ins[] = {"libmlx5.so.1", "libefa.so.1", "librdmacm.so.1"};
  for (int i = 0; i < 3; ++i) {
    struct loaded_copy_search search = {dir, stand_ins[i], 0};
    dl_iterate_phdr(find_foreign_copy, &search);
    failures += search.foreign_copies;
  }
  if (failures) return 1;
  printf("stand-ins load and answer EOPNOTSUPP\n");
  return 0;
}
