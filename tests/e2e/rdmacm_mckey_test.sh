#!/usr/bin/env bash
# Multicast over rdma_cm (docs/cm.md, "Multicast"): Debian's mckey (rdmacm-utils), unmodified,
# in three processes, each with its own uroce device on a loopback address: two receivers
# (`mckey -m 239.1.47.3 -b R -C 25`) and one sender (`-s`) that joins after both. Each receiver
# exits only once it has polled 25 completions; its device's counters (UROCE_STATS) must show
# exactly 25 datagrams to the group, each handed to its one attached QP, and the output of every
# process is exact (the joined group as rdma_cm maps an IPv4 group for RoCEv2).
set -uo pipefail
source "$(dirname "$0")/abi_lib.sh" "$1"
command -v mckey >/dev/null || { echo "SKIP: mckey not installed (Debian package rdmacm-utils)"; exit 77; }
GROUP=239.1.47.3 R1=127.0.147.1 R2=127.0.147.2 SND=127.0.147.3 COUNT=25
export UROCE_STATS=$ABI_TMP/mckey.stats

receiver() {  # receiver NAME ADDR
  UROCE_DEVICES="$1=$2" timeout -k 5 40 stdbuf -oL mckey -m $GROUP -b "$2" -C $COUNT >"$ABI_TMP/$1.out" 2>&1 &
  ABI_PIDS+=($!)
  eval "${1}_PID=$!"
}
receiver mcr1 $R1
receiver mcr2 $R2
# The sender's datagrams reach only members that have joined: wait for both joins (mckey's
# output is line-buffered by stdbuf, so that a line printed is a line seen).
for ((waited = 0; waited < 300; waited++)); do
  grep -q "^mckey: joined" "$ABI_TMP/mcr1.out" && grep -q "^mckey: joined" "$ABI_TMP/mcr2.out" && break
  sleep 0.1
done
SRC=0
UROCE_DEVICES="mcs=$SND" timeout -k 5 40 stdbuf -oL mckey -m $GROUP -b $SND -C $COUNT -s >"$ABI_TMP/mcs.out" 2>&1 ||
  SRC=$?
R1RC=0 R2RC=0
wait "$mcr1_PID" || R1RC=$?
wait "$mcr2_PID" || R2RC=$?
show_all() { for f in mcr1 mcr2 mcs; do echo "---- $f" >&2; cat "$ABI_TMP/$f.out" >&2; done; }
[[ $SRC == 0 && $R1RC == 0 && $R2RC == 0 ]] ||
  { show_all; abi_fail "mckey: sender $SRC, receivers $R1RC $R2RC (124: timed out, datagrams lost)"; }

joined="mckey: joined dgid: ::ffff:$GROUP mlid 0x0 sl 0"
for f in mcr1 mcr2; do
  diff <(printf '%s\n' "mckey: starting server" "mckey: joining" "$joined" \
    "receiving data transfers" "data transfers complete" "test complete" "return status 0") \
    "$ABI_TMP/$f.out" >&2 || { show_all; abi_fail "mckey receiver $f: output"; }
done
diff <(printf '%s\n' "mckey: starting client" "mckey: joining" "$joined" \
  "initiating data transfers" "data transfers complete" "test complete" "return status 0") \
  "$ABI_TMP/mcs.out" >&2 || { show_all; abi_fail "mckey sender: output"; }

# Exactly COUNT datagrams per receiving device, each delivered to its one attached QP.
for dev in mcr1 mcr2; do
  for counter in rx_mcast_packets rx_mcast_deliveries; do
    got=$(awk -v k="^$dev/[0-9]+\\.$counter\$" '$1 ~ k { n += $2 } END { print n + 0 }' "$UROCE_STATS")
    [[ $got == "$COUNT" ]] || { show_all; abi_fail "$dev: $counter $got, expected $COUNT"; }
  done
done
echo "ok   mckey: 2 receivers x $COUNT datagrams from one sender, counts exact"
echo "PASS"
