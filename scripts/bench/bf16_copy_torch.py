#!/usr/bin/env python3
# How much the rounding of the bf16 working copy costs a fine-tune, measured in torch alone (no
# superoffload code): the question of docs/optimizer-plugins.md "bf16 compute with an fp32 master".
#
# The same model, tokens, schedule and AdamW as scripts/bench/finetune_smollm2.yaml (fp32 master
# and moments, clip 1.0, Trainer's parameter groups), in fp32 activations, with the weights the
# forward and backward read and the grads the optimizer reads rounded as each variant says:
#   fp32            nothing rounded (the yardstick)
#   nearest         every weight rounded to nearest bf16 from the fp32 master, grads to bf16: what
#                   superoffload's train.dtype bf16 does on the host device
#   nearest_f32g    as nearest, grads left fp32 (is it the grads?)
#   nearest_2d      only matrices and embeddings rounded, norm weights read in fp32 (torch
#                   autocast keeps norms in fp32), grads bf16
#   sr_copy         every weight stochastically rounded from the fp32 master each step, grads bf16
#   sr_master       the master itself bf16, stochastically rounded after each step (superoffload's
#                   optimizer.master_dtype bf16), grads bf16
# Each eval point reports the val loss of the master read three ways: in fp32, rounded to nearest
# bf16 (the device's copy with an fp32 master; also what export --hf --dtype bf16 writes) and
# stochastically rounded to bf16; gaps are to the fp32 run's master.
# usage: bf16_copy_torch.py --model runs/smollm2-135m-instruct --data runs/ft-docs
#          [--steps 100 --stop 25 --variants fp32,nearest,...] > table
import argparse
import glob
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from sof_pyenv import require  # noqa: E402

np, torch, transformers = require("numpy", "torch", "transformers", venv="test")


def tokens(pattern):
    """llm.c shards (256 int32 header: magic, version, count; then uint16/uint32 ids), joined."""
    out = []
    for path in sorted(glob.glob(pattern)):
        head = np.fromfile(path, dtype=np.int32, count=256)
        dt = np.uint16 if head[0] == 20240520 else np.uint32
        out.append(np.fromfile(path, dtype=dt, offset=1024, count=int(head[2])).astype(np.int64))
    return np.concatenate(out)


def batches(toks, B, T, n):
    """n sequential (B, T) input/target windows, as superoffload's sequential loader reads them."""
    step = B * T
    for i in range(n):
        lo = (i * step) % (len(toks) - step - 1)
        w = torch.from_numpy(toks[lo:lo + step + 1])
        yield w[:-1].view(B, T), w[1:].view(B, T)


def lr_at(a, step):  # lib/train/schedule.cpp, cosine
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    x = min(max((step + 1 - a.warmup) / (a.steps - a.warmup), 0.0), 1.0)
    return a.min_lr + 0.5 * (1 + math.cos(math.pi * x)) * (a.lr - a.min_lr)


def nearest(t):
    return t.to(torch.bfloat16).to(torch.float32)


def stochastic(t, gen):
    bits = t.view(torch.int32)
    r = torch.randint(0, 1 << 16, t.shape, generator=gen, dtype=torch.int32)
    return ((bits + r) & -65536).view(torch.float32)  # magnitude rounded up with p = fraction


views_order = ("master", "nearest", "stochastic")


def loss_of(model, x, y):
    logits = model(input_ids=x).logits
    return torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))


def run(a, variant, train_toks, val_toks):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32)
    model.config.use_cache = False
    params = [p for p in model.parameters()]
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, a.beta2), eps=1e-8)
    if variant == "sr_master":
        with torch.no_grad():
            for p in params:
                p.copy_(nearest(p))

    def rounded(p):
        if variant in ("nearest", "nearest_f32g"):
            return nearest(p)
        if variant == "nearest_2d":
            return nearest(p) if p.dim() >= 2 else p.clone()
        if variant == "sr_copy":
            return stochastic(p, gen)
        return p.clone()  # fp32; sr_master: the master is bf16 already

    views = {"master": lambda p: p.clone(), "nearest": nearest,
             "stochastic": lambda p: stochastic(p, gen)}

    def evaluate():
        """Val loss of the master read in fp32, rounded to nearest bf16 (what the device holds with
        an fp32 master, and what export --hf --dtype bf16 writes) and stochastically rounded."""
        masters = [p.detach().clone() for p in params]
        out = {}
        with torch.no_grad():
            for view, f in views.items():
                for p, m in zip(params, masters):
                    p.copy_(f(m))
                out[view] = sum(loss_of(model, x, y).item()
                                for x, y in batches(val_toks, a.B, a.T, a.eval)) / a.eval
            for p, m in zip(params, masters):
                p.copy_(m)
        return out

    rows = [(0, evaluate(), float("nan"))]
    data = batches(train_toks, a.B, a.T, a.stop)
    recent = []
    for step in range(a.stop):
        x, y = next(data)
        masters = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p in params:
                p.copy_(rounded(p))
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, x, y)
        loss.backward()
        with torch.no_grad():
            for p, m in zip(params, masters):
                p.copy_(m)
                if variant not in ("fp32", "nearest_f32g") and p.grad is not None:
                    p.grad.copy_(nearest(p.grad))
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        for g in opt.param_groups:
            g["lr"] = lr_at(a, step)
        opt.step()
        if variant == "sr_master":
            with torch.no_grad():
                for p in params:
                    p.copy_(stochastic(p, gen))
        recent.append(loss.item())
        if (step + 1) % a.eval_every == 0 or step + 1 == a.stop:
            rows.append((step + 1, evaluate(), sum(recent[-10:]) / len(recent[-10:])))
        print(f"# {variant} step {step + 1} loss {loss.item():.4f}", file=sys.stderr, flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, help="directory of train_*.bin and val_*.bin")
    ap.add_argument("--variants", default="fp32,nearest,nearest_f32g,nearest_2d,sr_copy,sr_master")
    ap.add_argument("--steps", type=int, default=100, help="the schedule's length")
    ap.add_argument("--stop", type=int, default=25, help="steps run")
    ap.add_argument("--eval-every", dest="eval_every", type=int, default=25)
    ap.add_argument("--eval", type=int, default=12, help="val batches")
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--T", type=int, default=128)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--min-lr", dest="min_lr", type=float, default=5e-6)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    train_toks = tokens(os.path.join(a.data, "train_*.bin"))
    val_toks = tokens(os.path.join(a.data, "val_*.bin"))
    results = {v: run(a, v, train_toks, val_toks) for v in a.variants.split(",")}
    base = {row[0]: row[1]["master"] for row in results.get("fp32", [])}
    print("| run | step | train loss (mean of 10) | val: master in fp32 | val: nearest bf16 | "
          "val: stochastic bf16 |")
    print("|---|---|---|---|---|---|")
    for name, rows in results.items():
        for step, val, train in rows:
            cells = []
            for view in views_order:
                gap = f" ({val[view] - base[step]:+.4f})" if step in base else ""
                cells.append(f"{val[view]:.4f}{gap}")
            print(f"| {name} | {step} | {train:.4f} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
