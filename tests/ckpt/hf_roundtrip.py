#!/usr/bin/env python3
# The Hugging Face round trip against transformers itself: tiny Llama / Qwen2 / Qwen3 / Phi-3 /
# Mistral / Seed-OSS models made by transformers (random init, save_pretrained in bf16 and fp32, sharded and not: each
# architecture in both dtypes and both layouts, not every combination; with a tokenizer and
# generation_config.json) -> model.init_from -> `superoffload train` (3 steps) -> `export --hf`
# -> AutoModelForCausalLM.from_pretrained: no missing/unexpected/mismatched weight and no loading
# warning, logits equal our CPU model's (llama_ref_driver) on the exported weights within fp32
# tolerance, tokenizer files and generation_config.json copied, bos/eos ids kept. Also our logits
# of the transformers-saved source directory against transformers' own, and `eval --text`
# (transformers' loss; its token folder removed after success and after errors).
#
# Usage: hf_roundtrip.py --superoffload BIN --driver BIN --work DIR. Runs in the project's venv
# (scripts/python_env.sh test: torch, transformers); exits 77 (skipped) when it is missing.
import argparse
import contextlib
import filecmp
import io
import json
import logging
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, torch, transformers, st_numpy = require("numpy", "torch", "transformers", "safetensors.numpy",
                                            venv="test")
sys.path.insert(0, os.path.join(HERE, "..", "dataload"))
import prepare_reference  # noqa: E402  (the tokenizer trained for the test)

torch.set_num_threads(1)
TOL = 2e-5  # max |ours - transformers| / max |transformers| over the logits (both fp32)
B, T, VOCAB = 2, 16, 384

COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              bos_token_id=1, eos_token_id=0, pad_token_id=0)
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
BOTH = ("fp32", "bf16")
CASES = [
    # name, config class, extra config, saved dtype, max_shard_size, export dtypes: every
    # architecture in bf16 and fp32, sharded and not; the last two crosses export only the
    # source's dtype (the export's two dtypes are covered by the others; keeps the test short)
    ("llama_fp32_sharded", "LlamaConfig",
     dict(rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
          rope_scaling=LLAMA3_ROPE), torch.float32, "40KB", BOTH),
    ("qwen2_bf16_single", "Qwen2Config",
     dict(rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=True), torch.bfloat16, None,
     BOTH),
    ("qwen3_bf16_sharded", "Qwen3Config",
     dict(rms_norm_eps=1e-6, rope_theta=1e6, head_dim=24, tie_word_embeddings=False),
     torch.bfloat16, "40KB", BOTH),
    ("llama_bf16_single", "LlamaConfig",
     dict(rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
          rope_scaling=LLAMA3_ROPE), torch.bfloat16, None, ("bf16",)),
    ("qwen2_fp32_sharded", "Qwen2Config",
     dict(rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=False), torch.float32, "40KB",
     ("fp32",)),
    ("qwen3_fp32_single", "Qwen3Config",
     dict(rms_norm_eps=1e-6, rope_theta=1e6, head_dim=24, tie_word_embeddings=True),
     torch.float32, None, BOTH),
    # issue 26: fused qkv_proj / gate_up_proj; a window (6) shorter than the sequence (16);
    # q/k/v biases without an o_proj bias, head_dim 24 != 64/4, the config's dropout 0.1 (the 3
    # training steps drop, inference does not)
    ("phi3_bf16_sharded", "Phi3Config",
     dict(rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False), torch.bfloat16,
     "40KB", ("fp32",)),
    ("mistral_bf16_sharded", "MistralConfig",
     dict(rms_norm_eps=1e-6, rope_theta=10000.0, sliding_window=6, tie_word_embeddings=False),
     torch.bfloat16, "40KB", ("fp32",)),
    ("seed_oss_bf16_sharded", "SeedOssConfig",
     dict(rms_norm_eps=1e-6, rope_theta=10000.0, head_dim=24, attention_bias=True,
          attention_dropout=0.1, residual_dropout=0.1, tie_word_embeddings=False),
     torch.bfloat16, "40KB", ("fp32",)),
]
BAD_WORDS = ("missing", "unexpected", "newly initialized", "not initialized", "not used",
             "mismatch")


def run(cmd, cwd=None):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def load_hf(d):
    """from_pretrained in fp32 (eager attention), with every loading message captured."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    lg = logging.getLogger("transformers")
    lg.addHandler(handler)
    transformers.logging.set_verbosity_warning()
    try:
        with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf):
            model, info = transformers.AutoModelForCausalLM.from_pretrained(
                d, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    finally:
        lg.removeHandler(handler)
    return model.eval(), info, buf.getvalue()


def hf_logits(model, toks):
    idx = torch.tensor(toks[:B * T].reshape(B, T).astype(np.int64))
    with torch.no_grad():
        return model(idx).logits.float().numpy()


def our_logits(args, d, toks, work, tag):
    tok_path = os.path.join(work, f"{tag}_tokens.bin")
    np.concatenate([[B, T], toks]).astype("<i4").tofile(tok_path)
    out = os.path.join(work, f"{tag}_ours.safetensors")
    run([args.driver, "--hf", d, "--tokens", tok_path, "--out", out])
    return st_numpy.load_file(out)["logits"]


def rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def check_eval_text(args, src, model, work, check):
    """`superoffload eval --hf SRC --text FILE` against transformers' loss on the same text: the
    tokenizer's ids + EOS per document, read as the sequential validation batches."""
    rng = np.random.default_rng(8)
    docs = prepare_reference.corpus(rng, 30, 10, 30)
    txt = os.path.join(work, "eval.txt")
    with open(txt, "w") as f:
        f.write("\n\n".join(docs) + "\n")
    out = run([args.superoffload, "eval", "--hf", src, "--text", txt, "--set", f"train.seq_len={T}",
               "--set", f"train.batch_size={B}", "--set", "device.type=host"], cwd=work)
    got = float(out.split("eval: loss ")[1].split()[0])
    tk = transformers.AutoTokenizer.from_pretrained(src)
    ids = np.concatenate([tk(d)["input_ids"] + [tk.eos_token_id] for d in docs]).astype(np.int64)
    nb = (len(ids) - 1) // (B * T)
    losses = []
    with torch.no_grad():
        for b in range(nb):
            chunk = torch.tensor(ids[b * B * T: (b + 1) * B * T + 1])
            logits = model(chunk[:-1].view(B, T)).logits
            losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                            chunk[1:]).item())
    want = float(np.mean(losses))
    check(abs(got - want) <= 1e-4 * want, f"eval --text: loss {got} vs transformers {want}")
    print(f"  eval --text: loss {got:.6f}, transformers {want:.6f} ({nb} batches)")
    # ./eval-tokens-<pid> is gone after the run, and after one that failed while tokenizing (not
    # UTF-8) or after tokenizing (a deck refused)
    bad = os.path.join(work, "bad.txt")
    with open(bad, "wb") as f:
        f.write(b"the model\n\ndata \xff\xfe of\n")
    left = [f for f in os.listdir(work) if f.startswith("eval-tokens-")]
    check(not left, f"eval --text: {left} left after a run")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for extra, what, said in (([bad], "tokenizing fails", "not UTF-8"),
                              ([txt, "--set", "train.seq_len=0"], "the deck is refused",
                               "train.seq_len")):
        r = subprocess.run([args.superoffload, "eval", "--hf", src, "--text", *extra, "--set",
                            "device.type=host"], capture_output=True, text=True, cwd=work, env=env)
        left = [f for f in os.listdir(work) if f.startswith("eval-tokens-")]
        check(r.returncode != 0 and said in r.stdout + r.stderr and not left,
              f"eval --text when {what}: exit {r.returncode}, folders left {left}, "
              f"{(r.stdout + r.stderr)[-300:]!r}")
        if what == "the deck is refused":  # it failed after the tokens were written
            check("prepare: " in r.stdout, "eval --text: the deck was refused before tokenizing")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--superoffload", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    fails = []

    def check(ok, msg):
        if not ok:
            fails.append(msg)

    rng = np.random.default_rng(3)
    tokdir = os.path.join(args.work, "tokenizer")
    prepare_reference.make_bpe(tokdir, prepare_reference.corpus(rng, 300))
    toks = rng.integers(0, VOCAB, B * T + 1)
    shard = os.path.join(args.work, "train_000.bin")
    hdr = np.zeros(256, dtype="<i4")
    hdr[0], hdr[1], hdr[2] = 20240520, 1, 4 * B * T + 1
    with open(shard, "wb") as f:
        f.write(hdr.tobytes())
        f.write(rng.integers(0, VOCAB, 4 * B * T + 1).astype("<u2").tobytes())

    for name, cls, extra, dtype, shard_size, exports in CASES:
        work = os.path.join(args.work, name)
        src = os.path.join(work, "src")
        os.makedirs(work)
        torch.manual_seed(11)
        cfg = getattr(transformers, cls)(**COMMON, **extra)
        model = transformers.AutoModelForCausalLM.from_config(cfg)
        with torch.no_grad():  # biases away from their zero init, so their import counts
            for n, p in model.named_parameters():
                if n.endswith(".bias"):
                    p.normal_(0.0, 0.05)
        model = model.to(dtype)
        kw = {"max_shard_size": shard_size} if shard_size else {}
        model.save_pretrained(src, **kw)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tokdir, f), src)
        sharded = os.path.exists(os.path.join(src, "model.safetensors.index.json"))
        check(sharded == bool(shard_size), f"{name}: save_pretrained sharded={sharded}")
        check(os.path.exists(os.path.join(src, "generation_config.json")),
              f"{name}: save_pretrained wrote no generation_config.json")
        # the import: our logits of the transformers-saved directory vs transformers' own
        ref_model, _, _ = load_hf(src)
        e0 = rel(our_logits(args, src, toks, work, "src"), hf_logits(ref_model, toks))
        check(e0 <= TOL, f"{name}: imported logits differ from transformers' (rel {e0:.2e})")
        # train 3 steps from it, export (fp32 and bf16), load with transformers
        deck = os.path.join(work, "deck.yaml")
        with open(deck, "w") as f:
            f.write(f"""model: {{init_from: {src}}}
data: {{train: {shard}, val: {shard}, shuffle: false}}
train: {{batch_size: {B}, seq_len: {T}, steps: 3, lr: 1.0e-2, warmup_steps: 0, eval_batches: 1,
  log_every: 0, checkpoint_dir: {work}/ckpt}}
device: {{type: host}}
runtime: {{out_dir: {work}/out, threads: 1, log_level: quiet}}
""")
        run([args.superoffload, "train", deck], cwd=work)
        for edt in exports:
            out = os.path.join(work, f"export_{edt}")
            run([args.superoffload, "export", "--hf", out, os.path.join(work, "ckpt"), "--dtype",
                 edt, "--shard-size", "40KB" if sharded else "5GB"])
            m, info, log = load_hf(out)
            for k in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
                check(not info.get(k), f"{name} {edt}: from_pretrained {k}: {info.get(k)}")
            bad = [ln for ln in log.splitlines() if any(w in ln.lower() for w in BAD_WORDS)]
            check(not bad, f"{name} {edt}: loading warnings: {bad[:3]}")
            e = rel(our_logits(args, out, toks, work, f"export_{edt}"), hf_logits(m, toks))
            check(e <= TOL, f"{name} {edt}: exported logits: ours vs transformers rel {e:.2e}")
            # trained: not the source weights any more
            e_src = rel(hf_logits(m, toks), hf_logits(ref_model, toks))
            check(e_src > 1e-3, f"{name} {edt}: the export equals the source (did it train?)")
            for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
                check(os.path.exists(os.path.join(out, f)) and
                      filecmp.cmp(os.path.join(src, f), os.path.join(out, f), shallow=False),
                      f"{name} {edt}: {f} not copied from the source directory")
            oc = json.load(open(os.path.join(out, "config.json")))
            check((oc.get("bos_token_id"), oc.get("eos_token_id")) == (1, 0),
                  f"{name} {edt}: bos/eos ids {oc.get('bos_token_id')}/{oc.get('eos_token_id')} "
                  "not the source's 1/0")
            tk = transformers.AutoTokenizer.from_pretrained(out)
            check(tk.eos_token_id == 0, f"{name} {edt}: the exported tokenizer does not load")
            print(f"  {name} -> export {edt}: logits rel diff {e:.2e} (import {e0:.2e})")
        if name == CASES[-1][0]:
            check_eval_text(args, src, ref_model, work, check)
    if fails:
        print("FAILED:\n  " + "\n  ".join(fails))
        return 1
    print(f"hf round trip with transformers {transformers.__version__}: OK ({len(CASES)} models)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
