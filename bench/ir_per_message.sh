#!/usr/bin/env bash
# User-space instructions per message of the small-message path, per side, counted by callgrind:
# a figure the host's load does not move (it counts no kernel work and no time), so two builds
# can be compared on a busy machine. Runs `uroce bench` server and client under callgrind for N
# messages and prints, per side, the instructions (inclusive) of the per-packet functions divided
# by N. Whole-process totals are not printed: a spinning side's empty polls depend on timing.
#   bench/ir_per_message.sh UROCE [N] [TEST ARGS...]     # default: 100000, write -s 8
# Environment: A, B (addresses, default 127.0.79.1 / 127.0.79.2), PORT (default 19870).
set -uo pipefail
BIN=${1:?usage: $0 UROCE [N] [TEST ARGS...]}
N=${2:-100000}
shift $(($# < 2 ? $# : 2))
[[ $# -eq 0 ]] && set -- write -s 8
A=${A:-127.0.79.1}
B=${B:-127.0.79.2}
PORT=${PORT:-19870}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

valgrind --tool=callgrind --callgrind-out-file="$tmp/server" "$BIN" bench --server --addr "$A" \
  -p "$PORT" --accept-timeout 60 >/dev/null 2>&1 &
server=$!
sleep 3 # callgrind starts slowly
if ! valgrind --tool=callgrind --callgrind-out-file="$tmp/client" "$BIN" bench --client \
  --addr "$B" --peer "$A" -p "$PORT" --timeout 20 "$@" -n "$N" -m 4096 --no-verify \
  >/dev/null 2>"$tmp/client.err"; then
  cat "$tmp/client.err" >&2
  exit 1
fi
wait $server

for side in server client; do
  callgrind_annotate --inclusive=yes "$tmp/$side" 2>/dev/null |
    N=$N SIDE=$side /usr/bin/python3 -c '
import os, re, sys
n = int(os.environ["N"])
# Inclusive instructions of these functions: callgrind_annotate lists a function once whole and
# once per file its inlined pieces come from, so the largest figure is the whole function.
wanted = {
    "receive: UdpLink::handle_datagram": r"UdpLink::handle_datagram\(",
    "  of which ICRC check": r"UdpLink::icrc_ok\(",
    "  of which parse_transport": r"wire::parse_transport\(",
    "  of which QueuePair::receive": r"verbs::QueuePair::receive\(",
    "send: QueuePair::post_send": r"verbs::QueuePair::post_send\(uroce::transport::SendWr const&\)",
    "send: Requester::build": r"transport::Requester::build\(",
    "send: UdpLink::flush": r"UdpLink::flush\(",
    "key checks (KeyTable::check)": r"KeyTable::check\(",
    "mutex lock": r"[^_]pthread_mutex_lock@@",
    "mutex unlock": r"[^_]pthread_mutex_unlock@@",
}
got = {}
for line in sys.stdin:
    m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*)", line)
    if not m or m.group(2).startswith("=>") or m.group(2).startswith("<"):
        continue
    ir, what = int(m.group(1).replace(",", "")), m.group(2)
    for label, pat in wanted.items():
        if re.search(pat, what):
            got[label] = max(got.get(label, 0), ir)
print("%s (instructions per message, %d messages)" % (os.environ["SIDE"], n))
for label in wanted:
    if got.get(label, 0) >= n / 2:
        print("  %-34s %8.0f" % (label, got[label] / n))
'
done
