#!/usr/bin/env bash
# The README / docs/engine.md trace-to-PNG example on a tiny engine run: train with
# runtime.trace, then scripts/plot_trace.py writes a PNG, and scripts/plot_metrics.py the loss / lr /
# grad-norm curves (needs python3-matplotlib, which scripts/setup.sh installs).
# Usage: test_plot_trace.sh SUPEROFFLOAD_BINARY SOURCE_DIR SCRATCH_DIR
set -euo pipefail
bin=$1 src=$2 dir=$3
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
source "$src/tests/e2e/launch.sh" # a cross build runs the program under its emulator
bin=$(sof_launch_setup "$bin" "$dir")
cat > deck.yaml <<'YAML'
model: {num_layers: 1, num_heads: 2, channels: 32, max_seq_len: 16, vocab_size: 64}
data: {builtin: {train_tokens: 8192, val_tokens: 2048}}
train: {batch_size: 2, seq_len: 16, steps: 3, eval_batches: 1, log_every: 0}
offload: {enabled: true, bucket_mb: 0.01}
device: {type: host}
runtime: {out_dir: out, threads: 1, trace: out/trace.json, log_level: quiet}
YAML
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 "$bin" train deck.yaml
/usr/bin/python3 "$src/scripts/plot_trace.py" out/trace.json --steps 2 -o out/trace.png
magic=$(head -c 4 out/trace.png | od -An -c | tr -d ' ')
[ "$magic" = '211PNG' ] || { echo "out/trace.png is not a PNG (starts with '$magic')"; exit 1; }
echo "ok: out/trace.png ($(stat -c %s out/trace.png) bytes)"
# the loss / lr / grad-norm curves of the same run, from its metrics
/usr/bin/python3 "$src/scripts/plot_metrics.py" out/metrics.jsonl -o out/metrics.png
magic=$(head -c 4 out/metrics.png | od -An -c | tr -d ' ')
[ "$magic" = '211PNG' ] || { echo "out/metrics.png is not a PNG (starts with '$magic')"; exit 1; }
echo "ok: out/metrics.png ($(stat -c %s out/metrics.png) bytes)"
