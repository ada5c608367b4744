#!/usr/bin/python3
"""Per-side counters of bench/abi_path.sh's bandwidth runs, kept with STATS_DIR=DIR.

Usage: bench/abi_counters.py DIR

For each run (path, figure, round) and side (the client is the requester: it posts the WRITEs,
SENDs or READs; the server is the responder), per GB of payload moved:
  cpu      the process's CPU seconds (user + system), from /usr/bin/time
  vol/inv  its voluntary (it slept) and involuntary (it was preempted) context switches
  passes   progress passes, and the share run by the program's own thread (inline)
  sleeps   the engine's blocking waits, and what woke it: packet / kick / timeout
and per system call: data packets per send call (the bench's client fills a 256-packet pass; the
drop-in's sender runs a pass per post), packets per receive call and the share of receive calls
that found nothing. Counts, not timings: the load does not move them much, so they tell where the
two paths differ (docs/performance.md, "The drop-in path").
"""
import collections
import glob
import os
import re
import sys


def read_counters(path):
    """{side: {counter: value}}; sides are 'client'/'server' for the bench, pids for the drop-in."""
    sides = collections.defaultdict(dict)
    for line in open(path):
        key, _, value = line.strip().rpartition(" ")
        side, _, name = key.partition(".")
        sides[side][name] = int(value)
    if "local" in sides:
        return {"client": sides["local"], "server": sides["remote"]}
    return dict(sides)


def read_time(path):
    t = {}
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) == 2:
                t[parts[0]] = float(parts[1])
    return t


def main():
    d = sys.argv[1]
    runs = sorted(p for p in glob.glob(os.path.join(d, "*.*.r*")) if not re.search(r"\.time\.", p))
    print("%-22s %-6s %6s %6s %6s %7s %6s %6s %14s %7s %7s %6s" %
          ("run", "side", "GB", "cpu/GB", "vol/GB", "inv/GB", "pass/GB", "inline", "sleeps pk/ki/to",
           "pkt/tx", "pkt/rx", "rx0"))
    for path in runs:
        name = os.path.basename(path)
        path_kind, fig = name.split(".")[0], name.split(".")[1]
        sides = read_counters(path)
        if path_kind == "dropin":
            if len(sides) != 2:
                continue
            a, b = sides.keys()
            data_sender = a if sides[a].get("link_tx_bytes", 0) > sides[b].get("link_tx_bytes", 0) else b
            other = b if data_sender == a else a
            # READ: the responder sends the data.
            client, server = (other, data_sender) if fig.startswith("read") else (data_sender, other)
            sides = {"client": sides[client], "server": sides[server]}
        payload = max(s.get("link_tx_bytes", 0) for s in sides.values()) / 1e9
        for side in ("client", "server"):
            c = sides[side]
            t = read_time(path + ".time." + side)
            gb = payload or 1
            cpu = t.get("user_s", 0) + t.get("sys_s", 0)
            passes = c.get("engine_passes", 0)
            inline = c.get("engine_inline_passes", 0)
            tx_calls = c.get("link_tx_calls", 0)
            rx_calls = c.get("link_rx_calls", 0)
            print("%-22s %-6s %6.2f %6.2f %6.0f %7.0f %6.0f %5.0f%% %14s %7.1f %7.1f %5.0f%%" % (
                name, side, payload, cpu / gb, t.get("voluntary_switches", 0) / gb,
                t.get("involuntary_switches", 0) / gb, passes / gb,
                100.0 * inline / passes if passes else 0,
                "%d %d/%d/%d" % (c.get("engine_sleeps", 0), c.get("engine_wakeups_by_packet", 0),
                                 c.get("engine_wakeups_by_kick", 0),
                                 c.get("engine_wakeups_by_timeout", 0)),
                c.get("link_tx_packets", 0) / tx_calls if tx_calls else 0,
                c.get("link_rx_packets", 0) / rx_calls if rx_calls else 0,
                100.0 * c.get("link_rx_empty_calls", 0) / rx_calls if rx_calls else 0))


main()
