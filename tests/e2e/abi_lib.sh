# Shared helpers for the abi_* end-to-end scripts (sourced, not run).
# Usage in a script: source abi_lib.sh "$1"   (the folder holding the drop-in libibverbs.so.1)

ABI_LIB_DIR=${1:?usage: $0 <folder with libibverbs.so.1>}
if [[ ! -e "$ABI_LIB_DIR/libibverbs.so.1" ]]; then
  echo "FAIL: $ABI_LIB_DIR/libibverbs.so.1 not built" >&2
  exit 1
fi
export LD_LIBRARY_PATH="$ABI_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# A sanitizer build of the library runs inside binaries built without it: its runtimes must be
# loaded first, and leak checking is off because the leaks would be the tools' own.
abi_sanitizer_runtimes=$(ldd "$ABI_LIB_DIR/libibverbs.so.1" 2>/dev/null |
  awk '/lib(asan|ubsan)\.so/ { print $3 }' | sort | tr '\n' ' ')
if [[ -n ${abi_sanitizer_runtimes// /} ]]; then
  export LD_PRELOAD="$abi_sanitizer_runtimes${LD_PRELOAD:+ $LD_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
# Binaries are BIND_NOW already; make it explicit so a missing symbol fails at start-up.
export LD_BIND_NOW=1

ABI_TMP=$(mktemp -d "${TMPDIR:-/tmp}/uroce-abi.XXXXXX")
ABI_PIDS=()
abi_cleanup() {
  local pid
  for pid in "${ABI_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${ABI_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  rm -rf "$ABI_TMP"
}
trap abi_cleanup EXIT

abi_require() {
  local tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null; then
      echo "SKIP: $tool not installed (Debian package ibverbs-utils or perftest)"
      exit 77
    fi
  done
}

abi_fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Fails if a tool's output holds an error line. Tools print errors in many forms; these are
# the ones rdma-core's examples and perftest use.
# An optional second argument is a regex of lines that are not errors (ibv_devinfo prints
# "core clock not supported" as a capability, not a failure).
abi_check_clean() {
  local file=$1 benign=${2:-'^$^'}
  if grep -Ev "$benign" "$file" |
    grep -Eiq 'error|fail|couldn.t|unable|not supported|segmentation|abort'; then
    echo "---- $file" >&2
    cat "$file" >&2
    abi_fail "error output in $(basename "$file")"
  fi
}

# abi_run_pair NAME TIMEOUT SERVER_ADDR CLIENT_ADDR SERVER_CMD... -- CLIENT_CMD...
# Starts the server with its own device (UROCE_DEVICES=<name>s=<addr>), then the client, waits
# for both, and fails if either exits non-zero or prints an error. Output in $ABI_TMP/NAME.*.
abi_run_pair() {
  local name=$1 limit=$2 saddr=$3 caddr=$4
  shift 4
  local server=() client=()
  while [[ $# -gt 0 && $1 != -- ]]; do server+=("$1"); shift; done
  shift
  client=("$@")
  UROCE_DEVICES="uroces=$saddr" timeout -k 5 "$limit" "${server[@]}" \
    >"$ABI_TMP/$name.server" 2>&1 &
  local spid=$!
  ABI_PIDS+=("$spid")
  # perftest and the pingpong tools connect once and give up: wait until the server listens
  # (a fixed pause lost the race on a loaded machine), at most 20 s.
  local waited=0 child
  while ((waited < 200)); do
    child=$(LD_PRELOAD= pgrep -P "$spid" | head -1)  # pgrep hangs with the sanitizer runtimes preloaded
    [[ -n $child ]] && ss -Hltnp 2>/dev/null | grep -q "pid=$child," && break
    kill -0 "$spid" 2>/dev/null || break  # it died: its exit code says why
    sleep 0.1
    waited=$((waited + 1))
  done
  local crc=0 src=0
  UROCE_DEVICES="uroces=$caddr" timeout -k 5 "$limit" "${client[@]}" \
    >"$ABI_TMP/$name.client" 2>&1 || crc=$?
  wait "$spid" || src=$?
  # perftest times its report with a CPU frequency it measures against gettimeofday() before each
  # report; on a loaded machine that fit can fail ("Correlation coefficient r^2: ... < 0.9", then
  # "Can't produce a report" and exit 1), which says nothing about the device. Run such a pair
  # again, twice at most.
  if [[ ($crc != 0 || $src != 0) && ${ABI_CALIBRATION_RETRIES:-2} -gt 0 ]] &&
    grep -qs "Correlation coefficient r^2" "$ABI_TMP/$name.server" "$ABI_TMP/$name.client"; then
    echo "     note: $name: perftest could not measure the CPU clock under load; run again"
    ABI_CALIBRATION_RETRIES=$((${ABI_CALIBRATION_RETRIES:-2} - 1)) \
      abi_run_pair "$name" "$limit" "$saddr" "$caddr" "${server[@]}" -- "${client[@]}"
    return
  fi
  if [[ $crc != 0 || $src != 0 ]]; then
    echo "---- $name server (exit $src)" >&2; cat "$ABI_TMP/$name.server" >&2
    echo "---- $name client (exit $crc)" >&2; cat "$ABI_TMP/$name.client" >&2
    abi_fail "$name: exit codes server $src client $crc"
  fi
  abi_check_clean "$ABI_TMP/$name.server"
  abi_check_clean "$ABI_TMP/$name.client"
}
