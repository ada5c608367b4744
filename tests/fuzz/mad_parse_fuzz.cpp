// libFuzzer target for the CM MAD codec (src/wire/mad.h). Properties checked on every input:
//  - no parser crashes, reads out of bounds (ASan) or hits undefined behaviour (UBSan);
//  - a MAD that parses rebuilds into bytes that parse to the same fields, and rebuilding those
//    gives the same bytes again (the builder zeroes only reserved bits, which the parser ignores);
//  - the rdma_cm header and service-ID parsers agree with their writers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/bytes.h"
#include "wire/mad.h"

namespace {

using namespace uroce;
using namespace uroce::wire;

void check(bool ok) {
  if (!ok) std::abort();  // a broken property: libFuzzer saves the input
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy, so ASan sees any read past the end.
  std::vector<uint8_t> in(data, data + size);
  (void)parse_mad_header(in);

  auto mad = parse_cm_mad(in);
  if (mad.ok()) {
    const auto built = build_cm_mad(*mad);
    auto again = parse_cm_mad(built);
    check(again.ok());
    check(*again == *mad);
    check(build_cm_mad(*again) == built);
    // The header and every field outside reserved bits survive as received.
    check(std::memcmp(built.data(), in.data(), 18) == 0);
    check(std::memcmp(built.data() + 20, in.data() + 20, 4) == 0);
  }

  auto cma = parse_cma_header(in);
  if (cma.ok()) {
    std::vector<uint8_t> out(kCmaHeaderBytes);
    write_cma_header(*cma, out);
    auto back = parse_cma_header(out);
    check(back.ok());
    check(back->ip_version == cma->ip_version && back->src_port == cma->src_port);
    check(back->src_ipv4() == cma->src_ipv4() && back->dst_ipv4() == cma->dst_ipv4());
    if (cma->ip_version == 6) check(*back == *cma);
  }

  if (size >= 8) {
    const uint64_t sid = load_be64(data);
    auto parsed = parse_rdma_service_id(sid);
    if (parsed.ok()) check(rdma_service_id(parsed->port_space, parsed->port) == sid);
  }
  return 0;
}
