#!/usr/bin/env python3
# Loss-mask reference test: `superoffload train` on token shards with loss masks (<shard>.mask)
# against PyTorch (float64, cross_entropy with ignore_index=-1: the mean over the counted targets
# of the whole global batch) + AdamW + clip_grad_norm_, at 1 rank (2 micro-batches), 2 ranks
# (data parallel) and 2 ranks with parallel.sp = 2; step losses and grad norms must agree.
#
# Usage: mask_reference.py --superoffload BIN --mpirun "MPIEXEC FLAGS" --work DIR. Exits 77 (skipped)
# when torch or numpy is missing. The model math comes from tests/model/llama_reference.py.
import argparse
import json
import os
import shlex
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, torch, ref = require("numpy", "torch", "llama_reference", venv=None)

torch.set_num_threads(1)

CONFIG = dict(ref.CASES["qwen3"]["config"])  # qk-norm, head_dim != C/NH, untied
T = 16          # seq_len (divisible by sp = 2)
G = 4           # global batch (sequences per optimizer step)
STEPS = 3
LR, CLIP = 2e-3, 1.0
TOL_LOSS, TOL_NORM = 1e-5, 1e-4


def write_mask(path, mask):
    hdr = np.zeros(256, dtype="<i4")
    hdr[0], hdr[1], hdr[2] = 20250301, 1, len(mask)
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(np.asarray(mask, dtype=np.uint8).tobytes())


def make_data(work, rng):
    """tokens and a mask with uneven density: sequence 1 of every step counts nothing, so ranks
    and micro-batches hold different numbers of counted targets (the global mean differs from a
    mean of local means)."""
    n = STEPS * G * T + 1
    toks = rng.integers(0, CONFIG["vocab_size"], n)
    mask = (rng.random(n) < 0.6).astype(np.uint8)
    for s in range(STEPS):
        o = (s * G + 1) * T + 1  # targets of sequence 1 are tokens o .. o+T-1
        mask[o:o + T] = 0
    shard = os.path.join(work, "train_000.bin")
    ref.write_shard(shard, toks)
    write_mask(shard + ".mask", mask)
    return toks, mask, shard


def torch_reference(w, toks, mask):
    c = CONFIG
    P = ref.torch_params(c, w)
    names = [nm for nm, _, _ in ref.tensor_specs(c)]
    groups = [{"params": [P[nm] for nm in names if P[nm].dim() == 2], "weight_decay": ref.WD},
              {"params": [P[nm] for nm in names if P[nm].dim() != 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(ref.BETA1, ref.BETA2), eps=ref.EPS)
    losses, norms = [], []
    for s in range(STEPS):
        o = s * G * T
        chunk = toks[o:o + G * T + 1].astype(np.int64)
        tgt = chunk[1:].copy()
        tgt[mask[o + 1:o + G * T + 1] == 0] = -1
        idx = torch.tensor(chunk[:-1].reshape(G, T))
        tgt = torch.tensor(tgt.reshape(G, T))
        opt.zero_grad()
        logits = ref.forward(c, P, idx)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tgt.reshape(-1), ignore_index=-1)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_([P[nm] for nm in names], CLIP)))
        opt.step()
        losses.append(loss.item())
    return losses, norms


def run_case(args, work, name, hf_dir, shard, ranks, sp):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    deck = os.path.join(d, "deck.yaml")
    with open(deck, "w") as f:
        f.write(f"""model: {{init_from: {hf_dir}}}
data: {{train: {shard}, val: {shard}, shuffle: false, loss_mask: require}}
train: {{batch_size: 2, global_batch: {G}, seq_len: {T}, steps: {STEPS}, lr: {LR},
  warmup_steps: 0, schedule: constant, grad_clip: {CLIP}, eval_batches: 1, log_every: 0,
  metrics: {d}/metrics.jsonl}}
optimizer: {{type: adamw, weight_decay: {ref.WD}, beta1: {ref.BETA1}, beta2: {ref.BETA2},
  eps: {ref.EPS}}}
parallel: {{sp: {sp}}}
device: {{type: host}}
runtime: {{out_dir: {d}/out, threads: 1, log_level: quiet}}
""")
    cmd = shlex.split(args.superoffload) + ["train", deck]
    if ranks > 1:
        cmd = shlex.split(args.mpirun) + ["-n", str(ranks)] + cmd
    ref.run(cmd, env=ref.ENV, cwd=d)
    lines = [json.loads(x) for x in open(os.path.join(d, "metrics.jsonl")) if x.strip()]
    return [x for x in lines if x.get("kind") == "step"]


def main():
    ap = argparse.ArgumentParser()
    # shell words: the program (behind an emulator in a cross build), the MPI launcher with its
    # flags (tests/CMakeLists: SOF_EXEC_PREFIX_SHELL, SOF_MPIEXEC_SHELL)
    ap.add_argument("--superoffload", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    rng = np.random.default_rng(19)
    w = ref.random_weights(CONFIG, 7)
    hf_dir = os.path.join(args.work, "hf")
    w = ref.save_hf_dir(hf_dir, CONFIG, w, "single", "F32")
    toks, mask, shard = make_data(args.work, rng)
    want_loss, want_norm = torch_reference(w, toks, mask)
    print(f"torch: losses {['%.6f' % x for x in want_loss]}, norms {['%.6f' % x for x in want_norm]}")
    failures = []
    for name, ranks, sp in (("1rank_accum2", 1, 1), ("2ranks_dp", 2, 1), ("2ranks_sp2", 2, 2)):
        steps = run_case(args, args.work, name, hf_dir, shard, ranks, sp)
        if len(steps) != STEPS:
            failures.append(f"{name}: {len(steps)} step records, expected {STEPS}")
            continue
        worst_l = worst_n = 0.0
        for i, x in enumerate(steps):
            el = abs(x["loss"] - want_loss[i]) / abs(want_loss[i])
            en = abs(x["grad_norm"] - want_norm[i]) / want_norm[i]
            worst_l, worst_n = max(worst_l, el), max(worst_n, en)
            if el > TOL_LOSS:
                failures.append(f"{name} step {i + 1}: loss {x['loss']:.8g} vs torch "
                                f"{want_loss[i]:.8g} (rel {el:.2e} > {TOL_LOSS:g})")
            if en > TOL_NORM:
                failures.append(f"{name} step {i + 1}: grad norm {x['grad_norm']:.8g} vs torch "
                                f"{want_norm[i]:.8g} (rel {en:.2e} > {TOL_NORM:g})")
        print(f"  {name}: worst rel diff loss {worst_l:.2e}, grad norm {worst_n:.2e}")
    # the unmasked mean would differ: make sure the test can tell
    P = ref.torch_params(CONFIG, w)
    chunk = toks[:G * T + 1].astype(np.int64)
    plain = torch.nn.functional.cross_entropy(
        ref.forward(CONFIG, P, torch.tensor(chunk[:-1].reshape(G, T))).reshape(-1, CONFIG["vocab_size"]),
        torch.tensor(chunk[1:])).item()
    if abs(plain - want_loss[0]) / want_loss[0] <= 100 * TOL_LOSS:
        failures.append(f"the masked and unmasked losses are too close ({plain} vs {want_loss[0]}): "
                        "the test data does not exercise the mask")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"mask reference: OK (3 geometries x {STEPS} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
