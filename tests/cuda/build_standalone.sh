#!/bin/bash
# Builds the CUDA tests and the gpu_adam benchmark with nvcc alone (no CMake, MPI or yaml-cpp), for GPU
# machines whose image lacks the project's host dependencies. Usage: build_standalone.sh OUTDIR [DOCTEST_DIR]
set -euo pipefail
out=${1:?output dir}
doctest=${2:-/usr/include}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
nvcc=${NVCC:-nvcc}
# -ffp-contract=off: the host code (the test's scalar twin, the plugin's constants) as the reference
# computes it (GCC fuses a*b+c into an FMA by default where the ISA has one: aarch64)
flags=(-std=c++17 -O3 -arch=sm_90 -Xcompiler=-Wall,-Wextra,-ffp-contract=off -Werror=all-warnings
       -DSOF_HAVE_CUDA=1 -I"$root/lib" -I"$root/tests" -I"$root/plugins/gpu_adam")
# -isystem /usr/include would break #include_next in the C++ headers: add only other folders
[ "$doctest" != /usr/include ] && flags+=(-isystem "$doctest")
plugin=$root/plugins/gpu_adam/gpu_adam.cu
core=("$root"/lib/core/*.cpp) # the leaf module the devices use (errors, traces, job queues)
# the kernels the devices launch (casts, grad_prep, their scratch and stream checks)
kern=("$root/lib/kernels/scratch.cpp" "$root/lib/kernels/exec.cpp" "$root/lib/kernels/cpu/cast.cpp"
      "$root/lib/kernels/cuda/cast.cu" "$root/lib/kernels/cpu/grad_stats.cpp"
      "$root/lib/kernels/cuda/grad_stats.cu" "$root/lib/kernels/cuda/cuda_sync.cu")
# the tests' main and doctest's implementation: tests/doctest_impl.cpp (what CMake's sof_doctest is)
impl=$root/tests/doctest_impl.cpp
"$nvcc" "${flags[@]}" -x cu "$root/tests/cuda/test_gpu_adam.cpp" "$impl" "$plugin" \
  -o "$out/test_gpu_adam" &
pids=($!)
"$nvcc" "${flags[@]}" "$root/tests/cuda/bench_gpu_adam.cu" "$plugin" -o "$out/bench_gpu_adam" &
pids+=($!)
if [ -f "$root/lib/device/cuda_device.cu" ] && [ -f "$root/tests/cuda/test_cuda_device.cpp" ]; then
  "$nvcc" "${flags[@]}" -x cu "$root/tests/cuda/test_cuda_device.cpp" "$impl" "$root/lib/device/cuda_device.cu" \
    "$root/lib/device/device.cpp" "$root/lib/device/host_device.cpp" "${core[@]}" "${kern[@]}" \
    -o "$out/test_cuda_device" &
  pids+=($!)
  "$nvcc" "${flags[@]}" -x cu "$root/tests/cuda/bench_cuda_device.cpp" "$root/lib/device/cuda_device.cu" \
    "$root/lib/device/device.cpp" "$root/lib/device/host_device.cpp" "${core[@]}" "${kern[@]}" \
    -o "$out/bench_cuda_device" &
  pids+=($!)
fi
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
