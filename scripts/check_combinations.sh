#!/usr/bin/env bash
# Every engine option combination against the plain path, through the CLI: 96 runs of inputs/tiny.yaml
# (6 steps, NaN injected at step 2, clip 0.8), comparing each final checkpoint's files bitwise.
# Usage: scripts/check_combinations.sh [BUILD_DIR] (default build). About 5 minutes on 2 cores.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exe="$(cd "${1:-$root/build}" && pwd)/bin/superoffload"
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
for dt in fp32 bf16; do run plain_$dt --set train.dtype=$dt --set offload.enabled=false; done
n=0; bad=0
for dt in fp32 bf16; do for sch in superoffload interleaved synchronous; do
for w in stationary flow; do for cast in host device; do for tail in 0 1; do for stv in true false; do
  d=${dt}_${sch}_${w}_cast-${cast}_tail${tail}_stv-${stv}
  if ! run "$d" --set train.dtype=$dt --set offload.enabled=true --set offload.schedule=$sch \
       --set offload.weights=$w --set offload.cast=$cast --set offload.gpu_tail_buckets=$tail \
       --set offload.stv=$stv; then bad=$((bad + 1)); continue; fi
  n=$((n + 1))
  for f in params exp_avg exp_avg_sq; do
    cmp -s "$d/ckpt/step_00000006/$f.bin" "plain_$dt/ckpt/step_00000006/$f.bin" ||
      { echo "$d: $f.bin differs from the plain path"; bad=$((bad + 1)); }
  done
done; done; done; done; done; done
echo "check_combinations: $n combinations bitwise equal to the plain path checked, $bad problems"
[ "$bad" -eq 0 ]
