#!/usr/bin/env bash
# Builds uroce twice and runs every test in each build:
#   build/release: optimised, warnings as errors;
#   build/asan:    AddressSanitizer + UndefinedBehaviorSanitizer;
# then fuzzes the wire parsers for 30 s (scripts/fuzz-smoke.sh, build/fuzz).
# Usage: scripts/test.sh [--quick]   (--quick: the release build only)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
run_build() {
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DUROCE_WERROR=ON "$@" >/dev/null
  ninja -C "$dir" -j "$jobs"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 600
}
run_build build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [[ "${1:-}" != "--quick" ]]; then
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    run_build build/asan -DCMAKE_BUILD_TYPE=Debug -DUROCE_SANITIZE=address,undefined -DUROCE_BENCH=OFF
  # A bounded libFuzzer run of the wire parsers (clang-14, its own build dir, ~30 s).
  scripts/fuzz-smoke.sh 30
fi
