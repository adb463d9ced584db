#!/usr/bin/env python3
# Writes an llm.c token shard (256 x int32 header: magic 20240520, version 1, token count; then
# uint16 tokens) from a list of token ids or from a text file's bytes (byte-level, vocab 256).
"""Usage examples:

  scripts/make_shard.py out.bin --tokens 1 2 3 4          # explicit token ids
  scripts/make_shard.py out.bin --ids ids.txt             # whitespace-separated ids in a file
  scripts/make_shard.py out.bin --bytes corpus.txt        # every byte is a token (vocab 256)
  scripts/make_shard.py out.bin --bytes corpus.txt --split 1000000   # out_000000.bin, ...

Only the standard library is used (no numpy needed). Tokens must be in [0, 65535].
"""
import argparse
import array
import struct
import sys

MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256


def write_shard(path, tokens):
    toks = array.array("H", tokens)  # uint16; raises OverflowError for ids outside [0, 65535]
    if sys.byteorder != "little":
        toks.byteswap()
    header = [0] * HEADER_INTS
    header[0], header[1], header[2] = MAGIC, VERSION, len(toks)
    with open(path, "wb") as f:
        f.write(struct.pack("<%di" % HEADER_INTS, *header))
        f.write(toks.tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out", help="output shard path (with --split: base name, _NNNNNN is added)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens", type=int, nargs="+", help="token ids")
    src.add_argument("--ids", help="file of whitespace-separated token ids")
    src.add_argument("--bytes", help="file whose bytes are the tokens (vocab 256)")
    ap.add_argument("--split", type=int, default=0, help="tokens per shard (0 = one shard)")
    a = ap.parse_args()
    if a.tokens is not None:
        tokens = a.tokens
    elif a.ids is not None:
        with open(a.ids) as f:
            tokens = [int(x) for x in f.read().split()]
    else:
        with open(a.bytes, "rb") as f:
            tokens = list(f.read())
    bad = [t for t in tokens if not 0 <= t <= 65535]
    if bad:
        sys.exit("make_shard: token %d is outside [0, 65535] (llm.c shards hold uint16)" % bad[0])
    if not tokens:
        sys.exit("make_shard: no tokens given")
    if a.split <= 0:
        write_shard(a.out, tokens)
        print("%s: %d tokens, max id %d" % (a.out, len(tokens), max(tokens)))
        return
    stem, dot, ext = a.out.rpartition(".")
    if not dot:
        stem, ext = a.out, "bin"
    for i in range(0, len(tokens), a.split):
        path = "%s_%06d.%s" % (stem, i // a.split, ext)
        write_shard(path, tokens[i:i + a.split])
        print("%s: %d tokens" % (path, len(tokens[i:i + a.split])))


if __name__ == "__main__":
    main()
