#!/usr/bin/env python3
# LLaMA-family reference test: a PyTorch (float64) implementation of the model math written here,
# random models saved as Hugging Face directories (safetensors written by this script), compared
# with the C++ CPU model (logits, loss, every grad; with and without recompute) through
# llama_ref_driver, then import -> `superoffload train` (10 AdamW steps, clipping) -> `export --hf`
# -> reload, against torch.optim.AdamW + clip_grad_norm_ on the same batches.
#
# Usage: llama_reference.py --driver BIN --superoffload BIN --work DIR [--cases llama,qwen2,qwen3]
#        [--no-train]. Exits 77 (skipped) when torch or numpy is missing.
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, torch = require("numpy", "torch", venv=None)

torch.set_num_threads(1)

# Tolerances (C++ fp32 vs torch float64 on the same fp32 weights): max |diff| / max |ref| per
# tensor. Measured maxima are printed by every run (docs/models.md "Reference tests").
TOL_FWD = 1e-5     # logits
TOL_LOSS = 1e-5    # |loss diff| / loss
TOL_GRAD = 1e-4    # every gradient tensor
TOL_TRAIN = 1e-4   # weights after 10 AdamW steps, or NOISE_FACTOR x torch fp32's own deviation
NOISE_FACTOR = 4.0
TOL_STEP_LOSS = 1e-5

CASES = {
    # GQA (NKV < NH), untied head, Llama-3 rope_scaling (original 64: the 16 rotary frequencies
    # fall in all three bands: kept, smoothed, divided by factor); saved sharded, fp32.
    "llama": {
        "config": {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 2,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
            "vocab_size": 300, "max_position_embeddings": 512, "tie_word_embeddings": False,
            "attention_bias": False, "hidden_act": "silu", "torch_dtype": "float32",
        },
        "save": "sharded", "dtype": "F32",
    },
    # q/k/v biases, tied head, one kv head (multi-query); saved as one bf16 file (the import
    # converts bf16 -> fp32; the reference uses the same bf16-rounded values).
    "qwen2": {
        "config": {
            "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
            "hidden_size": 64, "intermediate_size": 80, "num_attention_heads": 4,
            "num_key_value_heads": 1, "head_dim": 16, "num_hidden_layers": 2,
            "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None,
            "vocab_size": 300, "max_position_embeddings": 128, "tie_word_embeddings": True,
            "hidden_act": "silu", "torch_dtype": "bfloat16",
        },
        "save": "single", "dtype": "BF16",
    },
    # per-head q/k RMSNorm before RoPE, head_dim 24 != C/NH = 16, untied; one fp32 file.
    "qwen3": {
        "config": {
            "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
            "hidden_size": 64, "intermediate_size": 112, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 24, "num_hidden_layers": 2,
            "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None,
            "vocab_size": 300, "max_position_embeddings": 128, "tie_word_embeddings": False,
            "attention_bias": False, "hidden_act": "silu", "torch_dtype": "float32",
        },
        "save": "single", "dtype": "F32",
    },
}
B, T = 2, 16
STEPS = 10
# eps 1e-5, not 1e-8: Adam turns a gradient element near eps into a +-lr step whose size and sign
# follow its rounding noise; torch fp32 against torch fp64 alone then differs by 3.7e-4 of max|w|
# after 10 steps with eps 1e-8, 1.4e-4 with 1e-6 and 3.1e-5 with 1e-5 (qwen2, the noisiest case).
LR, WD, BETA1, BETA2, EPS = 2e-3, 0.1, 0.9, 0.95, 1e-5


# ---------------------------------------------------------------- model description and math
def hd_of(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def has_bias(c):
    return c["model_type"] == "qwen2" or bool(c.get("attention_bias", False))


def tensor_specs(c):
    """(name, shape, init kind) in the engine's layout order (= Hugging Face names)."""
    C, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    NH, NKV, hd = c["num_attention_heads"], c["num_key_value_heads"], hd_of(c)
    s = [("model.embed_tokens.weight", (V, C), "emb")]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        s += [(p + "input_layernorm.weight", (C,), "norm"),
              (p + "self_attn.q_proj.weight", (NH * hd, C), "mat"),
              (p + "self_attn.k_proj.weight", (NKV * hd, C), "mat"),
              (p + "self_attn.v_proj.weight", (NKV * hd, C), "mat")]
        if has_bias(c):
            s += [(p + "self_attn.q_proj.bias", (NH * hd,), "bias"),
                  (p + "self_attn.k_proj.bias", (NKV * hd,), "bias"),
                  (p + "self_attn.v_proj.bias", (NKV * hd,), "bias")]
        if c["model_type"] == "qwen3":
            s += [(p + "self_attn.q_norm.weight", (hd,), "norm"),
                  (p + "self_attn.k_norm.weight", (hd,), "norm")]
        s += [(p + "self_attn.o_proj.weight", (C, NH * hd), "mat"),
              (p + "post_attention_layernorm.weight", (C,), "norm"),
              (p + "mlp.gate_proj.weight", (I, C), "mat"),
              (p + "mlp.up_proj.weight", (I, C), "mat"),
              (p + "mlp.down_proj.weight", (C, I), "mat")]
    s.append(("model.norm.weight", (C,), "norm"))
    if not c["tie_word_embeddings"]:
        s.append(("lm_head.weight", (V, C), "mat"))
    return s


def random_weights(c, seed):
    """fp32 numpy arrays; scales keep attention and logits away from saturation."""
    g = np.random.default_rng(seed)
    w = {}
    for name, shape, kind in tensor_specs(c):
        if kind == "emb":
            a = g.normal(0.0, 0.3 if c["tie_word_embeddings"] else 1.0, shape)
        elif kind == "mat":
            a = g.normal(0.0, 1.0 / math.sqrt(shape[1]), shape)
        elif kind == "norm":
            a = 1.0 + 0.1 * g.normal(0.0, 1.0, shape)
        else:
            a = 0.1 * g.normal(0.0, 1.0, shape)
        w[name] = a.astype(np.float32)
    return w


def rope_tables(c, T_):
    """cos, sin (T, hd/2): inv_freq in float64 (with llama3 scaling) rounded to float32 once,
    angle = pos * inv_freq in float32."""
    hd = hd_of(c)
    inv = np.array([1.0 / c["rope_theta"] ** ((2.0 * i) / hd) for i in range(hd // 2)])
    r = c.get("rope_scaling")
    if r:
        orig, lo, hi, fac = (r["original_max_position_embeddings"], r["low_freq_factor"],
                             r["high_freq_factor"], r["factor"])
        out = []
        for v in inv:
            wl = 2.0 * math.pi / v
            if wl > orig / lo:
                v = v / fac
            elif wl >= orig / hi:
                sm = (orig / wl - lo) / (hi - lo)
                v = (1.0 - sm) * v / fac + sm * v
            out.append(v)
        inv = np.array(out)
    inv32 = inv.astype(np.float32)
    ang = np.arange(T_, dtype=np.float32)[:, None] * inv32[None, :]  # float32 products
    ang = torch.from_numpy(ang.astype(np.float64))
    return torch.cos(ang), torch.sin(ang)


def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope(x, cos, sin):  # x (B, T, H, hd); rotate-half over pairs (i, i + hd/2)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def forward(c, P, idx):
    """logits (B, T, V) of the float64 torch model; P: name -> tensor."""
    Bn, Tn = idx.shape
    NH, NKV, hd, eps = c["num_attention_heads"], c["num_key_value_heads"], hd_of(c), c["rms_norm_eps"]
    cos, sin = rope_tables(c, Tn)
    mask = torch.ones(Tn, Tn, dtype=torch.bool).tril()
    x = P["model.embed_tokens.weight"][idx]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, P[p + "input_layernorm.weight"], eps)
        q = h @ P[p + "self_attn.q_proj.weight"].T
        k = h @ P[p + "self_attn.k_proj.weight"].T
        v = h @ P[p + "self_attn.v_proj.weight"].T
        if has_bias(c):
            q = q + P[p + "self_attn.q_proj.bias"]
            k = k + P[p + "self_attn.k_proj.bias"]
            v = v + P[p + "self_attn.v_proj.bias"]
        q, k, v = (q.view(Bn, Tn, NH, hd), k.view(Bn, Tn, NKV, hd), v.view(Bn, Tn, NKV, hd))
        if c["model_type"] == "qwen3":  # per-head RMSNorm of q and k, before RoPE
            q = rms(q, P[p + "self_attn.q_norm.weight"], eps)
            k = rms(k, P[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k = k.repeat_interleave(NH // NKV, dim=2)  # query head h uses kv head h // (NH / NKV)
        v = v.repeat_interleave(NH // NKV, dim=2)
        att = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = torch.einsum("bhts,bshd->bthd", att, v).reshape(Bn, Tn, NH * hd)
        x = x + y @ P[p + "self_attn.o_proj.weight"].T
        h = rms(x, P[p + "post_attention_layernorm.weight"], eps)
        g = torch.nn.functional.silu(h @ P[p + "mlp.gate_proj.weight"].T)
        x = x + (g * (h @ P[p + "mlp.up_proj.weight"].T)) @ P[p + "mlp.down_proj.weight"].T
    x = rms(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if c["tie_word_embeddings"] else P["lm_head.weight"]
    return x @ head.T


def loss_of(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))


def torch_params(c, w, dtype=torch.float64):
    return {n: torch.tensor(w[n], dtype=dtype, requires_grad=True)
            for n, _, _ in tensor_specs(c)}


# ---------------------------------------------------------------- safetensors (written here)
def bf16_round(a):
    """fp32 -> bf16 bits, round to nearest even (finite values)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors, dtype, metadata=None):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        raw = bf16_round(a).tobytes() if dtype == "BF16" else a.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = metadata or {"format": "pt"}
    hs = json.dumps(header).encode()
    hs += b" " * (-len(hs) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hs)))
        f.write(hs)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """name -> float32 numpy array (F32 or BF16), and the metadata."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        if e["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif e["dtype"] == "BF16":
            arr = bf16_to_f32(np.frombuffer(raw, dtype="<u2"))
        else:
            raise SystemExit(f"{path}: tensor {name} has dtype {e['dtype']} (expected F32/BF16)")
        out[name] = arr.reshape(e["shape"])
    return out, meta


def read_hf_dir(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        out = {}
        for fn in sorted(set(wm.values())):
            t, _ = read_safetensors(os.path.join(d, fn))
            for name in t:
                if wm.get(name) != fn:
                    raise SystemExit(f"{d}: {name} is in {fn} but the index says {wm.get(name)}")
            out.update(t)
        return out
    return read_safetensors(os.path.join(d, "model.safetensors"))[0]


def save_hf_dir(d, c, w, save, dtype):
    """Writes config.json and the tensors; returns the weights as the importer will see them
    (bf16-rounded when dtype is BF16)."""
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    names = [n for n, _, _ in tensor_specs(c)]
    if save == "single":
        write_safetensors(os.path.join(d, "model.safetensors"), {n: w[n] for n in names}, dtype)
    else:  # two shards, split in the middle, and the index
        half = len(names) // 2
        parts = [names[:half], names[half:]]
        wm, total = {}, 0
        for i, part in enumerate(parts):
            fn = f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors"
            write_safetensors(os.path.join(d, fn), {n: w[n] for n in part}, dtype)
            for n in part:
                wm[n] = fn
                total += w[n].size * (2 if dtype == "BF16" else 4)
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)
    if dtype == "BF16":
        return {n: bf16_to_f32(bf16_round(w[n])).reshape(w[n].shape) for n in names}
    return {n: w[n].copy() for n in names}


# ---------------------------------------------------------------- comparisons
class Report:
    def __init__(self):
        self.fail = []
        self.worst = {}

    def rel(self, what, key, got, ref, tol):
        got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
        if got.shape != ref.shape:
            self.fail.append(f"{what}: {key}: shape {got.shape} != reference {ref.shape}")
            return
        scale = max(np.abs(ref).max(), 1e-30)
        err = float(np.abs(got - ref).max() / scale)
        if not np.isfinite(err) or err > tol:
            self.fail.append(f"{what}: {key}: max|diff|/max|ref| = {err:.3e} > {tol:g} "
                             f"(max|diff| {np.abs(got - ref).max():.3e}, max|ref| {scale:.3e})")
        w = self.worst.get(what)
        if w is None or err > w[0]:
            self.worst[what] = (err, key)

    def check(self, what, ok, msg):
        if not ok:
            self.fail.append(f"{what}: {msg}")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r


def write_tokens(path, toks):
    np.concatenate([[B, T], toks]).astype("<i4").tofile(path)


def check_model(rep, name, c, w, hf_dir, toks, args, work):
    """C++ forward/backward of the imported dir vs torch autograd (float64)."""
    tok_path = os.path.join(work, f"{name}_tokens.bin")
    write_tokens(tok_path, toks)
    idx = torch.tensor(toks[:B * T].reshape(B, T), dtype=torch.long)
    tgt = torch.tensor(toks[1:].reshape(B, T), dtype=torch.long)
    P = torch_params(c, w)
    logits = forward(c, P, idx)
    loss = loss_of(logits, tgt)
    loss.backward()
    for rc in (False, True):
        out = os.path.join(work, f"{name}_out{'_rc' if rc else ''}.safetensors")
        run([args.driver, "--hf", hf_dir, "--tokens", tok_path, "--out", out]
            + (["--recompute"] if rc else []))
        got, meta = read_safetensors(out)
        tag = f"{name}{' recompute' if rc else ''}"
        order = meta["order"].split(",")
        rep.check(tag, order == [n for n, _, _ in tensor_specs(c)],
                  f"layout order {order} differs from the Hugging Face tensor list")
        lerr = abs(float(meta["loss"]) - loss.item()) / abs(loss.item())
        rep.check(tag, lerr <= TOL_LOSS, f"loss {meta['loss']} vs torch {loss.item():.9g} "
                  f"(rel {lerr:.3e} > {TOL_LOSS:g})")
        if lerr >= rep.worst.get("loss", (0.0, ""))[0]:
            rep.worst["loss"] = (lerr, tag)
        rep.rel("logits", tag, got["logits"], logits.detach().numpy(), TOL_FWD)
        for n, _, _ in tensor_specs(c):
            rep.rel("grads", f"{tag}: {n}", got["grad:" + n], P[n].grad.numpy(), TOL_GRAD)
    return loss.item()


def torch_train(c, w, shard_tokens, clip, dtype=torch.float64):
    """10 steps of torch.optim.AdamW (decay on 2-D tensors only) with clip_grad_norm_ on the
    llm.c-order batches (data.shuffle false): step s reads tokens [s*B*T, s*B*T + B*T + 1)."""
    P = torch_params(c, w, dtype)
    names = [n for n, _, _ in tensor_specs(c)]
    groups = [{"params": [P[n] for n in names if P[n].dim() == 2], "weight_decay": WD},
              {"params": [P[n] for n in names if P[n].dim() != 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=(BETA1, BETA2), eps=EPS)
    losses, norms = [], []
    nb = (len(shard_tokens) - 1) // (B * T)
    for s in range(STEPS):
        o = (s % nb) * B * T
        chunk = shard_tokens[o:o + B * T + 1].astype(np.int64)
        idx = torch.tensor(chunk[:-1].reshape(B, T))
        tgt = torch.tensor(chunk[1:].reshape(B, T))
        opt.zero_grad()
        loss = loss_of(forward(c, P, idx), tgt)
        loss.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_([P[n] for n in names], clip)))
        opt.step()
        losses.append(loss.item())
    return {n: P[n].detach() for n in names}, losses, norms


def write_shard(path, toks):
    hdr = np.zeros(256, dtype="<i4")
    hdr[0], hdr[1], hdr[2] = 20240520, 1, len(toks)
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(np.asarray(toks, dtype="<u2").tobytes())


def deck_model(c):
    """The deck's model section for config c (random init by the trainer, --train-init trainer)."""
    m = {"type": c["model_type"], "num_layers": c["num_hidden_layers"],
         "num_heads": c["num_attention_heads"], "num_kv_heads": c["num_key_value_heads"],
         "head_dim": hd_of(c), "channels": c["hidden_size"],
         "intermediate_size": c["intermediate_size"], "vocab_size": c["vocab_size"],
         "padded_vocab_size": c["vocab_size"], "max_seq_len": c["max_position_embeddings"],
         "norm_eps": c["rms_norm_eps"], "rope_theta": c["rope_theta"],
         "tie_embeddings": str(c["tie_word_embeddings"]).lower(),
         "init_std": 0.1}  # ~1/sqrt(C), like the HF-dir weights (the 0.02 default is tiny here)
    if c["model_type"] == "llama":
        m["attention_bias"] = str(bool(c.get("attention_bias"))).lower()
    r = c.get("rope_scaling")
    if r:
        m["rope_scaling"] = ("{type: llama3, factor: %r, low_freq_factor: %r, high_freq_factor: %r, "
                             "original_max_position_embeddings: %d}" % (
                                 r["factor"], r["low_freq_factor"], r["high_freq_factor"],
                                 r["original_max_position_embeddings"]))
    return "{" + ", ".join(f"{k}: {v}" for k, v in m.items()) + "}"


def train_run(args, d, model, shard, lr, steps, clip):
    """`superoffload train` on a deck in d; returns the newest checkpoint directory."""
    os.makedirs(d, exist_ok=True)
    deck = os.path.join(d, "deck.yaml")
    with open(deck, "w") as f:
        f.write(f"""model: {model}
data: {{train: {shard}, val: {shard}, shuffle: false}}
train: {{batch_size: {B}, seq_len: {T}, steps: {steps}, lr: {lr}, warmup_steps: 0,
  schedule: constant, grad_clip: {clip}, eval_batches: 1, log_every: 0,
  checkpoint_dir: {d}/ckpt, metrics: {d}/metrics.jsonl}}
optimizer: {{type: adamw, weight_decay: {WD}, beta1: {BETA1}, beta2: {BETA2}, eps: {EPS}}}
offload: {{enabled: true, stv: true, bucket_mb: 0.05, gpu_tail_buckets: 1}}
device: {{type: host}}
runtime: {{out_dir: {d}/out, threads: 1, log_level: quiet}}
""")
    run([args.superoffload, "train", deck], env=ENV, cwd=d)
    cks = sorted(x for x in os.listdir(os.path.join(d, "ckpt")) if x.startswith("step_"))
    if not cks:
        raise SystemExit(f"superoffload train wrote no checkpoint in {d}/ckpt")
    return os.path.join(d, "ckpt", cks[-1])


def read_ckpt_params(ckpt, c):
    """params.bin of a one-shard checkpoint (docs/checkpoints.md: raw fp32, layout order)."""
    with open(os.path.join(ckpt, "manifest.json")) as f:
        man = json.load(f)
    if len(man["shards"]) != 1:
        raise SystemExit(f"{ckpt}: {len(man['shards'])} shards, expected one")
    a = np.fromfile(os.path.join(ckpt, man["shards"][0]["params"]["file"]), dtype="<f4")
    w, o = {}, 0
    for n, shape, _ in tensor_specs(c):
        k = int(np.prod(shape))
        w[n] = a[o:o + k].reshape(shape).copy()
        o += k
    if o != a.size:
        raise SystemExit(f"{ckpt}: {a.size} params, the layout has {o}")
    return w


ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def check_train(rep, name, c, w, hf_dir, args, work, rng):
    d = os.path.join(work, f"{name}_train")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    toks = rng.integers(0, c["vocab_size"], STEPS * B * T + 1)
    shard = os.path.join(d, "train_000.bin")
    write_shard(shard, toks)
    from_hf = args.train_init == "hf"
    if from_hf:
        model = f"{{type: {c['model_type']}, init_from: {hf_dir}}}"
    else:  # the trainer's own init: one step at lr 0 checkpoints the initial weights
        model = deck_model(c)
        w = read_ckpt_params(train_run(args, os.path.join(d, "init"), model, shard, 0.0, 1, 0),
                             c)
    # clip between the 5th and 6th largest norm of an unclipped run: about half the steps clip,
    # so the clip coefficient changes the Adam moments' mix (all-clipped steps would hardly
    # matter to Adam, which is invariant to a common gradient scale)
    norms = sorted(torch_train(c, w, toks, float("inf"))[2])
    clip = float("%.6g" % ((norms[STEPS // 2 - 1] + norms[STEPS // 2]) / 2))
    ckpt = train_run(args, d, model, shard, LR, STEPS, clip)
    ref_w, ref_losses, ref_norms = torch_train(c, w, toks, clip)
    names = [n for n, _, _ in tensor_specs(c)]
    # the noise floor of each tensor: torch's own fp32 run against its float64 run. Adam turns
    # rounding noise in gradient elements near zero (e.g. k_proj.bias: attention is nearly
    # invariant to it) into visible weight differences, so a tensor may differ by
    # max(TOL_TRAIN, NOISE_FACTOR x its fp32 noise floor)
    w32 = torch_train(c, w, toks, clip, torch.float32)[0]
    tols = {}
    for n in names:
        e = float((w32[n].double() - ref_w[n]).abs().max() / ref_w[n].abs().max())
        tols[n] = max(TOL_TRAIN, NOISE_FACTOR * e)
        if e >= rep.worst.get("(torch fp32 trained weights)", (0.0, ""))[0]:
            rep.worst["(torch fp32 trained weights)"] = (e, f"{name}: {n}")
    if from_hf:
        check_export(rep, name, c, d, ckpt, ref_w, toks, args, tols)
    else:
        got = read_ckpt_params(ckpt, c)
        for n in names:
            rep.rel("trained weights", f"{name}: {n}", got[n], ref_w[n].numpy(), tols[n])
    check_metrics(rep, name, d, ref_losses, ref_norms, clip)


def check_export(rep, name, c, d, ckpt, ref_w, toks, args, tols):
    out_hf = os.path.join(d, "export")
    run([args.superoffload, "export", "--hf", out_hf, ckpt, "--dtype", "fp32"], env=ENV, cwd=d)
    with open(os.path.join(out_hf, "config.json")) as f:
        ec = json.load(f)
    for k in ("model_type", "hidden_size", "intermediate_size", "num_attention_heads",
              "num_key_value_heads", "num_hidden_layers", "vocab_size", "tie_word_embeddings",
              "rope_theta", "rms_norm_eps"):
        rep.check(f"{name} export", ec.get(k) == c[k] or (isinstance(c[k], float) and
                  abs(float(ec.get(k, 0)) - c[k]) <= 1e-6 * abs(c[k])),
                  f"config.json {k} = {ec.get(k)!r}, expected {c[k]!r}")
    rep.check(f"{name} export", hd_of(ec) == hd_of(c), f"head_dim {hd_of(ec)} != {hd_of(c)}")
    if c.get("rope_scaling"):
        rs = ec.get("rope_scaling") or {}
        for k, v in c["rope_scaling"].items():
            rep.check(f"{name} export", rs.get(k) == v, f"rope_scaling.{k} = {rs.get(k)!r}, expected {v!r}")
    got = read_hf_dir(out_hf)
    names = [n for n, _, _ in tensor_specs(c)]
    rep.check(f"{name} export", sorted(got) == sorted(names),
              f"exported tensors {sorted(set(got) ^ set(names))} missing or extra")
    for n in names:
        if n in got:
            rep.rel("trained weights", f"{name}: {n}", got[n], ref_w[n].numpy(), tols[n])
    # the reloaded model's logits vs the torch-trained model's (on the first batch)
    chunk = toks[:B * T + 1].astype(np.int64)
    idx = torch.tensor(chunk[:-1].reshape(B, T))
    with torch.no_grad():
        ref_logits = forward(c, ref_w, idx).numpy()
        if sorted(got) == sorted(names):
            Pg = {n: torch.tensor(got[n], dtype=torch.float64) for n in names}
            re_logits = forward(c, Pg, idx).numpy()
            # the trained model, reloaded, against torch's trained model (training tolerance)
            rep.rel("reloaded logits vs torch-trained", name, re_logits, ref_logits, TOL_TRAIN)
            # the C++ model on the exported directory against torch on the same weights
            tok_path = os.path.join(d, "tokens.bin")
            write_tokens(tok_path, chunk)
            out = os.path.join(d, "export_out.safetensors")
            run([args.driver, "--hf", out_hf, "--tokens", tok_path, "--out", out])
            rep.rel("exported model logits", name, read_safetensors(out)[0]["logits"], re_logits,
                    TOL_FWD)


def check_metrics(rep, name, d, ref_losses, ref_norms, clip):
    """per-step losses and norms from the run's metrics"""
    lines = [json.loads(x) for x in open(os.path.join(d, "metrics.jsonl")) if x.strip()]
    st = [x for x in lines if x.get("kind") == "step"]
    rep.check(f"{name} train", len(st) == STEPS, f"{len(st)} step lines in metrics.jsonl, expected {STEPS}")
    for i, x in enumerate(st[:STEPS]):
        e = abs(x["loss"] - ref_losses[i]) / abs(ref_losses[i])
        rep.check(f"{name} train", e <= TOL_STEP_LOSS,
                  f"step {i + 1} loss {x['loss']:.7g} vs torch {ref_losses[i]:.7g} (rel {e:.2e})")
        w0 = rep.worst.get("step losses", (0.0, ""))
        if e >= w0[0]:
            rep.worst["step losses"] = (e, f"{name} step {i + 1}")
        ne = abs(x["grad_norm"] - ref_norms[i]) / ref_norms[i]
        if ne >= rep.worst.get("step grad norms", (0.0, ""))[0]:
            rep.worst["step grad norms"] = (ne, f"{name} step {i + 1}")
        rep.check(f"{name} train", ne <= 1e-4, f"step {i + 1} grad_norm {x['grad_norm']:.7g} vs "
                  f"torch {ref_norms[i]:.7g}")
    clipped = sum(1 for x in st if x.get("clipped"))
    rep.check(f"{name} train", clipped > 0 and sum(n > clip for n in ref_norms) == clipped,
              f"{clipped} clipped steps in the run, torch clipped {sum(n > clip for n in ref_norms)}")
    print(f"  {name}: trained {STEPS} steps (clip {clip}, {clipped} clipped), losses "
          f"{ref_losses[0]:.4f} -> {ref_losses[-1]:.4f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--superoffload")
    ap.add_argument("--work", required=True)
    ap.add_argument("--cases", default="llama,qwen2,qwen3")
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--train-init", choices=["hf", "trainer"], default="hf",
                    help="hf: init_from the HF dir, export --hf, reload (default); trainer: the "
                         "trainer's random init, checkpoint params compared (no HF round trip)")
    args = ap.parse_args()
    if not args.no_train and not args.superoffload:
        ap.error("--superoffload is needed unless --no-train")
    work = os.path.abspath(args.work)
    args.driver = os.path.abspath(args.driver)
    if args.superoffload:
        args.superoffload = os.path.abspath(args.superoffload)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rep = Report()
    for i, name in enumerate(args.cases.split(",")):
        case = CASES[name]
        c = case["config"]
        rng = np.random.default_rng(1000 + i)
        w = random_weights(c, 2000 + i)
        hf_dir = os.path.join(work, f"{name}_hf")
        wi = save_hf_dir(hf_dir, c, w, case["save"], case["dtype"])
        toks = rng.integers(0, c["vocab_size"], B * T + 1)
        loss = check_model(rep, name, c, wi, hf_dir, toks, args, work)
        print(f"  {name}: {case['save']} {case['dtype']} import, loss {loss:.6f}")
        if case["save"] == "sharded":  # the same model as one file reads the same
            one = os.path.join(work, f"{name}_hf_single")
            save_hf_dir(one, c, w, "single", case["dtype"])
            check_model(rep, name + " single-file", c, wi, one, toks, args, work)
        if not args.no_train:
            check_train(rep, name, c, wi, hf_dir, args, work, rng)
    print("max errors (max|diff|/max|ref|, worst tensor):")
    for k, (e, where) in sorted(rep.worst.items()):
        print(f"  {k:28s} {e:.3e}  ({where})")
    if rep.fail:
        print(f"FAILED: {len(rep.fail)} check(s):")
        for f in rep.fail:
            print("  " + f)
        return 1
    print(f"ok: tolerances logits {TOL_FWD:g}, loss {TOL_LOSS:g}, grads {TOL_GRAD:g}, "
          f"trained weights {TOL_TRAIN:g} (or {NOISE_FACTOR:g}x torch fp32's own deviation), "
          f"step losses {TOL_STEP_LOSS:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
