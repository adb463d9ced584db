#!/usr/bin/env python3
# `superoffload eval` throughput against the forward part of training, same model and batch, at
# runtime.threads 1 and 2: rounds of (train: the step log's forward ms of steps 2..N; eval
# --checkpoint: its tok/s), alternating, medians reported (docs/performance.md).
"""Usage: scripts/bench/eval_vs_train.py [--bin build/bin/superoffload] [--rounds 5]
                                      [--threads 1 2] [--work /tmp/sof-bench-eval]

The model: GPT-2, 4 layers, 256 channels, vocabulary 4096, batch 8 x 128 tokens, host device,
built-in data. Prints one line per run (with the load average) and the medians per thread count.
Standard library only.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys

DECK = """model: {{num_layers: 4, num_heads: 4, channels: 256, max_seq_len: 128, vocab_size: 4096}}
data: {{builtin: {{train_tokens: 200000, val_tokens: 40000}}}}
train: {{batch_size: 8, seq_len: 128, steps: {steps}, lr: 1.0e-3, eval_batches: 1, log_every: 1,
  checkpoint_dir: {ckpt}, checkpoint_every: {steps}}}
device: {{type: host}}
runtime: {{out_dir: {out}, threads: 1}}
"""
B, T = 8, 128


def run(cmd, cwd):
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout + r.stderr


def load():
    return "%.1f" % os.getloadavg()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/bin/superoffload")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batches", type=int, default=20, help="eval batches")
    ap.add_argument("--work", default="/tmp/sof-bench-eval")
    a = ap.parse_args()
    binary = os.path.abspath(a.bin)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    deck = os.path.join(a.work, "deck.yaml")
    with open(deck, "w") as f:
        f.write(DECK.format(steps=a.steps, ckpt="ck", out="out"))
    run([binary, "train", deck], a.work)  # the checkpoint eval reads
    train_rate, eval_rate = {}, {}
    for rnd in range(a.rounds):
        for th in a.threads:
            log = run([binary, "train", deck, "--set", f"runtime.threads={th}", "--set",
                       "train.checkpoint_dir=", "--set", "train.checkpoint_every=0", "--set",
                       "runtime.out_dir=out_t"], a.work)
            fwd = [float(x) for x in re.findall(r"\(fwd ([0-9.]+) bwd", log)][1:]  # not step 1
            tr = B * T / (statistics.median(fwd) / 1e3)
            out = run([binary, "eval", "--checkpoint", "ck", "--batches", str(a.batches),
                       "--set", f"runtime.threads={th}"], a.work)
            ev = float(re.search(r"\| ([0-9.]+) tok/s \|", out).group(1))
            train_rate.setdefault(th, []).append(tr)
            eval_rate.setdefault(th, []).append(ev)
            print(f"round {rnd + 1} threads {th}: train forward {tr:8.0f} tok/s (median of "
                  f"steps 2..{a.steps}: {statistics.median(fwd):.1f} ms), eval {ev:8.0f} tok/s, "
                  f"eval/train {ev / tr:.3f} (load {load()})", flush=True)
    for th in a.threads:
        t, e = statistics.median(train_rate[th]), statistics.median(eval_rate[th])
        ratios = [x / y for x, y in zip(eval_rate[th], train_rate[th])]
        print(f"threads {th}: train forward {t:.0f} tok/s, eval {e:.0f} tok/s (medians of "
              f"{a.rounds}); eval/train per round: median {statistics.median(ratios):.3f}, "
              f"min {min(ratios):.3f}, max {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
