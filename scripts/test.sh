#!/usr/bin/env bash
# Builds uroce and runs its tests:
#   build/release: optimised, warnings as errors: every test, end-to-end ones included, and
#                  10,000 seeds of each seeded-simulation test;
#   build/asan:    AddressSanitizer + UndefinedBehaviorSanitizer: every test but those labelled
#                  `slow` (long end-to-end runs of perftest and namespaces, timing-bound under ASan);
#                  the GoogleTest files themselves without UBSan's checks (cmake/warnings.cmake);
#   build/tsan:    ThreadSanitizer over the threaded parts (CQ, MR deregistration and window
#                  deallocation against a progress pass, the progress engine, the out-of-band
#                  exchange, the CM's calls and event thread);
# then fuzzes the wire parsers for 30 s (scripts/fuzz-smoke.sh, build/fuzz).
# Usage: scripts/test.sh [--quick]   (--quick: the release build only)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
configure_and_build() {
  local dir=$1 target=$2; shift 2
  cmake -S . -B "$dir" -G Ninja -DUROCE_WERROR=ON "$@" >/dev/null
  ninja -C "$dir" -j "$jobs" $target
}
# CI's budget is 15 minutes on 2 cores: each phase says when it ended, so a slow one shows.
phase_done() { echo "== scripts/test.sh: $1 done at ${SECONDS} s"; }
run_tests() {
  local dir=$1; shift
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 600 "$@"
}
# Optimised as released, without debug info: -g costs about a quarter of the compile time of the
# test files, and the release tests need none (configure build/release yourself to profile).
configure_and_build build/release all -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG"
phase_done "release build"
# The seeded simulation runs 10,000 seeds of each recovery mode here (Sim.ManySeeds*); the ASan
# build keeps the tests' own counts, at which it already pays the most of any test.
UROCE_SIM_SEEDS=10000 run_tests build/release
phase_done "release tests"
[[ "${1:-}" == "--quick" ]] && exit 0

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1
configure_and_build build/asan all -DCMAKE_BUILD_TYPE=Debug -DUROCE_SANITIZE=address,undefined \
  -DUROCE_BENCH=OFF
phase_done "ASan+UBSan build"
run_tests build/asan -LE slow
phase_done "ASan+UBSan tests"

# uroce_threaded_tests: the unit test files with threads in them (tests/CMakeLists.txt), not all.
configure_and_build build/tsan uroce_threaded_tests -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DUROCE_SANITIZE=thread -DUROCE_BENCH=OFF
TSAN_OPTIONS=halt_on_error=1 build/tsan/tests/uroce_threaded_tests \
  --gtest_filter='VerbsCq.*:VerbsMr.*:VerbsMw.*:UdpLinkProgress*:*ProgressEngine*:BenchOob.*:CmGsi.*'

phase_done "TSan build and tests"

# A bounded libFuzzer run of the wire parsers, the MAD codec and a device (clang-14, own dir).
scripts/fuzz-smoke.sh 30
phase_done "fuzzing"
