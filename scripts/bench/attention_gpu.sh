#!/usr/bin/env bash
# A GPU session for the attention kernels (the device tool's H100): the op driver's attention
# cases, then forward/backward TFLOPS of our two CUDA kernels beside PyTorch's SDPA on the same
# shapes (docs/performance.md "Attention on the GPU"). Needs the CUDA build of
# scripts/gpu/build_and_test.sh build (build-gpu/; SOF_BUILD_DIR to change) and a python with
# torch (TORCH_PYTHON, default python3). Logs go to $OUT when set (the device tool's output
# folder), else to build-gpu/logs; the summary is printed last.
# Usage: scripts/bench/attention_gpu.sh [test] [bench]   (default: both)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SOF_BUILD_DIR:-$root/build-gpu}"
py="${TORCH_PYTHON:-python3}"
logs="${OUT:-$build/logs}"
mkdir -p "$logs"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(test bench)
has() { for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
rc=0
if has test; then
  # every attention case of the op driver (CUDA-core and tensor-core kernels against the CPU twin)
  timeout 900 "$build/bin/test_kernels" --gpu -tc='attention*' -s >"$logs/attention_op_driver.log" 2>&1 || rc=1
  grep -E "MESSAGE|ERROR" "$logs/attention_op_driver.log" | sed 's/^.*MESSAGE: /  /' | tail -60
  tail -4 "$logs/attention_op_driver.log"
fi
if has bench; then
  # GPT-2 350M's heads (16 x 64), a Llama shape (16 x 128), Llama-3 8B's GQA (32 q / 8 kv x 128);
  # 16k tokens per call
  for shape in "16 16 64" "16 16 128" "32 8 128"; do
    read -r nh nkv hd <<<"$shape"
    for T in 1024 4096; do
      B=$((16384 / T))
      {
        "$build/bin/superoffload" bench attention --gpu 1 --seq "$T" --batch "$B" --heads "$nh" \
          --kv-heads "$nkv" --head-dim "$hd" --reps 20 || echo "  ours: failed"
        "$py" "$root/scripts/bench/attention_torch_gpu.py" --seq "$T" --batch "$B" --heads "$nh" \
          --kv-heads "$nkv" --head-dim "$hd" --reps 20 || echo "  torch: failed"
      } 2>&1 | tee -a "$logs/attention_bench.log"
    done
  done
fi
exit $rc
