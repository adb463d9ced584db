#!/usr/bin/env bash
# Run THERE (a lent GPU machine: x86-64, NVIDIA driver + CUDA 13 + python3 with torch, no network,
# none of our Debian libraries): runs the prebuilt bundle of scripts/gpu/make_bundle.sh, no build.
# Unpacks its runtime .debs into a prefix (scripts/gpu/env.sh), links the build's absolute paths
# (compiled into the tests) to this checkout and the bundle, then runs the stages asked for and
# writes one log per stage plus summary.txt into $OUT (the device tool's output folder; else
# gpu-logs/). The one-step recipe (the exact device-tool call) is in scripts/gpu/README.md.
# Usage: scripts/gpu/run_bundle.sh [STAGE...]   (default: env test)
#   env    machine, GPU, library resolution of every bundled binary (ldd), MPI smoke test
#   test   the GPU tests of ctest -L 'gpu|cuda' in the order of scripts/gpu/tests.tsv (its stage
#          1, then 2, then 3), each under a time limit; test1 / test2 / test3: one stage only.
#          Each test's output goes to tests/NAME.log; a test that fails (not a timeout) runs once
#          more with SOF_CUDA_SYNC=1 CUDA_LAUNCH_BLOCKING=1 (every op synchronized and named) into
#          tests/NAME.sync.log; the summary names both and the last case each reached.
#   bench  bench_cuda_device (kernels + link curve), bench_gpu_adam, superoffload bench moe --gpu 1
#          (three shapes), superoffload bench train on
#          inputs/bench/*.yaml with the GPU's hardware profile
#   peer   llm.c's train_gpt2cu beside superoffload on GPT-2 350M (scripts/bench/llmc_peer.sh)
# Environment: BUNDLE (default .gpu-bundle), TESTS (regex of test names, default all),
#   DECKS (space-separated deck names of inputs/bench, default all: the two that matter most
#   first), STEPS (bench steps, default 5), BUDGET (seconds for the whole run, default 540: every
#   limit is cut to what is left, so the logs come back inside the device tool's 600 s),
#   TEST_LIMIT (seconds per test, default 240: a hung test costs that much, not the whole call),
#   RERUN (1: rerun a failed test with SOF_CUDA_SYNC=1; 0: not).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$(pwd -P)
T0=$(date +%s)
BUDGET=${BUDGET:-540}
BUNDLE=$(cd "${BUNDLE:-.gpu-bundle}" 2>/dev/null && pwd -P) ||
  { echo "run_bundle: no bundle at ${BUNDLE:-.gpu-bundle} (make it HERE with scripts/gpu/make_bundle.sh and carry it)" >&2; exit 2; }
LOGS=${OUT:-$ROOT/gpu-logs}
mkdir -p "$LOGS"
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(env test)
has() { for s in "${STAGES[@]}"; do [ "$s" = "$1" ] || [ "$s" = all ] && return 0; done; return 1; }
# the test stages asked for: test = 1 2 3
TEST_STAGES=()
for s in "${STAGES[@]}"; do
  case $s in
  test | all) TEST_STAGES+=(1 2 3) ;;
  test[123]) TEST_STAGES+=("${s#test}") ;;
  esac
done
# stage 1 first whatever the order asked for
if [ ${#TEST_STAGES[@]} -gt 0 ]; then mapfile -t TEST_STAGES < <(printf '%s\n' "${TEST_STAGES[@]}" | sort -u); fi
SUMMARY=$LOGS/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - ($(date +%s) - T0))); }
# limit N: N seconds, cut to what the budget has left (10 s kept for the summary)
limit() { local l; l=$(($(left) - 10)); [ "$1" -lt "$l" ] && l=$1; [ "$l" -lt 1 ] && l=1; echo "$l"; }

# shellcheck source=env.sh
source scripts/gpu/env.sh "$BUNDLE/debs" "${SOF_PREFIX:-/tmp/sofdeps}"
MPIRUN=$SOF_PREFIX/usr/bin/mpirun.openmpi
SRC_REC=$(sed -n 's/^src=//p' "$BUNDLE/manifest.txt")
BIN_REC=$(sed -n 's/^bin=//p' "$BUNDLE/manifest.txt")

# The tests hold the build's absolute paths (SOF_SOURCE_DIR, SOF_BINARY_DIR, SOF_PLUGIN_DIR): make
# them name this checkout and the bundle. REC -> TARGET: a symlink where nothing is; a real folder
# there (e.g. a build left by build_and_test.sh) is moved aside only with FORCE_LINK=1.
link_path() {
  local rec=$1 target=$2
  if [ -e "$rec" ] && [ "$(cd "$rec" && pwd -P)" = "$(cd "$target" && pwd -P)" ]; then return 0; fi
  if [ -L "$rec" ]; then
    ln -sfn "$target" "$rec"
  elif [ -e "$rec" ]; then
    [ "${FORCE_LINK:-0}" = 1 ] || { say "run_bundle: $rec is a real folder (FORCE_LINK=1 moves it aside)"; return 1; }
    mv "$rec" "$rec.moved-by-run_bundle.$$" && ln -s "$target" "$rec"
  else
    mkdir -p "$(dirname "$rec")" && ln -s "$target" "$rec"
  fi
}
link_path "$SRC_REC" "$ROOT" && link_path "$BIN_REC" "$BUNDLE" ||
  { say "run_bundle: cannot link $SRC_REC / $BIN_REC to this checkout / the bundle"; exit 2; }

say "run_bundle: $(date -u +%FT%TZ), stages ${STAGES[*]}, budget ${BUDGET}s, bundle $(sed -n 's/^commit=//p' "$BUNDLE/manifest.txt")"
say "  checkout $ROOT (build paths: $SRC_REC, $BIN_REC); prefix $SOF_PREFIX"
GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)
say "  GPU: $GPU"
case $GPU in
*H200*) HW=inputs/hardware/h200.yaml ;;
*) HW=inputs/hardware/h100-sxm.yaml ;;
esac

if has env; then
  {
    echo "== uname"; uname -a; cat /etc/os-release 2>/dev/null | head -2
    echo "== nvidia-smi"; nvidia-smi 2>&1 | head -15
    echo "== nproc $(nproc), $(free -g 2>/dev/null | sed -n 2p)"
    echo "== python3 $(command -v python3): $(python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1)"
    echo "== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    echo "== ldd (only what is not found)"
    for f in "$BUNDLE"/bin/* "$BUNDLE"/plugins/*.so "$BUNDLE"/llmc/* "$MPIRUN" "$SOF_PREFIX"/usr/bin/orted; do
      [ -f "$f" ] || continue
      miss=$(ldd "$f" 2>&1 | grep "not found")
      echo "$(basename "$f"): ${miss:-ok}"
    done
    echo "== superoffload --help"; timeout 30 "$BIN_REC/bin/superoffload" --help 2>&1 | head -5
    echo "== superoffload check inputs/tiny.yaml (singleton MPI_Init)"
    timeout 60 "$BIN_REC/bin/superoffload" check inputs/tiny.yaml 2>&1 | tail -3
    echo "rc=${PIPESTATUS[0]}" | tee "$LOGS/.check_rc"
    echo "== mpirun -n 2 hostname"; timeout 60 "$MPIRUN" -n 2 hostname 2>&1
    echo "rc=${PIPESTATUS[0]}" | tee "$LOGS/.mpirun_rc"
  } >"$LOGS/env.log" 2>&1
  say "env: $(grep -c '=> not found' "$LOGS/env.log") unresolved libraries; superoffload check $(cat "$LOGS/.check_rc"); mpirun -n 2 $(cat "$LOGS/.mpirun_rc")"
  rm -f "$LOGS/.check_rc" "$LOGS/.mpirun_rc"
fi

# run_test NAME LIMIT WD ENVS CMD LOG: rc of the test (its output appended to LOG)
run_test() {
  local name=$1 l=$2 wd=$3 envs=$4 cmd=$5 log=$6
  echo "===== $name (limit ${l}s, $(date -u +%T)): ${envs:+$envs }$cmd" >>"$log"
  # shellcheck disable=SC2086
  # stdin from /dev/null: mpirun forwards stdin to rank 0 and would eat the rest of tests.tsv
  (cd "$wd" && env $envs timeout -k 10 "$l" bash -c "$cmd") </dev/null >>"$log" 2>&1
}
# the verdict of rc for a test whose skip code is $2
verdict() {
  if [ "$1" -eq 0 ]; then echo passed
  elif [ "$1" -eq "$2" ]; then echo skipped
  elif [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; then echo TIMEOUT
  else echo "FAILED rc=$1"; fi
}
# the last case a log reached (case_names.h prints "[case] NAME" before each, "[run]" per run)
last_case() { grep -E '^\[(case|subcase|run)\] ' "$1" 2>/dev/null | tail -1 | cut -c1-160; }

if [ ${#TEST_STAGES[@]} -gt 0 ]; then
  pass=0 fail=0 skip=0
  mkdir -p "$LOGS/tests"
  for stage in "${TEST_STAGES[@]}"; do
    while IFS=$'\t' read -r name tstage tmo skipcode wd envs cmd; do
      [ "$tstage" = "$stage" ] || continue
      [[ $name =~ ${TESTS:-.} ]] || continue
      cmd=${cmd//@MPIEXEC@/$MPIRUN}; cmd=${cmd//@BIN@/$BIN_REC}; cmd=${cmd//@SRC@/$SRC_REC}
      wd=${wd//@BIN@/$BIN_REC}; wd=${wd//@SRC@/$SRC_REC}
      [ "$envs" = - ] && envs=""
      if [[ $cmd == python3* ]] && ! command -v python3 >/dev/null; then # a root without Python
        say "test $name [stage $stage]: skipped (no python3 here)"; skip=$((skip + 1)); continue
      fi
      mkdir -p "$wd"
      [ "$tmo" -gt "${TEST_LIMIT:-240}" ] && tmo=${TEST_LIMIT:-240} # a hang costs this, not the call
      [ $(($(left) - 10)) -lt 10 ] && { say "test $name [stage $stage]: not run (budget spent)"; continue; }
      l=$(limit "$tmo")
      log=$LOGS/tests/$name.log
      : >"$log"
      t1=$(date +%s)
      run_test "$name" "$l" "$wd" "$envs" "$cmd" "$log"
      rc=$?
      r=$(verdict "$rc" "$skipcode")
      [ "$r" = TIMEOUT ] && r="TIMEOUT after ${l}s"
      line="test $name [stage $stage]: $r ($(($(date +%s) - t1))s)"
      case $r in
      passed) pass=$((pass + 1)) ;;
      skipped) skip=$((skip + 1)) ;;
      *) fail=$((fail + 1)); line="$line, last: $(last_case "$log")" ;;
      esac
      say "$line"
      # a failure (not a hang): once more with every op synchronized and named
      if [[ $r == FAILED* ]] && [ "${RERUN:-1}" = 1 ]; then
        l=$(limit "$tmo")
        if [ $(($(left) - 10)) -ge 10 ]; then
          slog=$LOGS/tests/$name.sync.log
          : >"$slog"
          t1=$(date +%s)
          run_test "$name" "$l" "$wd" "SOF_CUDA_SYNC=1 CUDA_LAUNCH_BLOCKING=1${envs:+ $envs}" "$cmd" "$slog"
          rc2=$?
          r2=$(verdict "$rc2" "$skipcode")
          say "  rerun with SOF_CUDA_SYNC=1 CUDA_LAUNCH_BLOCKING=1: $r2 ($(($(date +%s) - t1))s), last: $(last_case "$slog")"
          grep -v '^=====' "$slog" | grep -m3 -E "CUDA|failed|error|ERROR" | cut -c1-300 |
            sed 's/^/    /' | tee -a "$SUMMARY" >/dev/null
        fi
      fi
      cat "$log" >>"$LOGS/test.log"
    done <"$BUNDLE/tests.tsv"
  done
  say "tests: $pass passed, $fail failed, $skip skipped (logs: tests/NAME.log, reruns tests/NAME.sync.log)"
fi

if has bench; then
  {
    echo "== bench_cuda_device --link"; timeout "$(limit 60)" "$BIN_REC/bin/bench_cuda_device" 67108864 20 --link 2>&1
    echo "== bench_gpu_adam 268435456 10"; timeout "$(limit 60)" "$BIN_REC/bin/bench_gpu_adam" 268435456 10 2>&1
    # the experts' grouped product beside one dense product of the same FLOPs (issue 27): the
    # CPU's shape, Qwen3-30B-A3B's at a 4 x 4096 micro-batch and GPT-OSS-20B's at 4 x 8192
    for shape in "" "--tokens 16384 --hidden 2048 --inter 768 --experts 128 --topk 8" \
      "--tokens 32768 --hidden 2880 --inter 2880 --experts 32 --topk 4"; do
      echo "== superoffload bench moe --gpu 1 --reps 5 $shape"
      # shellcheck disable=SC2086 # the shape is a list of options
      timeout "$(limit 60)" "$BIN_REC/bin/superoffload" bench moe --gpu 1 --reps 5 $shape 2>&1
    done
  } >"$LOGS/bench.log" 2>&1
  grep -A3 "^bench moe" "$LOGS/bench.log" | sed 's/^/  /' | tee -a "$SUMMARY" >/dev/null
  bash scripts/gpu/bench_data.sh >>"$LOGS/bench.log" 2>&1
  # every deck of inputs/bench, the two that matter most (issue 25) first
  all_decks="gpt2-350m gpt2-350m-offload-500k"
  for f in inputs/bench/*.yaml; do
    d=$(basename "$f" .yaml)
    [[ " $all_decks " == *" $d "* ]] || all_decks="$all_decks $d"
  done
  for d in ${DECKS:-$all_decks}; do
    # limits: model init, pinned host memory (87 GB for the 5B model) and 3 variants x STEPS steps
    extra=() dl=150
    case $d in
    gpt2-350m) dl=120 ;;
    llama-5b-offload) extra=(--variants deck) dl=240 ;;
    esac
    echo "===== bench train $d --hardware $HW ${extra[*]}" >>"$LOGS/bench.log"
    t1=$(date +%s)
    timeout -k 10 "$(limit $dl)" "$BIN_REC/bin/superoffload" bench train "inputs/bench/$d.yaml" \
      --hardware "$HW" --steps "${STEPS:-5}" "${extra[@]}" >>"$LOGS/bench.log" 2>&1
    rc=$?
    say "bench $d: rc=$rc ($(($(date +%s) - t1))s)"
    grep -A4 "^.*variant " "$LOGS/bench.log" | tail -4 | sed 's/^/  /' | tee -a "$SUMMARY" >/dev/null
  done
fi

if has peer; then
  LLMC=${LLMC:-$BUNDLE/llmc/train_gpt2cu} SOF=$BIN_REC/bin/superoffload HW=$HW \
    timeout -k 10 "$(limit 150)" bash scripts/bench/llmc_peer.sh run >"$LOGS/peer.log" 2>&1
  say "peer: rc=$?"
  tail -4 "$LOGS/peer.log" | tee -a "$SUMMARY" >/dev/null
fi
say "run_bundle: done in $(($(date +%s) - T0))s"
