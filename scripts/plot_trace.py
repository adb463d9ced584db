#!/usr/bin/env python3
# Draws the overlap timeline of a superoffload Chrome trace (runtime.trace / engine_driver --trace):
# one row per lane (engine, cpu optimizer, device streams); PNG via matplotlib, or SVG with no deps.
"""Usage: plot_trace.py TRACE.json [-o out.png|out.svg] [--steps K] [--summary-only]

Reads the {"traceEvents": [...]} file written by core::Trace, keeps the last K optimizer steps
(K from --steps, counted by the engine's "forward" spans of micro-batch starts; default: all),
prints per-lane busy time and how much of the CPU optimizer and transfer work overlapped the
model's backward, and draws one horizontal bar per span, colored by kind.
"""

import argparse
import json
import sys

COLORS = [  # (name prefix, color, legend label)
    ("forward", "#4c72b0", "forward"),
    ("backward", "#55a868", "backward"),
    ("adam", "#c44e52", "CPU / device Adam"),
    ("inverse", "#8c1c13", "inverse rollback"),
    ("D2H", "#dd8452", "D2H copy"),
    ("H2D", "#8172b3", "H2D copy"),
    ("D2D", "#937860", "D2D copy"),
    ("grad prep", "#da8bc3", "grad stats"),
    ("cast", "#ccb974", "cast"),
    ("finish step", "#8c8c8c", "finish_step (validate/wait)"),
    ("memset", "#b0b0b0", "memset"),
    ("bucket", "#000000", "bucket marker (next transfers)"),
]


def color_of(name):
    for prefix, col, _ in COLORS:
        if name.startswith(prefix):
            return col
    return "#64b5cd"


def load(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    lanes, order, spans, instants = {}, {}, [], []
    for e in events:
        ph = e.get("ph")
        if ph == "M" and e.get("name") == "thread_name":
            lanes[e["tid"]] = e["args"]["name"]
        elif ph == "M" and e.get("name") == "thread_sort_index":
            order[e["tid"]] = e["args"]["sort_index"]
        elif ph == "X":
            spans.append((e["tid"], e["name"], float(e["ts"]), float(e["ts"]) + float(e["dur"])))
        elif ph == "i":
            instants.append((e["tid"], e["name"], float(e["ts"])))
    for tid, _, _, _ in spans:
        lanes.setdefault(tid, "lane %d" % tid)
    tids = sorted(lanes, key=lambda t: (order.get(t, t), t))
    return lanes, tids, spans, instants


def window(lanes, spans, steps):
    """Start time of the last `steps` steps: begins of 'forward' spans that follow a finish step."""
    if not steps:
        return None
    engine = [t for t, n in lanes.items() if n == "engine"]
    fwd = sorted(s[2] for s in spans if s[0] in engine and s[1] == "forward")
    fin = sorted(s[3] for s in spans if s[0] in engine and s[1] == "finish step")
    starts, prev_end = [], -1.0
    for t in fwd:  # a step starts with the first forward after the previous finish step
        ended = [f for f in fin if f <= t]
        last_fin = ended[-1] if ended else -1.0
        if last_fin != prev_end or not starts:
            starts.append(t)
            prev_end = last_fin
    return starts[-steps] if len(starts) >= steps else (starts[0] if starts else None)


def union_len(iv):
    total, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(iv):
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def overlap_len(iv, ref):
    """Length of union(iv) intersected with union(ref)."""
    total = 0.0
    for a, b in iv:
        for c, d in ref:
            lo, hi = max(a, c), min(b, d)
            if hi > lo:
                total += hi - lo
    return total


def summary(lanes, tids, spans):
    t0 = min(s[2] for s in spans)
    t1 = max(s[3] for s in spans)
    print("window: %.1f ms, %d spans" % ((t1 - t0) / 1e3, len(spans)))
    for tid in tids:
        iv = [(s[2], s[3]) for s in spans if s[0] == tid]
        if iv:
            print("  %-22s busy %9.1f ms  (%d spans)" % (lanes[tid], union_len(iv) / 1e3, len(iv)))
    bwd = [(s[2], s[3]) for s in spans if s[1] == "backward"]
    if not bwd:
        return
    for label, pred in (
        ("CPU optimizer", lambda n, s: lanes[s[0]] == "cpu optimizer"),
        ("D2H copies", lambda n, s: n.startswith("D2H")),
        ("H2D copies", lambda n, s: n.startswith("H2D")),
    ):
        iv = [(s[2], s[3]) for s in spans if pred(s[1], s)]
        if not iv:
            continue
        busy = union_len(iv)
        ov = overlap_len(iv, bwd)
        print("  %-14s %8.1f ms, %5.1f%% of it overlapped backward" %
              (label, busy / 1e3, 100.0 * ov / busy if busy > 0 else 0.0))


def draw_svg(path, lanes, tids, spans, instants, t0, t1):
    width, left, row, top = 1400, 190, 26, 30
    scale = (width - left - 20) / max(t1 - t0, 1.0)
    h = top + row * len(tids) + 40 + 18 * ((len(COLORS) + 3) // 4)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (width, h),
           '<rect width="100%" height="100%" fill="white"/>']
    y_of = {tid: top + i * row for i, tid in enumerate(tids)}
    for tid in tids:
        y = y_of[tid]
        out.append('<text x="5" y="%d">%s</text>' % (y + 15, lanes[tid]))
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#eee"/>' %
                   (left, width - 20, y + row - 2, y + row - 2))
    for tid, name, a, b in spans:
        if tid not in y_of:
            continue
        x = left + (a - t0) * scale
        w = max((b - a) * scale, 0.5)
        out.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s"><title>%s %.3f ms'
                   '</title></rect>' % (x, y_of[tid] + 3, w, row - 8, color_of(name), name,
                                        (b - a) / 1e3))
    for tid, name, t in instants:
        if tid in y_of:
            x = left + (t - t0) * scale
            out.append('<line x1="%.2f" x2="%.2f" y1="%d" y2="%d" stroke="red"><title>%s</title>'
                       '</line>' % (x, x, y_of[tid], y_of[tid] + row, name))
    ly = top + row * len(tids) + 20
    out.append('<text x="%d" y="%d">%.1f ms shown</text>' % (left, ly - 5, (t1 - t0) / 1e3))
    for i, (_, col, label) in enumerate(COLORS):
        x = left + (i % 4) * 280
        y = ly + 18 * (i // 4)
        out.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (x, y, col))
        out.append('<text x="%d" y="%d">%s</text>' % (x + 16, y + 10, label))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out))


def draw_png(path, lanes, tids, spans, instants, t0, t1):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    fig, ax = plt.subplots(figsize=(16, 0.45 * len(tids) + 1.5))
    y_of = {tid: len(tids) - 1 - i for i, tid in enumerate(tids)}
    for tid, name, a, b in spans:
        if tid in y_of:
            ax.barh(y_of[tid], (b - a) / 1e3, left=(a - t0) / 1e3, height=0.7,
                    color=color_of(name), edgecolor="none")
    for tid, name, t in instants:
        if tid in y_of:
            ax.plot([(t - t0) / 1e3] * 2, [y_of[tid] - 0.4, y_of[tid] + 0.4], color="red")
    ax.set_yticks([y_of[t] for t in tids])
    ax.set_yticklabels([lanes[t] for t in tids])
    ax.set_xlabel("ms")
    ax.set_xlim(0, (t1 - t0) / 1e3)
    ax.legend(handles=[Patch(color=c, label=l) for _, c, l in COLORS], ncol=6, fontsize=7,
              loc="upper center", bbox_to_anchor=(0.5, -0.25))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", help="out.png (matplotlib) or out.svg (no dependencies)")
    ap.add_argument("--steps", type=int, default=0, help="keep only the last K steps")
    args = ap.parse_args()
    lanes, tids, spans, instants = load(args.trace)
    if not spans:
        sys.exit("plot_trace: %s has no spans" % args.trace)
    start = window(lanes, spans, args.steps)
    if start is not None:
        spans = [s for s in spans if s[3] >= start]
        instants = [i for i in instants if i[2] >= start]
    summary(lanes, tids, spans)
    if not args.output:
        return
    t0 = min(s[2] for s in spans)
    t1 = max(s[3] for s in spans)
    if args.output.endswith(".svg"):
        draw_svg(args.output, lanes, tids, spans, instants, t0, t1)
    else:
        try:
            draw_png(args.output, lanes, tids, spans, instants, t0, t1)
        except ImportError:
            sys.exit("plot_trace: matplotlib is not installed; write an .svg instead (-o out.svg)")
    print("wrote", args.output)


if __name__ == "__main__":
    main()
