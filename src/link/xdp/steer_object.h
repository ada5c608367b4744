#pragma once
// The compiled XDP program of the AF_XDP link (steer.bpf.c), an ELF object for libbpf's
// bpf_object__open_mem, embedded at build time (src/CMakeLists.txt, cmake/embed_bytes.cmake).
#include <cstddef>

namespace uroce::link::xdp {

extern const unsigned char kSteerObject[];
extern const size_t kSteerObjectBytes;

}  // namespace uroce::link::xdp
