#!/usr/bin/env python3
# scripts/prepare_data.py against transformers' AutoTokenizer on tokenizers trained here: a
# byte-level BPE (GPT-2 / Llama-3 / Qwen style, ChatML chat template) and a SentencePiece-style
# Unigram with a Metaspace pre-tokenizer and a BOS post-processor (Llama-2 style). Checks the
# shard ids (EOS after every document), the train/val split (whole documents, in order), the
# uint16/uint32 formats, the loss mask of chat data (exactly the assistant turns) and that the
# output does not depend on the worker count or the file pieces. Parquet files written by pyarrow
# (text and chat columns, several row groups) give the ids and masks of the same records as JSONL.
# The val split holds one evaluation batch (documents added when the seeded choice gives fewer, a
# warning when the data cannot), a last shard smaller than a batch joins the one before, and the
# deck keys the script prints train and evaluate (`superoffload train`, with --superoffload).
#
# Usage: prepare_reference.py --work DIR [--superoffload BIN]. Runs in the project's venv
# (scripts/python_env.sh tools); exits 77 (skipped) when it is not installed.
import argparse
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sof_pyenv import require  # noqa: E402  (tests/sof_pyenv.py)

np, tokenizers, transformers, pa, pq = require("numpy", "tokenizers", "transformers", "pyarrow",
                                               "pyarrow.parquet", venv="tools")
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_templates  # noqa: E402  (templates and their renderings by hand)

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = ("the of and to in is was for on that with as by at from his her an which or be are "
         "model token train data über naïve café 東京 データ 🙂 x^2 {json} tab\tend").split(" ")


def corpus(rng, n, lo=3, hi=40):
    return [" ".join(rng.choice(WORDS, rng.integers(lo, hi))) for _ in range(n)]


def make_bpe(d, train_text, template=CHATML, specials=("<|im_start|>", "<|im_end|>"),
             extra_config=None):
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", *specials],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_text, tr)
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>",
                   "pad_token": "<|endoftext|>", "chat_template": template,
                   **(extra_config or {})}, f)


def make_big_vocab(src, d, size):
    """The BPE of `src` with unused filler tokens and a new EOS as the last id, so the vocabulary
    has `size` tokens and EOS is id size - 1 (65536 for 65537: a uint16 shard cannot hold it)."""
    j = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    vocab = j["model"]["vocab"]
    for i in range(len(vocab), size - 1):
        vocab[f"<filler{i}>"] = i
    eos = "<|big_eos|>"
    vocab[eos] = size - 1
    j["added_tokens"].append({"id": size - 1, "content": eos, "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": False,
                              "special": True})
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos}, f)


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


def prepare(out, hf, files, *extra, env=None, quiet=True, result=False):
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "prepare_data.py"), "--tokenizer", hf,
           "--out", out, *(["--quiet"] if quiet else []), *extra, *files]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result:
        return r
    if r.returncode != 0:
        raise SystemExit(f"prepare_data.py failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}"
                         f"\n{r.stderr}")
    return r.stdout


def check_chat_templates(work, rng, check, env):
    """Multi-turn chat through Qwen3's template (the last reply renders with a think block, the
    earlier ones without), a Llama-3 template and a ChatML template with {% generation %} blocks:
    the ids equal apply_chat_template + EOS, and the mask equals, token by token, the replies and
    their end of turn as chat_templates.py renders them by hand."""
    for name, template in chat_templates.TEMPLATES.items():
        hf = os.path.join(work, f"tok_{name}")
        extra = {"bos_token": "<|begin_of_text|>"} if name == "llama3" else {}
        make_bpe(hf, corpus(rng, 300), template, chat_templates.SPECIALS[name], extra)
        at = transformers.AutoTokenizer.from_pretrained(hf)
        eos = at.eos_token_id
        convs = chat_templates.conversations(rng, WORDS, 24, padded=name == "llama3")
        path = os.path.join(work, f"chat_{name}.jsonl")
        with open(path, "w") as f:
            for m in convs:
                f.write(json.dumps({"messages": m}) + "\n")
        out = os.path.join(work, f"chat_{name}")
        prepare(out, hf, [path], "--val-fraction", "0", "--workers", "2", env=env)
        ids, mask, _, _ = read_split(out, "train")
        want_ids, want_mask, ok = [], [], True
        for m in convs:
            segs = chat_templates.SEGMENTS[name](m)
            text = "".join(t for t, _ in segs)
            rendered = at.apply_chat_template(m, tokenize=False)
            if text != rendered:
                check(False, f"chat {name}: the hand rendering differs from the template's: "
                             f"{text[:120]!r} vs {rendered[:120]!r}")
                ok = False
                break
            enc = at.backend_tokenizer.encode(text, add_special_tokens=False)
            t = at.apply_chat_template(m, tokenize=True)
            t = t["input_ids"] if hasattr(t, "keys") else t
            check(list(t) == enc.ids, f"chat {name}: apply_chat_template ids != encode(text)")
            em = chat_templates.expected_mask(segs, enc.offsets)
            if em is None:
                check(False, f"chat {name}: a token straddles a reply's edge in {text!r}")
                ok = False
                break
            want_ids += enc.ids + [eos]
            want_mask += em + [0]
        if not ok:
            continue
        check(ids.tolist() == want_ids, f"chat {name}: shard ids differ from apply_chat_template "
                                        "+ EOS")
        check(mask is not None and mask.tolist() == want_mask,
              f"chat {name}: the mask is not exactly the replies and their end of turn "
              f"({'no mask' if mask is None else int((mask != np.array(want_mask)).sum())} "
              "tokens differ)")
        if mask is not None and name == "qwen3":
            think = at.convert_tokens_to_ids("<think>")
            check(int(mask[ids == think].sum()) == 0, "chat qwen3: a <think> token is counted")
            check(int((ids == think).sum()) > 0, "chat qwen3: no think block in the data")


def check_worker_error(work, hf, env, check):
    """A bad record in a piece a worker process tokenizes: the run ends with the record's error
    (it used to hang: sys.exit in a pool worker)."""
    bad = os.path.join(work, "bad.jsonl")
    good = json.dumps({"messages": [{"role": "user", "content": "the model"},
                                    {"role": "assistant", "content": "data of"}]})
    with open(bad, "w") as f:
        f.write((good + "\n") * 40 + json.dumps({"messages": [{"role": "user"}]}) + "\n")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "prepare_data.py"), "--tokenizer", hf,
           "--out", os.path.join(work, "bad"), "--quiet", "--workers", "2", bad]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        check(r.returncode != 0 and "bad.jsonl (byte" in r.stderr and "chat record" in r.stderr,
              f"a bad record in a worker's piece: exit {r.returncode}, {r.stderr[-300:]!r}")
    except subprocess.TimeoutExpired:
        check(False, "a bad record in a worker's piece: prepare_data.py hangs")


def check_big_vocab(work, docs, check):
    """--dtype auto: a vocabulary of 65537 tokens (EOS = 65536) gives uint32 shards holding the
    ids unchanged; 65536 tokens (EOS = 65535) still uint16."""
    txt = os.path.join(work, "big.txt")
    with open(txt, "w") as f:
        f.write("\n\n".join(docs[:20]) + "\n")
    for size, wide_want in ((65536, False), (65537, True)):
        hf = os.path.join(work, f"bpe_{size}")
        make_big_vocab(os.path.join(work, "bpe"), hf, size)
        at = transformers.AutoTokenizer.from_pretrained(hf)
        check(len(at) == size and at.eos_token_id == size - 1,
              f"vocab {size}: the test tokenizer has {len(at)} tokens, EOS {at.eos_token_id}")
        out = os.path.join(work, f"big_{size}")
        prepare(out, hf, [txt], "--val-fraction", "0", "--workers", "1")
        ids, _, widths, _ = read_split(out, "train")
        want = [t for d in docs[:20] for t in at(d)["input_ids"] + [size - 1]]
        check(widths == {wide_want}, f"vocab {size}: shards are "
                                     f"{'uint32' if True in widths else 'uint16'}, want "
                                     f"{'uint32' if wide_want else 'uint16'}")
        check(ids.tolist() == want, f"vocab {size}: shard ids differ from AutoTokenizer + EOS")
        info = json.load(open(os.path.join(out, "prepare.json")))
        check(info["dtype"] == ("uint32" if wide_want else "uint16") and
              info["vocab_size"] == size, f"vocab {size}: prepare.json says {info['dtype']}")


def check_parquet(work, hf, docs, chats, env, check):
    """Parquet as the Hugging Face Hub stores datasets, written by pyarrow: a text column and a
    chat column (list<struct<role, content, name>>: a null field the template must not see), in
    several row groups read by 2 workers in pieces: the same ids (and chat masks) as the same
    records in JSONL. Bad columns and null records are errors naming file, row and column."""
    jl, cj = os.path.join(work, "pq_ref.jsonl"), os.path.join(work, "pq_chat.jsonl")
    with open(jl, "w") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")
    tp, cp = os.path.join(work, "text.parquet"), os.path.join(work, "chat.parquet")
    pq.write_table(pa.table({"id": list(range(len(docs))), "text": docs}), tp, row_group_size=7)
    rows = [[dict(m, name=("bob" if i == 0 and m["role"] == "user" else None)) for m in c]
            for i, c in enumerate(chats)]
    for r in rows:  # a null field is dropped before the template: prepare the JSONL side so too
        for m in r:
            if m["name"] is None:
                del m["name"]
    with open(cj, "w") as f:
        for r in rows:
            f.write(json.dumps({"messages": r}) + "\n")
    msg_type = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string()),
                                   ("name", pa.string())]))
    full = [[dict({"name": None}, **m) for m in r] for r in rows]
    pq.write_table(pa.table({"messages": pa.array(full, type=msg_type)}), cp, row_group_size=4)
    # a file named otherwise is found by its magic
    bare = os.path.join(work, "chat_parquet_noext")
    shutil.copy(cp, bare)
    for name, pfile, ref in (("text", tp, jl), ("chat", cp, cj), ("chat by magic", bare, cj)):
        a, b = os.path.join(work, f"pq_{name}"), os.path.join(work, f"pq_{name}_ref")
        prepare(a, hf, [pfile], "--val-fraction", "0", "--workers", "2", env=env)
        prepare(b, hf, [ref], "--val-fraction", "0", "--workers", "1")
        ia, ma, _, _ = read_split(a, "train")
        ib, mb, _, _ = read_split(b, "train")
        check(len(ia) > 0 and np.array_equal(ia, ib),
              f"parquet {name}: ids differ from the same records in JSONL")
        check((ma is None) == (mb is None) and (ma is None or np.array_equal(ma, mb)),
              f"parquet {name}: the loss mask differs from the JSONL one")
    # errors: a null text, no such column, plain text format asked for
    bad = os.path.join(work, "bad.parquet")
    pq.write_table(pa.table({"text": ["a b", None, "c"]}), bad, row_group_size=2)
    for extra, says in ((["--format", "auto"], f"{bad} (row 1, column 'text'): null"),
                        (["--text-key", "body"], "has no a list column 'messages' (--chat-key) "
                                                 "or a string column 'body' (--text-key); its "
                                                 "columns: text (string)"),
                        (["--format", "text"], "a Parquet file holds records")):
        r = prepare(os.path.join(work, "bad_out"), hf, [bad], *extra, result=True)
        check(r.returncode != 0 and says in r.stderr,
              f"parquet error {extra}: exit {r.returncode}, {r.stderr[-300:]!r}")


def check_val_sizing(work, hf, chats, superoffload, check):
    """A small chat dataset and a small --val-fraction: the seeded choice gives the val split
    less than one batch of --batch-size x --seq-len, so the first documents go to it as well and
    the deck keys the script prints train and evaluate. Data too small for a batch: a warning.
    A last shard smaller than a batch joins the one before."""
    cj = os.path.join(work, "vs.jsonl")
    with open(cj, "w") as f:
        for m in chats:
            f.write(json.dumps({"messages": m}) + "\n")
    out = os.path.join(work, "vs")
    r = prepare(out, hf, [cj], "--val-fraction", "0.02", "--seq-len", "32", "--batch-size", "4",
                "--seed", "3", quiet=False, result=True)
    info = json.load(open(os.path.join(out, "prepare.json")))
    val, train = info["val"], info["train"]
    check(r.returncode == 0 and val["tokens"] >= 4 * 32 + 1 and val["batches"] >= 1 and
          val["documents_added_for_one_batch"] > 0 and "went to it as well" in r.stderr,
          f"val sizing: val split {val} (stderr {r.stderr[-300:]!r})")
    check(val["documents"] + train["documents"] == len(chats),
          f"val sizing: {val['documents']} + {train['documents']} documents of {len(chats)}")
    check(f"data: {{train: '{out}/train_*.bin', val: '{out}/val_*.bin'}}" in r.stdout and
          "train: {seq_len: 32, batch_size: 4}" in r.stdout,
          f"val sizing: no deck keys printed: {r.stdout!r}")
    if superoffload:
        at = transformers.AutoTokenizer.from_pretrained(hf)
        deck = os.path.join(work, "vs.yaml")
        with open(deck, "w") as f:
            f.write(f"""model: {{num_layers: 1, num_heads: 2, channels: 16, max_seq_len: 64,
  vocab_size: {len(at)}}}
data: {{train: '{out}/train_*.bin', val: '{out}/val_*.bin'}}
train: {{seq_len: 32, batch_size: 4, steps: 2, eval_every: 1, eval_batches: 2, log_every: 1,
  checkpoint_dir: ''}}
offload: {{enabled: false}}
device: {{type: host}}
runtime: {{out_dir: {work}/vs_run, threads: 1}}
""")
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        t = subprocess.run([superoffload, "train", deck], capture_output=True, text=True, env=env)
        check(t.returncode == 0 and "val loss" in (t.stdout + t.stderr),
              f"the printed deck keys do not train and evaluate: exit {t.returncode}, "
              f"{(t.stdout + t.stderr)[-500:]!r}")
        # a deck with a larger batch than the data was prepared for: the clear message, at once
        t = subprocess.run([superoffload, "train", deck, "--set", "train.batch_size=64"],
                           capture_output=True, text=True, env=env)
        check(t.returncode == 2 and "(data.val)" in t.stderr and "one batch needs" in t.stderr,
              f"batch_size 64 on a small val split: exit {t.returncode}, {t.stderr[-300:]!r}")
    # too little data for a batch in the val split: said clearly
    tiny = os.path.join(work, "tiny.jsonl")
    with open(tiny, "w") as f:
        for m in chats[:2]:
            f.write(json.dumps({"messages": m}) + "\n")
    r = prepare(os.path.join(work, "tiny"), hf, [tiny], "--val-fraction", "0.5", "--seq-len",
                "1024", result=True)
    check(r.returncode == 0 and "WARNING: the val split has" in r.stderr and
          "less than one batch (--batch-size 4 x --seq-len 1024 + 1 = 4097 tokens)" in r.stderr,
          f"a val split too small for a batch: no warning: {r.stderr[-400:]!r}")
    # --shard-tokens that leaves a last piece under one batch: it joins the shard before
    one = os.path.join(work, "vs_one")
    prepare(one, hf, [cj], "--val-fraction", "0", "--seq-len", "32", "--batch-size", "4")
    ids, _, _, _ = read_split(one, "train")
    cut = os.path.join(work, "vs_cut")
    prepare(cut, hf, [cj], "--val-fraction", "0", "--seq-len", "32", "--batch-size", "4",
            "--shard-tokens", str((len(ids) - 20) // 3))  # 3 shards and 20-odd tokens left
    cids, cmask, _, files = read_split(cut, "train")
    sizes = [len(read_shard(os.path.join(cut, f))[0]) for f in files]
    check(len(files) == 3 and min(sizes) >= 129 and np.array_equal(cids, ids) and
          cmask is not None and len(cmask) == len(cids),
          f"a small last shard: shard sizes {sizes}, ids equal: {np.array_equal(cids, ids)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--superoffload", default="")
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

    check_parquet(args.work, hf, text_docs + jsonl_docs, chats, small_pieces, check)
    check_val_sizing(args.work, hf, chats, args.superoffload, check)
    check_worker_error(args.work, hf, small_pieces, check)
    check_chat_templates(args.work, rng, check, small_pieces)
    check_big_vocab(args.work, text_docs, check)

    if fails:
        print("FAILED:\n  " + "\n  ".join(fails))
        return 1
    print("prepare_data reference: OK (byte-level BPE and SentencePiece-style tokenizers, text, "
          "JSONL, chat with loss masks, Parquet, uint16/uint32, 1 and 2 workers, a val split of "
          "one batch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
