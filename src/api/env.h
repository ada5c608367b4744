#pragma once
// Settings the drop-in libraries read from the environment (docs/ibverbs.md, docs/cm.md): a
// decimal count, anything else or nothing leaving the default.
#include <cstdint>
#include <cstdlib>

namespace uroce::api {

// A count from the environment variable `name`, at most `cap`.
inline uint64_t count_from_env(const char* name, uint64_t default_value, uint64_t cap) {
  uint64_t n = default_value;
  if (const char* s = std::getenv(name); s && *s) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s, &end, 10);
    if (end && *end == '\0' && s[0] != '-') n = v < cap ? v : cap;
  }
  return n;
}

// The longest a microsecond setting may ask for: one second.
inline constexpr uint64_t kMaxEnvUs = 1'000'000;

// A microsecond count from the environment, at most kMaxEnvUs, in nanoseconds.
inline uint64_t ns_from_env(const char* name, uint64_t default_us) {
  return count_from_env(name, default_us, kMaxEnvUs) * 1000;
}

}  // namespace uroce::api
