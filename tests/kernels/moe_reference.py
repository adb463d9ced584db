#!/usr/bin/env python3
# The MoE ops against transformers itself, in float64: transformers' own sparse MoE blocks
# (Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock, GptOssMLP) with random weights, L blocks in a
# chain, forward + backward of sum(dy * y) + router_aux_loss_coef * load_balancing_loss_func
# (transformers' own, pooled over the blocks' router logits, with and without an attention mask)
# + z_coef * router_z_loss_func (switch_transformers'), compared with our ops composed the same way
# (moe_ref_driver, CPU twins, fp32): outputs, input grads, every weight and router grad, the aux
# losses. Also GPT-OSS's MXFP4 dequantization (ckpt/mxfp4.h) against transformers'
# convert_moe_packed_tensors on random blocks and scales, bitwise in fp32 and bf16.
#
# Usage: moe_reference.py --driver BIN --work DIR. Runs in the project's venv (scripts/python_env.sh
# test: torch, transformers, safetensors); exits 77 (skipped) when it is missing.
import argparse
import os
import shutil
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, torch, transformers, st_numpy = require("numpy", "torch", "transformers", "safetensors.numpy",
                                            venv="test")
from transformers.models.gpt_oss import modeling_gpt_oss as m_oss  # noqa: E402
from transformers.models.mixtral import modeling_mixtral as m_mix  # noqa: E402
from transformers.models.qwen3_moe import modeling_qwen3_moe as m_qwen  # noqa: E402
from transformers.models.switch_transformers import \
    modeling_switch_transformers as m_switch  # noqa: E402
from transformers.integrations import mxfp4 as hf_mxfp4  # noqa: E402

torch.set_num_threads(1)

# max |ours - reference| / max |reference| per tensor (C++ fp32 against float64 on the same fp32
# inputs); measured maxima are printed by every run (docs/moe.md)
TOL = 2e-5
TOL_LOSS = 1e-5  # relative, the aux losses

# name, transformers block, config, our --kind, L blocks, N tokens (B x S), aux coef, z coef, mask
CASES = [
    # Qwen3-MoE without norm_topk_prob, the aux loss pooled over 2 blocks, padding masked; one
    # expert that no token picks (its grads must be exactly zero)
    dict(name="qwen3moe", kind="qwen3moe", layers=2, B=2, S=12, topk=2, norm=False, aux=0.5,
         z=0.0, mask=True, starve=True,
         config=dict(hidden_size=32, moe_intermediate_size=24, num_experts=8)),
    # Qwen3-MoE with norm_topk_prob, 16 experts top-4, one block, no aux loss
    dict(name="qwen3moe-norm", kind="qwen3moe", layers=1, B=2, S=9, topk=4, norm=True, aux=0.0,
         z=0.0, mask=False, starve=False,
         config=dict(hidden_size=32, moe_intermediate_size=20, num_experts=16)),
    # Mixtral (always renormalized), aux and z-loss, no mask
    dict(name="mixtral", kind="mixtral", layers=2, B=1, S=20, topk=2, norm=True, aux=0.2, z=0.1,
         mask=False, starve=False,
         config=dict(hidden_size=32, intermediate_size=40, num_local_experts=4)),
    # GPT-OSS: top-4 of logits + router bias, clamped interleaved SwiGLU with expert biases
    # (values beyond +-7 on both clamps), aux loss with a mask
    dict(name="gpt-oss", kind="gpt-oss", layers=2, B=2, S=10, topk=4, norm=False, aux=2.0, z=0.05,
         mask=True, starve=False,
         config=dict(hidden_size=32, intermediate_size=16, num_local_experts=8)),
]


def f32(shape, rng, scale):
    """Random values exactly representable in fp32 (both sides see the same inputs)."""
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def build(case, rng):
    """transformers' blocks in float64 with random fp32-representable weights; our tensors."""
    kind, cfg, L = case["kind"], dict(case["config"]), case["layers"]
    H = cfg["hidden_size"]
    ours, blocks = {}, []
    for l in range(L):
        p = f"l{l}."
        if kind == "qwen3moe":
            c = transformers.Qwen3MoeConfig(num_experts_per_tok=case["topk"],
                                            norm_topk_prob=case["norm"], **cfg)
            E, I = c.num_experts, c.moe_intermediate_size
        elif kind == "mixtral":
            c = transformers.MixtralConfig(num_experts_per_tok=case["topk"],
                                           router_jitter_noise=0.0, **cfg)
            E, I = c.num_local_experts, c.intermediate_size
        else:
            c = transformers.GptOssConfig(num_experts_per_tok=case["topk"], **cfg)
            E, I = c.num_local_experts, c.intermediate_size
        c._experts_implementation = "eager"
        router = f32((E, H), rng, 0.3)
        if case["starve"]:
            router[E - 1, 0] = -40.0  # x[:, 0] > 0 below: expert E-1 is never in the top-k
        gate_up = f32((E, 2 * I, H), rng, 0.35 if kind == "gpt-oss" else 0.15)
        down = f32((E, H, I), rng, 0.15)
        ours[p + "router"], ours[p + "gate_up"], ours[p + "down"] = router, gate_up, down
        t = lambda a: torch.nn.Parameter(torch.from_numpy(a.astype(np.float64)))  # noqa: E731
        if kind == "qwen3moe":
            b = m_qwen.Qwen3MoeSparseMoeBlock(c).double()
            b.gate.weight, b.experts.gate_up_proj, b.experts.down_proj = \
                t(router), t(gate_up), t(down)
            hook_mod = b.gate
        elif kind == "mixtral":
            b = m_mix.MixtralSparseMoeBlock(c).double()
            b.gate.weight, b.experts.gate_up_proj, b.experts.down_proj = \
                t(router), t(gate_up), t(down)
            hook_mod = b.gate
        else:
            rb, gb, db = f32((E,), rng, 0.5), f32((E, 2 * I), rng, 1.5), f32((E, H), rng, 0.5)
            # activations exactly at the clamps' bounds for every token: gate 0 = +limit, up 0 =
            # +limit, up 1 = -limit (zero weights, the bound as bias): torch's clamp passes no
            # gradient there
            lim = c.swiglu_limit
            for r, v in ((0, lim), (1, lim), (3, -lim)):
                gate_up[:, r, :] = 0.0
                gb[:, r] = v
            ours[p + "router_bias"], ours[p + "gate_up_bias"], ours[p + "down_bias"] = rb, gb, db
            b = GptOss(c)
            b.router.weight, b.router.bias = t(router), t(rb)
            # transformers' GPT-OSS experts are (in, out): ours transposed on the last two axes
            b.experts.gate_up_proj = t(np.ascontiguousarray(gate_up.transpose(0, 2, 1)))
            b.experts.down_proj = t(np.ascontiguousarray(down.transpose(0, 2, 1)))
            b.experts.gate_up_proj_bias, b.experts.down_proj_bias = t(gb), t(db)
            hook_mod = b.router
            # record the activation's inputs: the case must reach both clamps
            gate_in = []
            orig = b.experts._apply_gate
            b.experts._apply_gate = lambda gu, o=orig, acc=gate_in: (acc.append(gu.detach()),
                                                                      o(gu))[1]
            b.gate_in = gate_in
        logits = []
        hook_mod.register_forward_hook(lambda mod, inp, out, acc=logits: acc.append(out[0]))
        blocks.append((b, logits, E, I))
    return ours, blocks


def GptOss(c):
    return m_oss.GptOssMLP(c).double()


def grads_of(case, block, prefix):
    """transformers' grads in our names and layouts."""
    b = block
    if case["kind"] == "gpt-oss":
        r = {prefix + "router": b.router.weight.grad, prefix + "router_bias": b.router.bias.grad,
             prefix + "gate_up": b.experts.gate_up_proj.grad.transpose(1, 2),
             prefix + "down": b.experts.down_proj.grad.transpose(1, 2),
             prefix + "gate_up_bias": b.experts.gate_up_proj_bias.grad,
             prefix + "down_bias": b.experts.down_proj_bias.grad}
    else:
        r = {prefix + "router": b.gate.weight.grad, prefix + "gate_up": b.experts.gate_up_proj.grad,
             prefix + "down": b.experts.down_proj.grad}
    return {k: v.detach().numpy() for k, v in r.items()}


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def compare(got, ref):
    """max rel error per tensor of ref (inf where the driver wrote none)."""
    return {k: (rel(got[k], v) if k in got else float("inf")) for k, v in ref.items()}


def run_case(case, driver, work):
    rng = np.random.default_rng(zlib.crc32(case["name"].encode()))
    ours, blocks = build(case, rng)
    B, S = case["B"], case["S"]
    N, H = B * S, case["config"]["hidden_size"]
    x = f32((N, H), rng, 1.0)
    if case["starve"]:
        x[:, 0] = np.abs(x[:, 0]) + 0.5
    dy = f32((N, H), rng, 1.0)
    mask = None
    if case["mask"]:
        mask = np.ones((B, S), np.float32)
        mask[0, :3] = 0.0  # left padding of the first row
        mask[1, -2:] = 0.0  # right padding of the second
    ours.update(x=x, dy=dy)
    if mask is not None:
        ours["mask"] = mask.reshape(-1)

    # transformers, float64
    xt = torch.from_numpy(x.astype(np.float64)).reshape(B, S, H).requires_grad_(True)
    h = xt
    for b, _, _, _ in blocks:
        out = b(h)
        h = out[0] if isinstance(out, tuple) else out
    E, K = blocks[0][2], case["topk"]
    gate_logits = tuple(lg[0] for _, lg, _, _ in blocks)
    am = torch.from_numpy(mask.astype(np.float64)) if mask is not None else None
    # the modeling file's own function (the three are the same code in transformers 5.x)
    mod = {"qwen3moe": m_qwen, "mixtral": m_mix, "gpt-oss": m_oss}[case["kind"]]
    balance = mod.load_balancing_loss_func(gate_logits, E, K, am)
    z = m_switch.router_z_loss_func(torch.cat(gate_logits, 0)[None])
    if mask is not None:  # the z-loss pooled like the aux loss: masked tokens excluded
        lse = torch.logsumexp(torch.cat(gate_logits, 0), dim=-1)
        mm = am.reshape(-1).repeat(len(blocks))
        z = (lse ** 2 * mm).sum() / mm.sum()
    loss = (h.reshape(N, H) * torch.from_numpy(dy.astype(np.float64))).sum() \
        + case["aux"] * balance + case["z"] * z
    loss.backward()
    balance, z = float(balance.detach()), float(z.detach())
    if case["kind"] == "gpt-oss":
        gu = torch.cat([t for b, _, _, _ in blocks for t in b.gate_in], 0)
        lim = blocks[0][0].experts.limit
        n_gate, n_up_hi, n_up_lo = int((gu[:, ::2] > lim).sum()), int((gu[:, 1::2] > lim).sum()), \
            int((gu[:, 1::2] < -lim).sum())
        print(f"  gpt-oss activations beyond the clamps (limit {lim}): gate > limit "
              f"{n_gate}, up > limit {n_up_hi}, up < -limit {n_up_lo} of {gu.shape[0]} rows")
        if min(n_gate, n_up_hi, n_up_lo) == 0:
            print("FAIL gpt-oss: the case does not reach every clamp")
            return False
    ref = {"y": h.detach().reshape(N, H).numpy(), "dx": xt.grad.reshape(N, H).numpy()}
    for l, (b, _, _, _) in enumerate(blocks):
        ref.update({"grad:" + k: v for k, v in grads_of(case, b, f"l{l}.").items()})

    inp, outp = os.path.join(work, case["name"] + ".in.safetensors"), \
        os.path.join(work, case["name"] + ".out.safetensors")
    st_numpy.save_file({k: np.ascontiguousarray(v, np.float32) for k, v in ours.items()}, inp)
    cmd = [driver, "--in", inp, "--out", outp, "--kind", case["kind"], "--topk", str(K),
           "--norm", "1" if case["norm"] else "0", "--aux-coef", repr(case["aux"]),
           "--z-coef", repr(case["z"])]
    subprocess.run(cmd, check=True)
    got = st_numpy.load_file(outp)
    ok = True
    errs = compare(got, ref)
    worst = max(errs.values())
    for k, e in errs.items():
        if not e <= TOL:
            print(f"FAIL {case['name']} {k}: max rel error {e:.3e} > {TOL}")
            ok = False
    extra = set(got) - set(ref) - {"balance", "z"}
    if extra:
        print(f"FAIL {case['name']}: grads transformers does not have: {sorted(extra)}")
        ok = False
    for k, v in (("balance", balance), ("z", z)):
        e = abs(float(got[k][0]) - v) / max(abs(v), 1e-300)
        if not e <= TOL_LOSS:
            print(f"FAIL {case['name']} {k}: ours {float(got[k][0])!r}, transformers {v!r}")
            ok = False
    if case["starve"]:  # the expert no token picked in block 0: zero grads, exactly
        E1 = E - 1
        for nm in ("gate_up", "down"):
            g = got[f"grad:l0.{nm}"][E1]
            if np.any(g != 0) or np.any(ref[f"grad:l0.{nm}"][E1] != 0):
                print(f"FAIL {case['name']}: expert {E1} took no token but has a {nm} grad")
                ok = False
    # the wrong variant must fail the same comparison: the other renormalization (qwen3moe),
    # the aux loss left out (where it is on)
    mutants = []
    if case["kind"] == "qwen3moe":
        mutants.append(["--norm", "0" if case["norm"] else "1"])
    if case["aux"] > 0:
        mutants.append(["--aux-coef", "0"])
    for mut in mutants:
        subprocess.run(cmd + mut, check=True)
        merr = max(compare(st_numpy.load_file(outp), ref).values())
        if not merr > 100 * TOL:
            print(f"FAIL {case['name']}: the mutant {' '.join(mut)} passes (error {merr:.2e})")
            ok = False
    print(f"{'ok' if ok else 'FAIL'}: {case['name']} (L={len(blocks)}, N={N}, E={E}, K={K}) "
          f"worst max rel error {worst:.2e}, balance {balance:.6f}, z {z:.6f}")
    return ok


def mxfp4_case(driver, work):
    """ckpt/mxfp4.h against transformers' convert_moe_packed_tensors, bitwise."""
    rng = np.random.default_rng(7)
    E, R, G = 3, 10, 4  # (E, R, G, 16) blocks: rows of 128 values
    blocks = rng.integers(0, 256, size=(E, R, G, 16), dtype=np.uint8)
    scales = rng.integers(90, 160, size=(E, R, G), dtype=np.uint8)
    scales[0, 0, 0], scales[0, 0, 1], scales[1, 2, 3] = 0, 254, 127  # the extremes: 2^-127, inf
    blocks[0, 0, 0, :] = np.arange(16, dtype=np.uint8) * 17  # every code in both nibbles
    src = os.path.join(work, "mxfp4.in.safetensors")
    dst = os.path.join(work, "mxfp4.out.safetensors")
    st_numpy.save_file({"w_blocks": blocks, "w_scales": scales}, src)
    subprocess.run([driver, "--mxfp4", src, dst], check=True)
    got = st_numpy.load_file(dst)["w"]  # (E, R, G * 32), ours
    ok = True
    for dt in (torch.float32, torch.bfloat16):
        want = hf_mxfp4.convert_moe_packed_tensors(torch.from_numpy(blocks),
                                                   torch.from_numpy(scales), dtype=dt)
        # transformers returns (E, G * 32, R): its parameter layout, ours transposed
        want = want.transpose(1, 2).float().numpy()
        mine = got.copy()
        if dt == torch.bfloat16:  # ours is exact: rounding to bf16 must change nothing
            mine = torch.from_numpy(got).to(torch.bfloat16).float().numpy()
            if not np.array_equal(mine.view(np.uint32), got.view(np.uint32)):
                print("FAIL mxfp4: a dequantized value is not exactly representable in bf16")
                ok = False
        same = np.array_equal(want.view(np.uint32), mine.view(np.uint32))
        if not same:
            bad = np.argwhere(want.view(np.uint32) != mine.view(np.uint32))[0]
            print(f"FAIL mxfp4 {dt}: first difference at {tuple(bad)}: ours "
                  f"{mine[tuple(bad)]!r}, transformers {want[tuple(bad)]!r}")
            ok = False
    # the wrong nibble order must fail
    swapped = ((blocks >> 4) | (blocks << 4)).astype(np.uint8)
    want = hf_mxfp4.convert_moe_packed_tensors(torch.from_numpy(swapped), torch.from_numpy(scales),
                                               dtype=torch.float32).transpose(1, 2).numpy()
    if np.array_equal(want.view(np.uint32), got.view(np.uint32)):
        print("FAIL mxfp4: swapped nibbles give the same result (the comparison cannot fail)")
        ok = False
    print(f"{'ok' if ok else 'FAIL'}: mxfp4 (E={E}, rows={R}, groups={G}) bitwise in fp32 and bf16")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    ok = mxfp4_case(a.driver, a.work)
    for case in CASES:
        ok = run_case(case, a.driver, a.work) and ok
    if ok:
        shutil.rmtree(a.work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
