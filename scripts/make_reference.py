#!/usr/bin/python3
# Writes tests/data/gpt2_ref.bin: a tiny GPT-2 in PyTorch (float64), the oracle for tests/model
# (logits, loss, every grad, 10 AdamW steps with clipping) and tests/train. Needs python3-torch.
#
# Usage: /usr/bin/python3 scripts/make_reference.py tests/data/gpt2_ref.bin
#
# The model is llm.c's GPT-2: learned positions, LayerNorm (eps 1e-5, biased variance), GELU (tanh
# approximation), causal attention with scale 1/sqrt(hs), LM head tied to wte over the padded vocab
# (rows V..Vp-1 of wte hold random values here: their logits are computed and stored, but excluded
# from the softmax, so their grads are exactly zero), mean cross-entropy over B*T positions.
# Everything is computed in float64 and rounded to float32 when written, so a C++ fp32 result is
# compared against the exact answer (tolerances then measure only the C++ side's rounding).
#
# File format (little endian), version 1 (reader: tests/model/gpt2_reference.h):
#   char[8] magic "SOFGPT2R"; u32 version = 1
#   i32 max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels
#   i32 B, T, steps
#   f64 lr, beta1, beta2, eps, weight_decay, grad_clip
#   u32 num_tensors, then per tensor:
#     u32 name_len; char name[name_len]; u32 dtype (0 = f32, 1 = i32); u32 ndim; i64 dims[ndim];
#     data (prod(dims) elements of dtype)
#   char[8] end marker "SOFGPT2E"
# Tensors:
#   inputs (B,T) i32, targets (B,T) i32, logits (B,T,Vp), loss (1)
#   param.<n>, grad.<n>, final.<n> for the 16 llm.c tensors <n> in llm.c shapes: wte (Vp,C),
#     wpe (maxT,C), ln1w (L,C), ln1b (L,C), qkvw (L,3C,C), qkvb (L,3C), attprojw (L,C,C),
#     attprojb (L,C), ln2w (L,C), ln2b (L,C), fcw (L,4C,C), fcb (L,4C), fcprojw (L,C,4C),
#     fcprojb (L,C), lnfw (C), lnfb (C). param = initial, grad = d loss / d param at the initial
#     params, final = after `steps` optimizer steps. sens.<n>: per element, the largest
#     |final' - final| over SENS_RUNS re-runs whose grads got fp32-sized random errors (GRAD_NOISE
#     times the tensor's max |grad|, every step): Adam turns tiny grads (like the key bias's, which
#     is exactly zero in exact arithmetic) into lr-sized steps, so a correct fp32 implementation can
#     land that far from `final`; tests allow |got - final| <= 1e-6 + sens.
#   train_losses (steps): loss before each step (train_losses[0] = loss)
#   train_norms (steps): global grad L2 norm before clipping
# The steps: the same batch every step; zero grads, forward, backward,
# torch.nn.utils.clip_grad_norm_(max_norm=grad_clip) (grads *= min(1, clip/(norm+1e-6))),
# torch.optim.AdamW(lr, betas, eps) with weight_decay on the 2-D llm.c tensors (wte, wpe, qkvw,
# attprojw, fcw, fcprojw) and 0 on biases and LayerNorm params.
import argparse
import math
import struct

import torch
import torch.nn.functional as F

CFG = dict(max_seq_len=20, vocab_size=67, padded_vocab_size=128, num_layers=2, num_heads=4,
           channels=32)
B, T = 2, 16
STEPS = 10
LR, BETA1, BETA2, EPS, WD = 1e-2, 0.9, 0.95, 1e-8, 0.1
GRAD_CLIP = 1.0
SEED = 20240601
GRAD_NOISE, SENS_RUNS = 5e-7, 4  # fp32 backward errors are ~5e-7 of a tensor's max |grad|
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
         "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAY = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}
MAGIC, END, VERSION = b"SOFGPT2R", b"SOFGPT2E", 1
F32, I32 = 0, 1


def shapes(cfg):
    """llm.c tensor shapes (block tensors stacked over layers)."""
    C, L = cfg["channels"], cfg["num_layers"]
    return dict(wte=(cfg["padded_vocab_size"], C), wpe=(cfg["max_seq_len"], C), ln1w=(L, C),
                ln1b=(L, C), qkvw=(L, 3 * C, C), qkvb=(L, 3 * C), attprojw=(L, C, C),
                attprojb=(L, C), ln2w=(L, C), ln2b=(L, C), fcw=(L, 4 * C, C), fcb=(L, 4 * C),
                fcprojw=(L, C, 4 * C), fcprojb=(L, C), lnfw=(C,), lnfb=(C,))


def init_params(cfg, gen):
    """Random params at scales that make every term of the math matter (non-unit LayerNorm
    weights, non-zero biases, random padded wte rows)."""
    params = {}
    for name, shape in shapes(cfg).items():
        if name in ("wte", "wpe"):
            scale, base = 0.1, 0.0
        elif name in ("ln1w", "ln2w", "lnfw"):
            scale, base = 0.1, 1.0
        elif name in DECAY:
            scale, base = 0.1, 0.0
        else:
            scale, base = 0.05, 0.0
        t = base + scale * torch.randn(shape, generator=gen, dtype=torch.float64)
        params[name] = t.requires_grad_(True)
    return params


def forward(cfg, p, inputs, targets):
    C, NH, L, V = cfg["channels"], cfg["num_heads"], cfg["num_layers"], cfg["vocab_size"]
    Bq, Tq = inputs.shape
    hs = C // NH
    x = p["wte"][inputs] + p["wpe"][:Tq]
    mask = torch.ones(Tq, Tq, dtype=torch.bool).tril()
    for l in range(L):
        h = F.layer_norm(x, (C,), p["ln1w"][l], p["ln1b"][l], eps=1e-5)
        qkv = h @ p["qkvw"][l].t() + p["qkvb"][l]
        q, k, v = qkv.split(C, dim=2)
        q = q.view(Bq, Tq, NH, hs).transpose(1, 2)
        k = k.view(Bq, Tq, NH, hs).transpose(1, 2)
        v = v.view(Bq, Tq, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(Bq, Tq, C)
        x = x + y @ p["attprojw"][l].t() + p["attprojb"][l]
        h = F.layer_norm(x, (C,), p["ln2w"][l], p["ln2b"][l], eps=1e-5)
        h = F.gelu(h @ p["fcw"][l].t() + p["fcb"][l], approximate="tanh")
        x = x + h @ p["fcprojw"][l].t() + p["fcprojb"][l]
    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    logits = x @ p["wte"].t()  # (B,T,Vp): padded columns computed, left out of the softmax
    loss = F.cross_entropy(logits[:, :, :V].reshape(-1, V), targets.reshape(-1))
    return logits, loss


def adamw_run(cfg, p0, data, hp, noise_gen=None, noise=0.0, dtype=None):
    """torch.optim.AdamW with clip_grad_norm_ from params p0 (cast to dtype if given), one step per
    (inputs, targets) batch of `data`; hp: lr, beta1, beta2, eps, wd, clip. Decay on the DECAY
    tensors only. Returns (final params, losses, pre-clip grad norms). With noise_gen, every grad
    gets N(0, 1) * noise * max|grad of its tensor| added before clipping: the spread of the final
    params over such runs measures how much the optimizer amplifies fp32-sized grad errors (Adam
    turns a grad that is ~0 in exact arithmetic, like the key bias's, into lr-sized steps of
    arbitrary sign). Also used by scripts/check_torch_roundtrip.py."""
    params = {}
    for n, t in p0.items():
        t = t.detach().clone()
        params[n] = (t if dtype is None else t.to(dtype)).requires_grad_(True)
    opt = torch.optim.AdamW(
        [{"params": [params[n] for n in NAMES if n in DECAY], "weight_decay": hp["wd"]},
         {"params": [params[n] for n in NAMES if n not in DECAY], "weight_decay": 0.0}],
        lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"], foreach=False)
    losses, norms = [], []
    for inputs, targets in data:
        opt.zero_grad(set_to_none=False)
        _, loss = forward(cfg, params, inputs, targets)
        loss.backward()
        if noise_gen is not None:
            for n in NAMES:
                g = params[n].grad
                g += torch.randn(g.shape, generator=noise_gen, dtype=g.dtype) * (
                    noise * g.abs().max())
        norm = torch.nn.utils.clip_grad_norm_([params[n] for n in NAMES], hp["clip"]).item()
        opt.step()
        losses.append(loss.item())
        norms.append(norm)
    return {n: t.detach() for n, t in params.items()}, losses, norms


def train(p0, inputs, targets, noise_gen=None):
    """STEPS AdamW steps with clipping from p0 on one batch (see adamw_run)."""
    hp = dict(lr=LR, beta1=BETA1, beta2=BETA2, eps=EPS, wd=WD, clip=GRAD_CLIP)
    return adamw_run(CFG, p0, [(inputs, targets)] * STEPS, hp, noise_gen, GRAD_NOISE)


def tensor_record(name, t, dtype):
    t = t.detach().contiguous()
    data = (t.to(torch.float32) if dtype == F32 else t.to(torch.int32)).numpy().tobytes()
    nb = name.encode()
    head = struct.pack("<I", len(nb)) + nb + struct.pack("<II", dtype, t.dim())
    return head + struct.pack(f"<{t.dim()}q", *t.shape) + data


def main():
    ap = argparse.ArgumentParser(description="Write the GPT-2 reference file for tests/model.")
    ap.add_argument("out", nargs="?", default="tests/data/gpt2_ref.bin")
    args = ap.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)

    tokens = torch.randint(0, CFG["vocab_size"], (B, T + 1), generator=gen, dtype=torch.int64)
    inputs, targets = tokens[:, :T].contiguous(), tokens[:, 1:].contiguous()
    params = init_params(CFG, gen)
    p0 = {n: t.detach().clone() for n, t in params.items()}

    logits, loss = forward(CFG, params, inputs, targets)
    loss.backward()
    grads0 = {n: t.grad.detach().clone() for n, t in params.items()}
    logits0, loss0 = logits.detach().clone(), loss.detach().clone()
    V = CFG["vocab_size"]
    assert torch.all(grads0["wte"][V:] == 0), "padded wte rows must get zero grads"

    final, losses, norms = train(p0, inputs, targets)
    for step, (loss, norm) in enumerate(zip(losses, norms)):
        print(f"step {step}: loss {loss:.6f} grad norm {norm:.6f}"
              f"{' (clipped)' if norm > GRAD_CLIP else ''}")
    # Sensitivity of the final params to fp32-sized grad errors (see train())
    sens = {n: torch.zeros_like(t) for n, t in p0.items()}
    for run in range(SENS_RUNS):
        noise_gen = torch.Generator().manual_seed(SEED + 1 + run)
        pert, _, _ = train(p0, inputs, targets, noise_gen)
        for n in NAMES:
            sens[n] = torch.maximum(sens[n], (pert[n] - final[n]).abs())
    for n in NAMES:
        print(f"sens.{n}: max {sens[n].max().item():.3e}, "
              f"{(sens[n] > 1e-5).sum().item()} of {sens[n].numel()} above 1e-5")
    nclip = sum(1 for n in norms if n > GRAD_CLIP)
    assert 0 < nclip < STEPS, f"{nclip} of {STEPS} steps clip: tune GRAD_CLIP to get both kinds"

    recs = [tensor_record("inputs", inputs, I32), tensor_record("targets", targets, I32),
            tensor_record("logits", logits0, F32), tensor_record("loss", loss0.reshape(1), F32)]
    for prefix, src in (("param", p0), ("grad", grads0), ("final", final), ("sens", sens)):
        recs += [tensor_record(f"{prefix}.{n}", src[n], F32) for n in NAMES]
    recs += [tensor_record("train_losses", torch.tensor(losses, dtype=torch.float64), F32),
             tensor_record("train_norms", torch.tensor(norms, dtype=torch.float64), F32)]

    with open(args.out, "wb") as f:
        f.write(MAGIC + struct.pack("<I", VERSION))
        f.write(struct.pack("<6i", CFG["max_seq_len"], CFG["vocab_size"],
                            CFG["padded_vocab_size"], CFG["num_layers"], CFG["num_heads"],
                            CFG["channels"]))
        f.write(struct.pack("<3i", B, T, STEPS))
        f.write(struct.pack("<6d", LR, BETA1, BETA2, EPS, WD, GRAD_CLIP))
        f.write(struct.pack("<I", len(recs)))
        for r in recs:
            f.write(r)
        f.write(END)
    nparams = sum(t.numel() for t in p0.values())
    print(f"wrote {args.out}: {nparams} params, loss {loss0.item():.6f}, {nclip} clipped steps")


if __name__ == "__main__":
    main()
