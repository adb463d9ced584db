#!/usr/bin/env python3
# Packing reference test (data.pack): `superoffload train` on rows that hold several EOS-separated
# documents against PyTorch running EVERY DOCUMENT ON ITS OWN (float64, positions from 0, causal
# inside the document, the target after an EOS not counted) + AdamW + clip_grad_norm_, for GPT-2
# (learned positions, llm.c checkpoint) and Llama (RoPE with llama3 scaling, GQA; HF directory), at
# 1 rank (2 micro-batches), 2 data-parallel ranks and 2 ranks with parallel.sp = 2.
#
# Usage: pack_reference.py --superoffload BIN --mpirun "MPIEXEC FLAGS" --work DIR. Exits 77 (skipped)
# when torch or numpy is missing. The Llama math comes from tests/model/llama_reference.py.
import argparse
import json
import math
import os
import shlex
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, torch, ref = require("numpy", "torch", "llama_reference", venv=None)

torch.set_num_threads(1)

T = 16          # seq_len (divisible by sp = 2)
G = 4           # global batch (sequences per optimizer step)
STEPS = 3
LR, CLIP = 2e-3, 1.0
TOL_LOSS, TOL_NORM = 1e-5, 1e-4
LLAMA = dict(ref.CASES["llama"]["config"])  # GQA, untied, llama3 rope scaling
GPT2 = {"V": 96, "L": 2, "NH": 4, "C": 32, "maxT": 32}


# ---------------------------------------------------------------- GPT-2 (llm.c layout)
def gpt2_specs(c):
    V, L, C, maxT = c["V"], c["L"], c["C"], c["maxT"]
    return [("wte", (V, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)),
            ("qkvw", (L, 3 * C, C)), ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)),
            ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)),
            ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)), ("lnfw", (C,)),
            ("lnfb", (C,))]


def gpt2_weights(c, seed):
    rng = np.random.default_rng(seed)
    w = {}
    for n, shape in gpt2_specs(c):
        if n in ("ln1w", "ln2w", "lnfw"):
            w[n] = (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        elif n.endswith("b"):
            w[n] = (0.02 * rng.standard_normal(shape)).astype(np.float32)
        else:
            w[n] = (rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)
    return w


def write_llmc(path, c, w):
    """llm.c GPT-2 fp32 checkpoint (magic 20240326, version 3), padded vocab = V."""
    hdr = np.zeros(256, dtype="<i4")
    hdr[:8] = [20240326, 3, c["maxT"], c["V"], c["L"], c["NH"], c["C"], c["V"]]
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        for n, _ in gpt2_specs(c):
            f.write(w[n].astype("<f4").tobytes())


def gpt2_forward(c, P, idx):
    """logits (B, T, V) of GPT-2 (tanh GELU, LayerNorm eps 1e-5, tied head), positions 0.."""
    Bn, Tn = idx.shape
    C, NH = c["C"], c["NH"]
    hd = C // NH
    ln = lambda x, w, b: torch.nn.functional.layer_norm(x, (C,), w, b, 1e-5)
    x = P["wte"][idx] + P["wpe"][:Tn][None]
    mask = torch.ones(Tn, Tn, dtype=torch.bool).tril()
    for l in range(c["L"]):
        h = ln(x, P["ln1w"][l], P["ln1b"][l])
        qkv = h @ P["qkvw"][l].T + P["qkvb"][l]
        q, k, v = (t.reshape(Bn, Tn, NH, hd) for t in qkv.split(C, dim=-1))
        att = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = torch.einsum("bhts,bshd->bthd", att, v).reshape(Bn, Tn, C)
        x = x + y @ P["attprojw"][l].T + P["attprojb"][l]
        h = ln(x, P["ln2w"][l], P["ln2b"][l])
        h = torch.nn.functional.gelu(h @ P["fcw"][l].T + P["fcb"][l], approximate="tanh")
        x = x + h @ P["fcprojw"][l].T + P["fcprojb"][l]
    x = ln(x, P["lnfw"], P["lnfb"])
    return x @ P["wte"].T


# ---------------------------------------------------------------- data and the reference
def make_tokens(V, eos, rng):
    """STEPS*G*T+1 tokens: documents of 1..9 tokens, each ending with EOS (some rows end inside a
    document, some rows start with one, some documents are a lone EOS)."""
    n = STEPS * G * T + 1
    out = []
    while len(out) < n:
        k = int(rng.integers(0, 9))
        out += list(rng.integers(0, V - 1, k)) + [eos]
    return np.array(out[:n], dtype=np.int64)


def packed_loss(forward, toks, o, eos):
    """sum over the documents of the step's G rows of each document run alone, / counted."""
    total, counted = 0.0, 0
    for r in range(G):
        x = toks[o + r * T:o + (r + 1) * T]
        y = toks[o + r * T + 1:o + (r + 1) * T + 1].copy()
        y[x == eos] = -1  # the next document's first token is not a target
        a = 0
        for t in range(T):
            if x[t] == eos or t == T - 1:
                logits = forward(torch.tensor(x[a:t + 1][None]))
                total = total + torch.nn.functional.cross_entropy(
                    logits[0], torch.tensor(y[a:t + 1]), ignore_index=-1, reduction="sum")
                a = t + 1
        counted += int((y >= 0).sum())
    return total / counted


def unpacked_loss(forward, toks, o, eos):
    """the same targets with whole rows as one sequence (what packing must differ from)."""
    x = torch.tensor(toks[o:o + G * T].reshape(G, T))
    y = toks[o + 1:o + G * T + 1].copy()
    y[toks[o:o + G * T] == eos] = -1
    logits = forward(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             torch.tensor(y), ignore_index=-1).item()


def torch_reference(forward, P, decay, toks, eos):
    names = list(P)
    groups = [{"params": [P[n] for n in names if n in decay], "weight_decay": ref.WD},
              {"params": [P[n] for n in names if n not in decay], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(ref.BETA1, ref.BETA2), eps=ref.EPS)
    losses, norms = [], []
    for s in range(STEPS):
        opt.zero_grad()
        loss = packed_loss(forward, toks, s * G * T, eos)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_([P[n] for n in names], CLIP)))
        opt.step()
        losses.append(loss.item())
    return losses, norms


# ---------------------------------------------------------------- runs
def run_case(args, d, model, data, ranks, sp):
    os.makedirs(d, exist_ok=True)
    deck = os.path.join(d, "deck.yaml")
    with open(deck, "w") as f:
        f.write(f"""model: {model}
data: {data}
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


def compare(name, steps, want_loss, want_norm, failures):
    if len(steps) != STEPS:
        failures.append(f"{name}: {len(steps)} step records, expected {STEPS}")
        return
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


GEOMETRIES = (("1rank_accum2", 1, 1), ("2ranks_dp", 2, 1), ("2ranks_sp2", 2, 2))


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
    failures = []

    # GPT-2: llm.c checkpoint, data.eos_id stated in the deck
    c = GPT2
    eos = c["V"] - 1
    w = gpt2_weights(c, 5)
    ckpt = os.path.join(args.work, "gpt2.bin")
    write_llmc(ckpt, c, w)
    toks = make_tokens(c["V"], eos, rng)
    shard = os.path.join(args.work, "gpt2_data", "train_000.bin")
    os.makedirs(os.path.dirname(shard))
    ref.write_shard(shard, toks)
    P = {n: torch.tensor(w[n], dtype=torch.float64, requires_grad=True) for n in w}
    decay = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}
    fwd = lambda idx: gpt2_forward(c, P, idx)
    cases = [("gpt2", fwd, P, decay, toks, eos, f"{{init_from: {ckpt}}}",
              f"{{train: {shard}, val: {shard}, shuffle: false, pack: true, eos_id: {eos}}}")]

    # Llama: HF directory; data.eos_id auto from prepare.json next to the shards
    cl = LLAMA
    eosl = cl["vocab_size"] - 1
    wl = ref.random_weights(cl, 7)
    hf_dir = os.path.join(args.work, "hf")
    wl = ref.save_hf_dir(hf_dir, cl, wl, "single", "F32")
    toksl = make_tokens(cl["vocab_size"], eosl, rng)
    shardl = os.path.join(args.work, "llama_data", "train_000.bin")
    os.makedirs(os.path.dirname(shardl))
    ref.write_shard(shardl, toksl)
    with open(os.path.join(os.path.dirname(shardl), "prepare.json"), "w") as f:
        json.dump({"eos_token_id": eosl}, f)
    Pl = ref.torch_params(cl, wl)
    decayl = {n for n in Pl if Pl[n].dim() == 2}
    fwdl = lambda idx: ref.forward(cl, Pl, idx)
    cases.append(("llama", fwdl, Pl, decayl, toksl, eosl, f"{{init_from: {hf_dir}}}",
                  f"{{train: {shardl}, val: {shardl}, shuffle: false, pack: true}}"))

    for name, fwd_, P_, decay_, toks_, eos_, model, data in cases:
        # the test must be able to tell packed from unpacked rows
        with torch.no_grad():
            plain = unpacked_loss(fwd_, toks_, 0, eos_)
            packed = packed_loss(fwd_, toks_, 0, eos_).item()
        if abs(plain - packed) / packed <= 20 * TOL_LOSS:
            failures.append(f"{name}: packed and unpacked losses too close ({packed} vs {plain})")
        want_loss, want_norm = torch_reference(fwd_, P_, decay_, toks_, eos_)
        print(f"{name}: torch losses {['%.6f' % x for x in want_loss]}, "
              f"norms {['%.6f' % x for x in want_norm]} (unpacked step-1 loss {plain:.6f})")
        for geo, ranks, sp in GEOMETRIES:
            steps = run_case(args, os.path.join(args.work, f"{name}_{geo}"), model, data, ranks, sp)
            compare(f"{name} {geo}", steps, want_loss, want_norm, failures)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print(f"pack reference: OK (GPT-2 and Llama x {len(GEOMETRIES)} geometries x {STEPS} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
