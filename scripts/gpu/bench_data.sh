#!/usr/bin/env bash
# The benchmark decks' data (inputs/bench/*.yaml): random token ids in llm.c's shard formats under
# data/bench/ (git-ignored), the same files for superoffload and llm.c (scripts/bench/llmc_peer.sh).
# Benchmark speed does not depend on the text, so uniform ids do; a fixed seed makes them the same
# everywhere. Idempotent; ~10 s with the standard library alone (scripts/make_shard.py --random).
#   gpt2_{train,val}_000000.bin    uint16, ids < 50257 (GPT-2), 4M / 256K tokens
#   llama3_{train,val}_000000.bin  uint32, ids < 128256 (Llama 3), 2M / 256K tokens
# The loader wraps around after the last shard, so a step may be larger than a split.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p data/bench
shard() { # FILE TOKENS VOCAB SEED DTYPE
  [ -s "$1" ] || python3 scripts/make_shard.py "$1" --random "$2" --vocab "$3" --seed "$4" --dtype "$5"
}
shard data/bench/gpt2_train_000000.bin 4194304 50257 1 uint16
shard data/bench/gpt2_val_000000.bin 262144 50257 2 uint16
shard data/bench/llama3_train_000000.bin 2097152 128256 3 uint32
shard data/bench/llama3_val_000000.bin 262144 128256 4 uint32
