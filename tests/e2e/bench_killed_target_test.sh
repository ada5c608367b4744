#!/usr/bin/env bash
# A target killed mid-transfer: the initiator's work requests end with RETRY_EXC_ERR after the
# configured retries (IBA 9.7.6.1.3: retry_cnt transport retries, each after the local ACK
# timeout), the client says so and exits 3, and nothing hangs.
source "$(dirname "$0")/bench_lib.sh"
SRV=127.0.42.1
CLI=127.0.42.2
PORT=18642
for test in write read; do
  start_server $test timeout 60 "$UROCE" bench --server --addr $SRV --port $PORT \
    --accept-timeout 30
  # Timeout exponent 14: 4.096 us * 2^14 = 67 ms per try, 3 retries: long enough that a loaded
  # machine does not give up before the kill, short enough to fail fast after it.
  timeout 60 "$UROCE" bench --client --addr $CLI --peer $SRV --port $PORT $test -s 64K \
    -D 30 --timeout 14 --retry-cnt 3 >"$TMP/$test.client.log" 2>&1 &
  client=$!
  PIDS+=("$client")
  sleep 2
  kill -0 "$client" 2>/dev/null || fail "$test: client ended before the target was killed"
  # SIGKILL the server itself (SERVER_PID is its `timeout` wrapper).
  target=$(LD_PRELOAD= pgrep -P "$SERVER_PID" -x uroce) || fail "$test: server is not running"
  kill -9 "$target"
  start=$(date +%s)
  rc=0
  wait "$client" || rc=$?
  elapsed=$(($(date +%s) - start))
  [[ $rc -eq 3 ]] || fail "$test: client exit code $rc, expected 3 (a work request failed)"
  grep -q "failed: RETRY_EXC_ERR" "$TMP/$test.client.log" ||
    fail "$test: no RETRY_EXC_ERR completion reported"
  ((elapsed < 15)) || fail "$test: took ${elapsed}s to give up"
  echo "ok: $test: $(grep -m1 'failed: RETRY_EXC_ERR' "$TMP/$test.client.log") after ${elapsed}s"
done
