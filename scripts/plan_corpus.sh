#!/usr/bin/env bash
# The planner's output over a corpus of decks and settings, to compare two builds byte for byte
# when the planner is restructured (docs/planner.md "How the planner is built").
# usage: scripts/plan_corpus.sh BIN OUT_DIR      e.g. run with the old and the new binary, then
#        diff -r OUT_OLD OUT_NEW   (1,920 runs: 20 decks x 4 profiles x 3 rank counts x 8 settings)
set -euo pipefail
bin=$(realpath "$1") out=$(realpath -m "$2")
cd "$(dirname "$0")/.."
mkdir -p "$out"
cases=$out/cases.txt
: >"$cases"
settings=(""
  "--set optimizer.state_dtype=auto --set offload.rollback=auto --set offload.cast=auto"
  "--set offload.weights=auto --set offload.flow_grads=auto --set offload.gpu_tail_buckets=auto"
  "--set offload.schedule=interleaved --set offload.interleave_k=auto"
  "--set offload.schedule=synchronous"
  "--set train.dtype=bf16 --set optimizer.master_dtype=auto --set optimizer.state_dtype=auto"
  "--set train.grad_accum=4 --set offload.weights=flow"
  "--set offload.stv=false --set offload.rollback=auto")
for deck in inputs/*.yaml inputs/bench/*.yaml; do
  for hw in "" inputs/hardware/gh200.yaml inputs/hardware/h100-pcie.yaml inputs/hardware/gh200-alps.yaml; do
    for r in 1 2 8; do
      for v in "${settings[@]}"; do
        echo "$deck --ranks $r ${hw:+--hardware $hw} $v" | sed 's/ *$//' >>"$cases"
      done
    done
  done
done
# `plan` spends most of its wall time starting up: 6 at a time
export bin out
nl -ba -w1 -s' ' "$cases" | xargs -P 6 -L 1 bash -c \
  'n=$0; { echo "ARGS: $*"; "$bin" plan "$@" 2>&1; echo "RC: $?"; } >"$out/$n.txt"'
echo "$(wc -l <"$cases") runs in $out"
