#!/usr/bin/env python3
# The attention op's sliding window and sinks against transformers itself, in float64: masks from
# transformers.masking_utils (sliding_window_causal_mask_function, packed_sequence_mask_function,
# eager_mask), attention from the models' own eager_attention_forward (gpt_oss: sinks; mistral:
# sliding window), gradients by torch autograd; the CPU twin through attn_hf_driver.
#
# Usage: attention_hf_reference.py --driver BIN --work DIR. Exits 77 (skipped) without the test
# venv (scripts/python_env.sh test); under SOF_REQUIRE_PYENV=1 that fails instead.
import argparse
import os
import subprocess
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, torch, transformers = require("numpy", "torch", "transformers", venv="test")
from transformers import masking_utils as mu  # noqa: E402
from transformers.models.gpt_oss import modeling_gpt_oss as gpt_oss  # noqa: E402
from transformers.models.mistral import modeling_mistral as mistral  # noqa: E402

torch.set_num_threads(1)

# The op in fp32 against float64 on the same fp32 inputs, max |diff| / max |ref| per tensor: the
# C++ op driver measures <= 5e-7 against its own double reference (op_attention_features.cpp);
# mistral's eager function rounds its softmax to fp32 (its dtype=torch.float32), ~6e-8 relative.
TOL = 5e-6

# name, B, T, NH, NKV, hd, window (0: causal), sinks, packed documents, model
CASES = [
    ("mistral sliding_window=16", 2, 70, 4, 2, 32, 16, False, False, "mistral"),
    ("mistral sliding_window=1", 1, 20, 2, 1, 16, 1, False, False, "mistral"),
    ("gpt_oss sliding_attention (window 8) with sinks", 2, 50, 4, 1, 16, 8, True, False, "gpt_oss"),
    ("gpt_oss full_attention with sinks", 1, 40, 4, 2, 16, 0, True, False, "gpt_oss"),
    ("gpt_oss window 12, sinks, packed documents", 2, 60, 2, 2, 32, 12, True, True, "gpt_oss"),
]


def masks(B, T, window, seg):
    """transformers' additive float64 mask (B, 1, T, T): 0 seen, dtype min not."""
    fn = mu.sliding_window_causal_mask_function(window) if window > 0 else mu.causal_mask_function
    if seg is not None:
        fn = mu.and_masks(fn, mu.packed_sequence_mask_function(torch.from_numpy(seg).long()))
    return mu.eager_mask(batch_size=B, q_length=T, kv_length=T, mask_function=fn,
                         dtype=torch.float64)


def reference(case, x, window=None, sinks_on=None):
    """out, lse, dq, dk, dv, dsinks of transformers' eager attention (float64, autograd)."""
    _, B, T, NH, NKV, hd, W, sinks, packed, model = case
    W = W if window is None else window
    sinks = sinks if sinks_on is None else sinks_on
    q = torch.tensor(x["q"], dtype=torch.float64).permute(0, 2, 1, 3).requires_grad_()
    k = torch.tensor(x["k"], dtype=torch.float64).permute(0, 2, 1, 3).requires_grad_()
    v = torch.tensor(x["v"], dtype=torch.float64).permute(0, 2, 1, 3).requires_grad_()
    z = torch.tensor(x["sinks"], dtype=torch.float64, requires_grad=True)
    mask = masks(B, T, W, x["seg"] if packed else None)
    module = types.SimpleNamespace(num_key_value_groups=NH // NKV, sinks=z, training=False)
    scaling = hd ** -0.5
    if sinks:
        out, _ = gpt_oss.eager_attention_forward(module, q, k, v, mask, scaling)
    else:
        out, _ = mistral.eager_attention_forward(module, q, k, v, mask, scaling)
    out.backward(torch.tensor(x["dout"], dtype=torch.float64))
    # lse: of the masked scores and the sink (what the op saves for its backward)
    kk = k.detach().repeat_interleave(NH // NKV, dim=1)
    logits = torch.matmul(q.detach(), kk.transpose(2, 3)) * scaling + mask
    if sinks:
        logits = torch.cat([logits, z.detach().reshape(1, -1, 1, 1).expand(B, -1, T, 1)], dim=-1)
    lse = torch.logsumexp(logits, dim=-1)  # (B, NH, T)
    grads = [t.grad.permute(0, 2, 1, 3).numpy() for t in (q, k, v)]
    dz = z.grad.numpy() if sinks else np.zeros(0)
    return [out.detach().numpy(), lse.numpy()] + grads + [dz]


def run_driver(args, case, x, tag):
    _, B, T, NH, NKV, hd, W, sinks, packed, _ = case
    path_in = os.path.join(args.work, f"in_{tag}.bin")
    path_out = os.path.join(args.work, f"out_{tag}.bin")
    with open(path_in, "wb") as f:
        np.array([B, T, NH, NKV, hd, W, int(sinks), int(packed)], dtype=np.int32).tofile(f)
        for name in ("q", "k", "v", "dout"):
            x[name].astype(np.float32).tofile(f)
        if sinks:
            x["sinks"].astype(np.float32).tofile(f)
        if packed:
            x["seg"].astype(np.int32).tofile(f)
    subprocess.run([args.driver, path_in, path_out], check=True)
    got = np.fromfile(path_out, dtype=np.float32).astype(np.float64)
    sizes = [B * T * NH * hd, B * NH * T, B * T * NH * hd, B * T * NKV * hd, B * T * NKV * hd,
             NH if sinks else 0]
    parts, o = [], 0
    for n in sizes:
        parts.append(got[o:o + n])
        o += n
    assert o == got.size, f"driver wrote {got.size} floats, expected {o}"
    return parts


def err(got, want):
    """max |got - want| / max |want|, the scale floored at 0.1: a tensor whose reference is exactly
    0 (a window of 1: every row sees only itself, so dS = 0 and dq = dk = 0) is compared with the
    op's rounding noise at the scale of the O(1) inputs instead of at 1e-17."""
    want = np.asarray(want, dtype=np.float64).reshape(-1)
    if want.size == 0:
        return 0.0
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 0.1))


def inputs(case, seed):
    _, B, T, NH, NKV, hd, _, _, packed, _ = case
    rng = np.random.default_rng(seed)
    # fp32 values (both sides compute on the same inputs), uniform in [-1, 1] as the op driver's
    u = lambda *s: rng.uniform(-1, 1, size=s).astype(np.float32).astype(np.float64)  # noqa: E731
    x = {"q": u(B, T, NH, hd), "k": u(B, T, NKV, hd), "v": u(B, T, NKV, hd),
         "dout": u(B, T, NH, hd),
         "sinks": rng.uniform(-1, 3, size=NH).astype(np.float32).astype(np.float64), "seg": None}
    if packed:
        # documents of 1 .. T/3 tokens, numbered 0, 1, 2, ... in each row (equal ids = one document
        # for both transformers' packed mask and the op's runs)
        seg = np.zeros((B, T), dtype=np.int32)
        for b in range(B):
            t, doc = 0, 0
            while t < T:
                n = int(rng.integers(1, T // 3 + 1))
                seg[b, t:t + n] = doc
                t, doc = t + n, doc + 1
        x["seg"] = seg
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    names = ["out", "lse", "dq", "dk", "dv", "dsinks"]
    failed = 0

    # transformers' band: row t of a window W sees the W keys t-W+1 .. t (kv_idx > q_idx - W)
    m = masks(1, 10, 4, None)[0, 0] == 0
    band = [[int(j) for j in torch.nonzero(m[t]).reshape(-1)] for t in range(10)]
    if band[9] != [6, 7, 8, 9] or band[2] != [0, 1, 2]:
        print(f"FAIL: transformers' sliding window band is not t-W < t2 <= t: {band}")
        failed += 1

    for i, case in enumerate(CASES):
        x = inputs(case, 1000 + i)
        got = run_driver(args, case, x, str(i))
        want = reference(case, x)
        errs = [err(g, w) for g, w in zip(got, want)]
        line = " ".join(f"{n} {e:.2e}" for n, e in zip(names, errs))
        bad = [n for n, e in zip(names, errs) if e > TOL]
        print(f"{'FAIL' if bad else 'ok  '} {case[0]}: {line}")
        failed += bool(bad)
        # the same comparison fails for a band one key wider and for the sinks left out
        if case[6] > 0:
            wide = reference(case, x, window=case[6] + 1)
            e = max(err(got[0], wide[0]), err(got[2], wide[2]))
            print(f"     band of W+1 keys instead: out/dq error {e:.2e} (must exceed {100 * TOL})")
            failed += e <= 100 * TOL
        if case[7]:
            nosink = reference(case, x, sinks_on=False)
            e = err(got[0], nosink[0])
            print(f"     sinks left out instead: out error {e:.2e} (must exceed {100 * TOL})")
            failed += e <= 100 * TOL
    print(f"attention_hf_reference: transformers {transformers.__version__}, torch "
          f"{torch.__version__}: {failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
