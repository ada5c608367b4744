#!/usr/bin/env bash
# A short, bounded libFuzzer run of the wire parsers (tests/fuzz/wire_parse_fuzz.cpp), seeded
# with the known-answer packets in tests/vectors/, of the CM MAD codec
# (tests/fuzz/mad_parse_fuzz.cpp), seeded with a MAD of each CM attribute, and of a device fed
# sequences of packets (tests/fuzz/qp_state_fuzz.cpp: guards around its memory, totals, counters).
# The packet parsers get half the time, the device a third, the MAD codec a sixth. Builds with
# clang-14 in its own build dir.
# Usage: scripts/fuzz-smoke.sh [seconds]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
mad_seconds=$((seconds / 6 > 0 ? seconds / 6 : 1))
qp_seconds=$((seconds / 3 > 0 ? seconds / 3 : 1))
wire_seconds=$((seconds - mad_seconds - qp_seconds > 0 ? seconds - mad_seconds - qp_seconds : 1))
dir=${UROCE_FUZZ_DIR:-build/fuzz}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUROCE_WERROR=ON \
  -DUROCE_FUZZ=ON -DUROCE_BENCH=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
ninja -C "$dir" -j "$(nproc)" uroce_wire_fuzz uroce_mad_fuzz uroce_qp_fuzz

# Seeds: each vector's bytes, once as is (mode byte 0) and once with the ICRC recomputed by the
# target (mode byte 1), so mutations get past the ICRC check too.
corpus=$dir/wire_corpus
rm -rf "$corpus" && mkdir -p "$corpus"
python3 - "$corpus" tests/vectors/*.txt <<'PY'
import sys
out, files = sys.argv[1], sys.argv[2:]
n = 0
for f in files:
    for line in open(f):
        if line.startswith("bytes "):
            data = bytes.fromhex(line.split()[1])
            for mode in (0, 1):
                open(f"{out}/seed{n:03d}_{mode}", "wb").write(bytes([mode]) + data)
            n += 1
print(f"fuzz-smoke: {2 * n} seeds from {len(files)} vector file(s)")
PY
# Crashes land in $dir/fuzz-artifacts/; the run fails on the first one.
mkdir -p "$dir/fuzz-artifacts"
"$dir/tests/fuzz/uroce_wire_fuzz" -max_total_time="$wire_seconds" -max_len=4096 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/fuzz-artifacts/" \
  "$corpus" 2>&1 | tail -n 25

# The MAD codec: a valid CM MAD header for each attribute ID (REQ .. SIDR_REP) and zeros after.
mad_corpus=$dir/mad_corpus
rm -rf "$mad_corpus" && mkdir -p "$mad_corpus"
python3 - "$mad_corpus" <<'PY'
import sys
for attr in range(0x10, 0x19):
    mad = bytes([1, 7, 2, 3, 0, 0, 0, 0]) + bytes(8) + attr.to_bytes(2, "big") + bytes(238)
    open(f"{sys.argv[1]}/attr{attr:02x}", "wb").write(mad)
PY
"$dir/tests/fuzz/uroce_mad_fuzz" -max_total_time="$mad_seconds" -max_len=512 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/fuzz-artifacts/" \
  "$mad_corpus" 2>&1 | tail -n 25

# The device: one input per kind of exchange (a WRITE, a SEND, a READ, an atomic, a two-packet
# WRITE, out-of-order packets on the selective-repeat QP, UC and UD SENDs, the device's own READ
# and atomic answered), in the byte layout tests/fuzz/qp_state_fuzz.cpp reads, so that mutations
# start from packets that pass the checks.
qp_corpus=$dir/qp_corpus
rm -rf "$qp_corpus" && mkdir -p "$qp_corpus"
python3 - "$qp_corpus" <<'PY'
import sys, os
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def shaped(which, opcode, psn_delta, keysel, off, length, payload=b"", atomic=(0, 0), aeth=0):
    b = bytes([4, which, opcode, psn_delta & 0xff, keysel]) + off.to_bytes(2, "little")
    b += length.to_bytes(2, "little") + bytes(atomic) + bytes([aeth])
    if opcode in (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b,
                  0x0d, 0x0e, 0x0f, 0x10, 0x16, 0x17):
        b += len(payload).to_bytes(2, "little") + payload
    return b
tick = bytes([3, 0x10, 0])
seeds = {
    "write": shaped(0x40, 0x0a, 0, 0x0c, 0x10, 16, b"\xee" * 16) + tick,
    "send": shaped(0x40, 0x04, 0, 0x0c, 0, 0, b"\x5a" * 40) + tick,
    "read": shaped(0x40, 0x0c, 0, 0x0c, 0x40, 64) + tick,
    "fetch_add": shaped(0x40, 0x14, 0, 0x0c, 0x80, 8, atomic=(1, 2)) + tick,
    "write_first_last": shaped(0x40, 0x06, 0, 0x0c, 0, 300, b"\x11" * 256)
    + shaped(0x40, 0x08, 1, 0x0c, 0, 0, b"\x22" * 44) + tick,
    "sr_out_of_order": shaped(0x41, 0x0a, 2, 0x0c, 0, 8, b"\x33" * 8)
    + shaped(0x41, 0x0a, 0, 0x0c, 8, 8, b"\x44" * 8) + shaped(0x41, 0x0a, 1, 0x0c, 16, 8, b"\x55" * 8) + tick,
    "uc_send": shaped(0x42, 0x04, 0, 0x0c, 0, 0, b"\x66" * 24) + tick,
    "ud_send": shaped(0x43, 0x04, 0, 0x0c, 0, 0, b"\x77" * 24) + tick,
    # The device's own READ (post, kind 1), then a READ response to it.
    "own_read": bytes([1, 0, 0, 0x20, 0, 31, 0]) + tick + shaped(0x00, 0x10, 0, 0x0c, 0, 0, b"\x88" * 32, aeth=1) + tick,
    "own_atomic": bytes([1, 0, 1, 0x40, 0, 7, 0]) + tick + shaped(0x00, 0x12, 0, 0x0c, 0, 0, aeth=1) + tick,
}
for name, data in seeds.items():
    open(f"{out}/{name}", "wb").write(data)
print(f"fuzz-smoke: {len(seeds)} device seeds")
PY
"$dir/tests/fuzz/uroce_qp_fuzz" -max_total_time="$qp_seconds" -max_len=2048 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/fuzz-artifacts/" \
  "$qp_corpus" 2>&1 | tail -n 25
