#!/usr/bin/env python3
# Benchmark of scripts/prepare_data.py: tokens/s on a synthetic text corpus with a byte-level BPE
# trained here (a 128K vocabulary by default), against tokenizers' own batch encoder (the floor:
# encode_batch over every document, no file I/O) and Megatron-style one-process encoding (one
# document at a time, as tools/preprocess_data.py with one worker), all in the same run.
"""Usage: scripts/bench_prepare.py [--mb 64] [--vocab 128000] [--workers 2] [--work DIR]

Prints one line per method (tokens, seconds, tokens/s) and the ratios; docs/performance.md
records the numbers. Runs in the project's venv (scripts/python_env.sh tools).
"""
import argparse
import json
import os
import subprocess
import sys
import time

VENV = os.environ.get("SOF_PYENV", os.path.expanduser("~/.cache/superoffload/pyenv-tools"))
try:
    import numpy as np
    import tokenizers
    import transformers
    from tokenizers import decoders, models, pre_tokenizers, trainers
except ImportError:
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) != os.path.realpath(VENV) and os.path.exists(py):
        os.execv(py, [py] + sys.argv)
    sys.exit("bench_prepare.py: run scripts/python_env.sh tools first")

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def make_corpus(path, mb, seed):
    """Zipf-distributed words of random syllables, sentences, paragraphs as documents."""
    rng = np.random.default_rng(seed)
    syl = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiou"] + ["th", "sh", "qu", "ng"]
    words = ["".join(rng.choice(syl, rng.integers(1, 5))) for _ in range(300000)]
    p = 1.0 / np.arange(1, len(words) + 1) ** 1.05
    p /= p.sum()
    target = mb << 20
    with open(path, "w") as f:
        n = 0
        while n < target:
            ids = rng.choice(len(words), size=20000, p=p)
            lens = rng.integers(5, 25, size=2000)
            parts, k = [], 0
            for ln in lens:
                parts.append(" ".join(words[i] for i in ids[k:k + ln]).capitalize() + ".")
                k += ln
                if k + 25 > len(ids):
                    break
            text = ""
            for j in range(0, len(parts), 8):  # documents of about 8 sentences
                text += " ".join(parts[j:j + 8]) + "\n\n"
            f.write(text)
            n += len(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=128000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="prepare_data.py is measured with 1 worker and with this many")
    ap.add_argument("--work", default="/tmp/sof-bench-prepare")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    corpus = os.path.join(a.work, f"corpus_{a.mb}mb.txt")
    if not os.path.exists(corpus):
        make_corpus(corpus, a.mb, 1)
    hf = os.path.join(a.work, f"bpe_{a.vocab}")
    if not os.path.exists(os.path.join(hf, "tokenizer.json")):
        t0 = time.time()
        tok = tokenizers.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tr = trainers.BpeTrainer(vocab_size=a.vocab, special_tokens=["<|endoftext|>"],
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                 show_progress=False)
        tok.train([corpus], tr)
        os.makedirs(hf, exist_ok=True)
        tok.save(os.path.join(hf, "tokenizer.json"))
        with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:
            f.write('{"tokenizer_class": "PreTrainedTokenizerFast", '
                    '"eos_token": "<|endoftext|>"}')
        print(f"trained a byte-level BPE: {tok.get_vocab_size()} tokens, "
              f"{time.time() - t0:.0f} s")
    at = transformers.AutoTokenizer.from_pretrained(hf)
    docs = [d for d in open(corpus, encoding="utf-8").read().split("\n\n") if d.strip()]
    mb = os.path.getsize(corpus) / 2**20
    print(f"corpus: {mb:.0f} MiB, {len(docs)} documents; tokenizer vocab {len(at)}; "
          f"{os.cpu_count()} cores")
    res = {}
    # 1. prepare_data.py end to end (reads, tokenizes in --workers processes, writes shards)
    out = os.path.join(a.work, "out")
    for w in sorted({1, a.workers}):
        t0 = time.time()
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "prepare_data.py"),
                            "--tokenizer", hf, "--out", out, "--workers", str(w),
                            "--quiet", corpus], capture_output=True, text=True)
        secs = time.time() - t0
        if r.returncode != 0:
            sys.exit(r.stderr)
        info = json.load(open(os.path.join(out, "prepare.json")))
        ntok = info["train"]["tokens"] + info["val"]["tokens"]
        res[f"prepare_data.py --workers {w}"] = (ntok, secs)
    # 2. tokenizers' batch encoder over every document (Rust threads), no I/O: the floor
    back = at.backend_tokenizer
    t0 = time.time()
    n = 0
    for i in range(0, len(docs), 4096):
        n += sum(len(e.ids) for e in back.encode_batch(docs[i:i + 4096]))
    res["tokenizers encode_batch"] = (n + len(docs), time.time() - t0)
    # 3. Megatron-style: one process, one document at a time through the HF tokenizer
    t0 = time.time()
    n = 0
    for d in docs:
        n += len(at(d)["input_ids"]) + 1
    res["one process, per document"] = (n, time.time() - t0)
    floor = res["tokenizers encode_batch"][0] / res["tokenizers encode_batch"][1]
    for k, (t, s) in res.items():
        print(f"{k:28s} {t:12d} tokens {s:8.2f} s {t / s:12.0f} tokens/s  "
              f"({t / s / floor:.2f}x the batch encoder)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
