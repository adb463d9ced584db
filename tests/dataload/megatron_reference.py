#!/usr/bin/env python3
# Megatron-LM indexed datasets made by Megatron itself (megatron-core's IndexedDatasetBuilder, used
# as tools/preprocess_data.py uses it: a document per record, its sentences as sequences, the EOD
# appended to the last one; one dataset uint16 as optimal_dtype picks for a small vocabulary, one
# int32 merged from two partitions with add_index) train exactly as the llm.c shards of the same
# tokens: `superoffload train` on the Megatron prefixes and on the shards gives the same loss, grad
# norm and validation loss bits at every step, packed and shuffled, at 1 rank and at 2 ranks.
#
# Usage: megatron_reference.py --superoffload BIN --mpirun "MPIEXEC FLAGS" --work DIR. Runs in the project's
# test venv (scripts/python_env.sh test: torch, megatron-core); exits 77 (skipped) when it is
# missing (a failure under SOF_REQUIRE_PYENV=1).
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

warnings.filterwarnings("ignore")  # megatron-core: "Transformer Engine and Apex are not installed"
np, torch, indexed = require("numpy", "torch", "megatron.core.datasets.indexed_dataset",
                             venv="test")

V, EOD, T, STEPS = 256, 255, 16, 6
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")


def documents(rng, n):
    """n documents of 1..3 sentences of 1..9 tokens (never the EOD)."""
    return [[rng.integers(0, EOD, int(rng.integers(1, 10))).tolist()
             for _ in range(int(rng.integers(1, 4)))] for _ in range(n)]


def add_like_preprocess(builder, docs):
    """What tools/preprocess_data.py does per record with --split-sentences --append-eod."""
    for sentences in docs:
        ids, lens = [], []
        for s in sentences:
            ids += s
            lens.append(len(s))
        ids.append(EOD)
        lens[-1] += 1
        builder.add_document(torch.tensor(ids), lens)


def tokens_of(docs):
    return [t for d in docs for s in d for t in s + ([EOD] if s is d[-1] else [])]


def write_llmc(path, ids, wide):
    hdr = np.zeros(256, dtype="<i4")
    hdr[0], hdr[1], hdr[2] = (20240801, 7, len(ids)) if wide else (20240520, 1, len(ids))
    with open(path, "wb") as f:
        f.write(hdr.tobytes())
        f.write(np.asarray(ids, dtype="<u4" if wide else "<u2").tobytes())


def run(args, d, train, val, ranks, eos, pack=True):
    os.makedirs(d, exist_ok=True)
    deck = os.path.join(d, "deck.yaml")
    with open(deck, "w") as f:
        f.write(f"""model: {{num_layers: 1, num_heads: 2, channels: 16, max_seq_len: {T},
  vocab_size: {V}}}
data: {{train: '{train}', val: '{val}', shuffle: true, seed: 5, pack: {str(pack).lower()}, eos_id: {eos}}}
train: {{batch_size: 2, global_batch: 4, seq_len: {T}, steps: {STEPS}, lr: 1.0e-2,
  warmup_steps: 0, eval_every: 3, eval_batches: 2, log_every: 0, checkpoint_dir: '',
  metrics: {d}/metrics.jsonl}}
device: {{type: host}}
runtime: {{out_dir: {d}/out, threads: 1, log_level: quiet}}
""")
    cmd = shlex.split(args.superoffload) + ["train", deck]
    if ranks > 1:
        cmd = shlex.split(args.mpirun) + ["-n", str(ranks)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=d)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    out = []
    for line in open(os.path.join(d, "metrics.jsonl")):
        x = json.loads(line)
        if x.get("kind") in ("step", "eval"):
            out.append({k: x.get(k) for k in ("kind", "step", "loss", "grad_norm", "val_loss")})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--superoffload", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    args.work = os.path.abspath(args.work)
    shutil.rmtree(args.work, ignore_errors=True)
    mega, shards = os.path.join(args.work, "mega"), os.path.join(args.work, "shards")
    os.makedirs(mega)
    os.makedirs(shards)
    rng = np.random.default_rng(3)
    fails = []

    # a: uint16, as preprocess_data.py's optimal_dtype picks for a vocabulary under 65500
    dtype = indexed.DType.optimal_dtype(V)
    a_docs = documents(rng, 120)
    b = indexed.IndexedDatasetBuilder(os.path.join(mega, "a_text_sentence.bin"), dtype=dtype)
    add_like_preprocess(b, a_docs)
    b.finalize(os.path.join(mega, "a_text_sentence.idx"))
    # b: int32, two partitions merged with add_index (preprocess_data.py --partitions 2)
    b_docs = [documents(rng, 50), documents(rng, 70)]
    for i, docs in enumerate(b_docs):
        p = os.path.join(args.work, f"part{i}")
        pb = indexed.IndexedDatasetBuilder(p + ".bin", dtype=np.int32)
        add_like_preprocess(pb, docs)
        pb.finalize(p + ".idx")
    b = indexed.IndexedDatasetBuilder(os.path.join(mega, "b_text_sentence.bin"), dtype=np.int32)
    for i in range(2):
        b.add_index(os.path.join(args.work, f"part{i}"))
    b.finalize(os.path.join(mega, "b_text_sentence.idx"))
    b_all = b_docs[0] + b_docs[1]

    # the files are what Megatron reads back: documents and tokens
    ds = indexed.IndexedDataset(os.path.join(mega, "b_text_sentence"))
    if len(ds.document_indices) != len(b_all) + 1 or \
            np.concatenate([ds[i] for i in range(len(ds))]).tolist() != tokens_of(b_all):
        fails.append("megatron-core reads back other documents than were written")

    write_llmc(os.path.join(shards, "a.bin"), tokens_of(a_docs), False)
    write_llmc(os.path.join(shards, "b.bin"), tokens_of(b_all), True)

    for ranks in (1, 2):
        want = run(args, os.path.join(args.work, f"llmc_{ranks}"),
                   os.path.join(shards, "*.bin"), os.path.join(shards, "a.bin"), ranks, EOD)
        # the prefixes (a glob of them), as Megatron-LM's --data-path names datasets; the EOS
        # for packing comes from nowhere: the indexes list the documents
        got = run(args, os.path.join(args.work, f"mega_{ranks}"),
                  os.path.join(mega, "*_text_sentence"), os.path.join(mega, "a_text_sentence"),
                  ranks, -1)
        steps = [x for x in got if x["kind"] == "step"]
        if len(steps) != STEPS or not any(x["kind"] == "eval" for x in got):
            fails.append(f"{ranks} rank(s): {len(steps)} steps, evals: "
                         f"{[x for x in got if x['kind'] == 'eval']}")
        if got != want:
            diff = next(i for i, (g, w) in enumerate(zip(got + [None], want + [None])) if g != w)
            fails.append(f"{ranks} rank(s): the Megatron datasets train differently from the "
                         f"llm.c shards of the same tokens: record {diff}: "
                         f"{got[diff] if diff < len(got) else None} vs "
                         f"{want[diff] if diff < len(want) else None}")
        else:
            print(f"  {ranks} rank(s): {len(steps)} steps and {len(got) - len(steps)} "
                  "evaluation(s) equal bit for bit")
        if ranks == 1:  # the comparison sees the documents: unpacked, the same data differs
            other = run(args, os.path.join(args.work, "mega_unpacked"),
                        os.path.join(mega, "*_text_sentence"),
                        os.path.join(mega, "a_text_sentence"), 1, -1, pack=False)
            if other == want:
                fails.append("the unpacked run equals the packed one: the test cannot tell")
    if fails:
        print("FAILED:\n  " + "\n  ".join(fails))
        return 1
    print("megatron reference: OK (megatron-core's files, uint16 and int32, merged partitions, "
          "packed and shuffled, 1 and 2 ranks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
