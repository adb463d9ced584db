#!/usr/bin/env python3
# Writes llm.c token shards (256 x int32 header: magic, version, token count; then the tokens,
# little-endian): uint16 (magic 20240520, version 1) or uint32 (magic 20240801, version 7).
"""Usage examples:

  scripts/make_shard.py out.bin --tokens 1 2 3 4          # explicit token ids
  scripts/make_shard.py out.bin --ids ids.txt             # whitespace-separated ids in a file
  scripts/make_shard.py out.bin --bytes corpus.txt        # every byte is a token (vocab 256)
  scripts/make_shard.py out.bin --bytes corpus.txt --split 1000000   # out_000000.bin, ...
  scripts/make_shard.py out.bin --ids llama3_ids.txt --vocab 128256  # uint32 when an id > 65535
  scripts/make_shard.py wide.bin --shard narrow.bin --dtype uint32    # convert uint16 -> uint32
  scripts/make_shard.py data/bench/r.bin --random 1048576 --vocab 50257 --seed 1  # benchmark data

Token width (--dtype): uint16 (llm.c's GPT-2 shards) holds ids in [0, 65535]; uint32 (llm.c's
llama-3 shards) holds ids in [0, 4294967295]. The default, auto, writes uint16 when every id is
< 65536 and uint32 otherwise. --vocab V refuses any id >= V (what the trainer checks).
Only the standard library is used (no numpy needed). Formats: docs/data.md.
"""
import argparse
import array
import random
import struct
import sys

HEADER_INTS = 256
# dtype -> (magic, version, array typecode candidates, largest id)
FORMATS = {
    "uint16": (20240520, 1, ("H",), 0xFFFF),
    "uint32": (20240801, 7, ("I", "L"), 0xFFFFFFFF),
}


def typecode(dtype):
    size = 2 if dtype == "uint16" else 4
    for code in FORMATS[dtype][2]:
        if array.array(code).itemsize == size:
            return code
    sys.exit("make_shard: this Python has no %d-byte unsigned array type" % size)


def write_shard(path, tokens, dtype="uint16"):
    magic, version, _, _ = FORMATS[dtype]
    toks = array.array(typecode(dtype), tokens)  # raises OverflowError for ids out of range
    if sys.byteorder != "little":
        toks.byteswap()
    header = [0] * HEADER_INTS
    header[0], header[1], header[2] = magic, version, len(toks)
    with open(path, "wb") as f:
        f.write(struct.pack("<%di" % HEADER_INTS, *header))
        f.write(toks.tobytes())


def read_shard(path):
    """The token ids of an llm.c shard of either format (checked like the trainer checks it)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 4 * HEADER_INTS:
        sys.exit("make_shard: %s is shorter than the 1024-byte shard header" % path)
    magic, version, n = struct.unpack("<3i", data[:12])
    for dtype, (m, v, _, _) in FORMATS.items():
        if magic == m:
            break
    else:
        sys.exit("make_shard: %s: bad magic %d (expected 20240520 or 20240801)" % (path, magic))
    if version != v:
        sys.exit("make_shard: %s: version %d does not go with magic %d (expected %d)"
                 % (path, version, magic, v))
    toks = array.array(typecode(dtype))
    if n < 1 or len(data) != 4 * HEADER_INTS + toks.itemsize * n:
        sys.exit("make_shard: %s: header declares %d %s tokens but the file has %d bytes"
                 % (path, n, dtype, len(data)))
    toks.frombytes(data[4 * HEADER_INTS:])
    if sys.byteorder != "little":
        toks.byteswap()
    return list(toks)


def choose_dtype(tokens, requested, vocab):
    """Checks every id (>= 0, < vocab, fits the width) and returns the dtype to write."""
    limit = FORMATS["uint32"][3]
    if vocab:
        limit = min(limit, vocab - 1)
    for i, t in enumerate(tokens):
        if not 0 <= t <= limit:
            if vocab and vocab - 1 == limit and t > limit:
                why = "is >= --vocab %d" % vocab
            else:
                why = "is outside [0, %d]" % limit
            sys.exit("make_shard: token %d at position %d %s" % (t, i, why))
    top = max(tokens)
    if requested == "auto":
        return "uint16" if top <= FORMATS["uint16"][3] else "uint32"
    if top > FORMATS[requested][3]:
        i = tokens.index(top)
        sys.exit("make_shard: token %d at position %d does not fit %s (ids up to %d); use "
                 "--dtype uint32 (or auto)" % (top, i, requested, FORMATS[requested][3]))
    return requested


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out", help="output shard path (with --split: base name, _NNNNNN is added)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens", type=int, nargs="+", help="token ids")
    src.add_argument("--ids", help="file of whitespace-separated token ids")
    src.add_argument("--bytes", help="file whose bytes are the tokens (vocab 256)")
    src.add_argument("--shard", help="an llm.c shard (uint16 or uint32) to rewrite: convert "
                     "between the formats with --dtype, re-split with --split")
    src.add_argument("--random", type=int, metavar="N",
                     help="N ids drawn uniformly from [0, --vocab) (needs --vocab; --seed): "
                     "benchmark data, whose speed does not depend on the text")
    ap.add_argument("--seed", type=int, default=1, help="seed of --random")
    ap.add_argument("--split", type=int, default=0, help="tokens per shard (0 = one shard)")
    ap.add_argument("--dtype", choices=("auto", "uint16", "uint32"), default="auto",
                    help="token width: auto = uint16 when every id < 65536, else uint32")
    ap.add_argument("--vocab", type=int, default=0,
                    help="vocabulary size V: refuse any id >= V (0 = no check)")
    a = ap.parse_args()
    if a.vocab < 0:
        sys.exit("make_shard: --vocab must be >= 1 (or 0 for no check)")
    if a.tokens is not None:
        tokens = a.tokens
    elif a.ids is not None:
        with open(a.ids) as f:
            tokens = [int(x) for x in f.read().split()]
    elif a.shard is not None:
        tokens = read_shard(a.shard)
    elif a.random is not None:
        if a.vocab < 1 or a.random < 1:
            sys.exit("make_shard: --random N needs N >= 1 and --vocab V >= 1")
        rng = random.Random(a.seed)
        tokens = [rng.randrange(a.vocab) for _ in range(a.random)]
    else:
        with open(a.bytes, "rb") as f:
            tokens = list(f.read())
    if not tokens:
        sys.exit("make_shard: no tokens given")
    dtype = choose_dtype(tokens, a.dtype, a.vocab)
    if a.split <= 0:
        write_shard(a.out, tokens, dtype)
        print("%s: %d tokens, max id %d, %s" % (a.out, len(tokens), max(tokens), dtype))
        return
    stem, dot, ext = a.out.rpartition(".")
    if not dot:
        stem, ext = a.out, "bin"
    for i in range(0, len(tokens), a.split):
        path = "%s_%06d.%s" % (stem, i // a.split, ext)
        write_shard(path, tokens[i:i + a.split], dtype)
        print("%s: %d tokens, %s" % (path, len(tokens[i:i + a.split]), dtype))


if __name__ == "__main__":
    main()
