#!/usr/bin/env bash
# `superoffload eval` end to end: the loss of a checkpoint equals the trainer's own validation loss
# at 1 rank and at 2 ranks (same global batch), eval_batches beyond the data is clamped with a
# warning (no wrap-around, in train and eval), and train.global_batch lets a run resume at another
# rank count and reach the same loss as the uninterrupted run.
# Usage: test_eval.sh SUPEROFFLOAD_BINARY SOURCE_DIR SCRATCH_DIR
set -euo pipefail
bin=$1 src=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/e2e/launch.sh" # mpi N ...: the configured MPI launcher
bin=$(sof_launch_setup "$bin" "$dir")
# |a - b| <= tol
close() { /usr/bin/python3 -c "import sys; a,b,t=map(float,sys.argv[1:]); sys.exit(abs(a-b)>t)" "$@"; }

cat > deck.yaml <<'YAML'
model: {num_layers: 2, num_heads: 2, channels: 32, max_seq_len: 32, vocab_size: 64}
data: {builtin: {train_tokens: 20000, val_tokens: 2049}}
train: {batch_size: 4, global_batch: 8, seq_len: 32, steps: 4, lr: 1.0e-2, eval_batches: 4,
  checkpoint_every: 2, checkpoint_dir: ckpt, log_every: 1}
device: {type: host}
runtime: {out_dir: out, threads: 1}
YAML
"$bin" train deck.yaml > train.log 2>&1 || { cat train.log; fail "train"; }
want=$(grep -oP 'step 4: val loss \K[0-9.]+' train.log | tail -1)
[ -n "$want" ] || { cat train.log; fail "no final val loss in the train log"; }
grep -q "elapsed .* eta " train.log || fail "the step log has no elapsed/ETA"
grep -q "batch_size 4 x grad_accum 2" train.log || fail "global_batch 8 did not give grad_accum 2"

# eval of the checkpoint: the same 4 validation batches, 1 rank and 2 ranks (2 x 2 sequences)
"$bin" eval --checkpoint ckpt --batches 4 > eval1.log 2>&1 || { cat eval1.log; fail "eval"; }
got1=$(grep -oP '^eval: loss \K[0-9.]+' eval1.log)
close "$got1" "$want" 1e-4 || fail "eval at 1 rank: loss $got1, the trainer's $want"
mpi 2 "$bin" eval --checkpoint ckpt --batches 2 --set train.batch_size=2 > eval2.log 2>&1 ||
  { cat eval2.log; fail "eval at 2 ranks"; }
got2=$(grep -oP '^eval: loss \K[0-9.]+' eval2.log)
# 2 global batches of 2 ranks x 2 sequences: the same 8 sequences as 1 rank's 2 batches of 4
"$bin" eval --checkpoint ckpt --batches 2 > eval1b.log 2>&1 || { cat eval1b.log; fail "eval"; }
got1b=$(grep -oP '^eval: loss \K[0-9.]+' eval1b.log)
close "$got2" "$got1b" 1e-4 || fail "eval at 2 ranks: loss $got2, at 1 rank $got1b"

# no wrap-around: 2049 val tokens hold 2048/(4*32) = 16 batches; 100 asked -> 16, said so
"$bin" eval --checkpoint ckpt --batches 100 > clamp.log 2>&1 || { cat clamp.log; fail "clamp"; }
grep -q "no wrap-around" clamp.log || { cat clamp.log; fail "eval did not say it clamped"; }
grep -q "in 16 batch(es)" clamp.log || { cat clamp.log; fail "eval did not read 16 batches"; }
"$bin" train deck.yaml --set train.eval_batches=100 --set train.steps=1 \
  --set train.checkpoint_dir=ckpt_clamp --set runtime.out_dir=out_clamp > tclamp.log 2>&1 ||
  { cat tclamp.log; fail "train with eval_batches 100"; }
grep -q "no wrap-around" tclamp.log || { cat tclamp.log; fail "train did not say it clamped"; }

# global_batch across rank counts: 1 rank to step 2, resume at 2 ranks to step 4
mkdir -p split && cp -r ckpt/step_00000002 split/ 2>/dev/null || fail "no step 2 checkpoint"
mpi 2 "$bin" train deck.yaml --set train.checkpoint_dir=split --set train.resume=auto \
  --set runtime.out_dir=out_split > resume.log 2>&1 || { cat resume.log; fail "resume at 2 ranks"; }
grep -q "resume: .*step_00000002" resume.log || { cat resume.log; fail "did not resume step 2"; }
# the same sequences per step: the training losses of steps 3 and 4 agree (the validation loss
# does not compare: eval_batches counts global batches, 8 sequences at 2 ranks, 4 at 1)
for s in 3 4; do
  a=$(grep -oP "step +$s/4 \| loss \K[0-9.]+" train.log)
  b=$(grep -oP "step +$s/4 \| loss \K[0-9.]+" resume.log)
  close "$a" "$b" 1e-4 || fail "step $s: loss $b resumed at 2 ranks, $a uninterrupted at 1 rank"
done
echo "eval: 1 rank $got1 = trainer $want; 2 ranks $got2 = $got1b; resume at 2 ranks: same losses"
echo "test_eval: OK"
