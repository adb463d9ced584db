#!/usr/bin/env python3
# Issues 17 and 26: a model written by transformers itself (random init, save_pretrained) ->
# model.init_from -> 10 clipped AdamW steps of ours -> export --hf -> loaded by transformers (no
# missing or unexpected key) -> the trained weights and the logits of the export against
# transformers + torch.optim.AdamW on the same batches with the same hyperparameters and
# transformers' Trainer parameter groups (no weight decay on biases and norm weights). One
# transformers process per run of the script: Llama (fp32, one file), Phi-3 (fused qkv_proj and
# gate_up_proj), Mistral (a sliding window shorter than the sequence) and Seed-OSS (q/k/v biases,
# head_dim decoupled from hidden_size; its config's dropout 0.1 overridden to 0 by the deck keys),
# the last three saved in bf16 and sharded; ours at 1 rank, 2 ranks (ZeRO-3) and sp = 2. Issue 27's
# mixtures of experts (Qwen3-MoE, Mixtral, GPT-OSS; --archs, ctest test_moe_train_reference_*)
# likewise; gpt_oss_mxfp4: GPT-OSS with its experts stored as MXFP4 as the hub's are, which
# transformers dequantizes on load (Mxfp4Config(dequantize=True), its CPU path) and ours on import:
# also compared bitwise before training (an lr-0 step exported).
# --device cuda: ours on the CUDA device in fp32 and in bf16 at 1 rank (label gpu; exits 77 where
# torch sees no GPU; with SOF_TEST_GPU_AS_HOST=1 the same runs on the host device and torch's CPU);
# --device cpu: the host device in fp32 against torch on the CPU (label reference).
#
# Tolerances come from the run itself. The oracle is torch in float64; torch's own run at the
# precision under test (fp32, or bf16 autocast with fp32 master weights and AdamW) against it is
# the noise floor of that precision. Ours must stay within K x that floor (K = 4 for fp32: a
# different summation order only; K = 8 for bf16: we also keep the residual stream and every
# activation in bf16, where autocast keeps the residual adds in fp32) or an absolute floor:
#   weights  ||w_ours - w64|| / ||w64 - w_init|| per tensor (error relative to how far training
#            moved it: Adam turns rounding noise in near-zero gradient elements into +-lr steps, so
#            a max-element measure would be dominated by those elements)
#   logits   max|ours - ref64| / max|ref64| of the exported model on a held-out batch
#   losses   |loss_ours - loss64| / loss64 for each of the 10 steps
# The clip threshold lies between the 5th and 6th largest gradient norm of an unclipped float64
# run, so about half the steps clip (Adam is nearly invariant to a scale common to all steps);
# ours must clip the same steps as the oracle.
#
# Usage: hf_train_reference.py --superoffload BIN --work DIR --device cuda|cpu [--archs a,b]
#   [--mpirun "MPIEXEC FLAGS"]
# Runs in the project's test venv (scripts/python_env.sh test) or any python3 with torch and
# transformers (the GPU machine's); exits 77 (skipped) when they are missing.
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, torch, transformers = require("numpy", "torch", "transformers", venv="test")

B, T, STEPS = 4, 64, 10
VOCAB = 512
# eps 1e-5 (tests/model/llama_reference.py says why: smaller eps turns rounding noise in tiny
# gradient elements into full +-lr steps)
LR, WD, BETA1, BETA2, EPS = 2e-3, 0.1, 0.9, 0.95, 1e-5
# head_dim 64 (a head size every CUDA attention path supports) over hidden 128: q and o are
# 256 wide (decoupled, as Seed-OSS); GQA 2:1 with 2 kv heads (sp = 2 splits them); untied
COMMON = dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=64,
              max_position_embeddings=256, rope_theta=10000.0, tie_word_embeddings=False,
              bos_token_id=1, eos_token_id=0, pad_token_id=None)
GPT_OSS = dict(rms_norm_eps=1e-5, num_local_experts=4, num_experts_per_tok=2, intermediate_size=64,
               sliding_window=24,
               rope_parameters=dict(rope_type="yarn", rope_theta=150000.0, factor=4.0,
                                    beta_fast=32.0, beta_slow=1.0, truncate=False,
                                    original_max_position_embeddings=64))
ARCHS = {  # config class, extra keys, saved dtype, max_shard_size, transformers' dropout overrides
    "llama": ("LlamaConfig", dict(rms_norm_eps=1e-5), torch.float32, None, {}),
    "phi3": ("Phi3Config", dict(rms_norm_eps=1e-5), torch.bfloat16, "150KB", {}),
    "mistral": ("MistralConfig", dict(rms_norm_eps=1e-6, sliding_window=24), torch.bfloat16,
                "150KB", {}),
    "seed_oss": ("SeedOssConfig",
                 dict(rms_norm_eps=1e-6, attention_bias=True, attention_out_bias=False,
                      attention_dropout=0.1, residual_dropout=0.1),
                 torch.bfloat16, "150KB", dict(attention_dropout=0.0, residual_dropout=0.0)),
    # issue 27: mixture of experts. Layer 0 dense (mlp_only_layers), layer 1 sparse: 4 experts,
    # top 2, renormalized; saved with the hub's per-expert names (save_pretrained's default)
    "qwen3_moe": ("Qwen3MoeConfig",
                  dict(rms_norm_eps=1e-6, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=64, norm_topk_prob=True, mlp_only_layers=[0]),
                  torch.bfloat16, "150KB", {}),
    # every layer sparse, top 2 of 4 not renormalized, the load-balancing loss on (coefficient
    # 0.1 so that its gradient counts); saved with transformers 5's fused expert tensors
    "qwen3_moe_aux": ("Qwen3MoeConfig",
                      dict(rms_norm_eps=1e-6, num_experts=4, num_experts_per_tok=2,
                           moe_intermediate_size=64, norm_topk_prob=False,
                           output_router_logits=True, router_aux_loss_coef=0.1),
                      torch.float32, None, {}),
    # Mixtral: every layer sparse, 4 experts of the model's intermediate_size (64), top 2, always
    # renormalized, a sliding window of 24 keys (sequences of 64); saved with the hub's names
    # (block_sparse_moe.experts.{e}.w1/w3/w2, save_pretrained's default)
    "mixtral": ("MixtralConfig",
                dict(rms_norm_eps=1e-5, sliding_window=24, num_local_experts=4,
                     num_experts_per_tok=2, intermediate_size=64),
                torch.bfloat16, "150KB", {}),
    # the load-balancing loss on (coefficient 0.1), no window, transformers 5's fused names
    # (mlp.gate, mlp.experts.gate_up_proj / down_proj)
    "mixtral_aux": ("MixtralConfig",
                    dict(rms_norm_eps=1e-5, num_local_experts=4, num_experts_per_tok=2,
                         intermediate_size=64, output_router_logits=True,
                         router_aux_loss_coef=0.1),
                    torch.float32, None, {}),
    # GPT-OSS: q/k/v/o biases, sinks, sliding (24 keys) and full layers, YaRN (factor 4 over an
    # original 64 positions, truncate false); every layer sparse: router bias, top 2 of the
    # logits then softmax, experts with biases, interleaved gate/up and the clamped SwiGLU (the
    # gate_up weights drawn N(0, 0.3) so that both clamps bind), transposed fused tensors
    "gpt_oss": ("GptOssConfig", GPT_OSS, torch.bfloat16, "150KB", {}),
    # gpt_oss with every expert tensor (both layers' gate_up_proj and down_proj) stored as MXFP4
    # (MXFP4 below; the biases and everything else bf16) and the hub's quantization_config
    "gpt_oss_mxfp4": ("GptOssConfig", GPT_OSS, torch.bfloat16, "150KB", {}),
    # the load-balancing loss on (coefficient 0.1; over the router logits with their bias), only
    # full-attention layers, fp32 in one file
    "gpt_oss_aux": ("GptOssConfig",
                    dict(rms_norm_eps=1e-5, num_local_experts=4, num_experts_per_tok=2,
                         intermediate_size=64, layer_types=["full_attention"] * 2,
                         output_router_logits=True, router_aux_loss_coef=0.1),
                    torch.float32, None, {}),
    # the router z-loss on (ours: model.router_z_loss_coef; the oracle adds coef x z to
    # transformers' loss), the load-balancing loss off; layer 0's expert 3 routed one token in
    # step 1 and none after (IDLE, asserted): steps 2-10 decay its moments and weights without
    # a gradient, as torch's AdamW does
    "gpt_oss_z": ("GptOssConfig",
                  dict(rms_norm_eps=1e-5, num_local_experts=4, num_experts_per_tok=2,
                       intermediate_size=64, layer_types=["full_attention"] * 2),
                  torch.float32, None, {}),
}
# our deck's extra model keys per architecture
DECK_MODEL = {"gpt_oss_z": dict(router_z_loss_coef=0.05)}
# an expert that the oracle must see idle (no token, in a layer) in some step after one where
# it had tokens (idle_router); its slices of the expert tensors are compared as tensors of their
# own
IDLE = {"gpt_oss_z": 3}
# layouts per architecture where not all: the load-balancing loss is each rank's own over its
# micro-batch (as DDP computes it), so 2 ranks differ from one process over the whole batch
ONLY_LAYOUTS = {"qwen3_moe_aux": ("1rank",), "mixtral_aux": ("1rank",), "gpt_oss_aux": ("1rank",)}
SAVE_OPTIONS = {"qwen3_moe_aux": dict(save_original_format=False),
                "mixtral_aux": dict(save_original_format=False)}
MOE_TYPES = ("qwen3_moe", "mixtral", "gpt_oss")  # model_type of the mixture-of-experts archs
# archs whose expert tensors are rewritten as MXFP4 after save_pretrained: random codes (every byte
# value: both nibbles, every code, negative ones and -0) and E8M0 scale bytes drawn uniformly from
# these ranges per tensor name (2^-6..2^-2 times codes of RMS 2.9: gate_up elements of RMS 0.38,
# so that both clamps bind as gpt_oss's N(0, 0.3); down 2^-10..2^-6: RMS 0.024, its init's 0.02)
MXFP4 = {"gpt_oss_mxfp4": {"gate_up_proj": (121, 125), "down_proj": (117, 121)}}
# the hub's quantization_config (openai/gpt-oss-20b's config.json, kept in inputs/hf)
HUB_GPT_OSS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs", "hf",
                           "gpt-oss-20b", "config.json")
INIT_STD = {"gpt_oss": {"mlp.experts.gate_up_proj": 0.3},  # tensors drawn wider (name suffix)
            "gpt_oss_aux": {"mlp.experts.gate_up_proj": 0.3},
            "gpt_oss_z": {"mlp.experts.gate_up_proj": 0.3}}
# ours: name -> (ranks, train.batch_size, parallel.sp); every layout reads the same global batch
# of B sequences per step (ZeRO-3 shards the state over both ranks)
LAYOUTS = {"1rank": (1, B, 1), "zero3": (2, B // 2, 1), "sp2": (2, B, 2)}
K = {"fp32": 4.0, "bf16": 8.0}
FLOOR = {  # absolute floors per precision: weights (update-relative), logits, losses; fp32 on the
    # CPU measured 1.3e-5, 2.4e-6, 3.5e-8 (torch fp32 itself: 1.3e-5, 2.8e-6, 6.9e-8)
    "fp32": (2e-4, 2e-5, 1e-5),
    "bf16": (5e-2, 2e-2, 1e-2),
}
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))


def run(cmd, cwd):
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=ENV)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def write_shard(path, toks):
    hdr = np.zeros(256, dtype="<i4")
    hdr[0], hdr[1], hdr[2] = 20240520, 1, len(toks)
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(np.asarray(toks, dtype="<u2").tobytes())


def ours(args, work, name, src, shard, clip, dtype, device, layout, steps=STEPS, lr=LR, tag=""):
    """superoffload train (10 steps from the HF dir) + export --hf; the export's directory, the
    per-step (loss, clipped) of the run and the MoE models' per-step (router balance, z) (rank
    0's metrics)."""
    ranks, batch, sp = LAYOUTS[layout]
    extra = "".join(f", {k}: {v!r}" for k, v in DECK_MODEL.get(name, {}).items())
    d = os.path.join(work, f"ours_{dtype}_{layout}{tag}")
    os.makedirs(d)
    with open(os.path.join(d, "deck.yaml"), "w") as f:
        f.write(f"""model: {{init_from: {src}, attention_dropout: 0, residual_dropout: 0{extra}}}
data: {{train: {shard}, val: {shard}, shuffle: false}}
train: {{batch_size: {batch}, seq_len: {T}, steps: {steps}, lr: {lr}, warmup_steps: 0,
  schedule: constant, grad_clip: {clip!r}, eval_batches: 1, log_every: 0, dtype: {dtype},
  checkpoint_dir: {d}/ckpt, metrics: {d}/metrics.jsonl}}
optimizer: {{type: adamw, weight_decay: {WD}, beta1: {BETA1}, beta2: {BETA2}, eps: {EPS},
  bias_correction: true}}
offload: {{enabled: true, stv: true, bucket_mb: 0.05, gpu_tail_buckets: 1}}
device: {{type: {"cuda" if device == "cuda" else "host"}}}
runtime: {{out_dir: {d}/out, threads: 1, log_level: quiet}}
parallel: {{zero_stage: 3, sp: {sp}}}
""")
    cmd = [args.superoffload, "train", "deck.yaml"]
    if ranks > 1:
        cmd = shlex.split(args.mpirun) + ["-n", str(ranks)] + cmd
    run(cmd, cwd=d)
    cks = sorted(x for x in os.listdir(os.path.join(d, "ckpt")) if x.startswith("step_"))
    if not cks:
        raise SystemExit(f"superoffload train wrote no checkpoint in {d}/ckpt")
    out = os.path.join(d, "export")
    run([args.superoffload, "export", "--hf", out, os.path.join(d, "ckpt", cks[-1]), "--dtype",
         "fp32"], cwd=d)
    lines = [json.loads(x) for x in open(os.path.join(d, "metrics.jsonl")) if x.strip()]
    steps = [x for x in lines if x.get("kind") == "step"]
    aux = [(x["router_balance"], x["router_z"]) for x in steps if "router_balance" in x]
    return out, [x["loss"] for x in steps], [bool(x["clipped"]) for x in steps], aux


def load(d, dev, dtype=torch.float32, info=False, **over):
    cfg = json.load(open(os.path.join(d, "config.json")))
    if cfg["model_type"] in MOE_TYPES:
        over = dict(over, experts_implementation="eager")  # grouped_mm has no float64
    if cfg.get("quantization_config", {}).get("quant_method") == "mxfp4":
        # transformers' own dequantization (integrations/mxfp4.py convert_moe_packed_tensors, into
        # the parameters' dtype): the path its quantizer's is_trainable names for training, and
        # the one a CPU without triton and the hub kernels has (without this argument this venv's
        # from_pretrained raises quantizer_mxfp4.py's "Using mxfp4 requires Accelerate"; with
        # accelerate and no triton it falls back to the same dequantization)
        over = dict(over, quantization_config=transformers.Mxfp4Config(dequantize=True))
    m = transformers.AutoModelForCausalLM.from_pretrained(
        d, dtype=dtype, attn_implementation="eager", output_loading_info=info, **over)
    if info:
        m, li = m
        return m.to(dev), li
    return m.to(dev)


def trainer_groups(model):
    """transformers' Trainer parameter groups: its own decay rule (no decay on biases and norm
    weights)."""
    decay = set(transformers.Trainer.get_decay_parameter_names(None, model))
    params = dict(model.named_parameters())
    return [{"params": [p for n, p in params.items() if n in decay], "weight_decay": WD},
            {"params": [p for n, p in params.items() if n not in decay], "weight_decay": 0.0}]


def router_terms(model, out):
    """MoE: (balance, z, counts) of a forward: transformers' load-balancing loss (unscaled), the
    router z-loss (the mean over every sparse layer's tokens of logsumexp(logits)^2, pooled as
    ours) and the tokens each expert got per layer ((L, E), top-k of the logits: the same
    experts as top-k of the softmax)."""
    if not hasattr(out, "router_logits"):
        return None
    k = model.config.num_experts_per_tok
    z = (torch.cat(out.router_logits).logsumexp(-1) ** 2).mean()
    counts = [torch.bincount(r.topk(k, dim=-1).indices.reshape(-1), minlength=r.shape[-1]).tolist()
              for r in out.router_logits]
    return out.aux_loss, z, counts


def skip_idle(opt, model, saved, counts):
    """--mutate skip_idle: undo the AdamW step (weights and moments) of the expert slices that got
    no token in this step (what an engine that skipped idle experts would do)."""
    for n, p in model.named_parameters():
        if n in saved:
            layer = int(n.split(".layers.")[1].split(".")[0])
            for e, c in enumerate(counts[layer]):
                if c == 0:
                    with torch.no_grad():
                        p[e] = saved[n][0][e]
                        for j, key in enumerate(("exp_avg", "exp_avg_sq")[:len(saved[n]) - 1]):
                            opt.state[p][key][e] = saved[n][1 + j][e]


def torch_train(src, toks, dev, mode, over, clip, z_coef=0.0, mutate=""):
    """10 steps of transformers + torch.optim.AdamW (Trainer's groups) with clip_grad_norm_ (clip
    None: unclipped) on the batches our loader gives with shuffle false: step s reads tokens
    [s*B*T, s*B*T + B*T + 1). mode: fp64 (the oracle), fp32, bf16 (autocast, fp32 master weights
    and optimizer). z_coef: + z_coef x the router z-loss (ours: model.router_z_loss_coef).
    Returns the model, the losses, the pre-clip gradient norms and for a MoE model each step's
    (balance, z, per-layer expert counts)."""
    model = load(src, dev, torch.float64 if mode == "fp64" else torch.float32, **over).train()
    opt = torch.optim.AdamW(trainer_groups(model), lr=LR, betas=(BETA1, BETA2), eps=EPS)
    moe = model.config.model_type in MOE_TYPES
    fwd = dict(output_router_logits=True) if moe else {}
    losses, norms, aux = [], [], []
    for s in range(STEPS):
        chunk = torch.tensor(toks[s * B * T: s * B * T + B * T + 1].astype(np.int64), device=dev)
        idx, tgt = chunk[:-1].view(B, T), chunk[1:].view(B, T)
        opt.zero_grad()
        if mode == "bf16":
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                out = model(idx, **fwd)
        else:
            out = model(idx, **fwd)
        logits = out.logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, VOCAB) if mode != "fp64"
                                                 else logits.reshape(-1, VOCAB), tgt.reshape(-1))
        terms = router_terms(model, out) if moe else None
        if getattr(model.config, "output_router_logits", False):  # MoE: + coef x balance
            loss = loss + model.config.router_aux_loss_coef * out.aux_loss
        if z_coef and mutate != "no_z":  # ours: + coef x z
            loss = loss + (2 * z_coef if mutate == "double_z" else z_coef) * terms[1]
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_(
            model.parameters(), clip if clip is not None else float("inf"))))
        saved = {n: [p.detach().clone()] + ([opt.state[p][k].clone() for k in
                                             ("exp_avg", "exp_avg_sq")] if opt.state.get(p) else [])
                 for n, p in model.named_parameters() if ".mlp.experts." in n} \
            if mutate == "skip_idle" else None
        opt.step()
        if saved is not None:
            skip_idle(opt, model, saved, terms[2])
        losses.append(loss.item())
        if terms:
            aux.append((terms[0].item(), terms[1].item(), terms[2]))
    return model.eval(), losses, norms, aux


def state(model, idle=None):
    """the state dict in float64; idle: an expert whose slices of the expert tensors join as
    tensors of their own (name[e]), so that its error is relative to its own (small) update"""
    s = {k: v.detach().double().cpu() for k, v in model.state_dict().items()}
    if idle is not None:
        s.update({f"{k}[{idle}]": v[idle] for k, v in list(s.items()) if ".mlp.experts." in k})
    return s


def logits_of(model, idx):
    with torch.no_grad():
        return model(idx.to(next(model.parameters()).device)).logits.double().cpu()


def errors(w, logits, losses, ref, init):
    """(worst tensor error, its name), logits error, worst step-loss error against the oracle"""
    w_ref, lg_ref, l_ref = ref
    we = max(((w[k] - w_ref[k]).norm().item() / max((w_ref[k] - init[k]).norm().item(), 1e-30), k)
             for k in w_ref)
    le = float((logits - lg_ref).abs().max() / lg_ref.abs().max())
    se = max(abs(a - b) / abs(b) for a, b in zip(losses, l_ref))
    return we, le, se


def idle_router(model, toks, e):
    """Layer 0's expert e made to receive exactly one token id, one that occurs in step 1's batch
    and in no later step: its router row along that token's router input (less the batch's mean
    input) in the initial model, unit length, its bias half way between that token's logit and
    the largest of the other tokens' (a margin of 0.4 or more to the top-k boundary in every step
    of the oracle, measured: no near tie that rounding could flip)."""
    first = toks[:B * T]
    later = set(toks[B * T:STEPS * B * T].tolist())
    v = next(int(x) for x in first if int(x) not in later)
    cap = {}

    def hook(mod, inp, out):
        cap.setdefault("x", inp[0].detach().reshape(-1, inp[0].shape[-1]))
    router = model.model.layers[0].mlp.router
    hk = router.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.tensor(first.reshape(B, T).astype(np.int64)))
    hk.remove()
    x, pos = cap["x"], torch.tensor(first == v)
    d = x[pos].mean(0) - x.mean(0)
    d = d / d.norm()
    lg = x @ d
    with torch.no_grad():
        router.weight[e] = d
        router.bias[e] = -(float(lg[pos].min()) + float(lg[~pos].max())) / 2


def write_mxfp4(src, ranges):
    """The expert tensors of a saved GPT-OSS directory replaced, in their own files, by MXFP4 as
    the hub stores them: `<name>_blocks` (E, R, X/32, 16) uint8, byte b of a block holding elements
    2b (low nibble) and 2b + 1 (high) of its 32, and `<name>_scales` (E, R, X/32) uint8 (value =
    E2M1 code x 2^(scale - 127)), where the parameter is (E, X, R) (transformers' dequantization
    transposes); config.json gets the hub's quantization_config. Random codes and scales (ranges:
    the scale bytes per tensor name); returns per tensor name the byte values and scales used."""
    from safetensors.torch import load_file, save_file
    g = torch.Generator().manual_seed(27)
    used = {}
    index = json.load(open(os.path.join(src, "model.safetensors.index.json")))
    for f in sorted(set(index["weight_map"].values())):
        path = os.path.join(src, f)
        t = load_file(path)
        for k in [k for k in t if k.rsplit(".", 1)[1] in ranges]:
            e, x, r = t.pop(k).shape
            lo, hi = ranges[k.rsplit(".", 1)[1]]
            t[k + "_blocks"] = torch.randint(0, 256, (e, r, x // 32, 16), generator=g,
                                             dtype=torch.uint8)
            t[k + "_scales"] = torch.randint(lo, hi + 1, (e, r, x // 32), generator=g,
                                             dtype=torch.uint8)
            used[k] = (set(t[k + "_blocks"].unique().tolist()),
                       set(t[k + "_scales"].unique().tolist()))
            del index["weight_map"][k]
            index["weight_map"].update({k + "_blocks": f, k + "_scales": f})
        save_file(t, path, metadata={"format": "pt"})
    json.dump(index, open(os.path.join(src, "model.safetensors.index.json"), "w"), indent=2)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["quantization_config"] = json.load(open(HUB_GPT_OSS))["quantization_config"]
    json.dump(cfg, open(os.path.join(src, "config.json"), "w"), indent=2)
    return used


def check_mxfp4_cover(name, used, ranges, fails):
    """every expert tensor of every layer is MXFP4, holds all 256 byte values (each E2M1 code in
    both nibbles) and every scale byte of its range"""
    want = {f"model.layers.{i}.mlp.experts.{p}" for i in range(COMMON["num_hidden_layers"])
            for p in ranges}
    if set(used) != want:
        fails.append(f"{name}: MXFP4 tensors {sorted(used)}, expected {sorted(want)}")
    for k, (b, sc) in sorted(used.items()):
        lo, hi = ranges[k.rsplit(".", 1)[1]]
        if len(b) != 256 or sc != set(range(lo, hi + 1)):
            fails.append(f"{name}: {k}: {len(b)} of 256 byte values, scales {sorted(sc)}")
    print(f"  {name}: {len(used)} expert tensors as MXFP4, every byte value in each; scale bytes "
          + ", ".join(f"{p} {lo}..{hi}" for p, (lo, hi) in ranges.items()))


def mutate_mxfp4(src, work, how):
    """--mutate mxfp4_nibbles / mxfp4_scale: a copy of the source for ours only, every block
    byte's nibbles swapped or every scale one higher (what a reader with that bug would see)"""
    from safetensors.torch import load_file, save_file
    out = os.path.join(work, "src_mutated")
    shutil.copytree(src, out)
    for f in os.listdir(out):
        if f.endswith(".safetensors"):
            t = load_file(os.path.join(out, f))
            for k in list(t):
                if how == "mxfp4_nibbles" and k.endswith("_blocks"):
                    t[k] = (t[k] >> 4) | (t[k] << 4)
                elif how == "mxfp4_scale" and k.endswith("_scales"):
                    t[k] = t[k] + 1
            save_file(t, os.path.join(out, f), metadata={"format": "pt"})
    return out


def check_import(args, work, name, src, ours_src, shard, clip, fails):
    """ours at step 0 (one step at lr 0, exported in fp32) against transformers' parameters as it
    loads the directory (fp32), every tensor: the same bits, but that the lr-0 step adds a signed
    zero (-0 x m / ...) to each weight, which turns -0 into +0 where m < 0 (never +0 into -0): a
    zero may be transformers' -0 and our +0, and some of transformers' -0 (E2M1 code 8) must stay
    ours"""
    out, _, _, _ = ours(args, work, name, ours_src, shard, clip, "fp32", "cpu", "1rank", steps=1,
                        lr=0.0, tag="_lr0")
    w, ref = load(out, "cpu").state_dict(), load(src, "cpu").state_dict()
    bad, n, neg0, flipped = [], 0, 0, 0
    for k, r in ref.items():
        a, b = w[k].view(torch.int32), r.view(torch.int32)
        n += r.numel()
        rneg0 = (r == 0) & (b < 0)
        neg0 += int(rneg0.sum())
        flip = rneg0 & (a == 0)  # transformers' -0 (bits 0x80000000), ours +0 (bits 0)
        flipped += int(flip.sum())
        if not torch.equal(a[~flip], b[~flip]):
            d = (w[k] - r).abs().max() / r.abs().max()
            bad.append((float(d), int((a != b).sum() - flip.sum()), k))
    print(f"  {name} import (step 0, 1 rank): {len(ref) - len(bad)} of {len(ref)} tensors "
          f"({n} values) bitwise equal to transformers' dequantized ones; of its {neg0} -0, "
          f"{neg0 - flipped} are -0 in ours, {flipped} turned +0 by the lr-0 step")
    if bad:
        e, c, k = max(bad)
        fails.append(f"{name} import: {len(bad)} tensors differ from transformers' dequantized "
                     f"ones, worst {k}: {c} values, max |diff| / max |value| {e:.3e}")
    elif not 0 < neg0 - flipped:
        fails.append(f"{name} import: none of transformers' {neg0} -0 is -0 in ours")


def make_source(work, name, toks):
    cls, extra, dtype, shard, _ = ARCHS[name]
    torch.manual_seed(17)
    cfg = getattr(transformers, cls)(**{**COMMON, **extra})
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(torch.float32)
    with torch.no_grad():  # biases away from their zero init, so their import counts
        for n, p in model.named_parameters():
            if n.endswith("bias"):  # also gpt_oss's experts.gate_up_proj_bias / down_proj_bias
                p.normal_(0.0, 0.05)
            for suffix, std in INIT_STD.get(name, {}).items():
                if n.endswith(suffix):
                    p.normal_(0.0, std)
    if name in IDLE:
        idle_router(model, toks, IDLE[name])
    src = os.path.join(work, "src")
    model.to(dtype).save_pretrained(src, **({"max_shard_size": shard} if shard else {}),
                                    **SAVE_OPTIONS.get(name, {}))
    if shard and not os.path.exists(os.path.join(src, "model.safetensors.index.json")):
        raise SystemExit(f"{name}: save_pretrained wrote one file, not shards")
    return src, (write_mxfp4(src, MXFP4[name]) if name in MXFP4 else None)


def rel(a, b):
    return abs(a - b) / abs(b)


def check_router(tag, mode, layout, ours_aux, ref, torch_aux, fails):
    """MoE: our step log's router balance and z (metrics.jsonl) against the oracle's. The first
    step (the same weights) both; z at every step (smooth in the weights; the balance counts
    top-k choices, which a last-bit difference may flip later). The balance is each rank's over
    its own micro-batch (as the loss term is), so it is compared at 1 rank only; z is a mean
    over tokens and equal at every layout."""
    if len(ours_aux) != STEPS:
        fails.append(f"{tag}: {len(ours_aux)} steps with router_balance / router_z in "
                     f"metrics.jsonl, expected {STEPS}")
        return
    tol = max(FLOOR[mode][2], K[mode] * max(rel(t[1], r[1]) for t, r in zip(torch_aux, ref)))
    checks = [("router z (every step)", max(rel(o[1], r[1]) for o, r in zip(ours_aux, ref)))]
    if layout == "1rank":
        checks.append(("router balance (step 1)", rel(ours_aux[0][0], ref[0][0])))
    for what, e in checks:
        print(f"  {tag} {what}: ours {e:.3e} against fp64 (step 1: balance {ref[0][0]:.6f}, z "
              f"{ref[0][1]:.6f}), tolerance {tol:.3e}")
        if not e <= tol:
            fails.append(f"{tag} {what}: ours {e:.3e} > tolerance {tol:.3e}")


def check_idle(name, e, aux, fails):
    """the oracle's expert e gets no token in any layer in some step after one where it had
    tokens (so its AdamW step, decaying moments and weights without a gradient, is tested)"""
    got = [[a[2][layer][e] for a in aux] for layer in range(len(aux[0][2]))]
    print(f"  {name}: expert {e}'s tokens per step, each layer: {got}")
    if not any(c[i] > 0 and 0 in c[i + 1:] for c in got for i in range(len(c))):
        fails.append(f"{name}: expert {e} is never idle after a step with tokens: {got}")


def check_arch(args, name, dev, toks, held_out, shard, fails):
    work = os.path.join(args.work, name)
    os.makedirs(work)
    src, mx = make_source(work, name, toks)
    ours_src = src  # --mutate mxfp4_*: ours reads mutated files, transformers the right ones
    if mx is not None:
        check_mxfp4_cover(name, mx, MXFP4[name], fails)
        if args.mutate.startswith("mxfp4"):
            ours_src = mutate_mxfp4(src, work, args.mutate)
    over = ARCHS[name][4]
    zc = DECK_MODEL.get(name, {}).get("router_z_loss_coef", 0.0)
    idle = IDLE.get(name)
    init = state(load(src, "cpu", **over), idle)
    # the clip threshold from an unclipped float64 run, then the clipped oracle
    _, _, n64, _ = torch_train(src, toks, dev, "fp64", over, None, zc, args.mutate)
    top = sorted(n64, reverse=True)
    clip = float((top[4] + top[5]) / 2)
    m64, l64, c64, a64 = torch_train(src, toks, dev, "fp64", over, clip, zc, args.mutate)
    clipped64 = [n > clip for n in c64]
    ref = (state(m64, idle), logits_of(m64, held_out), l64)
    if idle is not None:
        check_idle(name, idle, a64, fails)
    moved = min((ref[0][k] - init[k]).norm().item() for k in init if not k.endswith("]"))
    if not (moved > 0 and 2 <= sum(clipped64) <= STEPS - 2):  # (random tokens: no loss trend)
        fails.append(f"{name}: the reference did not train as intended (smallest update {moved}, "
                     f"clipped {clipped64})")
    if mx is not None:
        check_import(args, work, name, src, ours_src, shard, clip, fails)
    modes = ("fp32", "bf16") if args.device == "cuda" else ("fp32",)
    # the 2-rank layouts for the architectures of issue 26 (llama's ZeRO-3 and Ulysses runs are
    # tests/mpi's); on the GPU one rank
    layouts = ("1rank",) if args.device == "cuda" or name == "llama" else tuple(LAYOUTS)
    layouts = tuple(x for x in layouts if x in ONLY_LAYOUTS.get(name, layouts)
                    and x in args.layouts.split(","))
    for mode in modes:
        # (a mutation applies to torch's own run too: its noise floor stays that of fp32)
        mt, lt, nt, at = torch_train(src, toks, dev, mode, over, clip, zc, args.mutate)
        floor = errors(state(mt, idle), logits_of(mt, held_out), lt, ref, init)
        # a clip decision may differ from the oracle's only in bf16 and only where the oracle's
        # norm lies within K x torch bf16's own relative norm error of the threshold (measured
        # on the CPU's bf16: llama's step 6 at 0.07 % of the threshold, gpt_oss's step 8 at 1.8 %)
        norm_noise = K[mode] * max(abs(a - b) / b for a, b in zip(nt, c64)) if mode != "fp32" \
            else 0.0
        for lay in layouts:
            out, lo, cl, ao = ours(args, work, name, ours_src, shard, clip, mode,
                                   args.ours_device, lay)
            tag = f"{name} {mode} {lay}"
            if len(lo) != STEPS:
                fails.append(f"{tag}: {len(lo)} step losses in metrics.jsonl, expected {STEPS}")
                continue
            for i, (a, b) in enumerate(zip(cl, clipped64)):
                near = abs(c64[i] - clip) / clip
                if a != b and near > norm_noise:
                    fails.append(f"{tag}: step {i + 1} clipped {a}, the oracle's {b} (its norm "
                                 f"{c64[i]:.5f} is {near:.2e} from the clip {clip:.5f}, "
                                 f"beyond {mode}'s noise {norm_noise:.2e})")
                elif a != b:
                    print(f"  {tag}: step {i + 1} clipped {a}, the oracle's {b}: its norm "
                          f"{c64[i]:.5f} is {near:.2e} from the clip, within {mode}'s noise "
                          f"{norm_noise:.2e}")
            if "quantization_config" in json.load(open(os.path.join(out, "config.json"))):
                fails.append(f"{tag}: the export's config.json has a quantization_config")
            exp, info = load(out, "cpu", info=True, **over)
            for k in ("missing_keys", "unexpected_keys", "mismatched_keys"):
                if info.get(k):
                    fails.append(f"{tag}: from_pretrained {k}: {info.get(k)}")
            got = errors(state(exp, idle), logits_of(exp, held_out), lo, ref, init)
            if a64:
                check_router(tag, mode, lay, ao, a64, at, fails)
            for i, what in enumerate(("weights", "logits", "step losses")):
                g, f = got[i], floor[i]
                gv, fv = (g[0], f[0]) if i == 0 else (g, f)
                tol = max(FLOOR[mode][i], K[mode] * fv)
                where = f" (worst: {g[1]})" if i == 0 else ""
                print(f"  {tag} {what}: ours {gv:.3e}{where}, torch {mode} {fv:.3e} against "
                      f"fp64, tolerance {tol:.3e}")
                if not gv <= tol:
                    fails.append(f"{tag} {what}: ours {gv:.3e} > tolerance {tol:.3e}{where}")
    print(f"  {name}: clip {clip:.4f} ({sum(clipped64)} of {STEPS} steps clipped), losses torch "
          f"fp64 {l64[0]:.5f} -> {l64[-1]:.5f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--superoffload", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), required=True)
    # the configured MPI launcher and its flags (tests/CMakeLists: SOF_MPIEXEC_SHELL); the GPU
    # bundle's run keeps the default
    ap.add_argument("--mpirun", default="mpirun --oversubscribe")
    # the MoE cases run as ctest's test_moe_train_reference* (each its own ~20 s)
    # a subset of the layouts (1rank, zero3, sp2) where an architecture has them all
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--archs", default=",".join(a for a in ARCHS
                                                if not a.startswith(MOE_TYPES)))
    # a wrong oracle that ours must fail (by hand): no_z / double_z (the z-loss term missing or
    # doubled), skip_idle (an expert with no token in a step skips its AdamW step); a wrong MXFP4
    # reader on our side (gpt_oss_mxfp4): mxfp4_nibbles (the two codes of a byte swapped),
    # mxfp4_scale (every exponent one too high)
    ap.add_argument("--mutate", choices=("", "no_z", "double_z", "skip_idle", "mxfp4_nibbles",
                                         "mxfp4_scale"), default="")
    args = ap.parse_args()
    if set(args.layouts.split(",")) - set(LAYOUTS):
        raise SystemExit(f"--layouts {args.layouts!r}: known are {', '.join(LAYOUTS)}")
    args.superoffload = os.path.abspath(args.superoffload)
    # SOF_TEST_GPU_AS_HOST=1 (ctest *_cuda_on_host): the --device cuda runs (fp32 and bf16, one
    # rank) with ours on the host device and torch on the CPU: the harness without a GPU
    as_host = args.device == "cuda" and os.environ.get("SOF_TEST_GPU_AS_HOST") == "1"
    args.ours_device = "cpu" if as_host else args.device
    if args.device == "cuda" and not as_host and not torch.cuda.is_available():
        print("SKIPPED: torch sees no CUDA device")
        return 77
    dev = torch.device("cpu" if as_host else args.device)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (ours: no TF32 either)
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(2)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    rng = np.random.default_rng(17)
    toks = rng.integers(0, VOCAB, STEPS * B * T + 1)
    held_out = torch.tensor(rng.integers(0, VOCAB, B * T).reshape(B, T))
    shard = os.path.join(args.work, "train_000.bin")
    write_shard(shard, toks)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, device {dev}"
          + (f" ({torch.cuda.get_device_name()})" if dev.type == "cuda" else "")
          + (" (the --device cuda runs on the host: SOF_TEST_GPU_AS_HOST=1)" if as_host else ""))
    fails = []
    names = [a for a in args.archs.split(",") if a]
    for name in names:
        if name not in ARCHS:
            raise SystemExit(f"--archs: unknown architecture {name!r} (known: {', '.join(ARCHS)})")
        check_arch(args, name, dev, toks, held_out, shard, fails)
    if fails:
        print("FAILED:\n  " + "\n  ".join(fails))
        return 1
    print(f"hf train reference ({args.device}, {', '.join(names)}): OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
