#!/bin/bash
# Builds the CUDA tests and the gpu_adam benchmark with nvcc alone (no CMake, MPI or yaml-cpp), for GPU
# machines whose image lacks the project's host dependencies. Usage: build_standalone.sh OUTDIR [DOCTEST_DIR]
set -euo pipefail
out=${1:?output dir}
doctest=${2:-/usr/include}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
nvcc=${NVCC:-nvcc}
flags=(-std=c++17 -O3 -arch=sm_90 -Xcompiler=-Wall,-Wextra -Werror=all-warnings
       -DSOF_HAVE_CUDA=1 -I"$root/lib" -I"$root/tests" -I"$root/plugins/gpu_adam")
# -isystem /usr/include would break #include_next in the C++ headers: add only other folders
[ "$doctest" != /usr/include ] && flags+=(-isystem "$doctest")
plugin=$root/plugins/gpu_adam/gpu_adam.cu
core=("$root/lib/core/error.cpp" "$root/lib/core/strfmt.cpp" "$root/lib/core/trace.cpp")
"$nvcc" "${flags[@]}" -x cu "$root/tests/cuda/test_gpu_adam.cpp" "$plugin" -o "$out/test_gpu_adam" &
pids=($!)
"$nvcc" "${flags[@]}" "$root/tests/cuda/bench_gpu_adam.cu" "$plugin" -o "$out/bench_gpu_adam" &
pids+=($!)
if [ -f "$root/lib/device/cuda_device.cu" ] && [ -f "$root/tests/cuda/test_cuda_device.cpp" ]; then
  "$nvcc" "${flags[@]}" -x cu "$root/tests/cuda/test_cuda_device.cpp" "$root/lib/device/cuda_device.cu" \
    "$root/lib/device/device.cpp" "$root/lib/device/host_device.cpp" "${core[@]}" \
    -o "$out/test_cuda_device" &
  pids+=($!)
  "$nvcc" "${flags[@]}" -x cu "$root/tests/cuda/bench_cuda_device.cpp" "$root/lib/device/cuda_device.cu" \
    "$root/lib/device/device.cpp" "$root/lib/device/host_device.cpp" "${core[@]}" \
    -o "$out/bench_cuda_device" &
  pids+=($!)
fi
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
