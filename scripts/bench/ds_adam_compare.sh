#!/bin/bash
# Builds scripts/bench/ds_adam_compare.cpp against DeepSpeed's CPU-Adam kernel OUTSIDE the project
# tree and runs it against a superoffload optimizer plugin (paired, alternating order, same buffers).
# Usage: ds_adam_compare.sh DS_ROOT WORKDIR [PLUGIN.so] [PARAMS] [THREADS] [PAIRS]
#   DS_ROOT: a DeepSpeed checkout (csrc/includes/cpu_adam.h, simd.h), e.g. a git clone of
#            github.com/deepspeedai/DeepSpeed, or from a bare mirror:
#            mkdir -p DS_ROOT && git -C MIRROR archive HEAD csrc/includes csrc/adam | tar -x -C DS_ROOT
#   WORKDIR: build directory outside the project (e.g. /tmp/ds_adam)
# Defaults: build/plugins/libcpu_adam.so, 268435456 params, 2 threads, 20 pairs.
# DeepSpeed is compiled as its op builder does on an AVX-512 CPU: -O3 -march=native -fopenmp
# -D__AVX512__. No torch: a stub torch/extension.h supplies the c10::Half/BFloat16 names its
# templates mention and a torch::Tensor declaration.
set -euo pipefail
ds=${1:?DeepSpeed checkout}
work=${2:?build dir outside the project}
root=$(cd "$(dirname "$0")/../.." && pwd)
plugin=${3:-$root/build/plugins/libcpu_adam.so}
params=${4:-268435456}
threads=${5:-2}
pairs=${6:-20}
[ -f "$ds/csrc/includes/cpu_adam.h" ] || { echo "ds_adam_compare.sh: $ds/csrc/includes/cpu_adam.h not found: give a DeepSpeed checkout" >&2; exit 2; }
case "$(realpath -m "$work")/" in "$root"/*) echo "ds_adam_compare.sh: WORKDIR must be outside the project tree" >&2; exit 2;; esac
mkdir -p "$work/stub/torch"
cat > "$work/stub/torch/extension.h" <<'STUB'
// Stub for building DeepSpeed's CPU-Adam kernel without torch (ds_adam_compare.sh).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>
namespace c10 {
struct Half { uint16_t x; };
struct BFloat16 { uint16_t x; };
} // namespace c10
namespace torch { struct Tensor; }
STUB
simd=-D__AVX512__
grep -q avx512f /proc/cpuinfo || simd=-D__AVX256__
g++ -std=c++17 -O3 -march=native -fopenmp "$simd" -Wno-reorder -I"$work/stub" \
  -I"$ds/csrc/includes" -I"$root/lib" "$root/scripts/bench/ds_adam_compare.cpp" -ldl \
  -o "$work/ds_adam_compare"
echo "ds_adam_compare.sh: built $work/ds_adam_compare ($simd, DeepSpeed $(git -C "$ds" rev-parse --short HEAD 2>/dev/null || echo "from $ds"))"
"$work/ds_adam_compare" "$plugin" "$params" "$threads" "$pairs"
