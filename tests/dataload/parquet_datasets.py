#!/usr/bin/env python3
# Parquet files written by Hugging Face `datasets` (Dataset.to_parquet: what the Hub stores, schema
# metadata and all), a text dataset and a chat ("messages") dataset, through
# scripts/prepare_data.py: the same ids (and loss masks) as the same records given as JSONL.
# (tests/dataload/prepare_reference.py covers Parquet written by pyarrow itself, in the tools venv.)
#
# Usage: parquet_datasets.py --work DIR. Runs in the project's test venv (scripts/python_env.sh
# test: datasets); exits 77 (skipped) when it is missing (a failure under SOF_REQUIRE_PYENV=1).
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, datasets = require("numpy", "datasets", venv="test")
datasets.disable_progress_bars()
sys.path.insert(0, HERE)
import prepare_reference as ref  # noqa: E402  (the test tokenizer and shard reader)


def prepare(out, hf, path):
    """prepare_data.py as a user runs it (it moves itself into the tools venv)."""
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "scripts", "prepare_data.py"), "--tokenizer",
           hf, "--out", out, "--quiet", "--val-fraction", "0", "--workers", "2", path]
    env = {k: v for k, v in os.environ.items() if k != "SOF_PYENV"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"prepare_data.py failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return ref.read_split(out, "train")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    rng = np.random.default_rng(11)
    hf = os.path.join(args.work, "bpe")
    ref.make_bpe(hf, ref.corpus(rng, 300))
    docs = ref.corpus(rng, 80)
    chats = []
    for _ in range(25):
        m = [{"role": "system", "content": " ".join(rng.choice(ref.WORDS, 3))}]
        for _ in range(int(rng.integers(1, 3))):
            m.append({"role": "user", "content": " ".join(rng.choice(ref.WORDS, 5))})
            m.append({"role": "assistant", "content": " ".join(rng.choice(ref.WORDS, 7))})
        chats.append(m)
    fails = []
    cases = (("text", {"text": docs, "source": ["web"] * len(docs)},
              [{"text": d} for d in docs]),
             ("chat", {"messages": chats, "id": list(range(len(chats)))},
              [{"messages": m} for m in chats]))
    for name, columns, records in cases:
        pq = os.path.join(args.work, f"{name}-00000-of-00001.parquet")
        datasets.Dataset.from_dict(columns).to_parquet(pq)
        jl = os.path.join(args.work, f"{name}.jsonl")
        with open(jl, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        ids, mask, _, _ = prepare(os.path.join(args.work, f"{name}_pq"), hf, pq)
        want, want_mask, _, _ = prepare(os.path.join(args.work, f"{name}_jl"), hf, jl)
        if len(ids) == 0 or not np.array_equal(ids, want):
            fails.append(f"{name}: the ids of the datasets Parquet file differ from the JSONL's")
        if (mask is None) != (want_mask is None) or (
                mask is not None and not np.array_equal(mask, want_mask)):
            fails.append(f"{name}: the loss mask differs from the JSONL one")
        print(f"  {name}: {len(records)} records, {len(ids)} tokens equal")
    if fails:
        print("FAILED:\n  " + "\n  ".join(fails))
        return 1
    print(f"parquet from datasets {datasets.__version__}: OK (text and chat columns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
