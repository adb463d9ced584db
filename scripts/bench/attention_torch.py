#!/usr/bin/env python3
# PyTorch's F.scaled_dot_product_attention (causal, fp32, CPU) forward + backward on the shape of
# `superoffload bench attention`: best time of --reps and the resident-set peak above the inputs.
# Needs torch >= 2.0 (SDPA); Debian's python3-torch 1.13 lacks it: see scripts/bench/attention.sh.
import argparse
import time

import torch
import torch.nn.functional as F


def status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return -1


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    if not hasattr(F, "scaled_dot_product_attention"):
        raise SystemExit(f"torch {torch.__version__} has no F.scaled_dot_product_attention "
                         "(needs >= 2.0): see scripts/bench/attention.sh")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    hd = a.channels // a.heads

    def make(seq):
        shape = (a.batch, a.heads, seq, hd)
        q, k, v = (torch.rand(shape) * 2 - 1 for _ in range(3))
        for x in (q, k, v):
            x.requires_grad_(True)
        return q, k, v, torch.rand(shape) * 2 - 1

    def step(q, k, v, dout):
        for x in (q, k, v):
            x.grad = None
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(dout)

    # warm-up on a small problem (thread pool, kernels), so that the measured call's memory is
    # not served from blocks a full-size warm-up left resident
    step(*make(64))
    inputs = make(a.seq)
    peak = -1.0
    if reset_peak():
        before = status_kib("VmRSS:")
        step(*inputs)
        peak = (status_kib("VmHWM:") - before) / 1024.0
    best = 1e30
    for _ in range(a.reps):
        t = time.perf_counter()
        step(*inputs)
        best = min(best, time.perf_counter() - t)
    flops = 14.0 * a.batch * a.heads * (a.seq * a.seq / 2) * hd
    print(f"  {'torch ' + torch.__version__ + ' SDPA':26s} {best:10.3f} {flops / best / 1e9:12.1f} "
          f"{peak:14.1f}")


if __name__ == "__main__":
    main()
