#!/usr/bin/env bash
# Builds uroce twice and runs every test in each build:
#   build/release: optimised, warnings as errors;
#   build/asan:    AddressSanitizer + UndefinedBehaviorSanitizer.
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
fi
