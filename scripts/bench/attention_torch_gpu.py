#!/usr/bin/env python3
# PyTorch's F.scaled_dot_product_attention on the GPU (bf16, causal; its default choice and the
# flash and cuDNN backends forced), forward and backward timed with CUDA events (median), on the
# shape of `superoffload bench attention --gpu 1`: rows of the same table (scripts/bench/attention_gpu.sh).
import argparse
import contextlib
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of this script (fp32)")
    a = ap.parse_args()
    nkv = a.kv_heads or a.heads
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("attention_torch_gpu.py: no CUDA device visible to torch")
    torch.manual_seed(1234)
    dev, dt = a.device, torch.bfloat16 if cuda else torch.float32

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def uniform(*shape):
        return (torch.rand(*shape, device=dev) * 2 - 1).to(dt)

    q = uniform(a.batch, a.heads, a.seq, a.head_dim).requires_grad_(True)
    k = uniform(a.batch, nkv, a.seq, a.head_dim).requires_grad_(True)
    v = uniform(a.batch, nkv, a.seq, a.head_dim).requires_grad_(True)
    dout = uniform(a.batch, a.heads, a.seq, a.head_dim)
    extra = {"enable_gqa": True} if nkv != a.heads else {}
    fwd_flops = 4.0 * a.batch * a.heads * a.head_dim * (a.seq * (a.seq + 1) / 2)
    bwd_flops = 2.5 * fwd_flops

    backends = [("torch SDPA (default)", None)]
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends += [("torch SDPA flash", (sdpa_kernel, SDPBackend.FLASH_ATTENTION)),
                     ("torch SDPA cuDNN", (sdpa_kernel, SDPBackend.CUDNN_ATTENTION))]
    except ImportError:
        pass

    def median_ms(fn, before=None):
        times = []
        for _ in range(a.reps):
            if before:
                before()
            if cuda:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e))
            else:
                t = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t) * 1e3)
        times.sort()
        return times[len(times) // 2]

    for name, be in backends:
        ctx = be[0](be[1]) if be else contextlib.nullcontext()
        try:
            with ctx:
                def fwd():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, **extra)

                for _ in range(3):  # warm-up
                    fwd().backward(dout)
                tf = median_ms(lambda: fwd())
                holder = {}

                def make_graph():
                    for x in (q, k, v):
                        x.grad = None
                    holder["o"] = fwd()
                    sync()

                tb = median_ms(lambda: holder["o"].backward(dout), before=make_graph)
        except RuntimeError as err:
            print(f"  {name:22s} (unavailable: {str(err).splitlines()[0][:70]})")
            continue
        print(f"  {name:22s} {tf:10.3f} {fwd_flops / tf / 1e9:12.1f} {tb:10.3f} "
              f"{bwd_flops / tb / 1e9:12.1f}")
    where = torch.cuda.get_device_name() if cuda else "cpu"
    print(f"  (torch {torch.__version__}, {where})")


if __name__ == "__main__":
    main()
