# Shared by the bench_* and netns_* tests: temporary files, bounded background servers, checks.
# Sourced, not run. Each test passes the uroce binary as $1.
set -euo pipefail
UROCE=${1:?usage: $0 path/to/uroce}
TMP=$(mktemp -d /tmp/uroce-e2e.XXXXXX)
PIDS=()
cleanup_bench() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup_bench EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$TMP"/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }; done
  exit 1
}
# start_server NAME PREFIX... ARGS: runs `PREFIX uroce bench --server ARGS` in the background.
start_server() {
  local name=$1; shift
  "$@" >"$TMP/$name.server.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
}
# json_check FILE PYTHON-EXPRESSION: the expression (over `j`, the parsed file) must be true.
json_check() {
  python3 - "$1" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2])
if not ok:
    print("json check failed:", sys.argv[2], file=sys.stderr)
    print(json.dumps({k: v for k, v in j.items() if k != "counters"}, indent=1)[:3000],
          file=sys.stderr)
    sys.exit(1)
PY
}
# iterations_arg ARGS...: the value of the last -n in ARGS (the iterations asked for per size).
iterations_arg() {
  local n=""
  while (($#)); do
    [[ $1 == -n ]] && n=$2
    shift
  done
  echo "${n:?no -n among the arguments}"
}
