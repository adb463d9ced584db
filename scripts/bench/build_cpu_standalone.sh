#!/bin/bash
# Builds the cpu_adam plugin, the Adam benchmark driver and the host conformance test with g++ alone
# (no CMake, MPI or yaml-cpp), for machines that lack the project's other dependencies.
# Usage: build_cpu_standalone.sh OUTDIR [DOCTEST_DIR]; then OUTDIR/adam_bench_driver adam ... and
# OUTDIR/test_adam_conformance (plugins in OUTDIR/plugins).
set -euo pipefail
out=${1:?output dir}
doctest=${2:-/usr/include}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out/plugins"
cxx=${CXX:-g++}
flags=(-std=c++20 -O3 -DNDEBUG -Wall -Wextra -Werror -fopenmp -I"$root/lib")
[ "$doctest" != /usr/include ] && flags+=(-isystem "$doctest")
core=("$root/lib/core/error.cpp" "$root/lib/core/strfmt.cpp")
optim=("$root/lib/optim/optimizer.cpp" "$root/lib/optim/bench_adam.cpp" "$root/lib/optim/bench_ceiling.cpp")
p=$root/plugins/cpu_adam
"$cxx" "${flags[@]}" -ffp-contract=off -fPIC -shared -fvisibility=hidden -DSOF_CPU_ADAM_X86=1 \
  -Wno-uninitialized -Wno-maybe-uninitialized -Wl,-z,nodelete \
  "$p/cpu_adam.cpp" "$p/kernels_scalar.cpp" "$p/kernels_avx2.cpp" "$p/kernels_avx512.cpp" \
  -o "$out/plugins/libcpu_adam.so" &
pids=($!)
"$cxx" "${flags[@]}" "$root/tests/optim/adam_bench_driver.cpp" "${optim[@]}" "${core[@]}" -ldl \
  -o "$out/adam_bench_driver" &
pids+=($!)
"$cxx" "${flags[@]}" -ffp-contract=off -I"$root/tests" -DSOF_SOURCE_DIR="\"$root\"" \
  -DSOF_PLUGIN_DIR="\"$out/plugins\"" "$root/tests/optim/test_adam_conformance.cpp" \
  "$root/tests/optim/test_adam_torch.cpp" "${optim[@]}" "${core[@]}" -ldl \
  -o "$out/test_adam_conformance" &
pids+=($!)
rc=0
for q in "${pids[@]}"; do wait "$q" || rc=1; done
exit $rc
