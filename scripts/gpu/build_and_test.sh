#!/usr/bin/env bash
# Run THERE (a GPU machine without network, e.g. the device tool's H100 with `.debs` carried):
# build superoffload with CUDA against the unpacked Debian packages, then run the GPU checks.
# Usage: scripts/gpu/build_and_test.sh [build] [test] [bench] [all]   (default: all)
#   build  configure + build (build-gpu/, Release, sm_90)
#   test   the CUDA tests: ctest -L 'gpu|cuda' (op driver, attention, device, gpu_adam, engine)
#   bench  superoffload bench train on inputs/bench/*.yaml with the GPU's hardware profile
# The prebuilt bundle (make_bundle.sh HERE, run_bundle.sh THERE) spends no device time on the
# build; this script is its fallback (README.md).
# Logs go to $OUT (the device tool's output folder) when it is set, else to build-gpu/logs.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=(all)
has() { for s in "${STAGES[@]}"; do [ "$s" = "$1" ] || [ "$s" = all ] && return 0; done; return 1; }
# shellcheck source=env.sh
source scripts/gpu/env.sh .debs /tmp/sofdeps
LOGS=${OUT:-build-gpu/logs}
mkdir -p "$LOGS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$LOGS/gpu.txt"
rc=0
if has build; then
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DSOF_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    "${SOF_CMAKE_HINTS[@]}" >"$LOGS/configure.log" 2>&1 || { tail -30 "$LOGS/configure.log"; exit 1; }
  cmake --build build-gpu -j "$(nproc)" >"$LOGS/build.log" 2>&1 || { grep -E "error" "$LOGS/build.log" | head -40; exit 1; }
  echo "build: ok"
fi
if has test; then
  ctest --test-dir build-gpu -L 'gpu|cuda' --output-on-failure -j 4 >"$LOGS/ctest_gpu.log" 2>&1 || rc=1
  tail -25 "$LOGS/ctest_gpu.log"
fi
if has bench; then
  case $(cat "$LOGS/gpu.txt") in *H200*) hw=inputs/hardware/h200.yaml ;; *) hw=inputs/hardware/h100-sxm.yaml ;; esac
  bash scripts/gpu/bench_data.sh >/dev/null
  for d in gpt2-350m llama3-1b gpt2-350m-offload-500k llama-5b-offload; do
    extra=()
    [ "$d" = llama-5b-offload ] && extra=(--variants deck)
    build-gpu/bin/superoffload bench train "inputs/bench/$d.yaml" --hardware "$hw" --steps 5 \
      "${extra[@]}" >>"$LOGS/bench.log" 2>&1 || rc=1
    tail -6 "$LOGS/bench.log"
  done
fi
exit $rc
