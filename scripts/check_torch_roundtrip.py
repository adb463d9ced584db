#!/usr/bin/python3
# End-to-end check against PyTorch, the way an outside reviewer would test us: a GPT-2 built and
# trained by PyTorch on a config of your choice, imported through `model.init_from`, trained a few
# steps by superoffload, exported with `superoffload export --llmc`, and compared tensor by tensor
# with PyTorch continuing the same training. Needs python3-torch (use /usr/bin/python3).
#
#   /usr/bin/python3 scripts/check_torch_roundtrip.py --exe build/bin/superoffload \
#       --layers 3 --heads 3 --channels 48 --vocab 1000 --seq 32 --batch 2 --steps 5 --offload on
#
# What it does (in --workdir, default a fresh temporary directory):
#  1. Builds llm.c's GPT-2 in PyTorch (the model code of scripts/make_reference.py: learned
#     positions, LayerNorm eps 1e-5, GELU tanh, causal attention, LM head tied to wte over the
#     padded vocab Vp = V rounded up to 128), float64, random params; wte's padding rows V..Vp-1
#     are zero as llm.c writes them (--random-pad: random, to check they are carried through and
#     decayed like the rest of wte).
#  2. "Pre-trains" it --pretrain-steps AdamW steps on random batches (so the params are not an
#     init), rounds them to fp32 and writes them as an llm.c fp32 checkpoint (version 3).
#  3. Writes one llm.c token shard (magic 20240520, version 1, uint16 tokens; for V > 65536
#     magic 20240801, version 7, uint32 tokens) with steps*B*T + 1 random tokens < V; it is both
#     data.train and data.val.
#  4. Writes a deck: model.init_from, data.shuffle false (batch s = tokens[s*B*T, s*B*T + B*T + 1),
#     inputs the first B*T, targets shifted by one: docs/data.md), constant lr, no warmup, clip,
#     AdamW (weight decay on wte, wpe, qkvw, attprojw, fcw, fcprojw), offload on/off.
#  5. Runs `superoffload train deck.yaml` and `superoffload export --llmc out.bin CKPT_DIR`.
#  6. Continues in PyTorch (float64) from the same fp32 params: torch.optim.AdamW with the same
#     hyperparameters and decay groups, clip_grad_norm_(1.0) every step, the same batches in the
#     same order.
#  7. Compares out.bin with PyTorch's params tensor by tensor, and the per-step train losses and
#     pre-clip grad norms from <out_dir>/metrics.jsonl with PyTorch's.
#
# Pass/fail rule. superoffload computes in fp32, the reference in fp64. For most elements the
# difference after a few Adam steps is fp32 rounding (~1e-7 relative). But Adam divides each
# grad by its own running RMS, so an element whose exact grad is tiny (relative to the fp32 error
# of computing it) moves by +-lr per step with an arbitrary sign; the key bias (rows C..2C of
# qkvb) is the extreme case: its exact grad is zero (softmax ignores a per-query constant), so its
# fp32 grad is pure rounding noise and Adam makes lr-sized steps from it. As in
# scripts/make_reference.py we measure how far PyTorch itself moves each element when its grads
# get fp32-sized errors: --sens-runs re-runs of the PyTorch continuation with N(0,1) *
# --grad-noise * max|grad of the tensor| added to every grad every step; sens = the largest
# |perturbed - reference| per element. An element passes when
#     |got - ref| <= atol * max(1, max|ref of the tensor|) + 3 * sens      (atol = 1e-5)
# and the run passes when every element of every tensor passes and every train loss and grad
# norm agrees within 1e-4 relative. The report also gives, per tensor, the max abs error, the max
# error relative to max|ref|, the 99.9th percentile of the abs error, and how many elements
# exceed atol alone (those are the sensitivity-covered ones). Exit 0 on pass, 1 on fail, 2 when
# superoffload itself failed.
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_reference import NAMES, adamw_run, init_params, shapes  # noqa: E402

MODEL_MAGIC, MODEL_VERSION = 20240326, 3
SHARD_FORMATS = {np.uint16: (20240520, 1), np.uint32: (20240801, 7)}  # docs/data.md
ATOL = 1e-5
LOSS_RTOL = 1e-4


def write_llmc_model(path, cfg, params):
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [MODEL_MAGIC, MODEL_VERSION, cfg["max_seq_len"], cfg["vocab_size"],
                  cfg["num_layers"], cfg["num_heads"], cfg["channels"], cfg["padded_vocab_size"]]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for n in NAMES:  # llm.c order, each tensor contiguous in its llm.c shape
            f.write(params[n].detach().to(torch.float32).contiguous().numpy().tobytes())


def read_llmc_model(path):
    with open(path, "rb") as f:
        data = f.read()
    header = np.frombuffer(data[:1024], dtype=np.int32)
    if header[0] != MODEL_MAGIC or header[1] != MODEL_VERSION:
        raise SystemExit(f"{path}: magic {header[0]} version {header[1]}, expected "
                         f"{MODEL_MAGIC} {MODEL_VERSION}")
    cfg = dict(max_seq_len=int(header[2]), vocab_size=int(header[3]),
               num_layers=int(header[4]), num_heads=int(header[5]), channels=int(header[6]),
               padded_vocab_size=int(header[7]))
    flat = np.frombuffer(data[1024:], dtype=np.float32)
    out, off = {}, 0
    for n, shape in shapes(cfg).items():
        k = int(np.prod(shape))
        out[n] = torch.from_numpy(flat[off:off + k].copy()).reshape(shape).to(torch.float64)
        off += k
    if off != flat.size:
        raise SystemExit(f"{path}: {flat.size} floats after the header, the header implies {off}")
    return cfg, out


def write_shard(path, tokens, vocab):
    dtype = np.uint16 if vocab <= 65536 else np.uint32
    header = np.zeros(256, dtype="<i4")
    header[:3] = [*SHARD_FORMATS[dtype], len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=np.dtype(dtype).newbyteorder("<")).tobytes())


def batches(tokens, B, T, steps):
    """llm.c sequential order: batch s is tokens[s*B*T : s*B*T + B*T + 1]."""
    out = []
    for s in range(steps):
        buf = tokens[s * B * T: s * B * T + B * T + 1]
        out.append((buf[:-1].reshape(B, T).clone(), buf[1:].reshape(B, T).clone()))
    return out


def run(cmd, log_path):
    print("$ " + " ".join(cmd), flush=True)
    with open(log_path, "w") as log:
        r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.stdout.write(open(log_path).read()[-4000:])
        print(f"FAIL: `{' '.join(cmd)}` exited with {r.returncode} (log: {log_path})")
        sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description="End-to-end check against PyTorch: import, train, export, compare.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", default="build/bin/superoffload", help="the superoffload program")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=3)
    ap.add_argument("--channels", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--max-seq-len", type=int, default=0, help="maxT; 0 = seq + 7 (unused wpe "
                    "rows, which get zero grads and only weight decay)")
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--workdir", default="", help="default: a new temporary directory")
    ap.add_argument("--offload", choices=["on", "off"], default="on")
    ap.add_argument("--device", choices=["host", "cuda", "auto"], default="host")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--pretrain-steps", type=int, default=3)
    ap.add_argument("--random-pad", action="store_true",
                    help="random (not zero) padding rows V..Vp-1 of wte")
    ap.add_argument("--sens-runs", type=int, default=3)
    ap.add_argument("--grad-noise", type=float, default=1e-6)
    args = ap.parse_args()

    torch.set_num_threads(2)
    gen = torch.Generator().manual_seed(args.seed)
    V = args.vocab
    Vp = (V + 127) // 128 * 128
    B, T, steps = args.batch, args.seq, args.steps
    cfg = dict(max_seq_len=args.max_seq_len or T + 7, vocab_size=V, padded_vocab_size=Vp,
               num_layers=args.layers, num_heads=args.heads, channels=args.channels)
    if cfg["channels"] % cfg["num_heads"]:
        raise SystemExit("--channels must be divisible by --heads")
    hp = dict(lr=args.lr, beta1=0.9, beta2=0.95, eps=1e-8, wd=0.1, clip=1.0)
    work = args.workdir or tempfile.mkdtemp(prefix="sof_torch_rt_")
    os.makedirs(work, exist_ok=True)
    exe = os.path.abspath(args.exe)
    print(f"config: L={cfg['num_layers']} NH={cfg['num_heads']} C={cfg['channels']} V={V} "
          f"Vp={Vp} maxT={cfg['max_seq_len']} B={B} T={T} steps={steps} offload={args.offload} "
          f"workdir={work}")

    # 1-2. PyTorch model, pre-trained a few steps on random batches, written as fp32 llm.c file
    p = init_params(cfg, gen)
    if not args.random_pad:
        with torch.no_grad():
            p["wte"][V:] = 0.0
    pre = [(lambda t: (t[:, :T].clone(), t[:, 1:].clone()))(
        torch.randint(0, V, (B, T + 1), generator=gen)) for _ in range(args.pretrain_steps)]
    p, pre_losses, _ = adamw_run(cfg, p, pre, dict(hp, lr=1e-2), dtype=torch.float64)
    print("torch pre-training losses: " + " ".join(f"{x:.4f}" for x in pre_losses))
    init_path = os.path.join(work, "init.bin")
    write_llmc_model(init_path, cfg, p)
    _, p0 = read_llmc_model(init_path)  # the fp32-rounded params both sides start from

    # 3. token shard: exactly `steps` batches (train), also the val file
    tokens = torch.randint(0, V, (steps * B * T + 1,), generator=gen)
    shard_path = os.path.join(work, "tokens.bin")
    write_shard(shard_path, tokens.numpy(), V)

    # 4. deck
    ckpt_dir, out_dir = os.path.join(work, "ckpt"), os.path.join(work, "run")
    deck = f"""model:
  init_from: {init_path}
data:
  train: {shard_path}
  val: {shard_path}
  shuffle: false
train:
  batch_size: {B}
  seq_len: {T}
  steps: {steps}
  lr: {hp['lr']!r}
  warmup_steps: 0
  schedule: constant
  grad_clip: {hp['clip']!r}
  eval_batches: 1
  checkpoint_dir: {ckpt_dir}
optimizer:
  type: adamw
  weight_decay: {hp['wd']!r}
  beta1: {hp['beta1']!r}
  beta2: {hp['beta2']!r}
  eps: {hp['eps']!r}
offload:
  enabled: {'true' if args.offload == 'on' else 'false'}
"""
    if args.offload == "on":
        deck += "  bucket_mb: 0.05\n  gpu_tail_buckets: 1\n"
    deck += f"""device:
  type: {args.device}
runtime:
  out_dir: {out_dir}
  threads: 2
"""
    deck_path = os.path.join(work, "deck.yaml")
    with open(deck_path, "w") as f:
        f.write(deck)

    # 5. superoffload: train, export
    out_bin = os.path.join(work, "out.bin")
    run([exe, "train", deck_path], os.path.join(work, "train.log"))
    run([exe, "export", "--llmc", out_bin, ckpt_dir], os.path.join(work, "export.log"))
    got_cfg, got = read_llmc_model(out_bin)
    if got_cfg != cfg:
        print(f"FAIL: exported header {got_cfg} != {cfg}")
        sys.exit(1)

    # 6. PyTorch continuation, plus the sensitivity runs
    data = batches(tokens, B, T, steps)
    ref, losses, norms = adamw_run(cfg, p0, data, hp, dtype=torch.float64)
    sens = {n: torch.zeros_like(t) for n, t in ref.items()}
    for r in range(args.sens_runs):
        pert, _, _ = adamw_run(cfg, p0, data, hp, torch.Generator().manual_seed(args.seed + 1 + r),
                               args.grad_noise, dtype=torch.float64)
        for n in NAMES:
            sens[n] = torch.maximum(sens[n], (pert[n] - ref[n]).abs())

    # 7. compare
    ok = True
    print(f"{'tensor':>9} {'numel':>8} {'max|ref|':>9} {'max abs':>9} {'max rel':>9} "
          f"{'p99.9 abs':>9} {'>atol':>6} {'max sens':>9} {'worst/allow':>11}  moved")
    worst_rel, worst_p999 = 0.0, 0.0
    for n in NAMES:
        err = (got[n] - ref[n]).abs()
        scale = ref[n].abs().max().item()
        tol = ATOL * max(1.0, scale)
        allow = tol + 3 * sens[n]
        ratio = (err / allow).max().item()
        moved = (ref[n] - p0[n]).abs().max().item()
        p999 = float(np.quantile(err.flatten().numpy(), 0.999))
        rel = err.max().item() / max(scale, 1e-30)
        worst_rel, worst_p999 = max(worst_rel, rel), max(worst_p999, p999)
        bad = ratio > 1.0
        ok &= not bad
        print(f"{n:>9} {err.numel():>8} {scale:9.3e} {err.max().item():9.2e} {rel:9.2e} "
              f"{p999:9.2e} {int((err > tol).sum()):>6} {sens[n].max().item():9.2e} "
              f"{ratio:11.3f}  {moved:.2e}{'  FAIL' if bad else ''}")
        if n == "qkvb":  # the key bias (exact grad 0) vs the query and value biases
            C = cfg["channels"]
            kb = err[:, C:2 * C].max().item()
            qv = torch.cat([err[:, :C], err[:, 2 * C:]], dim=1).max().item()
            print(f"{'':>9} {'':>8} key bias rows: max abs err {kb:.2e}; query/value bias: "
                  f"{qv:.2e}")
        if n == "wte" and Vp > V:
            pad_err = err[V:].max().item()
            print(f"{'wte pad':>9} {err[V:].numel():>8} rows {V}..{Vp - 1}: max abs err "
                  f"{pad_err:.2e}")
    metrics = [json.loads(line) for line in open(os.path.join(out_dir, "metrics.jsonl"))]
    steps_rec = sorted((m for m in metrics if m.get("kind") == "step"), key=lambda m: m["step"])
    if len(steps_rec) != steps:
        print(f"FAIL: {len(steps_rec)} step records in metrics.jsonl, expected {steps}")
        ok = False
    print(f"{'step':>4} {'loss sof':>12} {'loss torch':>12} {'rel':>9} {'norm sof':>12} "
          f"{'norm torch':>12} {'rel':>9}")
    worst_loss = 0.0
    for i, m in enumerate(steps_rec[:steps]):
        lrel = abs(m["loss"] - losses[i]) / abs(losses[i])
        nrel = abs(m["grad_norm"] - norms[i]) / abs(norms[i])
        worst_loss = max(worst_loss, lrel, nrel)
        bad = lrel > LOSS_RTOL or nrel > LOSS_RTOL
        ok &= not bad
        print(f"{m['step']:>4} {m['loss']:12.7f} {losses[i]:12.7f} {lrel:9.2e} "
              f"{m['grad_norm']:12.7f} {norms[i]:12.7f} {nrel:9.2e}{'  FAIL' if bad else ''}")
    print(f"summary: worst max-rel err {worst_rel:.2e}, worst p99.9 abs err {worst_p999:.2e}, "
          f"worst loss/norm rel err {worst_loss:.2e}")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
