#!/usr/bin/env python3
# scripts/prepare_data.py against transformers' AutoTokenizer on tokenizers trained here: a
# byte-level BPE (GPT-2 / Llama-3 / Qwen style, ChatML chat template) and a SentencePiece-style
# Unigram with a Metaspace pre-tokenizer and a BOS post-processor (Llama-2 style). Checks the
# shard ids (EOS after every document), the train/val split (whole documents, in order), the
# uint16/uint32 formats, the loss mask of chat data (exactly the assistant turns) and that the
# output does not depend on the worker count or the file pieces.
#
# Usage: prepare_reference.py --work DIR. Runs in the project's venv (scripts/python_env.sh
# tools); exits 77 (skipped) when it is not installed.
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
VENV = os.environ.get("SOF_PYENV", os.path.expanduser("~/.cache/superoffload/pyenv-tools"))
try:
    import numpy as np
    import tokenizers
    import transformers
except ImportError as e:
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) != os.path.realpath(VENV) and os.path.exists(py):
        os.execv(py, [py] + sys.argv)
    # scripts/run_tests.sh (CI) sets SOF_REQUIRE_PYENV=1: there a missing environment fails
    # the test instead of skipping it
    required = os.environ.get("SOF_REQUIRE_PYENV") == "1"
    why = "run scripts/python_env.sh tools to install the pinned packages"
    print(f"{'FAIL' if required else 'SKIP'}: {e}; {why}"
          + (" (SOF_REQUIRE_PYENV=1: the Python environment is required)" if required else ""))
    sys.exit(1 if required else 77)
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = ("the of and to in is was for on that with as by at from his her an which or be are "
         "model token train data über naïve café 東京 データ 🙂 x^2 {json} tab\tend").split(" ")


def corpus(rng, n, lo=3, hi=40):
    return [" ".join(rng.choice(WORDS, rng.integers(lo, hi))) for _ in range(n)]


def make_bpe(d, train_text):
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>",
                                                             "<|im_end|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_text, tr)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
                   "pad_token": "<|endoftext|>", "chat_template": CHATML}, f)


def make_sentencepiece(d, train_text):
    tok = tokenizers.Tokenizer(models.Unigram())
    tok.normalizer = tokenizers.normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tr = trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                 unk_token="<unk>")
    tok.train_from_iterator(train_text, tr)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>",
                   "eos_token": "</s>", "unk_token": "<unk>"}, f)


def read_shard(path):
    hdr = np.fromfile(path, dtype="<i4", count=256)
    wide = {20240520: False, 20240801: True}[int(hdr[0])]
    assert int(hdr[1]) == (7 if wide else 1), f"{path}: version {hdr[1]}"
    ids = np.fromfile(path, dtype="<u4" if wide else "<u2", offset=1024)
    assert len(ids) == hdr[2], f"{path}: {len(ids)} ids, header says {hdr[2]}"
    return ids.astype(np.int64), wide


def read_split(out, split):
    files = sorted(f for f in os.listdir(out) if f.startswith(split + "_") and f.endswith(".bin"))
    ids, masks, widths = [], [], set()
    for f in files:
        a, wide = read_shard(os.path.join(out, f))
        ids.append(a)
        widths.add(wide)
        mp = os.path.join(out, f + ".mask")
        if os.path.exists(mp):
            h = np.fromfile(mp, dtype="<i4", count=256)
            assert int(h[0]) == 20250301 and int(h[1]) == 1 and int(h[2]) == len(a), mp
            masks.append(np.fromfile(mp, dtype=np.uint8, offset=1024))
    cat = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    return cat, (np.concatenate(masks) if masks else None), widths, files


def split_docs(ids, eos):
    out, cur = [], []
    for t in ids.tolist():
        cur.append(t)
        if t == eos:
            out.append(tuple(cur))
            cur = []
    assert not cur, "a shard stream does not end with EOS"
    return out


def prepare(out, hf, files, *extra, env=None):
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "prepare_data.py"), "--tokenizer", hf,
           "--out", out, "--quiet", *extra, *files]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"prepare_data.py failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}"
                         f"\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    rng = np.random.default_rng(5)
    fails = []

    def check(ok, msg):
        if not ok:
            fails.append(msg)

    make_bpe(os.path.join(args.work, "bpe"), corpus(rng, 400))
    make_sentencepiece(os.path.join(args.work, "spm"), corpus(rng, 400))

    # inputs: a text file (blank-line documents), a JSONL file, a chat JSONL file
    text_docs = corpus(rng, 60)
    jsonl_docs = corpus(rng, 40)
    txt = os.path.join(args.work, "a.txt")
    with open(txt, "w") as f:
        f.write("\n\n".join(text_docs) + "\n")
    jl = os.path.join(args.work, "b.jsonl")
    with open(jl, "w") as f:
        for d in jsonl_docs:
            f.write(json.dumps({"text": d, "id": 1}) + "\n")
    chats = []
    for _ in range(30):
        msgs = [{"role": "system", "content": " ".join(rng.choice(WORDS, 4))}]
        for _ in range(int(rng.integers(1, 4))):
            msgs.append({"role": "user", "content": " ".join(rng.choice(WORDS, 6))})
            msgs.append({"role": "assistant", "content": " ".join(rng.choice(WORDS, 8))})
        chats.append(msgs)
    cj = os.path.join(args.work, "c.jsonl")
    with open(cj, "w") as f:
        for m in chats:
            f.write(json.dumps({"messages": m}) + "\n")

    small_pieces = dict(os.environ, SOF_PREPARE_CHUNK_BYTES="700")
    for name in ("bpe", "spm"):
        hf = os.path.join(args.work, name)
        at = transformers.AutoTokenizer.from_pretrained(hf)
        eos = at.eos_token_id
        want = [tuple(at(d)["input_ids"] + [eos]) for d in text_docs + jsonl_docs]
        if name == "spm":
            check(all(w[0] == at.bos_token_id for w in want), "spm: AutoTokenizer adds no BOS")
        # every document in train (val-fraction 0), 2 workers over small file pieces
        out = os.path.join(args.work, f"{name}_all")
        prepare(out, hf, [txt, jl], "--val-fraction", "0", "--workers", "2", env=small_pieces)
        ids, _, widths, _ = read_split(out, "train")
        got = split_docs(ids, eos)
        check(got == want, f"{name}: shard ids differ from AutoTokenizer + EOS per document "
                           f"({len(got)} vs {len(want)} documents; first difference at "
                           f"{next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), -1)})")
        check(widths == {False}, f"{name}: a vocabulary of {len(at)} should give uint16 shards")
        # uint32, one worker, whole pieces, several shards: the same ids
        out32 = os.path.join(args.work, f"{name}_u32")
        prepare(out32, hf, [txt, jl], "--val-fraction", "0", "--workers", "1", "--dtype",
                "uint32", "--shard-tokens", "500")
        ids32, _, w32, files32 = read_split(out32, "train")
        check(w32 == {True} and len(files32) > 1 and np.array_equal(ids32, ids),
              f"{name}: uint32 / 1 worker / 500-token shards differ from the uint16 run")
        # a train/val split: whole documents, each in one split, order kept
        outs = os.path.join(args.work, f"{name}_split")
        prepare(outs, hf, [txt, jl], "--val-fraction", "0.3", "--workers", "2", "--seed", "9",
                env=small_pieces)
        tr = split_docs(read_split(outs, "train")[0], eos)
        va = split_docs(read_split(outs, "val")[0], eos)
        check(0 < len(va) < len(want) and sorted(tr + va) == sorted(want),
              f"{name}: train ({len(tr)}) + val ({len(va)}) documents are not the documents")
        it = iter(want)
        check(all(any(d == w for w in it) for d in tr), f"{name}: train documents out of order")

    # chat: the template's ids (AutoTokenizer.apply_chat_template) and a mask of the assistant turns
    hf = os.path.join(args.work, "bpe")
    at = transformers.AutoTokenizer.from_pretrained(hf)
    eos = at.eos_token_id
    out = os.path.join(args.work, "chat")
    prepare(out, hf, [cj], "--val-fraction", "0", "--workers", "2", env=small_pieces)
    ids, mask, _, _ = read_split(out, "train")
    check(mask is not None and len(mask) == len(ids), "chat: no loss mask of the shard's length")
    want_ids = []
    want_text = ""
    for m in chats:
        t = at.apply_chat_template(m, tokenize=True)
        t = t["input_ids"] if isinstance(t, dict) or hasattr(t, "keys") else t
        want_ids += list(t) + [eos]
        want_text += "".join(x["content"] + "<|im_end|>\n" for x in m if x["role"] == "assistant")
    check(ids.tolist() == want_ids, "chat: shard ids differ from apply_chat_template + EOS")
    if mask is not None:
        got_text = at.decode(ids[mask == 1].tolist())
        check(got_text == want_text, "chat: the masked tokens are not exactly the assistant turns "
                                     f"(first 80 chars: {got_text[:80]!r} vs {want_text[:80]!r})")
        check(int(mask[ids == eos].sum()) == 0, "chat: a document-separating EOS is counted")
    info = json.load(open(os.path.join(out, "prepare.json")))
    check(info["loss_mask"] and info["train"]["counted_targets"] == int(mask.sum()),
          "chat: prepare.json does not report the mask")

    if fails:
        print("FAILED:\n  " + "\n  ".join(fails))
        return 1
    print("prepare_data reference: OK (byte-level BPE and SentencePiece-style tokenizers, text, "
          "JSONL, chat with loss masks, uint16/uint32, 1 and 2 workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
