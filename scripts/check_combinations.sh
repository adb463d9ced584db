#!/usr/bin/env bash
# Engine option combinations against the plain path. The 60 distinct ones run in-process as the
# ctest `test_combinations` (label combinations, ~15 s); this script runs that test, then a few of
# them through the CLI as separate processes (NaN injected with --set at step 2, clip 0.8),
# comparing each final checkpoint's files bitwise. Usage: scripts/check_combinations.sh [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
exe="$build/bin/superoffload"
ctest --test-dir "$build" -L combinations --output-on-failure
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--set train.steps=6 --set train.eval_batches=1 --set train.eval_every=0
        --set train.checkpoint_every=0 --set train.log_every=0 --set train.grad_clip=0.8
        --set "debug.inject_nonfinite_steps=[2]" --set runtime.log_level=quiet)
run() { # run DIR ARGS...: train into DIR, print the last line of the log on failure
  local d=$1; shift
  "$exe" train "$root/inputs/tiny.yaml" "${common[@]}" --set runtime.out_dir="$d" \
    --set train.checkpoint_dir="$d/ckpt" "$@" > "$d.log" 2>&1 || { echo "$d FAILED: $(tail -1 "$d.log")"; return 1; }
}
run plain_fp32 --set train.dtype=fp32 --set offload.enabled=false
run plain_bf16 --set train.dtype=bf16 --set offload.enabled=false --set offload.cast=device
run plain_bf16_host --set train.dtype=bf16 --set offload.enabled=false --set offload.cast=host
n=0; bad=0
check() { # check NAME PLAIN ARGS...
  local d=$1 ref=$2; shift 2
  if ! run "$d" --set offload.enabled=true "$@"; then bad=$((bad + 1)); return; fi
  n=$((n + 1))
  for f in params exp_avg exp_avg_sq; do
    cmp -s "$d/ckpt/step_00000006/$f.bin" "$ref/ckpt/step_00000006/$f.bin" ||
      { echo "$d: $f.bin differs from $ref"; bad=$((bad + 1)); }
  done
}
check so_fp32 plain_fp32 --set train.dtype=fp32 --set offload.gpu_tail_buckets=1
check il_bf16_host plain_bf16_host --set train.dtype=bf16 --set offload.schedule=interleaved \
  --set offload.interleave_k=2 --set offload.cast=host
check il_flow_bf16_dev plain_bf16 --set train.dtype=bf16 --set offload.schedule=interleaved \
  --set offload.interleave_k=1 --set offload.weights=flow --set offload.cast=device
check sync_flow_fp32 plain_fp32 --set train.dtype=fp32 --set offload.schedule=synchronous \
  --set offload.weights=flow
echo "check_combinations: ctest passed; $n CLI runs bitwise equal to the plain path, $bad problems"
[ "$bad" -eq 0 ]
