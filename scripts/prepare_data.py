#!/usr/bin/env python3
# Text, JSONL, chat JSONL or Parquet (Hugging Face datasets) -> llm.c token shards (uint16/uint32
# by vocabulary) with the tokenizer of a Hugging Face model directory (chat template included), EOS
# between documents, a train/val split that holds an evaluation batch, loss masks for chat data
# (only assistant turns count), parallel over pieces of files. docs/data.md.
"""Usage: scripts/prepare_data.py --tokenizer HF_DIR --out DIR [options] FILE [FILE ...]

Inputs (--format auto picks by content): text files (documents separated by blank lines;
--text-docs file|line|blank), JSONL with a text field (--text-key, default "text"), chat JSONL
(each line {"messages": [{"role": ..., "content": ...}, ...]} or a bare list of messages: the
model's chat template renders it; a loss mask marks the assistant turns), Parquet files as the
Hugging Face Hub stores datasets (a text column --text-key, or a chat column --chat-key, default
"messages": a list of {role, content} per row).

Writes DIR/train_000000.bin ..., DIR/val_000000.bin ... (llm.c shards: uint16 when the vocabulary
fits, else uint32), DIR/<shard>.mask next to each shard of chat data, and DIR/prepare.json (what
was done). The val split holds at least one evaluation batch of --batch-size x --seq-len tokens
(the first documents go to it when the seeded choice gives fewer); the run ends by printing the
deck keys to train on the result.
"""
import argparse
import itertools
import json
import os
import re
import sys
import time


def _reexec_in_venv():
    """tokenizers/transformers live in the project's venv (scripts/python_env.sh tools)."""
    venv = os.environ.get("SOF_PYENV", os.path.expanduser("~/.cache/superoffload/pyenv-tools"))
    py = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) != os.path.realpath(venv) and os.path.exists(py):
        os.execv(py, [py] + sys.argv)
    sys.exit("prepare_data.py: the Python packages tokenizers/transformers/pyarrow are missing; run "
             "scripts/python_env.sh tools (scripts/setup.sh does) and try again")


os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch was not found" banner
try:
    import numpy as np
    import pyarrow.parquet as pq
    import transformers
    from tqdm import tqdm
except ImportError:
    _reexec_in_venv()

MAGIC16, VERSION16, MAGIC32, VERSION32 = 20240520, 1, 20240801, 7
MASK_MAGIC, MASK_VERSION = 20250301, 1
MAX_SHARD_TOKENS = 2**31 - 1
# a large file is cut into pieces of about this size at document ends (tests make it small)
CHUNK_BYTES = int(os.environ.get("SOF_PREPARE_CHUNK_BYTES", 32 << 20))


class PrepareError(Exception):
    """An error for the user: raised in the worker processes too, where the pool hands it to the
    parent (a sys.exit in a pool worker would leave the parent waiting forever)."""


def fail(msg):
    raise PrepareError(msg)


# ------------------------------------------------------------------ tokenizer (one per process)
_TOK = None


def load_tokenizer(path):
    try:
        tok = transformers.AutoTokenizer.from_pretrained(path)
    except Exception as e:  # noqa: BLE001 - the message names the directory and the cause
        fail(f"cannot load the tokenizer of {path}: {e} (a Hugging Face model directory with "
             "tokenizer.json and tokenizer_config.json)")
    if not getattr(tok, "is_fast", False):
        fail(f"{path}: only fast tokenizers (tokenizer.json) are supported")
    return tok


def _init_worker(path, threads):
    global _TOK
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if threads else "false"
    _TOK = load_tokenizer(path)


# ------------------------------------------------------------------ reading documents
def is_parquet(path):
    """A Parquet file (the Hugging Face Hub's format for datasets): by name or by its magic."""
    if path.endswith(".parquet"):
        return True
    with open(path, "rb") as f:
        return f.read(4) == b"PAR1"


def parquet_format(path, fmt, text_key, chat_key):
    """'chat' (a list column chat_key) or 'jsonl' (a string column text_key), checked against the
    file's schema; fmt: the --format asked for."""
    try:
        schema = pq.ParquetFile(path).schema_arrow
    except Exception as e:  # noqa: BLE001 - pyarrow's own reason, named
        fail(f"{path}: not a readable Parquet file ({e})")
    cols = {f.name: f.type for f in schema}
    import pyarrow as pa
    is_list = chat_key in cols and (pa.types.is_list(cols[chat_key]) or
                                    pa.types.is_large_list(cols[chat_key]))
    is_text = text_key in cols and (pa.types.is_string(cols[text_key]) or
                                    pa.types.is_large_string(cols[text_key]))
    if fmt == "text":
        fail(f"{path}: a Parquet file holds records, not plain text; use --format auto, jsonl "
             "(a text column) or chat (a messages column)")
    if fmt in ("auto", "chat") and is_list:
        return "chat"
    if fmt in ("auto", "jsonl") and is_text:
        return "jsonl"
    want = {"chat": f"a list column '{chat_key}' (--chat-key)",
            "jsonl": f"a string column '{text_key}' (--text-key)"}
    need = want[fmt] if fmt in want else f"{want['chat']} or {want['jsonl']}"
    fail(f"{path}: the Parquet file has no {need}; its columns: "
         + ", ".join(f"{n} ({t})" for n, t in cols.items()))


def parquet_chunks(path):
    """(first, end) row-group ranges of about CHUNK_BYTES (uncompressed) each, and their sizes."""
    meta = pq.ParquetFile(path).metadata
    out, start, size = [], 0, 0
    for i in range(meta.num_row_groups):
        size += meta.row_group(i).total_byte_size
        if size >= CHUNK_BYTES or i == meta.num_row_groups - 1:
            out.append((start, i + 1, max(size, 1)))
            start, size = i + 1, 0
    return out


def parquet_documents(path, first, end, fmt, key):
    """The documents of row groups [first, end): strings, or (where, messages) pairs (chat)."""
    f = pq.ParquetFile(path)
    row0 = sum(f.metadata.row_group(i).num_rows for i in range(first))
    values = f.read_row_groups(list(range(first, end)), columns=[key],
                               use_threads=False).column(0).to_pylist()
    out = []
    for r, v in enumerate(values, row0):
        where = f"{path} (row {r}, column '{key}')"
        if fmt == "jsonl":
            if not isinstance(v, str):
                fail(f"{where}: {'null' if v is None else type(v).__name__}, not a string")
            out.append(v)
            continue
        if not isinstance(v, list) or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str)
                and isinstance(m.get("content"), str) for m in v):
            fail(f"{where}: a chat record is a list of {{\"role\": str, \"content\": str}} "
                 "messages")
        # a struct column gives every message every field of the schema, null where a row has
        # none (e.g. "tool_calls": None): the template sees only the ones the row has
        out.append((where, [{k: x for k, x in m.items() if x is not None} for m in v]))
    return out


def detect_format(path, text_key, chat_key):
    if not (path.endswith(".jsonl") or path.endswith(".json")):
        return "text"
    with open(path, encoding="utf-8") as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{ln}: not JSON ({e}); give one JSON object per line")
            if isinstance(obj, list) or (isinstance(obj, dict) and chat_key in obj):
                return "chat"
            if isinstance(obj, dict) and text_key in obj:
                return "jsonl"
            fail(f"{path}:{ln}: neither a chat record (\"{chat_key}\": [...], --chat-key) nor a "
                 f"record with the text field '{text_key}' (--text-key)")
    return "jsonl"


def chunks_of(path, fmt, text_docs):
    """(start, end) byte ranges of a file, cut at document ends, about CHUNK_BYTES each."""
    size = os.path.getsize(path)
    if (fmt == "text" and text_docs == "file") or size <= CHUNK_BYTES:
        return [(0, size)]
    sep = b"\n\n" if fmt == "text" and text_docs == "blank" else b"\n"
    out, start = [], 0
    with open(path, "rb") as f:
        while start < size:
            pos = start + CHUNK_BYTES  # file offset of the next block read
            if pos >= size:
                out.append((start, size))
                break
            f.seek(pos)
            tail, end = b"", size
            while True:
                block = f.read(1 << 20)
                if not block:
                    break
                buf = tail + block  # starts at file offset pos - len(tail)
                i = buf.find(sep)
                if i >= 0:
                    end = pos - len(tail) + i + len(sep)
                    break
                tail = buf[len(buf) - (len(sep) - 1):] if len(sep) > 1 else b""
                pos += len(block)
            out.append((start, end))
            start = end
    return out


def documents(path, start, end, fmt, key, text_docs):
    """The documents of a byte range: a list of str (text, JSONL) or of (where, message list)
    pairs (chat; `where` names the file, the range and the line within it)."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{path}: byte {start + e.start} is not UTF-8 ({e.reason})")
    if fmt == "text":
        if text_docs == "file":
            return [text] if text.strip() else []
        parts = text.split("\n\n") if text_docs == "blank" else text.split("\n")
        return [p.strip("\n") for p in parts if p and not p.isspace()]
    out = []
    for ln, line in enumerate(text.split("\n"), 1):
        if not line or line.isspace():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f"{path} (byte {start}+, line {ln}): not JSON ({e})")
        if fmt == "jsonl":
            if not isinstance(obj, dict) or not isinstance(obj.get(key), str):
                fail(f"{path} (byte {start}+, line {ln}): no string field '{key}'")
            out.append(obj[key])
        else:
            msgs = obj if isinstance(obj, list) else obj.get(key)
            if not isinstance(msgs, list) or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str)
                    and isinstance(m.get("content"), str) for m in msgs):
                fail(f"{path} (byte {start}+, line {ln}): a chat record is a list of "
                     "{\"role\": str, \"content\": str} messages")
            out.append((f"{path} (byte {start}+, line {ln})", msgs))
    return out


# ------------------------------------------------------------------ encoding
GENERATION_BLOCK = re.compile(r"\{%-?\s*generation\s*-?%\}")
_PROBE = ("sofprobeuser1", "sofprobereply1", "sofprobeuser2", "sofprobereply2")


def template_end_of_turn(tok):
    """What the chat template writes after an assistant message's content to end its turn (e.g.
    '<|im_end|>\n', '<|eot_id|>'): the common beginning of what follows the content of an earlier
    reply and of the last one in a probe conversation."""
    u1, a1, u2, a2 = _PROBE
    msgs = [{"role": "user", "content": u1}, {"role": "assistant", "content": a1},
            {"role": "user", "content": u2}, {"role": "assistant", "content": a2}]
    try:
        text = tok.apply_chat_template(msgs, tokenize=False)
    except Exception as e:  # noqa: BLE001 - the template's own error, named
        fail(f"the chat template cannot render a user/assistant conversation ({e})")
    i, j = text.find(a1), text.find(a2)
    if i < 0 or j < 0:
        fail("the chat template does not write the assistant messages' content as given, so the "
             "assistant turns cannot be located for the loss mask")
    after1, after2 = text[i + len(a1):], text[j + len(a2):]
    n = 0
    while n < min(len(after1), len(after2)) and after1[n] == after2[n]:
        n += 1
    return after1[:n]


def _content_forms(content, assistant):
    """How a template may write a message's content: as given, trimmed (Llama 3's `| trim`),
    without leading newlines, or (assistant) the part after a </think> (Qwen3 moves the
    reasoning out of the content)."""
    forms = [content, content.strip(), content.lstrip("\n")]
    if assistant and "</think>" in content:
        forms.append(content.split("</think>")[-1].lstrip("\n"))
    out = []
    for f in forms:
        if f not in out:
            out.append(f)
    return out


def assistant_spans(text, msgs, eot, where):
    """Character spans [a, b) of the assistant replies in the rendering `text` of the whole
    conversation: each reply's content and the end-of-turn `eot` after it. Found from the last
    message to the first: message i lies before the one after it, and a reply is its content
    followed by the end of turn, so a role name or an earlier equal message is not taken for it."""
    spans, cursor = [], len(text)
    for i in range(len(msgs) - 1, -1, -1):
        m = msgs[i]
        asst = m["role"] == "assistant"
        found = -1
        for form in _content_forms(m["content"], asst):
            found = text.rfind(form + eot if asst else form, 0, cursor)
            if found >= 0:
                if asst:
                    spans.append((found, found + len(form) + len(eot)))
                break
        if found >= 0:
            cursor = found
        elif asst:
            fail(f"{where}: assistant message {i} is not in the chat template's rendering of the "
                 f"conversation followed by its end of turn {eot!r}, so its tokens cannot be "
                 "located for the loss mask")
        # a system/user message the template rewrites (merged, dropped) only bounds nothing
    spans.reverse()
    return spans


def _with_eos(flat, lens, eos, mask=None):
    """The documents' ids (flat, lens per document) with EOS after each that does not end with
    it; returns (ids, document end offsets, mask with 0 at the added EOS)."""
    ends = np.cumsum(lens, dtype=np.int64)
    if eos is None:
        return flat, ends, mask
    need = lens == 0
    some = ~need
    need[some] = flat[ends[some] - 1] != eos
    pos = ends[need]
    flat = np.insert(flat, pos, np.uint32(eos))
    if mask is not None:
        mask = np.insert(mask, pos, np.uint8(0))
    return flat, ends + np.cumsum(need, dtype=np.int64), mask


def _flatten(lists):
    """Lists of ids -> (uint32 ids, int64 lengths), without a numpy array per document."""
    lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.uint32,
                       count=int(lens.sum()))
    return flat, lens


def encode_chats(tok, convs, eot, generation, where):
    """The template's ids of each conversation and a 0/1 mask: 1 on the assistant replies (their
    content and end of turn; text the template adds before a reply, such as Qwen3's empty
    <think></think> block, is prompt). `generation`: the template marks the replies itself with
    {% generation %} blocks (transformers' assistant mask is used)."""
    if generation:
        out = tok.apply_chat_template(convs, tokenize=True, return_dict=True,
                                      return_assistant_tokens_mask=True)
        return out["input_ids"], out["assistant_masks"]
    texts = tok.apply_chat_template(convs, tokenize=False)
    id_lists, masks = [], []
    for k, enc in enumerate(tok.backend_tokenizer.encode_batch(texts, add_special_tokens=False)):
        spans = assistant_spans(texts[k], convs[k], eot, where(k))
        starts = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(enc.ids))
        mask = np.zeros(len(starts), dtype=np.uint8)
        for a, b in spans:
            mask[(starts >= a) & (starts < b)] = 1
        id_lists.append(enc.ids)
        masks.append(mask)
    return id_lists, masks


def task_documents(task):
    path, start, end, fmt, key, text_docs, parquet = task[:7]
    if parquet:
        return parquet_documents(path, start, end, fmt, key)
    return documents(path, start, end, fmt, key, text_docs)


def encode_task(task):
    """Tokenizes one piece of one file (a byte range, or row groups of a Parquet file); returns
    (path, start, ids, doc_ends, mask or None, bytes)."""
    path, start, end, fmt, key, text_docs, parquet, nbytes, eos, eot, generation = task
    tok = _TOK
    back = tok.backend_tokenizer
    if fmt == "chat":
        docs = list(task_documents(task))
        id_lists, masks = [], []
        for i in range(0, len(docs), 256):
            part = docs[i:i + 256]
            ids, m = encode_chats(tok, [d for _, d in part], eot, generation,
                                  lambda k: part[k][0])
            id_lists += ids
            masks += [np.asarray(x, dtype=np.uint8) for x in m]
        flat, lens = _flatten(id_lists)
        mask = np.concatenate(masks) if masks else np.zeros(0, np.uint8)
    else:
        texts = task_documents(task)
        id_lists = []
        # encode_batch, not encode_batch_fast: in tokenizers 0.23.3 the "fast" one (no offsets)
        # takes 1.3-1.5x the CPU time on a 128K BPE (docs/performance.md)
        for i in range(0, len(texts), 4096):
            id_lists += [e.ids for e in back.encode_batch(texts[i:i + 4096],
                                                          add_special_tokens=True)]
        flat, lens = _flatten(id_lists)
        mask = None
    ids, ends, mask = _with_eos(flat, lens, eos, mask)
    return path, start, ids, ends, mask, nbytes


# ------------------------------------------------------------------ writing shards
class ShardWriter:
    def __init__(self, out, split, wide, masked, shard_tokens):
        self.out, self.split, self.wide, self.masked = out, split, wide, masked
        self.cap = shard_tokens
        self.ids, self.masks, self.n, self.count = [], [], 0, 0
        self.files, self.sizes, self.tokens, self.counted = [], [], 0, 0

    def total(self):
        """Tokens so far, written and pending."""
        return self.tokens + self.n

    def close(self, min_tokens):
        """Writes what is left. A last piece of fewer than min_tokens tokens (less than one batch:
        the loader refuses such a shard) is appended to the shard before it when the two fit in
        one."""
        if 0 < self.n < min_tokens and self.count > 0 and \
                self.sizes[-1] + self.n <= MAX_SHARD_TOKENS:
            self.count -= 1
            path = os.path.join(self.out, self.files.pop())
            prev = np.fromfile(path, dtype="<u4" if self.wide else "<u2", offset=1024)
            self.ids.insert(0, prev)
            if self.masked:
                pm = np.fromfile(path + ".mask", dtype=np.uint8, offset=1024)
                self.masks.insert(0, pm)
                self.counted -= int(pm.sum())
            self.n += len(prev)
            self.tokens -= self.sizes.pop()
        self.flush()

    def add(self, ids, mask):
        while len(ids):
            take = min(len(ids), self.cap - self.n)
            self.ids.append(ids[:take])
            if self.masked:
                self.masks.append(mask[:take])
            self.n += take
            ids = ids[take:]
            mask = mask[take:] if self.masked else None
            if self.n == self.cap:
                self.flush()

    def flush(self):
        if self.n == 0:
            return
        ids = np.concatenate(self.ids)
        path = os.path.join(self.out, f"{self.split}_{self.count:06d}.bin")
        hdr = np.zeros(256, dtype="<i4")
        hdr[0], hdr[1], hdr[2] = (MAGIC32, VERSION32, len(ids)) if self.wide else \
            (MAGIC16, VERSION16, len(ids))
        with open(path + ".tmp", "wb") as f:
            f.write(hdr.tobytes())
            f.write(ids.astype("<u4" if self.wide else "<u2").tobytes())
        os.replace(path + ".tmp", path)
        if self.masked:
            m = np.concatenate(self.masks)
            mh = np.zeros(256, dtype="<i4")
            mh[0], mh[1], mh[2] = MASK_MAGIC, MASK_VERSION, len(m)
            with open(path + ".mask.tmp", "wb") as f:
                f.write(mh.tobytes())
                f.write(m.astype(np.uint8).tobytes())
            os.replace(path + ".mask.tmp", path + ".mask")
            self.counted += int(m.sum())
        self.files.append(os.path.basename(path))
        self.sizes.append(len(ids))
        self.tokens += len(ids)
        self.ids, self.masks, self.n = [], [], 0
        self.count += 1


def parse_count(s):
    mult = {"K": 10**3, "M": 10**6, "G": 10**9}
    try:
        return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)
    except (ValueError, IndexError):
        fail(f"'{s}' is not a token count (e.g. 100M, 1000000)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("files", nargs="+", help="input files")
    ap.add_argument("--tokenizer", required=True, help="Hugging Face model directory")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--format", choices=["auto", "text", "jsonl", "chat"], default="auto")
    ap.add_argument("--text-key", default="text",
                    help="JSONL field / Parquet column holding the text")
    ap.add_argument("--chat-key", default="messages",
                    help="JSONL field / Parquet column holding a chat's messages")
    ap.add_argument("--text-docs", choices=["blank", "line", "file"], default="blank",
                    help="text files: documents are separated by blank lines, are lines, or are "
                         "whole files")
    ap.add_argument("--val-fraction", type=float, default=0.01,
                    help="fraction of documents (seeded choice) that go to the val split")
    ap.add_argument("--seed", type=int, default=1234, help="seed of the train/val choice")
    ap.add_argument("--seq-len", type=int, default=1024,
                    help="train.seq_len the data is for: the val split holds at least one "
                         "evaluation batch of --batch-size x --seq-len + 1 tokens")
    ap.add_argument("--batch-size", type=int, default=4,
                    help="sequences per batch over all data-parallel ranks (train.batch_size x "
                         "ranks) the val split must hold")
    ap.add_argument("--shard-tokens", default="100M", help="tokens per shard (e.g. 100M)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="processes tokenizing in parallel (pieces of files)")
    ap.add_argument("--no-eos", action="store_true", help="no EOS token after each document")
    ap.add_argument("--dtype", choices=["auto", "uint16", "uint32"], default="auto",
                    help="token width: auto = uint16 when the vocabulary fits (<= 65536)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    a = ap.parse_args()
    if not 0.0 <= a.val_fraction <= 1.0:
        fail(f"--val-fraction {a.val_fraction} must be in [0, 1]")
    shard_tokens = parse_count(a.shard_tokens)
    if not 1 <= shard_tokens <= MAX_SHARD_TOKENS:
        fail(f"--shard-tokens {a.shard_tokens} must be in [1, {MAX_SHARD_TOKENS}]")
    if a.seq_len < 1 or a.batch_size < 1:
        fail(f"--seq-len {a.seq_len} and --batch-size {a.batch_size} must be >= 1")
    need = a.batch_size * a.seq_len + 1  # tokens of one batch: the loader's minimum per shard
    for p in a.files:
        if not os.path.isfile(p):
            fail(f"input file {p} does not exist")
    tok = load_tokenizer(a.tokenizer)
    vocab = len(tok)
    wide = vocab > 65536 if a.dtype == "auto" else a.dtype == "uint32"
    if a.dtype == "uint16" and vocab > 65536:
        fail(f"--dtype uint16: the vocabulary of {a.tokenizer} has {vocab} tokens (> 65536)")
    eos = None if a.no_eos else tok.eos_token_id
    if eos is None and not a.no_eos:
        fail(f"{a.tokenizer}: the tokenizer has no EOS token to put between documents; give "
             "--no-eos or a tokenizer_config.json with eos_token")
    parquet = {p: is_parquet(p) for p in a.files}
    fmts = {p: parquet_format(p, a.format, a.text_key, a.chat_key) if parquet[p] else
            (a.format if a.format != "auto" else detect_format(p, a.text_key, a.chat_key))
            for p in a.files}
    masked = any(f == "chat" for f in fmts.values())
    if masked and not all(f == "chat" for f in fmts.values()):
        fail("chat files and plain text/JSONL files in one run: a loss mask goes with every "
             "shard or none; prepare them separately")
    if masked and tok.chat_template is None:
        fail(f"{a.tokenizer}: the tokenizer has no chat template (tokenizer_config.json "
             "chat_template or chat_template.jinja) for chat data")
    generation = masked and bool(GENERATION_BLOCK.search(tok.get_chat_template()))
    eot = template_end_of_turn(tok) if masked and not generation else ""
    tasks = []
    for p in a.files:
        key = a.chat_key if fmts[p] == "chat" else a.text_key
        pieces = parquet_chunks(p) if parquet[p] else \
            [(s, e, e - s) for s, e in chunks_of(p, fmts[p], a.text_docs)]
        for s, e, nb in pieces:
            tasks.append((p, s, e, fmts[p], key, a.text_docs, parquet[p], nb, eos, eot,
                          generation))
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):
        if (f.startswith("train_") or f.startswith("val_")) and (".bin" in f):
            os.remove(os.path.join(a.out, f))  # a rerun replaces the old shards
    writers = {s: ShardWriter(a.out, s, wide, masked, shard_tokens) for s in ("train", "val")}
    rng = np.random.default_rng(a.seed)
    total_bytes = sum(t[7] for t in tasks)
    t0 = time.time()
    ndocs = {"train": 0, "val": 0}
    # a split of some documents: the val split gets the first documents too until it holds one
    # evaluation batch (the seeded choice alone may leave it smaller: a deck could not evaluate).
    # The first pieces wait until 2 batches of tokens have come (one for each split; less data
    # cannot give both a batch: then the seeded choice stands and a warning says so).
    fill_val = 0.0 < a.val_fraction < 1.0
    forced, held, held_tokens = [0], [], [0]
    bar = tqdm(total=total_bytes, unit="B", unit_scale=True, disable=a.quiet,
               desc="prepare", file=sys.stderr)
    workers = max(1, min(a.workers, len(tasks)))

    def consume(result):
        bar.update(result[5])
        if held_tokens[0] < 2 * need and fill_val:
            held.append(result)
            held_tokens[0] += len(result[2])
            if held_tokens[0] >= 2 * need:
                release(True)
            return
        assign(result, False)

    def release(fill):
        for r in held:
            assign(r, fill)
        held.clear()

    def assign(result, fill):
        """Puts a piece's documents into the splits (fill: the first ones into val until it
        holds one batch)."""
        _, _, ids, ends, mask, _ = result
        to_val = rng.random(len(ends)) < a.val_fraction  # per document, in order
        if fill and writers["val"].total() < need:
            have, lens = writers["val"].total(), np.diff(ends, prepend=np.int64(0))
            for i in range(len(ends)):
                if have >= need:
                    break
                if not to_val[i]:
                    to_val[i] = True
                    forced[0] += 1
                have += int(lens[i])
        nval = int(to_val.sum())
        for split, ndoc in (("train", len(ends) - nval), ("val", nval)):
            if ndoc == 0:
                continue
            if ndoc == len(ends):  # every document of the piece: no selection
                writers[split].add(ids, mask)
            else:  # the split's documents' tokens, in order
                sel = np.repeat(to_val if split == "val" else ~to_val,
                                np.diff(ends, prepend=np.int64(0)))
                writers[split].add(ids[sel], mask[sel] if masked else None)
            ndocs[split] += ndoc

    if workers == 1:
        global _TOK
        _TOK = tok  # in this process: the tokenizer loaded above, with Rust's threads
        os.environ["TOKENIZERS_PARALLELISM"] = "true"
        for t in tasks:
            consume(encode_task(t))
    else:
        import multiprocessing as mp
        with mp.get_context("fork").Pool(workers, initializer=_init_worker,
                                         initargs=(a.tokenizer, False)) as pool:
            for r in pool.imap(encode_task, tasks):  # in order: the output does not depend on -j
                consume(r)
    release(False)  # less than 2 batches of data in all
    bar.close()
    for w in writers.values():
        w.close(need)
    secs = time.time() - t0
    total = sum(w.tokens for w in writers.values())
    bt = a.batch_size * a.seq_len
    batches = {k: sum((n - 1) // bt for n in w.sizes) for k, w in writers.items()}
    info = {"tokenizer": os.path.abspath(a.tokenizer), "vocab_size": vocab,
            "dtype": "uint32" if wide else "uint16", "eos_token_id": eos,
            "bos_token_id": tok.bos_token_id, "format": sorted(set(fmts.values())),
            "inputs": [os.path.abspath(p) for p in a.files], "val_fraction": a.val_fraction,
            "seed": a.seed, "loss_mask": masked,
            "eval_batch": {"batch_size": a.batch_size, "seq_len": a.seq_len, "tokens": need},
            "train": {"shards": writers["train"].files, "tokens": writers["train"].tokens,
                      "documents": ndocs["train"], "counted_targets": writers["train"].counted,
                      "batches": batches["train"]},
            "val": {"shards": writers["val"].files, "tokens": writers["val"].tokens,
                    "documents": ndocs["val"], "counted_targets": writers["val"].counted,
                    "batches": batches["val"], "documents_added_for_one_batch": forced[0]},
            "seconds": round(secs, 3), "tokens_per_s": round(total / max(secs, 1e-9))}
    with open(os.path.join(a.out, "prepare.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(f"prepare: {total} tokens ({info['dtype']}, vocab {vocab}) in "
          f"{len(writers['train'].files)} train + {len(writers['val'].files)} val shard(s), "
          f"{ndocs['train']} + {ndocs['val']} documents{', with loss masks' if masked else ''}, "
          f"{secs:.1f} s ({info['tokens_per_s']} tokens/s, {workers} worker(s)) -> {a.out}")
    report_batches(a, writers, batches, forced[0], need)


def report_batches(a, writers, batches, forced, need):
    """What a deck can do with the splits: the keys to train on them (unless --quiet) and, on
    stderr, a clear warning when a split cannot hold one batch of --batch-size x --seq-len."""
    geo = f"--batch-size {a.batch_size} x --seq-len {a.seq_len} + 1 = {need} tokens"
    if forced:
        sys.stderr.write(f"prepare_data.py: the seeded choice (--val-fraction {a.val_fraction}) "
                         f"gave the val split less than one evaluation batch ({geo}): the first "
                         f"{forced} document(s) went to it as well\n")
    for split, used in (("train", a.val_fraction < 1.0), ("val", a.val_fraction > 0.0)):
        w = writers[split]
        if used and batches[split] == 0:
            sys.stderr.write(
                f"prepare_data.py: WARNING: the {split} split has {w.tokens} tokens, less than "
                f"one batch ({geo}): a deck with train.batch_size x data-parallel ranks = "
                f"{a.batch_size} and train.seq_len = {a.seq_len} stops at its start "
                f"(data.{split}); give more data, a smaller --seq-len/--batch-size (and the same "
                "in the deck)" + (", or a larger --val-fraction" if split == "val" else "")
                + "\n")
    if a.quiet:
        return
    glob = {k: os.path.join(a.out, f"{k}_*.bin") for k in ("train", "val")}
    val = glob["val"] if a.val_fraction > 0.0 else glob["train"]
    print(f"train on it with these deck keys (or --set key=value):\n"
          f"  data: {{train: '{glob['train']}', val: '{val}'}}\n"
          f"  train: {{seq_len: {a.seq_len}, batch_size: {a.batch_size}}}\n"
          f"  # {batches['train']} training and {batches['val']} validation batch(es) of "
          f"{a.batch_size} x {a.seq_len} at 1 rank (n ranks: batch_size {a.batch_size} / n "
          "each)" + ("; no val split (--val-fraction 0): validating on the training data"
                     if a.val_fraction == 0.0 else ""))


if __name__ == "__main__":
    try:
        main()
    except PrepareError as err:
        sys.exit(f"prepare_data.py: {err}")
