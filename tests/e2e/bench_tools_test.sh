#!/usr/bin/env bash
# The rest of the command line: `bench --pcap` (Wireshark decodes every frame, sent and received),
# `--stats-file` read back by `uroce stat`, `--json -`, `uroce devices`, and bad input giving an
# error code instead of a crash or a hang.
source "$(dirname "$0")/bench_lib.sh"
SRV=127.0.43.1
CLI=127.0.43.2
PORT=18644

start_server pcap timeout 60 "$UROCE" bench --server --addr $SRV --port $PORT --accept-timeout 30
timeout 60 "$UROCE" bench --client --addr $CLI --peer $SRV --port $PORT write -s 5000 -n 20 -m 1024 \
  --write-segments message --pcap "$TMP/run.pcap" --stats-file "$TMP/stats.txt" --json - >"$TMP/run.json" \
  2>"$TMP/pcap.client.log" || fail "client exited with $?"
wait "$SERVER_PID" || fail "server exited with $?"
json_check "$TMP/run.json" 'j["verified"] and j["results"][0]["bytes"] == 5000 and j["write_segments"] == "message"'

# uroce stat reads the counters back; the capture holds exactly the frames the link counted.
"$UROCE" stat "$TMP/stats.txt" >"$TMP/stat.out" || fail "uroce stat exited with $?"
grep -q "tx_packets" "$TMP/stat.out" || fail "uroce stat printed no tx_packets"
"$UROCE" stat --json "$TMP/stats.txt" >"$TMP/stat.json" || fail "uroce stat --json failed"
json_check "$TMP/stat.json" 'j["local"]["tx_packets"] >= 100 and j["remote"]["rx_packets"] >= 100'
frames=$(python3 -c '
import sys
c = dict(l.split() for l in open(sys.argv[1]))
print(int(c["local.link_tx_packets"]) + int(c["local.link_rx_packets"]))' "$TMP/stats.txt")
if command -v tshark >/dev/null; then
  tshark -n -r "$TMP/run.pcap" -T fields -e infiniband.bth.opcode -e _ws.malformed \
    >"$TMP/tshark.out" 2>"$TMP/tshark.log" || fail "tshark cannot read the capture"
  [[ $(wc -l <"$TMP/tshark.out") -eq $frames ]] ||
    fail "capture has $(wc -l <"$TMP/tshark.out") frames, the link counted $frames"
  # RDMA WRITE First (6), Middle (7), Last (8) out; ACK (17) in; nothing malformed.
  for op in 6 7 8 17; do
    grep -q "^$op\b" "$TMP/tshark.out" || fail "no opcode $op in the capture"
  done
  ! grep -qv "^[0-9]*\s*$" "$TMP/tshark.out" || fail "tshark found malformed frames"
  echo "ok: pcap: $frames frames decoded by tshark"

  # The default: each MTU of the WRITE is a WRITE ONLY (10) with its own RETH, verified.
  start_server pcap2 timeout 60 "$UROCE" bench --server --addr $SRV --port $PORT --accept-timeout 30
  timeout 60 "$UROCE" bench --client --addr $CLI --peer $SRV --port $PORT write -s 5000 -n 5 \
    -m 1024 --pcap "$TMP/only.pcap" --json - >"$TMP/only.json" 2>"$TMP/pcap2.client.log" ||
    fail "client exited with $?"
  wait "$SERVER_PID" || fail "server exited with $?"
  json_check "$TMP/only.json" 'j["verified"] and j["write_segments"] == "packet"'
  tshark -n -r "$TMP/only.pcap" -T fields -e infiniband.bth.opcode -e infiniband.reth.dmalen \
    >"$TMP/only.out" 2>"$TMP/tshark2.log" || fail "tshark cannot read the second capture"
  grep -q "^10\s" "$TMP/only.out" || fail "no WRITE ONLY in the per-packet capture"
  ! grep -q "^[678]\b" "$TMP/only.out" || fail "WRITE FIRST/MIDDLE/LAST in the per-packet capture"
  # 5000 bytes at MTU 1024: four RETHs of 1024 and one of 904 per message.
  grep -q "^10\s904$" "$TMP/only.out" || fail "no 904-byte tail RETH: $(sort -u "$TMP/only.out")"
  echo "ok: per-packet WRITEs decoded by tshark"
else
  echo "ok: pcap written (tshark not installed: not decoded)"
fi

"$UROCE" devices >"$TMP/devices.out" || fail "uroce devices exited with $?"
grep -q "127.0.0.1 .*::ffff:127.0.0.1" "$TMP/devices.out" || fail "uroce devices lacks 127.0.0.1"

# Bad input: an error code and a message, promptly.
expect_rc() {
  local want=$1; shift
  local rc=0
  timeout 20 "$@" >"$TMP/bad.log" 2>&1 || rc=$?
  [[ $rc -eq $want ]] || fail "'$*' exited with $rc, expected $want: $(cat "$TMP/bad.log")"
}
expect_rc 1 "$UROCE" bench --client --addr $CLI --peer $SRV -s 12Q
expect_rc 1 "$UROCE" bench --client --addr $CLI --peer $SRV -s 3G  # above 2^31 (IBA 9.4)
expect_rc 1 "$UROCE" bench --server --addr 300.1.1.1 --port $PORT --accept-timeout 1
expect_rc 1 "$UROCE" bench --client --addr $CLI                      # no --peer
expect_rc 2 "$UROCE" bench --client --addr $CLI --peer $SRV --port $PORT --accept-timeout 1
expect_rc 2 "$UROCE" bench --server --addr $SRV --port $PORT --accept-timeout 1
echo "garbage" >"$TMP/garbage.txt"
expect_rc 1 "$UROCE" stat "$TMP/garbage.txt"
expect_rc 1 "$UROCE" stat "$TMP/missing.txt"
echo "ok: bad input rejected"
