#!/usr/bin/env python3
# Validation-loss curves of the state-format convergence runs (state_formats_convergence.sh) as a
# small hand-written SVG (text, diff-able, no plotting package): one column per run directory.
"""Usage: state_formats_plot.py OUT_DIR[=TITLE] [OUT_DIR[=TITLE] ...] -o FILE.svg [--skip-first]
                             [--vs-fp32]

Reads OUT_DIR/<format>/metrics.jsonl as scripts/bench/state_formats_table.py does (the same
formats and yardsticks) and draws, per directory, two panels sharing the step axis: the val loss
of every format at every eval step, and below it each format's gap to its yardstick (fp32; bf16
master, alone or with q8 moments, against bf16 compute). --skip-first leaves the step-0 eval out
of the loss panel (it stretches the axis; the gap there is 0 for every format). --vs-fp32 draws
every format's gap to fp32 instead (where the bf16-compute yardstick itself is off fp32).
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from state_formats_table import FORMATS, YARDSTICK, load  # noqa: E402

# one row per format: legend label, colour, dash pattern
STYLE = {
    "fp32": ("fp32", "#000000", ""),
    "bf16_moments": ("bf16 moments", "#1f77b4", ""),
    "q8_moments": ("q8 moments", "#d62728", ""),
    "bf16_train": ("bf16 compute", "#2ca02c", "6,3"),
    "bf16_master": ("bf16 master (gap to bf16 compute)", "#9467bd", "2,2"),
    "q8_bf16_master": ("q8 moments + bf16 master (gap to bf16 compute)", "#ff7f0e", "8,2,2,2"),
}
PANEL_W, LOSS_H, GAP_H = 420, 230, 170
LEFT, RIGHT, TOP, GAP_TOP, BOTTOM = 62, 16, 34, 40, 40
LEGEND_COL, LEGEND_ROW, CHAR_W = 260, 20, 6.2  # legend slot width, row height, ~px per char at 11px


def nice_ticks(lo, hi, n=5):
    """About n round tick values covering [lo, hi] (1, 2, 2.5 or 5 times a power of ten)."""
    if hi <= lo:
        hi = lo + 1e-9
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks, t = [], first
    while t <= hi + step * 1e-6:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks, step


def fmt_tick(v, step):
    digits = max(0, -int(math.floor(math.log10(step)))) if step < 1 else 0
    if step < 1 and abs(step * 10 ** digits - round(step * 10 ** digits)) > 1e-9:
        digits += 1
    s = f"{v:.{digits}f}"
    return "0" if float(s) == 0 else s


def panel(out, x0, y0, w, h, xs_range, series, title, ylabel, zero_line=False):
    """One panel: axes, grid, ticks, one polyline (with point marks) per series."""
    (xlo, xhi), ys = xs_range, [v for _, pts, _ in series for _, v in pts]
    ylo, yhi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if zero_line:
        ylo, yhi = min(ylo, 0.0), max(yhi, 0.0)
    pad = (yhi - ylo) * 0.05 or 1e-4
    yt, ystep = nice_ticks(ylo - pad, yhi + pad)
    xt, xstep = nice_ticks(xlo, xhi, 5)
    ylo, yhi, xlo, xhi = yt[0], yt[-1], xt[0], xt[-1]
    px = lambda x: x0 + (x - xlo) / (xhi - xlo) * w  # noqa: E731
    py = lambda y: y0 + h - (y - ylo) / (yhi - ylo) * h  # noqa: E731
    out.append(f'<text x="{x0 + w / 2:.1f}" y="{y0 - 10:.1f}" text-anchor="middle" '
               f'font-size="13">{title}</text>')
    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#888"/>')
    for t in yt:
        out.append(f'<line x1="{x0}" y1="{py(t):.1f}" x2="{x0 + w}" y2="{py(t):.1f}" '
                   f'stroke="{"#999" if zero_line and t == 0 else "#e4e4e4"}"/>')
        out.append(f'<text x="{x0 - 5}" y="{py(t) + 4:.1f}" text-anchor="end" font-size="10">'
                   f'{fmt_tick(t, ystep)}</text>')
    for t in xt:
        out.append(f'<line x1="{px(t):.1f}" y1="{y0 + h}" x2="{px(t):.1f}" y2="{y0 + h + 4}" '
                   f'stroke="#888"/>')
        out.append(f'<text x="{px(t):.1f}" y="{y0 + h + 16}" text-anchor="middle" font-size="10">'
                   f'{fmt_tick(t, xstep)}</text>')
    out.append(f'<text x="{x0 + w / 2:.1f}" y="{y0 + h + 31}" text-anchor="middle" '
               f'font-size="11">step</text>')
    out.append(f'<text transform="translate({x0 - 48},{y0 + h / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle" font-size="11">{ylabel}</text>')
    for name, pts, _ in series:
        _, colour, dash = STYLE[name]
        d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="1.3"'
                   f'{dash_attr}/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="1.8" fill="{colour}"/>')


def column(out, x0, out_dir, title, skip_first, vs_fp32=False):
    runs = {f: load(os.path.join(out_dir, f, "metrics.jsonl")) for f in FORMATS
            if os.path.exists(os.path.join(out_dir, f, "metrics.jsonl"))}
    if not runs:
        sys.exit(f"state_formats_plot.py: no <format>/metrics.jsonl under {out_dir}")
    loss, gaps = [], []
    for name, (_, val) in runs.items():
        steps = sorted(s for s in val if not (skip_first and s == 0))
        loss.append((name, [(s, val[s]) for s in steps], None))
        ref = "fp32" if vs_fp32 else YARDSTICK.get(name, "fp32")
        if ref in runs:
            rv = runs[ref][1]
            gaps.append((name, [(s, val[s] - rv[s]) for s in sorted(val) if s in rv], None))
    steps = [s for _, pts, _ in loss for s, _ in pts]
    xr = (0, max(steps))
    panel(out, x0 + LEFT, TOP, PANEL_W, LOSS_H, xr, loss, title, "val loss")
    panel(out, x0 + LEFT, TOP + LOSS_H + BOTTOM + GAP_TOP, PANEL_W, GAP_H, (0, xr[1]), gaps,
          "val loss gap to fp32" if vs_fp32 else
          "val loss gap to the yardstick (fp32; bf16 master: bf16 compute)", "gap", zero_line=True)
    return set(runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", help="run directories, each OUT_DIR or OUT_DIR=TITLE")
    ap.add_argument("-o", "--out", required=True, help="the SVG file to write")
    ap.add_argument("--skip-first", action="store_true", help="no step-0 eval in the loss panels")
    ap.add_argument("--vs-fp32", action="store_true", help="every format's gap to fp32")
    a = ap.parse_args()
    col_w = LEFT + PANEL_W + RIGHT
    width = col_w * len(a.dirs)
    legend_y = TOP + LOSS_H + BOTTOM + GAP_TOP + GAP_H + BOTTOM + 8
    body, seen = [], set()
    for i, spec in enumerate(a.dirs):
        d, _, title = spec.partition("=")
        seen |= column(body, i * col_w, d, title or os.path.basename(os.path.normpath(d)),
                       a.skip_first, a.vs_fp32)
    # legend entries flow left to right in slots of LEGEND_COL px (a long label takes as many as
    # it needs); a row ends where the next entry's text would cross the right edge
    lx, ly = LEFT, legend_y
    for name in (n for n in FORMATS if n in seen):
        label, colour, dash = STYLE[name]
        if a.vs_fp32:  # every gap is to fp32: no "(gap to bf16 compute)"
            label = label.split(" (gap")[0]
        text_w = 30 + len(label) * CHAR_W
        slots = math.ceil(text_w / LEGEND_COL)
        if lx > LEFT and lx + text_w > width - RIGHT:
            lx, ly = LEFT, ly + LEGEND_ROW
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        body.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{colour}" '
                    f'stroke-width="2"{dash_attr}/>')
        body.append(f'<text x="{lx + 30}" y="{ly + 4}" font-size="11">{label}</text>')
        lx += slots * LEGEND_COL
    height = ly + LEGEND_ROW + 10
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
           f'<rect width="{width}" height="{height}" fill="#fff"/>'] + body + ["</svg>"]
    with open(a.out, "w") as f:
        f.write("\n".join(svg) + "\n")
    print(f"state_formats_plot.py: wrote {a.out} ({os.path.getsize(a.out)} bytes)")


if __name__ == "__main__":
    main()
