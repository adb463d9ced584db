#!/usr/bin/python3
# Writes tests/data/adam_ref.bin: torch.optim.AdamW / torch.optim.Adam(L2) steps on seeded data,
# the PyTorch side of the optimizer plugin conformance test (tests/optim). Needs python3-torch.
#
# Format (little endian), version 1:
#   char[8] magic "SOFADAM1"; u32 version=1; u32 ncases
#   per case: u32 n; u32 nsteps; u32 mode (0 AdamW, 1 Adam+L2); u32 grad_bf16 (grads rounded to
#             bf16 before scaling); i64 start_step (optimizer step count before the first step);
#             f32 lr, beta1, beta2, eps, weight_decay, grad_scale;
#             f32 p0[n], m0[n], v0[n]; f32 graw[nsteps][n] (unscaled grads, bf16-exact when
#             grad_bf16); f32 p[n], m[n], v[n] after the nsteps torch steps.
# torch sees grad = float32(graw) * grad_scale (fp32 multiply), exactly what a plugin computes.
import argparse
import struct

import torch

CASES = [
    # name, n, nsteps, mode, grad_bf16, start_step, lr, b1, b2, eps, wd, scale
    ("adamw_decay_step1", 1031, 1, 0, 0, 0, 1e-3, 0.9, 0.999, 1e-8, 0.1, 1.0),
    ("adamw_nodecay_step1", 517, 1, 0, 0, 0, 3e-4, 0.9, 0.95, 1e-8, 0.0, 1.0),
    ("adamw_decay_step1000", 1031, 1, 0, 0, 999, 1e-3, 0.9, 0.999, 1e-8, 0.1, 1.0),
    ("adamw_bf16grad_scaled", 777, 3, 0, 1, 0, 2e-3, 0.9, 0.999, 1e-6, 0.05, 0.125),
    ("adamw_scaled_steps20", 4099, 20, 0, 0, 0, 6e-4, 0.9, 0.95, 1e-8, 0.1, 0.37),
    ("adam_l2", 1031, 5, 1, 0, 0, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1.0),
    ("adam_l2_step1000_bf16", 300, 2, 1, 1, 999, 1e-3, 0.8, 0.99, 1e-8, 0.02, 2.0),
]


def bf16_exact(x):
    return x.to(torch.bfloat16).to(torch.float32)


def run_case(gen, n, nsteps, mode, grad_bf16, start_step, lr, b1, b2, eps, wd, scale):
    p0 = torch.randn(n, generator=gen, dtype=torch.float32) * 0.5
    if start_step > 0:
        m0 = torch.randn(n, generator=gen, dtype=torch.float32) * 0.01
        v0 = torch.rand(n, generator=gen, dtype=torch.float32) * 1e-4
    else:
        m0 = torch.zeros(n, dtype=torch.float32)
        v0 = torch.zeros(n, dtype=torch.float32)
    grads = []
    for _ in range(nsteps):
        g = torch.randn(n, generator=gen, dtype=torch.float32) * 0.02
        if grad_bf16:
            g = bf16_exact(g)
        grads.append(g)

    p = torch.nn.Parameter(p0.clone())
    if mode == 0:
        opt = torch.optim.AdamW([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd,
                                foreach=False)
    else:
        opt = torch.optim.Adam([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd,
                               foreach=False)
    if start_step > 0:
        opt.state[p] = {"step": torch.tensor(float(start_step)), "exp_avg": m0.clone(),
                        "exp_avg_sq": v0.clone()}
    for g in grads:
        p.grad = g * torch.tensor(scale, dtype=torch.float32)
        opt.step()
    st = opt.state[p]
    return p0, m0, v0, grads, p.detach(), st["exp_avg"], st["exp_avg_sq"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/adam_ref.bin")
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(20260523)
    with open(args.out, "wb") as f:
        f.write(b"SOFADAM1")
        f.write(struct.pack("<II", 1, len(CASES)))
        for (name, n, nsteps, mode, gbf, start, lr, b1, b2, eps, wd, scale) in CASES:
            p0, m0, v0, grads, p, m, v = run_case(gen, n, nsteps, mode, gbf, start, lr, b1, b2,
                                                  eps, wd, scale)
            f.write(struct.pack("<IIIIq", n, nsteps, mode, gbf, start))
            f.write(struct.pack("<6f", lr, b1, b2, eps, wd, scale))
            for t in [p0, m0, v0] + grads + [p, m, v]:
                f.write(t.contiguous().numpy().astype("<f4").tobytes())
            print(f"{name}: n={n} steps={nsteps} mode={mode} start={start}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
