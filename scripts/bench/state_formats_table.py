#!/usr/bin/env python3
# Table of the state-format convergence runs (scripts/bench/state_formats_convergence.sh): every
# 100 steps each format's train loss (mean of the 10 steps ending there) and its gap to the yardstick.
# usage: state_formats_table.py OUT_DIR [EVERY] [--markdown]
#   EVERY: the step interval (default 100); --markdown: only the val-loss table, as the docs show it
import json
import os
import sys

# bf16 master params run with bf16 compute, so their yardstick is bf16_train (also for q8 moments with
# bf16 master, the 70B plan's state); the rest compare to fp32.
FORMATS = ["fp32", "bf16_moments", "q8_moments", "bf16_train", "bf16_master", "q8_bf16_master"]
YARDSTICK = {"bf16_master": "bf16_train", "q8_bf16_master": "bf16_train"}


def load(path):
    train, val = {}, {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == "step":
                train[r["step"]] = r["loss"]
            elif r.get("kind") == "eval":
                val[r["step"]] = r["val_loss"]
            elif r.get("kind") == "summary":  # the final eval is only in the summary line
                val[r["steps"]] = r["last_val_loss"]
    return train, val


def smooth(train, step):
    xs = [train[s] for s in range(step - 9, step + 1) if s in train]
    return sum(xs) / len(xs) if len(xs) == 10 else None


LABEL = {"fp32": "fp32", "bf16_moments": "bf16 moments", "q8_moments": "q8 moments",
         "bf16_train": "bf16 compute", "bf16_master": "bf16 master (gap to bf16 compute)",
         "q8_bf16_master": "q8 moments + bf16 master (gap to bf16 compute)"}


def markdown(runs, names, every, last):
    """The val loss every `every` steps and each format's gap to its yardstick (Markdown)."""
    print("| step | " + " | ".join(LABEL[n] for n in names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for step in range(every, last + 1, every):
        cells = []
        for n in names:
            v, ref = runs[n][1].get(step), YARDSTICK.get(n, "fp32")
            y = runs[ref][1].get(step) if ref in runs else None
            if v is None:
                cells.append("-")
            elif n == "fp32" or y is None:
                cells.append(f"{v:.4f}")
            else:
                cells.append(f"{v:.4f} ({v - y:+.4f})")
        print(f"| {step} | " + " | ".join(cells) + " |")


def main():
    args = [a for a in sys.argv[1:] if a != "--markdown"]
    out = args[0]
    every = int(args[1]) if len(args) > 1 else 100
    runs = {f: load(os.path.join(out, f, "metrics.jsonl")) for f in FORMATS
            if os.path.exists(os.path.join(out, f, "metrics.jsonl"))}
    names = list(runs)
    last = min(max(t) for t, _ in runs.values())
    if "--markdown" in sys.argv:
        markdown(runs, names, every, last)
        return
    print("train loss (mean of 10 steps) and gap to yardstick (fp32; bf16_master, q8_bf16_master: bf16_train)")
    print("step  " + "  ".join(f"{n:>22}" for n in names))
    gaps = {n: [] for n in names}
    for step in range(every, last + 1, every):
        cells = []
        for n in names:
            v = smooth(runs[n][0], step)
            y = smooth(runs[YARDSTICK.get(n, "fp32")][0], step) if YARDSTICK.get(n, "fp32") in runs else None
            if v is None or y is None:
                cells.append(f"{'-':>22}")
                continue
            gaps[n].append(v - y)
            cells.append(f"{v:10.4f} ({v - y:+.4f})")
        print(f"{step:<5} " + "  ".join(cells))
    print(f"val loss every {every} steps and gap to yardstick")
    print("step  " + "  ".join(f"{n:>22}" for n in names))
    for step in range(every, last + 1, every):
        cells = []
        for n in names:
            v, y = runs[n][1].get(step), runs.get(YARDSTICK.get(n, "fp32"), ({}, {}))[1].get(step)
            cells.append(f"{v:10.4f} ({v - y:+.4f})" if v is not None and y is not None else f"{'-':>22}")
        print(f"{step:<5} " + "  ".join(cells))
    print("val loss at the last common eval step and gap")
    vstep = min(max(v) for _, v in runs.values())
    for n in names:
        v = runs[n][1][vstep]
        y = runs.get(YARDSTICK.get(n, "fp32"), ({}, {}))[1].get(vstep, float("nan"))
        mg = max((abs(g) for g in gaps[n]), default=float("nan"))
        print(f"{n:>14} step {vstep}: val {v:.4f} gap {v - y:+.4f}; max |train gap| steps {every}..{last}: {mg:.4f}")


if __name__ == "__main__":
    main()
