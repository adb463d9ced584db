#!/usr/bin/env python3
# Draws a run's training curves from its metrics JSONL (runtime.out_dir/metrics.jsonl): loss (train
# and validation), learning rate and grad norm over the steps; the companion of plot_trace.py.
"""Usage: plot_metrics.py METRICS.jsonl [-o out.png|out.svg] [--summary-only]

Reads the "step" records (loss, lr, grad_norm, skipped, clipped) and the "eval" records
(val_loss) of a metrics file written by `superoffload train` (a resumed run appends to it; the
last record of each step wins), prints a one-line summary and draws three panels sharing the step
axis: loss (train, and validation as points), lr, grad norm (clipped steps marked, skipped steps
left out). PNG or SVG by the output's extension (matplotlib: python3-matplotlib).
"""

import argparse
import json
import math
import sys


def load(path):
    steps, evals = {}, {}
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_metrics.py: {path}:{ln}: not JSON ({e})")
            if r.get("kind") == "step":
                steps[int(r["step"])] = r
            elif r.get("kind") == "eval":
                evals[int(r["step"])] = r["val_loss"]
            elif r.get("kind") == "summary":  # the final evaluation
                evals[int(r["steps"])] = r["last_val_loss"]
    if not steps:
        sys.exit(f"plot_metrics.py: {path} has no step records (is it a superoffload metrics "
                 "file? train.metrics / runtime.out_dir/metrics.jsonl)")
    return [steps[k] for k in sorted(steps)], sorted(evals.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("metrics")
    ap.add_argument("-o", "--out", default="metrics.png")
    ap.add_argument("--summary-only", action="store_true")
    a = ap.parse_args()
    steps, evals = load(a.metrics)
    xs = [r["step"] for r in steps]
    loss = [r["loss"] for r in steps]
    lr = [r["lr"] for r in steps]
    ok = [r for r in steps if not r.get("skipped") and math.isfinite(r["grad_norm"])]
    clipped = sum(1 for r in steps if r.get("clipped"))
    print(f"{len(steps)} steps ({xs[0]}..{xs[-1]}): loss {loss[0]:.4f} -> {loss[-1]:.4f}, lr "
          f"{min(lr):.3g}..{max(lr):.3g}, grad norm {min(r['grad_norm'] for r in ok):.3g}.."
          f"{max(r['grad_norm'] for r in ok):.3g} ({clipped} clipped, "
          f"{len(steps) - len(ok)} skipped)" +
          (f", val loss {evals[0][1]:.4f} -> {evals[-1][1]:.4f}" if evals else ""))
    if a.summary_only:
        return 0
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(3, 1, sharex=True, figsize=(9, 8))
    ax[0].plot(xs, loss, lw=1, label="train loss")
    if evals:
        ax[0].plot([s for s, _ in evals], [v for _, v in evals], "o-", ms=4, label="val loss")
    ax[0].set_ylabel("loss (nats/token)")
    ax[0].legend()
    ax[1].plot(xs, lr, color="#c44e52", lw=1)
    ax[1].set_ylabel("learning rate")
    ax[2].plot([r["step"] for r in ok], [r["grad_norm"] for r in ok], color="#55a868", lw=1,
               label="grad norm (before clipping)")
    cl = [r for r in ok if r.get("clipped")]
    if cl:
        ax[2].plot([r["step"] for r in cl], [r["grad_norm"] for r in cl], "x", color="black",
                   label="clipped")
    ax[2].set_ylabel("grad norm")
    ax[2].set_xlabel("step")
    ax[2].legend()
    for x in ax:
        x.grid(alpha=0.3)
    fig.suptitle(a.metrics)
    fig.tight_layout()
    fig.savefig(a.out, dpi=100)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
