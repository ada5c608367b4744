#!/usr/bin/env bash
# The stand-ins (libmlx5, libefa, librdmacm) under Debian programs that link them with BIND_NOW:
# stubs_load_check dlopen()s them with RTLD_NOW, checks their answers, then loads UCX's modules
# and libfabric (every import must resolve); ucx_info -d and fi_info -l must start cleanly.
# Usage: stubs_load_test.sh <folder with libibverbs.so.1> <stubs_load_check> <system lib folder>
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/abi_lib.sh" "$1"
check=${2:?usage: $0 <lib folder> <stubs_load_check> <system lib folder>}
system_lib=${3:?usage: $0 <lib folder> <stubs_load_check> <system lib folder>}
export UROCE_DEVICES=uroce0=127.0.44.1
failed=0

consumers=()
for consumer in "$system_lib/ucx/libuct_ib.so.0" "$system_lib/ucx/libuct_rdmacm.so.0" \
  "$system_lib/libfabric.so.1"; do
  if [[ -e $consumer ]]; then
    consumers+=("$consumer")
  else
    echo "note: $consumer not installed, not loaded"
  fi
done
timeout 60 "$check" "$ABI_LIB_DIR" "${consumers[@]}" || failed=1

# A program that starts, prints and exits 0; no loader error and no ERROR line on the way.
run_clean() {
  local name=$1
  shift
  if ! command -v "$1" >/dev/null; then
    echo "note: $1 not installed, not run"
    return
  fi
  local out="$ABI_TMP/$name.out"
  timeout 60 "$@" >"$out" 2>&1
  local rc=$?
  if ((rc != 0)) || grep -Eq 'symbol lookup error|undefined symbol|cannot open shared| ERROR ' "$out"; then
    echo "FAIL: $* (exit $rc):"
    grep -E 'symbol|shared|ERROR' "$out" | head -20
    failed=1
  else
    echo "ok: $*"
  fi
}
run_clean ucx_info ucx_info -d
run_clean fi_info fi_info -l
exit $failed
