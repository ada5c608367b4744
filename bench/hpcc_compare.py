#!/usr/bin/env python3
"""uroce's fabric lab against HPCC's ns-3 simulator, DCQCN on both, the same scenarios side by side.

HPCC's simulator (github.com/alibaba-edu/High-Precision-Congestion-Control, ns-3.17) is built
outside this repository (docs/experiments.md, "uroce beside HPCC's ns-3 simulator", says how).
This script writes its topology, flow, trace and config files for each scenario, runs it, reads
its packet trace (analysis/trace_reader), its flow completion file and its rate log (rdma-hw.cc
built with PRINT_LOG 1), runs `uroce sim` on the same setting, and prints the same figures for
both, computed the same way from 2 us samples. It writes per scenario a CSV of both time series
and three SVG figures (rate, throughput, queue) with both simulators in them.

    bench/hpcc_compare.py --hpcc /work/hpcc/src [--uroce build/release/tools/uroce]
                          [--out DIR] [--seeds 1,2,3] [--kmin KB --kmax KB --pmax P --tag T] [scenario ...]

Scenarios: incast (8:1, 1 MiB each), parking-lot (3 x 4 MiB, synchronized), convergence (2 x 4
MiB, 100 us apart). The setting is HPCC's `run.py --cc dcqcn --bw 100`: 100 Gb/s, 1 us links,
Kmin 400 KB, Kmax 1600 KB, Pmax 0.2 marked at dequeue, its DCQCN rules (uroce: --dcqcn hpcc).
"""
import argparse
import math
import os
import re
import subprocess
import sys

LINE_BPS = 100e9
TAG = [""]
SAMPLE_NS = 2000
START_NS = 2_000_000_000  # HPCC's flows conventionally start at 2 s
FAIR_WINDOW_NS = 20_000

HPCC_CONFIG = """ENABLE_QCN 1
USE_DYNAMIC_PFC_THRESHOLD 1
PACKET_PAYLOAD_SIZE 1000
TOPOLOGY_FILE {d}/topology.txt
FLOW_FILE {d}/flow.txt
TRACE_FILE {d}/trace.txt
TRACE_OUTPUT_FILE {d}/mix.tr
FCT_OUTPUT_FILE {d}/fct.txt
PFC_OUTPUT_FILE {d}/pfc.txt
SIMULATOR_STOP_TIME {stop}
CC_MODE 1
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 300
EWMA_GAIN 0.00390625
FAST_RECOVERY_TIMES 1
RATE_AI 20Mb/s
RATE_HAI 200Mb/s
MIN_RATE 1000Mb/s
DCTCP_RATE_AI 1000Mb/s
ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0
HAS_WIN 0
GLOBAL_T 1
VAR_WIN 0
FAST_REACT 0
U_TARGET 0.95
MI_THRESH 0
INT_MULTI 1
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.01
PINT_PROB 1.0
RATE_BOUND 1
ACK_HIGH_PRIO 1
LINK_DOWN 0 0 0
ENABLE_TRACE 1
KMAX_MAP 1 100000000000 {kmax}
KMIN_MAP 1 100000000000 {kmin}
PMAX_MAP 1 100000000000 {pmax}
BUFFER_SIZE 32
QLEN_MON_FILE {d}/qlen.txt
QLEN_MON_START 3000000000
QLEN_MON_END 3000000000
"""

# The marking curve, HPCC's KB (uroce's --kmin-kb is KiB: 2.4% more); --kmin/--kmax/--pmax change it
# for both.
MARK = {"kmin": 400, "kmax": 1600, "pmax": 0.2}


def uroce_setting():
    return ["--mode", "pfc+dcqcn", "--dcqcn", "hpcc", "--kmin-kb", str(MARK["kmin"]), "--kmax-kb",
            str(MARK["kmax"]), "--pmax", str(MARK["pmax"]), "--xoff-kb", "4096", "--mark", "dequeue"]


class Scenario:
    """Hosts, switches, links and flows in HPCC's terms, the watched port, and uroce's command."""

    def __init__(self, name, nodes, switches, links, flows, watch, uroce_args):
        self.name = name
        self.nodes = nodes          # total node count (hosts first, then switches)
        self.switches = switches    # switch node ids
        self.links = links          # (a, b) pairs, in the order that numbers the interfaces
        self.flows = flows          # (src, dst, bytes, start_ns offset)
        self.watch = watch          # (switch node, interface) of the bottleneck port
        self.uroce_args = uroce_args


def interface_of(links, node, peer):
    """ns-3 numbers a node's devices 1.. in the order its links are created (0 is loopback)."""
    i = 0
    for a, b in links:
        if node in (a, b):
            i += 1
            if peer in (a, b) and node != peer:
                return i
    raise ValueError("no link %d-%d" % (node, peer))


def scenarios():
    out = {}
    # Incast 8:1: hosts 0-7 send to host 8, all on switch 9.
    links = [(h, 9) for h in range(9)]
    out["incast"] = Scenario("incast", 10, [9], links, [(h, 8, 1 << 20, 0) for h in range(8)],
                             (9, interface_of(links, 9, 8)),
                             ["incast", "--senders", "8", "--bytes", str(1 << 20)])
    # Parking lot (uroce's dumbbell 2 + 2): hosts 0, 1 on switch 4, hosts 2, 3 on switch 5; 0, 1
    # and 2 send to 3.
    links = [(0, 4), (1, 4), (4, 5), (2, 5), (3, 5)]
    out["parking-lot"] = Scenario("parking-lot", 6, [4, 5], links,
                                  [(h, 3, 4 << 20, 0) for h in range(3)],
                                  (5, interface_of(links, 5, 3)),
                                  ["parking-lot", "--bytes", str(4 << 20)])
    # Convergence (uroce's dumbbell 2 + 1): hosts 0, 1 on switch 3, host 2 on switch 4; flows to
    # host 2, the second 100 us later; the bottleneck is switch 3's port onto the shared link.
    links = [(0, 3), (1, 3), (3, 4), (2, 4)]
    out["convergence"] = Scenario("convergence", 5, [3, 4], links,
                                  [(0, 2, 4 << 20, 0), (1, 2, 4 << 20, 100_000)],
                                  (3, interface_of(links, 3, 4)),
                                  ["convergence", "--flows", "2", "--stagger-us", "100",
                                   "--bytes", str(4 << 20)])
    return out


# ---------------------------------------------------------------------------------------------
# HPCC's simulator


def ip_of(node):
    return 0x0b000001 + (node // 256) * 0x10000 + (node % 256) * 0x100


def run_hpcc(sc, hpcc_root, work, seed):
    d = os.path.join(work, "hpcc-%s%s-%d" % (sc.name, TAG[0], seed))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "topology.txt"), "w") as f:
        f.write("%d %d %d\n%s\n" % (sc.nodes, len(sc.switches), len(sc.links),
                                    " ".join(map(str, sc.switches))))
        for a, b in sc.links:
            f.write("%d %d 100Gbps 0.001ms 0\n" % (a, b))
    with open(os.path.join(d, "flow.txt"), "w") as f:
        f.write("%d\n" % len(sc.flows))
        for src, dst, size, off in sc.flows:
            f.write("%d %d 3 100 %d %.9f\n" % (src, dst, size, (START_NS + off) / 1e9))
    with open(os.path.join(d, "trace.txt"), "w") as f:
        f.write("1\n%d\n" % sc.watch[0])
    with open(os.path.join(d, "config.txt"), "w") as f:
        f.write(HPCC_CONFIG.format(d=d, stop="2.010", **MARK))
    sim = os.path.join(hpcc_root, "simulation")
    exe = os.path.join(sim, "build", "scratch", "third")
    # ns-3's run number picks the random stream the switches' ECN marking draws from.
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(sim, "build"),
               NS_GLOBAL_VALUE="RngRun=%d" % seed)
    log = subprocess.run([exe, os.path.join(d, "config.txt")], cwd=sim, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True)
    with open(os.path.join(d, "stdout.txt"), "w") as f:
        f.write(log.stdout)
    reader = os.path.join(hpcc_root, "analysis", "trace_reader")
    node, intf = sc.watch
    tr = subprocess.run([reader, os.path.join(d, "mix.tr"), "node=%d" % node],
                        stdout=subprocess.PIPE, text=True, check=True).stdout
    return parse_hpcc(sc, log.stdout, tr, open(os.path.join(d, "fct.txt")).read(),
                      open(os.path.join(d, "pfc.txt")).read())


RATE_LINE = re.compile(r"^(\d+) (rate dec|fast recovery|active inc|hyper inc): (\w+) (\w+) \d+ \d+ "
                       r"\(([\d.]+) ([\d.]+)\)->\(([\d.]+) ([\d.]+)\)")


def parse_hpcc(sc, stdout, trace, fct, pfc):
    """Time series on the 2 us grid, as uroce's sampler takes them."""
    src_of_ip = {ip_of(s): i for i, (s, _, _, _) in enumerate(sc.flows)}
    nf = len(sc.flows)
    node, intf = sc.watch
    events = []  # (t, kind, flow, value)
    ce = 0
    cnps = [0] * nf
    for line in trace.splitlines():
        p = line.split()
        # time n:node intf:queue qlen event ecn:x sip dip sport dport kind ...
        if len(p) < 12 or p[1] != "n:%d" % node:
            continue
        t = int(p[0]) - START_NS
        i, q = map(int, p[2].split(":"))
        qlen, ev, kind = int(p[3]), p[4], p[10]
        if kind == "U" and i == intf and q == 3:
            events.append((t, "q", None, qlen))
            if ev == "Dequ":
                size, payload = p[14].rstrip(")").split("(")
                events.append((t, "tx", src_of_ip.get(int(p[6], 16)), (int(size), int(payload))))
                if p[5] != "ecn:0":
                    ce += 1
        elif kind == "A" and ev == "Dequ" and int(p[11], 16) & 1:
            f = src_of_ip.get(int(p[7], 16))
            if f is not None:
                cnps[f] += 1
    rates = []  # (t, flow, new rate bps, kind)
    for line in stdout.splitlines():
        m = RATE_LINE.match(line)
        if m:
            f = src_of_ip.get(int(m.group(3), 16))
            if f is not None:
                rates.append((int(m.group(1)) - START_NS, f, float(m.group(8)) * 1e9, m.group(2)))
    done = [None] * nf
    for line in fct.splitlines():
        p = line.split()
        if len(p) >= 7:
            f = src_of_ip.get(int(p[0], 16))
            if f is not None:
                done[f] = int(p[5]) - START_NS + int(p[6])
    pauses = len([line for line in pfc.splitlines() if line.strip()])
    events.sort(key=lambda e: e[0])
    end = max(d for d in done if d is not None) if all(d is not None for d in done) else 10_000_000
    n = end // SAMPLE_NS + 2
    series = {"t_us": [], "queue": [], "tx": [], "rx": [[] for _ in range(nf)],
              "rate": [[] for _ in range(nf)], "cuts": [[] for _ in range(nf)]}
    qlen, tx, ei, ri = 0, 0, 0, 0
    rx = [0] * nf
    rate = [LINE_BPS] * nf
    cuts = [0] * nf
    for s in range(n):
        t = s * SAMPLE_NS
        while ei < len(events) and events[ei][0] <= t:
            _, kind, f, v = events[ei]
            if kind == "q":
                qlen = v
            else:
                tx += v[0]
                if f is not None:
                    rx[f] += v[1]
            ei += 1
        while ri < len(rates) and rates[ri][0] <= t:
            _, f, r, kind = rates[ri]
            rate[f] = r
            if kind == "rate dec":
                cuts[f] += 1
            ri += 1
        series["t_us"].append(t / 1e3)
        series["queue"].append(qlen)
        series["tx"].append(tx)
        for f in range(nf):
            series["rx"][f].append(rx[f])
            series["rate"][f].append(rate[f])
            series["cuts"][f].append(cuts[f])
    return {"series": series, "done_ns": done, "ce": ce, "cnps": cnps, "pauses": pauses,
            "wire_per_payload": None}


# ---------------------------------------------------------------------------------------------
# uroce


def run_uroce(sc, uroce, work, seed):
    d = os.path.join(work, "uroce-%s%s-%d" % (sc.name, TAG[0], seed))
    cmd = [uroce, "sim"] + sc.uroce_args + uroce_setting() + ["--seed", str(seed), "--out", d]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        sys.exit("uroce failed: %s\n%s" % (" ".join(cmd), out.stdout))
    csv = [f for f in os.listdir(d) if f.endswith(".csv")][0]
    lines = open(os.path.join(d, csv)).read().splitlines()
    result = {}
    for line in lines:
        if line.startswith("# result "):
            k, v = line[len("# result "):].split("=", 1)
            result[k] = float(v)
    rows = [line.split(",") for line in lines if not line.startswith("#")]
    head, rows = rows[0], rows[1:]
    col = {h: i for i, h in enumerate(head)}
    nf = len(sc.flows)
    series = {"t_us": [], "queue": [], "tx": [], "rx": [[] for _ in range(nf)],
              "rate": [[] for _ in range(nf)], "cuts": [[] for _ in range(nf)]}
    tx = 0.0
    rx = [0.0] * nf
    for r in rows:
        t = float(r[col["t_us"]])
        series["t_us"].append(t)
        series["queue"].append(float(r[col["queue0_bytes"]]))
        # The CSV holds per-sample rates; integrate them back to running byte counts.
        tx += float(r[col["bottleneck_util"]]) * LINE_BPS * SAMPLE_NS / 8e9
        series["tx"].append(tx)
        for f in range(nf):
            rx[f] += float(r[col["flow%d_tput_gbps" % f]]) * SAMPLE_NS / 8
            series["rx"][f].append(rx[f])
            series["rate"][f].append(float(r[col["flow%d_rate_gbps" % f]]) * 1e9)
            series["cuts"][f].append(float(r[col["flow%d_rate_cuts" % f]]))
    done = [result["flow%d_done_us" % f] * 1e3 for f in range(nf)]
    cnps = [result["flow%d_cnps" % f] for f in range(nf)]
    return {"series": series, "done_ns": done, "ce": result.get("ecn_marked", 0), "cnps": cnps,
            "pauses": result.get("pause_frames", 0), "cmd": " ".join(cmd)}


# ---------------------------------------------------------------------------------------------
# The figures, computed the same way for both


def jain(x):
    s = sum(x)
    q = sum(v * v for v in x)
    return s * s / (len(x) * q) if q > 0 else 0


def figures(sc, run):
    s = run["series"]
    done = run["done_ns"]
    nf = len(sc.flows)
    last = max(done)
    first_done = min(done)
    idx_last = min(int(last // SAMPLE_NS), len(s["t_us"]) - 1)
    step = FAIR_WINDOW_NS // SAMPLE_NS
    # Utilization: wire bytes the bottleneck sent over the flows' span, against line rate.
    util = s["tx"][idx_last] * 8e9 / (LINE_BPS * (idx_last * SAMPLE_NS)) if idx_last else 0
    qs = s["queue"][: idx_last + 1]
    # Per 20 us window: utilization and Jain's index of the flows running through the window.
    windows = []
    for a in range(0, idx_last - step + 1, step):
        b = a + step
        u = (s["tx"][b] - s["tx"][a]) * 8e9 / (LINE_BPS * FAIR_WINDOW_NS)
        t0, t1 = a * SAMPLE_NS, b * SAMPLE_NS
        running = [f for f in range(nf)
                   if sc.flows[f][3] <= t0 and done[f] >= t1]
        x = [s["rx"][f][b] - s["rx"][f][a] for f in running]
        windows.append((t0, u, jain(x) if len(x) > 1 else 1.0, len(running)))
    # Time the link ran below 90% of the line (20 us windows).
    below = sum(FAIR_WINDOW_NS for w in windows if w[1] < 0.9) / 1e3
    # Recovery: the first window at >= 90% after the link first fell below 50%.
    recover = None
    fell = False
    for t0, u, _, _ in windows:
        if u < 0.5 and t0 > 0:
            fell = True
        elif fell and u >= 0.9:
            recover = t0 / 1e3
            break
    # Fair from: the start of the first window from which every later window with all flows
    # running has Jain >= 0.95 (each flow's share within about a fifth of fair).
    all_on = max(f[3] for f in sc.flows)
    fair_from = None
    for t0, _, j, k in windows:
        if t0 < all_on or k < nf:
            continue
        if j >= 0.95:
            if fair_from is None:
                fair_from = t0 / 1e3
        else:
            fair_from = None
    min_rate = [min(s["rate"][f][: idx_last + 1]) / 1e9 for f in range(nf)]
    cuts = sum(s["cuts"][f][idx_last] for f in range(nf))
    ideal_us = sum(f[2] for f in sc.flows) * 8e6 / LINE_BPS
    return {
        "last_done_us": last / 1e3,
        "first_done_us": first_done / 1e3,
        "last_over_ideal": last / 1e3 / ideal_us if sc.name == "incast" else float("nan"),
        "util": util,
        "queue_avg_kb": sum(qs) / len(qs) / 1e3 if qs else 0,
        "queue_max_kb": max(qs) / 1e3 if qs else 0,
        "below_90_us": below,
        "recover_us": recover if recover is not None else float("nan"),
        "fair_from_us": fair_from if fair_from is not None else float("nan"),
        "min_rate_gbps": min(min_rate),
        "rate_cuts": cuts,
        "ce_marked": run["ce"],
        "pauses": run["pauses"],
    }


# ---------------------------------------------------------------------------------------------
# Output: CSV and SVG (the same look as tools/sim/svg_plot.cpp: ticks, units, legend, caption)


def nice_ticks(lo, hi, n=6):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    t = math.floor(lo / step) * step
    out = []
    while t <= hi + 1e-9 * step:
        out.append(round(t, 10))
        t += step
    if out[-1] < hi:
        out.append(round(out[-1] + step, 10))
    return out


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def wrap(lines, width=150):
    out = []
    for line in lines:
        while len(line) > width:
            cut = line.rfind(" ", 0, width)
            cut = cut if cut > 0 else width
            out.append(line[:cut])
            line = "    " + line[cut:].lstrip()
        out.append(line)
    return out


def svg(title, xlabel, ylabel, series, caption):
    """series: (label, points, color, dashed)."""
    caption = wrap(caption)
    w, h, l, r, top, bot = 900, 520, 70, 230, 40, 60
    cap_h = 16 * len(caption) + 10
    xs = [p[0] for _, pts, _, _ in series for p in pts] or [0, 1]
    ys = [p[1] for _, pts, _, _ in series for p in pts] or [0, 1]
    xt = nice_ticks(min(xs), max(xs))
    yt = nice_ticks(0, max(ys) * 1.05 if max(ys) > 0 else 1)
    x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]
    pw, ph = w - l - r, h - top - bot

    def X(x):
        return l + (x - x0) / (x1 - x0) * pw

    def Y(y):
        return top + ph - (y - y0) / (y1 - y0) * ph

    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
         'font-size="12">' % (w, h + cap_h), '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15">%s</text>' % (l, title)]
    for x in xt:
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (X(x), top, X(x), top + ph))
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (X(x), top + ph + 16, x))
    for y in yt:
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (l, Y(y), l + pw, Y(y)))
        o.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (l - 6, Y(y) + 4, y))
    o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' % (l, top, pw, ph))
    o.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (l + pw / 2, top + ph + 40, xlabel))
    o.append('<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle">%s</text>'
             % (top + ph / 2, ylabel))
    for k, (label, pts, color, dashed) in enumerate(series):
        if pts:
            d = " ".join("%.1f,%.1f" % (X(x), Y(min(y, y1))) for x, y in pts)
            o.append('<polyline fill="none" stroke="%s" stroke-width="1.4"%s points="%s"/>'
                     % (color, ' stroke-dasharray="6,3"' if dashed else "", d))
        ly = top + 10 + 18 * k
        o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>'
                 % (l + pw + 12, ly, l + pw + 40, ly, color, ' stroke-dasharray="6,3"' if dashed else ""))
        o.append('<text x="%d" y="%d">%s</text>' % (l + pw + 46, ly + 4, label))
    for k, line in enumerate(caption):
        o.append('<text x="%d" y="%d" font-size="11">%s</text>' % (10, h + 14 + 16 * k, line))
    o.append("</svg>")
    return "\n".join(o)


def smooth_tput(s, f, span=5):
    t, rx = s["t_us"], s["rx"][f]
    return [(t[i], (rx[i] - rx[i - span]) * 8 / ((t[i] - t[i - span]) * 1e3)) for i in range(span, len(t))]


def smooth_util(s, span=5):
    t, tx = s["t_us"], s["tx"]
    return [(t[i], (tx[i] - tx[i - span]) * 8 / ((t[i] - t[i - span]) * 1e3))
            for i in range(span, len(t))]


def write_outputs(sc, runs, figs, out, seed):
    os.makedirs(out, exist_ok=True)
    nf = len(sc.flows)
    stem = os.path.join(out, "hpcc-vs-uroce-" + sc.name + TAG[0])
    n = max(len(r["series"]["t_us"]) for r in runs.values())
    with open(stem + ".csv", "w") as f:
        for who, fg in figs.items():
            for k, v in fg.items():
                f.write("# %s %s=%g\n" % (who, k, v))
        cols = ["t_us"]
        for who in runs:
            cols += ["%s_queue_bytes" % who, "%s_util" % who]
            cols += ["%s_flow%d_rate_gbps" % (who, i) for i in range(nf)]
        f.write(",".join(cols) + "\n")
        for i in range(1, n):
            row = ["%g" % (i * SAMPLE_NS / 1e3)]
            for r in runs.values():
                s = r["series"]
                j = min(i, len(s["t_us"]) - 1)
                row.append("%g" % s["queue"][j])
                row.append("%.4g" % ((s["tx"][j] - s["tx"][j - 1]) * 8e9 / (LINE_BPS * SAMPLE_NS) if j == i else 0))
                row += ["%.4g" % (s["rate"][k][j] / 1e9) for k in range(nf)]
            f.write(",".join(row) + "\n")
    caption = ["%s, DCQCN on HPCC's run.py --cc dcqcn setting: 100 Gb/s, 1 us links, Kmin %d KB, "
               "Kmax %d KB, Pmax %g at dequeue; flows %s" % (
                   sc.name, MARK["kmin"], MARK["kmax"], MARK["pmax"], ", ".join("%d->%d %d B at %d us" % (a, b, c, d // 1000) for a, b, c, d in sc.flows)),
               "HPCC: ns-3 (alibaba-edu/High-Precision-Congestion-Control), 1000 B payload, no window, "
               "ACK per packet; uroce: uroce sim %s, seed %d, 1024 B MTU" % (" ".join(sc.uroce_args), seed)]
    for who, fg in figs.items():
        caption.append("%s: util %.3f, last done %.0f us, queue avg %.0f KB max %.0f KB, below 90%% for %.0f us, "
                       "min rate %.2f Gb/s, cuts %d" % (who, fg["util"], fg["last_done_us"], fg["queue_avg_kb"],
                                                        fg["queue_max_kb"], fg["below_90_us"], fg["min_rate_gbps"],
                                                        fg["rate_cuts"]))
    dash = {"hpcc": False, "uroce": True}
    show = range(nf) if nf <= 3 else [0, nf - 1]
    rate, tput, queue = [], [], []
    for who, r in runs.items():
        s = r["series"]
        for k in show:
            c = COLORS[k % len(COLORS)]
            rate.append(("%s flow %d" % (who, k), list(zip(s["t_us"], [v / 1e9 for v in s["rate"][k]])), c, dash[who]))
            tput.append(("%s flow %d" % (who, k), smooth_tput(s, k), c, dash[who]))
        tput.append(("%s link (util x line)" % who, smooth_util(s), "#000", dash[who]))
        queue.append(("%s queue" % who, list(zip(s["t_us"], [q / 1e3 for q in s["queue"]])),
                      COLORS[0] if who == "hpcc" else COLORS[1], False))
    for k, c in (("kmin", "#888"), ("kmax", "#444")):
        queue.append(("%s %d KB" % (k.capitalize(), MARK[k]), [(0, MARK[k]), (n * SAMPLE_NS / 1e3, MARK[k])], c, True))
    with open(stem + "-rate.svg", "w") as f:
        f.write(svg(sc.name + ": DCQCN rate, HPCC ns-3 (solid) and uroce (dashed)", "time (us)",
                    "rate (Gb/s)", rate, caption))
    with open(stem + "-throughput.svg", "w") as f:
        f.write(svg(sc.name + ": throughput (10 us average), HPCC ns-3 (solid) and uroce (dashed)",
                    "time (us)", "throughput (Gb/s)", tput, caption))
    with open(stem + "-queue.svg", "w") as f:
        f.write(svg(sc.name + ": bottleneck queue, HPCC ns-3 and uroce", "time (us)", "queue (KB)",
                    queue, caption))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hpcc", required=True, help="HPCC checkout (simulation/ built, analysis/trace_reader)")
    ap.add_argument("--uroce", default="build/release/tools/uroce")
    ap.add_argument("--out", default="out/hpcc-compare")
    ap.add_argument("--seeds", default="1", help="comma-separated: uroce --seed and HPCC's RngRun")
    ap.add_argument("--kmin", type=int, default=400, help="KB (uroce: KiB)")
    ap.add_argument("--kmax", type=int, default=1600, help="KB (uroce: KiB)")
    ap.add_argument("--pmax", type=float, default=0.2)
    ap.add_argument("--tag", default="", help="suffix for the output files")
    ap.add_argument("scenario", nargs="*", default=["incast", "parking-lot", "convergence"])
    a = ap.parse_args()
    MARK.update(kmin=a.kmin, kmax=a.kmax, pmax=a.pmax)
    TAG[0] = a.tag
    all_sc = scenarios()
    work = os.path.abspath(a.out)
    os.makedirs(work, exist_ok=True)
    keys = ["util", "last_done_us", "first_done_us", "last_over_ideal", "queue_avg_kb", "queue_max_kb",
            "below_90_us", "recover_us", "fair_from_us", "min_rate_gbps", "rate_cuts", "ce_marked", "pauses"]
    seeds = [int(x) for x in a.seeds.split(",")]
    for name in a.scenario:
        sc = all_sc[name]
        per_seed = []
        for seed in seeds:
            runs = {"hpcc": run_hpcc(sc, a.hpcc, work, seed), "uroce": run_uroce(sc, a.uroce, work, seed)}
            figs = {who: figures(sc, r) for who, r in runs.items()}
            per_seed.append(figs)
            if seed == seeds[0]:
                write_outputs(sc, runs, figs, work, seed)
                print("== %s (uroce: %s)" % (name, runs["uroce"]["cmd"]))
                for who in runs:
                    print("%s per-flow done_us (seed %d): %s" % (
                        who, seed, " ".join("%.0f" % (d / 1e3) for d in runs[who]["done_ns"])))
        print("%-14s %s" % ("figure", "  ".join("%-22s" % ("seed %d hpcc/uroce" % s) for s in seeds)) +
              "  mean hpcc / uroce / ratio")
        for k in keys:
            cells = ["%10.4g %10.4g" % (f["hpcc"][k], f["uroce"][k]) + "  " for f in per_seed]
            mh = sum(f["hpcc"][k] for f in per_seed) / len(per_seed)
            mu = sum(f["uroce"][k] for f in per_seed) / len(per_seed)
            print("%-14s %s %10.4g %10.4g %6.3f" % (k, "".join(cells), mh, mu, mu / mh if mh else float("nan")))


if __name__ == "__main__":
    main()
