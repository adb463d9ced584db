#!/usr/bin/env python3
# `superoffload generate` against transformers' generate: a tiny Llama, Qwen3, Phi-3, Mistral
# (sliding window), Seed-OSS, Qwen3-MoE, Mixtral and GPT-OSS made by transformers (random init, a BPE tokenizer with a ChatML template trained here) -> init_from ->
# 2 training steps -> `export --hf` -> greedy decoding of a text prompt and of chat messages by
# both: the prompt ids, every new token and the decoded text must be equal. Also sampling: the
# same seed gives the same tokens, top_k=1 is greedy, and the tokens are not all the greedy ones.
#
# Usage: generate_reference.py --superoffload BIN --work DIR [--cases a,b]. Runs in the project's
# venv (scripts/python_env.sh test: torch, transformers); exits 77 (skipped) when it is missing.
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, torch, transformers = require("numpy", "torch", "transformers", venv="test")
sys.path.insert(0, os.path.join(HERE, "..", "dataload"))
import prepare_reference  # noqa: E402  (the tokenizer trained for the test)

torch.set_num_threads(1)
VOCAB, NEW = 384, 24
COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
              bos_token_id=1, eos_token_id=0, pad_token_id=0, initializer_range=0.2)
CASES = [("llama", "LlamaConfig", dict(rms_norm_eps=1e-5, rope_theta=10000.0,
                                       tie_word_embeddings=False)),
         ("qwen3", "Qwen3Config", dict(rms_norm_eps=1e-6, rope_theta=1e6, head_dim=24,
                                       tie_word_embeddings=True)),
         # issue 26: fused phi3 tensors; a window of 8 keys, shorter than prompt + new tokens
         # (the KV cache's rows beyond it must not be attended); Seed-OSS's biases and head_dim
         ("phi3", "Phi3Config", dict(rms_norm_eps=1e-5, rope_theta=10000.0,
                                     tie_word_embeddings=False)),
         ("mistral", "MistralConfig", dict(rms_norm_eps=1e-6, rope_theta=10000.0, sliding_window=8,
                                           tie_word_embeddings=False)),
         ("seed_oss", "SeedOssConfig", dict(rms_norm_eps=1e-6, rope_theta=10000.0, head_dim=24,
                                            attention_bias=True, tie_word_embeddings=False)),
         # issue 27: a dense layer, then a sparse one (4 experts, top 2, renormalized): the
         # MoE block runs on the new rows of each decode call
         ("qwen3_moe", "Qwen3MoeConfig", dict(rms_norm_eps=1e-6, rope_theta=1e6, num_experts=4,
                                              num_experts_per_tok=2, moe_intermediate_size=32,
                                              norm_topk_prob=True, mlp_only_layers=[0],
                                              tie_word_embeddings=False)),
         # Mixtral: every layer 4 experts (the model's intermediate_size wide), top 2, always
         # renormalized, a window of 8 keys; the hub's block_sparse_moe.experts.{e}.w1/w3/w2
         ("mixtral", "MixtralConfig", dict(rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=8,
                                           num_local_experts=4, num_experts_per_tok=2,
                                           tie_word_embeddings=False)),
         # GPT-OSS: biases, sinks, sliding (8 keys) / full layers, YaRN; 4 experts with biases,
         # top 2 of the logits then softmax, the clamped SwiGLU; transposed fused experts
         ("gpt_oss", "GptOssConfig", dict(rms_norm_eps=1e-5, sliding_window=8, head_dim=16,
                                          num_local_experts=4, num_experts_per_tok=2,
                                          tie_word_embeddings=False,
                                          rope_parameters=dict(rope_type="yarn",
                                                               rope_theta=150000.0, factor=4.0,
                                                               beta_fast=32.0, beta_slow=1.0,
                                                               truncate=False,
                                                               original_max_position_embeddings=32)))]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, **kw)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


# what only the tokenizer script's libraries print (transformers' import notice in the tools venv,
# which has no torch): a user of `generate` must see only superoffload's output
FOREIGN = ("[transformers]", "PyTorch was not found")


def ours(args, d, *extra, noise=None):
    """Our generate on the CPU twins (--device host: the reference compares the CPU model; the
    CUDA one is compared with it by tests/e2e/test_generate_cuda.cpp where a GPU is lent).
    noise: a list that gets each stderr line of a library's notice."""
    cmd = [args.superoffload, "generate", "--hf", d, "--json", "--device", "host", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if r.returncode != 0:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    if noise is not None:
        noise += [ln for ln in r.stderr.splitlines() if any(f in ln for f in FOREIGN)]
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--superoffload", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--cases", default="", help="comma list of case names (default: all)")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.cases or c[0] in args.cases.split(",")]
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    fails = []

    def check(ok, msg):
        if not ok:
            fails.append(msg)

    rng = np.random.default_rng(5)
    tokdir = os.path.join(args.work, "tokenizer")
    prepare_reference.make_bpe(tokdir, prepare_reference.corpus(rng, 300))
    shard = os.path.join(args.work, "train_000.bin")
    hdr = np.zeros(256, dtype="<i4")
    hdr[0], hdr[1], hdr[2] = 20240520, 1, 129
    with open(shard, "wb") as f:
        f.write(hdr.tobytes())
        f.write(rng.integers(0, VOCAB, 129).astype("<u2").tobytes())
    prompt = "the model reads a few words and then"
    chat = os.path.join(args.work, "chat.json")
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": "what comes next after these words?"}]
    with open(chat, "w") as f:
        json.dump(messages, f)

    for name, cls, extra in cases:
        work = os.path.join(args.work, name)
        src = os.path.join(work, "src")
        os.makedirs(work)
        torch.manual_seed(11)
        model = transformers.AutoModelForCausalLM.from_config(
            getattr(transformers, cls)(**COMMON, **extra))
        model.save_pretrained(src)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tokdir, f), src)
        deck = os.path.join(work, "deck.yaml")
        with open(deck, "w") as f:
            f.write(f"""model: {{init_from: {src}}}
data: {{train: {shard}, val: {shard}, shuffle: false}}
train: {{batch_size: 2, seq_len: 32, steps: 2, lr: 1.0e-2, warmup_steps: 0, eval_batches: 1,
  log_every: 0, checkpoint_dir: {work}/ckpt}}
device: {{type: host}}
runtime: {{out_dir: {work}/out, threads: 1, log_level: quiet}}
""")
        run([args.superoffload, "train", deck], cwd=work)
        out = os.path.join(work, "export")
        run([args.superoffload, "export", "--hf", out, os.path.join(work, "ckpt"), "--dtype",
             "fp32"])
        hf = transformers.AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32)
        hf.eval()
        tok = transformers.AutoTokenizer.from_pretrained(out)
        chat_ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if not isinstance(chat_ids, list):
            chat_ids = chat_ids["input_ids"]
        for what, ids, opt in (("text", tok(prompt).input_ids, ["--prompt", prompt]),
                               ("chat", list(chat_ids), ["--chat", chat])):
            with torch.no_grad():
                g = hf.generate(torch.tensor([ids]), max_new_tokens=NEW, do_sample=False,
                                attention_mask=torch.ones(1, len(ids), dtype=torch.long))
            want = g[0, len(ids):].tolist()
            noise = []
            got = ours(args, out, *opt, "--temperature", "0", "--max-tokens", str(NEW),
                       noise=noise)
            check(not noise, f"{name} {what}: generate's stderr has the tokenizer libraries' "
                  f"notices: {noise}")
            check(got["prompt_ids"] == ids, f"{name} {what}: prompt ids {got['prompt_ids']} != "
                  f"transformers' {ids}")
            check(got["ids"] == want, f"{name} {what}: greedy ids {got['ids']} != transformers' "
                  f"{want}")
            check(got["text"] == tok.decode(want, skip_special_tokens=True),
                  f"{name} {what}: text {got['text']!r} != {tok.decode(want, skip_special_tokens=True)!r}")
            check(len(set(want)) > 1, f"{name} {what}: greedy output is one repeated token "
                  f"{want} (the test would not tell much)")
            print(f"  {name} {what}: {len(ids)} prompt tokens, {len(want)} new tokens equal "
                  f"({got['tokens_per_s']:.0f} tok/s)")
        # sampling (ids in, ids out: no tokenizer runs): reproducible per seed; top_k = 1 is
        # greedy; sampling differs from greedy
        pids = ",".join(str(i) for i in tok(prompt).input_ids)
        base = ["--prompt-ids", pids, "--max-tokens", str(NEW), "--ignore-eos"]
        samp = base + ["--top-k", "20", "--top-p", "0.9", "--temperature", "1.5"]
        s1 = ours(args, out, *samp, "--seed", "3")
        s2 = ours(args, out, *samp, "--seed", "3")
        k1 = ours(args, out, *base, "--seed", "9", "--top-k", "1")
        gr = ours(args, out, *base, "--temperature", "0")
        check(s1["ids"] == s2["ids"], f"{name}: the same seed sampled {s1['ids']} and {s2['ids']}")
        check(k1["ids"] == gr["ids"], f"{name}: top_k=1 {k1['ids']} != greedy {gr['ids']}")
        check(s1["ids"] != gr["ids"], f"{name}: sampling at temperature 1.5 gave the greedy ids")
        check(len(gr["ids"]) == NEW, f"{name}: --ignore-eos gave {len(gr['ids'])} tokens")
        check(gr["device"] == "host", f"{name}: --device host ran on {gr['device']}")
        # --device cuda: the same greedy ids on a GPU, else (no GPU, no CUDA build) a usage
        # error naming the device; a device name we do not know is a usage error
        r = subprocess.run([args.superoffload, "generate", "--hf", out, "--json", "--device",
                            "cuda", "--temperature", "0", *base], capture_output=True, text=True,
                           env=ENV)
        if r.returncode == 0:
            check(json.loads(r.stdout.strip().splitlines()[-1])["ids"] == gr["ids"],
                  f"{name}: --device cuda greedy ids differ from the CPU's")
        else:
            check(r.returncode == 2 and "cuda" in r.stderr.lower(),
                  f"{name}: --device cuda without a GPU: exit {r.returncode}, {r.stderr[-200:]!r}")
        r = subprocess.run([args.superoffload, "generate", "--hf", out, "--device", "tpu", *base],
                           capture_output=True, text=True, env=ENV)
        check(r.returncode == 2 and "--device must be auto, host or cuda" in r.stderr,
              f"{name}: --device tpu: exit {r.returncode}, {r.stderr[-200:]!r}")
    # the tokenizer script's real errors stay visible: a model directory without a tokenizer
    notok = os.path.join(args.work, "no_tokenizer")
    os.makedirs(notok)
    shutil.copy(os.path.join(args.work, cases[0][0], "export", "config.json"), notok)
    r = subprocess.run([args.superoffload, "generate", "--hf",
                        os.path.join(args.work, cases[0][0], "export"), "--tokenizer", notok,
                        "--prompt", prompt, "--device", "host"], capture_output=True, text=True,
                       env=ENV)
    check(r.returncode != 0 and "hf_tokenize.py: " in r.stderr and "tokenizer.json" in r.stderr,
          f"generate with a tokenizer directory without tokenizer.json: exit {r.returncode}, "
          f"{r.stderr[-300:]!r}")
    if fails:
        print("FAILED:\n  " + "\n  ".join(fails))
        return 1
    print(f"generate reference: OK ({len(cases)} models, greedy text + chat equal transformers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
