#!/usr/bin/env bash
# `uroce bench` between two processes on two loopback addresses: every RC opcode (write, read,
# send, atomic) in bandwidth and latency mode, sizes 0 B .. 8 MiB, with the data verified by both
# sides. Every process is bounded by a timeout.
source "$(dirname "$0")/bench_lib.sh"
SRV=127.0.41.1
CLI=127.0.41.2
PORT=18641
run() {
  local name=$1; shift
  start_server "$name" timeout 180 "$UROCE" bench --server --addr $SRV --port $PORT \
    --accept-timeout 60
  # A 1.07 s ACK timeout (4.096 us * 2^18): under ASan on a loaded 2-core machine a receiver
  # verifying 8 MiB messages can fall behind long enough to exhaust retries at the default 67 ms.
  # Recovery from loss is the netns test's subject; this one is about the data.
  timeout 180 "$UROCE" bench --client --addr $CLI --peer $SRV --port $PORT --timeout 18 \
    --json "$TMP/$name.json" "$@" >"$TMP/$name.client.log" 2>&1 ||
    fail "$name: client exited with $?"
  wait "$SERVER_PID" || fail "$name: server exited with $?"
  # Every size runs the -n iterations asked for, no fewer and no more.
  json_check "$TMP/$name.json" \
    "j['verified'] and all(r['iterations'] == $(iterations_arg "$@") for r in j['results'])"
  echo "ok: $name ($(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['results']))" "$TMP/$name.json") sizes)"
}
# 0, 1, 2, 4 .. 8 MiB: 25 sizes, each a few iterations (the largest moves 80 MiB per test).
SWEEP=(-a --min-size 0 --max-size 8M -n 10)
run write_bw write "${SWEEP[@]}"
run read_bw read "${SWEEP[@]}"
run send_bw send "${SWEEP[@]}"
run atomic_bw atomic -n 2000
json_check "$TMP/write_bw.json" '[r["bytes"] for r in j["results"]][:3] == [0, 1, 2] and j["results"][-1]["bytes"] == 8 << 20'
# Latency (ping-pong for write and send; write signals with the last byte, so from 1 B).
run write_lat write --lat -a --min-size 1 --max-size 1M -n 20
run read_lat read --lat -a --min-size 0 --max-size 1M -n 20
run send_lat send --lat -a --min-size 0 --max-size 1M -n 20
run atomic_lat atomic --lat -n 200
# Other MTUs and a shallow queue move the same data.
run write_mtu4096 write -m 4096 -s 3,4097,1M -n 20
run send_mtu256_depth1 send -m 256 -t 1 -s 1000,65536 -n 20
# Moderated completions (-Q, perftest's --cq-mod): a completion every N requests stands for the
# ones before it; a count that is not a multiple of N still ends with a completion, and every
# atomic's result is still checked.
run write_cq_mod write -Q 16 -s 8,65536 -n 1001
run read_cq_mod read -Q 8 -s 4096 -n 100
run atomic_cq_mod atomic -Q 32 -n 2000
start_server cq_mod_over_depth timeout 60 "$UROCE" bench --server --addr $SRV --port $PORT \
  --accept-timeout 60
rc=0
timeout 60 "$UROCE" bench --client --addr $CLI --peer $SRV --port $PORT write -t 8 -Q 16 -n 10 \
  >"$TMP/cq_mod_over_depth.log" 2>&1 || rc=$?
wait "$SERVER_PID" || true  # the server sees the client go
((rc == 1)) && grep -q "cq-mod 16 is more than the depth 8" "$TMP/cq_mod_over_depth.log" ||
  fail "-Q over the depth: exit $rc, $(cat "$TMP/cq_mod_over_depth.log")"
echo "ok: -Q over the depth is a setup error"
