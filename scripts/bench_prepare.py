#!/usr/bin/env python3
# Benchmark of scripts/prepare_data.py: tokens/s on a synthetic text corpus with a byte-level BPE
# trained here (a 128K vocabulary by default), against tokenizers' own batch encoders (the floor:
# encode_batch / encode_batch_fast over every document, no file I/O) and Megatron-style
# one-process encoding (one document at a time, as tools/preprocess_data.py with one worker),
# all in the same run, in interleaved rounds.
"""Usage: scripts/bench_prepare.py [--mb 64] [--vocab 128000] [--train-mb 64] [--workers 2]
                                  [--repeat 1] [--per-doc-mb 0] [--floors encode_batch ...]
                                  [--work DIR]

Prints one line per method and round (tokens, seconds, tokens/s, CPU seconds (user + system of
every thread and worker), tokens per CPU second, load average), then the medians and their ratio
to the faster of tokenizers' two batch encoders (encode_batch, encode_batch_fast: the floor); docs/performance.md records the numbers. Runs in the project's
venv (scripts/python_env.sh tools).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

VENV = os.environ.get("SOF_PYENV", os.path.expanduser("~/.cache/superoffload/pyenv-tools"))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found" banner
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


def train_tokenizer(hf, corpus, train_mb, vocab):
    """A byte-level BPE trained on the first train_mb MiB of the corpus."""
    t0 = time.time()
    sample = corpus + f".first{train_mb}mb"
    with open(corpus, "rb") as f, open(sample, "wb") as g:
        g.write(f.read(train_mb << 20))
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<|endoftext|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    tok.train([sample], tr)
    os.remove(sample)
    os.makedirs(hf, exist_ok=True)
    tok.save(os.path.join(hf, "tokenizer.json"))
    with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:
        f.write('{"tokenizer_class": "PreTrainedTokenizerFast", '
                '"eos_token": "<|endoftext|>"}')
    print(f"trained a byte-level BPE on {train_mb} MiB: {tok.get_vocab_size()} tokens, "
          f"{time.time() - t0:.0f} s", flush=True)


def load():
    return "load %.1f %.1f %.1f" % os.getloadavg()


def children_cpu():
    """User + system CPU seconds of the finished child processes (prepare_data.py and its
    workers): on a shared machine the wall time depends on the others' load, the CPU time less."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=64, help="corpus size in MiB")
    ap.add_argument("--vocab", type=int, default=128000)
    ap.add_argument("--train-mb", type=int, default=64,
                    help="the tokenizer is trained on the first this many MiB of the corpus")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="prepare_data.py is measured with 1 worker and with this many")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of every method, interleaved; the medians are reported")
    ap.add_argument("--per-doc-mb", type=int, default=0,
                    help="one-document-at-a-time encoding on the first this many MiB of "
                         "documents only (0: all; its tokens/s does not depend on the size)")
    ap.add_argument("--floors", nargs="+", default=["encode_batch", "encode_batch_fast"],
                    choices=["encode_batch", "encode_batch_fast"],
                    help="tokenizers' batch encoders to measure (the faster is the floor)")
    ap.add_argument("--work", default="/tmp/sof-bench-prepare")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    corpus = os.path.join(a.work, f"corpus_{a.mb}mb.txt")
    if not os.path.exists(corpus):
        t0 = time.time()
        make_corpus(corpus, a.mb, 1)
        print(f"wrote {corpus}: {time.time() - t0:.0f} s", flush=True)
    train_mb = min(a.train_mb, a.mb)
    hf = os.path.join(a.work, f"bpe_{a.vocab}_{train_mb}mb")
    if not os.path.exists(os.path.join(hf, "tokenizer.json")):
        train_tokenizer(hf, corpus, train_mb, a.vocab)
    at = transformers.AutoTokenizer.from_pretrained(hf)
    with open(corpus, encoding="utf-8") as f:
        docs = [d for d in f.read().split("\n\n") if d.strip()]
    mb = os.path.getsize(corpus) / 2**20
    per_doc = docs
    if a.per_doc_mb:
        n, k = 0, 0
        while k < len(docs) and n < a.per_doc_mb << 20:
            n += len(docs[k]) + 2
            k += 1
        per_doc = docs[:k]
    print(f"corpus: {mb:.0f} MiB, {len(docs)} documents; tokenizer vocab {len(at)}; "
          f"{os.cpu_count()} cores; {load()}", flush=True)
    res = {}

    def record(name, ntok, secs, cpu):
        res.setdefault(name, []).append((ntok, secs, cpu))
        print(f"  {name:40s} {ntok:12d} tokens {secs:9.2f} s {ntok / secs:10.0f} tokens/s, "
              f"{cpu:8.2f} CPU s {ntok / cpu:10.0f} tokens/CPU-s ({load()})", flush=True)

    back = at.backend_tokenizer
    out = os.path.join(a.work, "out")
    for rnd in range(a.repeat):
        print(f"round {rnd + 1} of {a.repeat}", flush=True)
        # 1. prepare_data.py end to end (reads, tokenizes in --workers processes, writes shards)
        for w in sorted({1, a.workers}):
            t0, c0 = time.time(), children_cpu()
            r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "prepare_data.py"),
                                "--tokenizer", hf, "--out", out, "--workers", str(w),
                                "--quiet", corpus], capture_output=True, text=True)
            secs, cpu = time.time() - t0, children_cpu() - c0
            if r.returncode != 0:
                sys.exit(r.stderr)
            info = json.load(open(os.path.join(out, "prepare.json")))
            record(f"prepare_data.py --workers {w}",
                   info["train"]["tokens"] + info["val"]["tokens"], secs, cpu)
        # 2. tokenizers' batch encoders over every document (Rust threads), no I/O: the floor
        for fn in a.floors:
            enc = getattr(back, fn)
            t0, c0 = time.time(), time.process_time()
            n = 0
            for i in range(0, len(docs), 4096):
                n += sum(len(e.ids) for e in enc(docs[i:i + 4096]))
            record(f"tokenizers {fn}", n + len(docs), time.time() - t0, time.process_time() - c0)
        # 3. Megatron-style: one process, one document at a time through the HF tokenizer
        t0, c0 = time.time(), time.process_time()
        n = 0
        for d in per_doc:
            n += len(at(d)["input_ids"]) + 1
        record("one process, per document" + (f" (first {a.per_doc_mb} MiB)"
                                              if a.per_doc_mb else ""), n, time.time() - t0,
               time.process_time() - c0)
    rate = {k: statistics.median(t / s for t, s, _ in v) for k, v in res.items()}
    cpu_rate = {k: statistics.median(t / c for t, _, c in v) for k, v in res.items()}
    floor = max(rate[f"tokenizers {fn}"] for fn in a.floors)
    cfloor = max(cpu_rate[f"tokenizers {fn}"] for fn in a.floors)
    print(f"medians over {a.repeat} round(s); floor = the faster batch encoder: {floor:.0f} "
          f"tokens/s, {cfloor:.0f} tokens/CPU-s")
    for k, r in rate.items():
        print(f"{k:48s} {r:10.0f} tokens/s ({r / floor:.2f}x)  {cpu_rate[k]:10.0f} tokens/CPU-s "
              f"({cpu_rate[k] / cfloor:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
