#!/usr/bin/python3
# Writes tests/data/longseq_ref.safetensors: the PyTorch (float64) oracle of the long-sequence
# tests (tests/mpi/test_longseq.cpp): a tiny GPT-2 and a tiny Llama trained 2 AdamW steps on one
# 4096-token sequence per step, with the full T x T attention of the textbook formula (the C++ model
# never forms it). Needs python3-torch (Debian's 1.13) and numpy; about a minute and 6 GB.
#
# Usage: /usr/bin/python3 scripts/make_longseq_reference.py tests/data/longseq_ref.safetensors
#
# Per model m in (gpt2, llama), F32 tensors (tokens are small integers, exact in fp32):
#   m.meta    [T, steps, lr, beta1, beta2, eps, weight_decay, grad_clip]
#   m.tokens  (steps*T + 1): the training stream; step s reads tokens [s*T, s*T + T + 1)
#   m.init    (num_params): initial parameters in superoffload's flat layout order
#   m.final   (num_params): after the 2 steps
#   m.losses  (steps): the loss before each step; m.norms (steps): the grad norm before clipping
# The configs below must match the test's decks (the test checks the parameter count and meta).
# Optimizer: torch.optim.AdamW with decay on the 2-D tensors only, clip_grad_norm_ each step.
import argparse
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

T, STEPS = 4096, 2
LR, BETA1, BETA2, EPS, WD, CLIP = 3e-3, 0.9, 0.95, 1e-5, 0.1, 1.0
GPT2 = dict(L=2, NH=4, C=32, V=100, Vp=128, maxT=T)
LLAMA = dict(L=2, NH=8, NKV=4, C=64, I=96, V=128, theta=10000.0, eps=1e-5, maxT=T)


def gpt2_specs(c):
    """(name, shape) in the flat layout order (lib/model/layout.cpp)."""
    C, L = c["C"], c["L"]
    s = [("wte", (c["Vp"], C)), ("wpe", (c["maxT"], C))]
    for l in range(L):
        s += [(f"h{l}.{n}", sh) for n, sh in
              [("ln1w", (C,)), ("ln1b", (C,)), ("qkvw", (3 * C, C)), ("qkvb", (3 * C,)),
               ("attprojw", (C, C)), ("attprojb", (C,)), ("ln2w", (C,)), ("ln2b", (C,)),
               ("fcw", (4 * C, C)), ("fcb", (4 * C,)), ("fcprojw", (C, 4 * C)),
               ("fcprojb", (C,))]]
    return s + [("lnfw", (C,)), ("lnfb", (C,))]


def llama_specs(c):
    C, L, I = c["C"], c["L"], c["I"]
    hd = C // c["NH"]
    Q, KV = c["NH"] * hd, c["NKV"] * hd
    s = [("embed", (c["V"], C))]
    for l in range(L):
        s += [(f"{l}.{n}", sh) for n, sh in
              [("ln1", (C,)), ("wq", (Q, C)), ("wk", (KV, C)), ("wv", (KV, C)), ("wo", (C, Q)),
               ("ln2", (C,)), ("gate", (I, C)), ("up", (I, C)), ("down", (C, I))]]
    return s + [("norm", (C,)), ("head", (c["V"], C))]  # untied lm_head


def init(specs, gen, padded_from=None):
    p = {}
    for name, shape in specs:
        if len(shape) == 2:
            t = torch.randn(shape, generator=gen, dtype=torch.float64) / math.sqrt(shape[1])
        elif name.split(".")[-1] in ("ln1w", "ln2w", "lnfw", "ln1", "ln2", "norm"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            t = 0.05 * torch.randn(shape, generator=gen, dtype=torch.float64)
        if name == "wte" and padded_from is not None:
            t[padded_from:] = 0.0  # llm.c's zero padding rows (they stay zero)
        t = t.float().double()  # fp32 values: the C++ run starts from exactly these
        p[name] = t.requires_grad_(True)
    return p


def causal_attention(q, k, v):
    """q (T, H, hd), k, v (T, H, hd): softmax(q k^T / sqrt(hd)) v over the full T x T square,
    one head at a time (memory)."""
    Tq, H, hd = q.shape
    mask = torch.ones(Tq, Tq, dtype=torch.bool).tril()
    out = []
    for h in range(H):
        s = (q[:, h] @ k[:, h].t()) / math.sqrt(hd)
        a = s.masked_fill(~mask, float("-inf")).softmax(-1)
        out.append(a @ v[:, h])
    return torch.stack(out, 1).reshape(Tq, H * hd)


def gpt2_loss(c, p, idx, tgt):
    C, NH = c["C"], c["NH"]
    hd = C // NH
    x = p["wte"][idx] + p["wpe"][: idx.shape[0]]
    for l in range(c["L"]):
        g = lambda n: p[f"h{l}.{n}"]
        h = F.layer_norm(x, (C,), g("ln1w"), g("ln1b"), eps=1e-5)
        q, k, v = (h @ g("qkvw").t() + g("qkvb")).split(C, dim=1)
        y = causal_attention(q.view(-1, NH, hd), k.view(-1, NH, hd), v.view(-1, NH, hd))
        x = x + y @ g("attprojw").t() + g("attprojb")
        h = F.layer_norm(x, (C,), g("ln2w"), g("ln2b"), eps=1e-5)
        h = F.gelu(h @ g("fcw").t() + g("fcb"), approximate="tanh")
        x = x + h @ g("fcprojw").t() + g("fcprojb")
    x = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], eps=1e-5)
    logits = x @ p["wte"].t()
    return F.cross_entropy(logits[:, : c["V"]], tgt)


def rope(x, cos, sin):  # x (T, H, hd): rotate-half pairs (i, i + hd/2)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def llama_loss(c, p, idx, tgt):
    C, NH, NKV = c["C"], c["NH"], c["NKV"]
    hd = C // NH
    # inv_freq in float64 rounded to fp32 once, angle = pos * inv_freq in fp32 (as HF)
    inv = np.array([1.0 / c["theta"] ** ((2.0 * i) / hd) for i in range(hd // 2)]).astype(np.float32)
    ang = np.arange(idx.shape[0], dtype=np.float32)[:, None] * inv[None, :]
    ang = torch.from_numpy(ang.astype(np.float64))
    cos, sin = torch.cos(ang), torch.sin(ang)

    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["eps"]))

    x = p["embed"][idx]
    for l in range(c["L"]):
        g = lambda n: p[f"{l}.{n}"]
        h = rms(x, g("ln1"))
        q = rope((h @ g("wq").t()).view(-1, NH, hd), cos, sin)
        k = rope((h @ g("wk").t()).view(-1, NKV, hd), cos, sin)
        v = (h @ g("wv").t()).view(-1, NKV, hd)
        k = k.repeat_interleave(NH // NKV, dim=1)  # query head h reads kv head h / (NH/NKV)
        v = v.repeat_interleave(NH // NKV, dim=1)
        x = x + causal_attention(q, k, v) @ g("wo").t()
        h = rms(x, g("ln2"))
        x = x + (F.silu(h @ g("gate").t()) * (h @ g("up").t())) @ g("down").t()
    logits = rms(x, p["norm"]) @ p["head"].t()
    return F.cross_entropy(logits[:, : c["V"]], tgt)


def train(specs, p, loss_fn, tokens):
    names = [n for n, _ in specs]
    groups = [{"params": [p[n] for n in names if p[n].dim() == 2], "weight_decay": WD},
              {"params": [p[n] for n in names if p[n].dim() != 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(BETA1, BETA2), eps=EPS)
    losses, norms = [], []
    for s in range(STEPS):
        chunk = torch.tensor(tokens[s * T: s * T + T + 1], dtype=torch.long)
        opt.zero_grad()
        loss = loss_fn(p, chunk[:-1], chunk[1:])
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_([p[n] for n in names], CLIP)))
        opt.step()
        losses.append(loss.item())
        print(f"  step {s}: loss {losses[-1]:.6f}, grad norm {norms[-1]:.6f}", flush=True)
    return losses, norms


def flat(specs, p):
    return np.concatenate([p[n].detach().numpy().astype(np.float32).ravel() for n, _ in specs])


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt", "made_by": "scripts/make_longseq_reference.py"}
    hs = json.dumps(header).encode()
    hs += b" " * (-len(hs) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hs)))
        f.write(hs)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    args = ap.parse_args()
    torch.set_num_threads(2)
    out = {}
    meta = np.array([T, STEPS, LR, BETA1, BETA2, EPS, WD, CLIP], dtype=np.float32)
    rng = np.random.default_rng(4096)
    for name, c, specs_fn, loss_fn, seed, pad in (
            ("gpt2", GPT2, gpt2_specs, gpt2_loss, 11, GPT2["V"]),
            ("llama", LLAMA, llama_specs, llama_loss, 12, None)):
        specs = specs_fn(c)
        p = init(specs, torch.Generator().manual_seed(seed), pad)
        tokens = rng.integers(0, c["V"], STEPS * T + 1)
        out[f"{name}.meta"] = meta
        out[f"{name}.tokens"] = tokens.astype(np.float32)
        out[f"{name}.init"] = flat(specs, p)
        print(f"{name}: {out[f'{name}.init'].size} params", flush=True)
        losses, norms = train(specs, p, lambda q, i, t: loss_fn(c, q, i, t), tokens)
        out[f"{name}.final"] = flat(specs, p)
        out[f"{name}.losses"] = np.array(losses, dtype=np.float32)
        out[f"{name}.norms"] = np.array(norms, dtype=np.float32)
    write_safetensors(args.out, out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
