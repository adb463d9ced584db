#!/usr/bin/env bash
# A Llama-3-sized vocabulary (128256) end to end: scripts/make_shard.py writes uint32 shards (and a
# uint16 one in the same glob), `check` accepts the deck, `train` runs 2 steps of a tiny GPT-2 and
# a tiny LLaMA on them; the built-in corpus and an out-of-vocabulary id are refused (key; file,
# position, value).
# Usage: test_big_vocab.sh SUPEROFFLOAD_BINARY SOURCE_DIR SCRATCH_DIR
set -euo pipefail
bin=$1 src=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir/shards" && cd "$dir"
source "$src/tests/e2e/launch.sh" # a cross build runs the program under its emulator
bin=$(sof_launch_setup "$bin" "$dir")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
# expect_rc RC NEEDLE... -- CMD...: CMD exits with RC and its output contains every NEEDLE
expect_rc() {
  local want=$1; shift
  local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  local rc=0
  "$@" > out.log 2>&1 || rc=$?
  [ "$rc" = "$want" ] || { cat out.log; fail "'$*' exited $rc, expected $want"; }
  for n in "${needles[@]}"; do
    grep -qF -- "$n" out.log || { cat out.log; fail "'$*': output lacks '$n'"; }
  done
}

/usr/bin/python3 - <<'PY'
import random
random.seed(7)
ids = [random.randrange(128256) for _ in range(6000)]
ids[:3] = [5, 99999, 65536]  # below 100000 (the refusal below names position 3)
ids[3] = 128255  # the largest id of the vocabulary
open("big.txt", "w").write(" ".join(map(str, ids)))
open("small.txt", "w").write(" ".join(str(random.randrange(50000)) for _ in range(1000)))
PY
mk="/usr/bin/python3 $src/scripts/make_shard.py"
expect_rc 0 "shards/train_000000.bin: 3000 tokens, uint32" -- \
  $mk shards/train.bin --ids big.txt --split 3000 --vocab 128256
expect_rc 0 "uint16" -- $mk shards/train_000002.bin --ids small.txt
expect_rc 0 "uint32" -- $mk shards/val.bin --ids big.txt --vocab 128256

cat > deck.yaml <<'YAML'
model: {num_layers: 1, num_heads: 2, channels: 32, max_seq_len: 16, vocab_size: 128256}
data: {train: "shards/train_*.bin", val: "shards/val.bin"}
train: {batch_size: 2, seq_len: 16, steps: 2, eval_every: 2, eval_batches: 1, log_every: 1}
device: {type: host}
runtime: {out_dir: out, threads: 1}
YAML
expect_rc 0 "vocab_size: 128256" "deck OK: deck.yaml" -- "$bin" check deck.yaml
expect_rc 2 "model.vocab_size = 128256 does not fit the built-in corpus (data.train = builtin)" -- \
  "$bin" check deck.yaml --set data.train=builtin
expect_rc 0 "V=128256" "3 shard(s), 7000 tokens" "done:" -- "$bin" train deck.yaml
# the same data for a tiny LLaMA (GQA) with Llama-3's vocabulary
expect_rc 0 "V=128256" "done:" -- "$bin" train deck.yaml --set model.type=llama \
  --set model.intermediate_size=64 --set model.num_kv_heads=1 --set runtime.out_dir=out_llama
# a model with a smaller vocabulary than the data: exit 4 (format), file, position and value
expect_rc 4 "shards/train_000000.bin: token 128255 at position 3" "vocab_size 100000" -- \
  "$bin" train deck.yaml --set model.vocab_size=100000 --set runtime.out_dir=out2
echo "ok: uint32 shards with V = 128256 check, train and refuse out-of-vocabulary ids"
