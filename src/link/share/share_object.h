#pragma once
// The compiled SK_REUSEPORT program of a shared address (share.bpf.c), an ELF object for
// libbpf's bpf_object__open_mem, embedded at build time (src/CMakeLists.txt,
// cmake/embed_bytes.cmake).
#include <cstddef>

namespace uroce::link::share {

extern const unsigned char kShareObject[];
extern const size_t kShareObjectBytes;

}  // namespace uroce::link::share
