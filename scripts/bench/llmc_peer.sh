#!/usr/bin/env bash
# llm.c's CUDA trainer as the peer of issue 17 section 6: train_gpt2cu and `superoffload bench
# train` on the same GPT-2 350M shape (24 layers, C 1024, 16 heads, vocabulary 50257 padded to
# 50304, bf16), the same batch (B 16, T 1024, 4 micro-batches: 64K tokens per step) and the same
# token shards (data/bench/gpt2_*.bin, llm.c's uint16 format: scripts/gpu/bench_data.sh), on the
# same GPU; prints both tokens/s. llm.c's code is never committed: its source comes from the
# device tool's `fetch github:karpathy/llm.c` (a bare git directory) into .peer/llm.c (ignored).
#
# Usage:
#   scripts/bench/llmc_peer.sh source [GITDIR]  .peer/llm.c from GITDIR (default: the fetch mirror)
#   scripts/bench/llmc_peer.sh build            build .peer/llm.c/train_gpt2cu (HERE or THERE:
#                                               nvcc, sm_90, bf16, no cuDNN, no MPI/NCCL, ~20 s)
#   scripts/bench/llmc_peer.sh run              both trainers, STEPS steps each, on this GPU
# Environment for run: LLMC (train_gpt2cu; default .peer/llm.c/train_gpt2cu), SOF (superoffload;
#   default .gpu-bundle/bin/superoffload, else build/bin/superoffload), HW (hardware profile,
#   default inputs/hardware/h100-sxm.yaml), STEPS (default 10).
#
# llm.c's flags (train_gpt2.cu error_usage): -e d24 = random init of GPT-2 depth 24 (no weights
# file needed), -i/-j train/val shard globs, -b 16 -t 1024 micro-batch, -d 65536 total batch (so 4
# micro-batches), -x steps, -l lr, -u 0 warmup, -v val every (only steps 0 and last here), -m 1 val
# batch, -s 0 no sampling (no tokenizer file needed), -z 0 (one GPU), -r 0 no recompute (ours
# recomputes nothing either), -ge 0 its default GELU fusion, -f 1 its default TF32 for fp32 paths.
set -euo pipefail
cd "$(dirname "$0")/../.."
LLMC_SRC=.peer/llm.c
cmd=${1:-run}

case $cmd in
source)
  git_dir=${2:-/work/.mirror/karpathy+llm.c/repo}
  rm -rf "$LLMC_SRC" && mkdir -p "$LLMC_SRC"
  git --git-dir="$git_dir" archive HEAD | tar -x -C "$LLMC_SRC"
  echo "llmc_peer: $LLMC_SRC from $git_dir ($(git --git-dir="$git_dir" rev-parse --short HEAD))"
  ;;
build)
  [ -f "$LLMC_SRC/train_gpt2.cu" ] || { echo "llmc_peer: no $LLMC_SRC/train_gpt2.cu (run: $0 source)" >&2; exit 2; }
  cd "$LLMC_SRC"
  # CUDA 13 takes a cudaMemLocation in cudaMemAdvise (llm.c is written for CUDA 12): the one line
  # of its out-of-memory fallback, patched in the ignored copy only
  sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' llmc/cuda_utils.cuh
  # the Makefile's flags without NVML (nvml.h is absent here: llm.c then leaves it out) or MPI
  nvcc --threads="$(nproc)" --use_fast_math -std=c++17 -O3 \
    --generate-code 'arch=compute_90,code=[compute_90,sm_90]' -DENABLE_BF16 train_gpt2.cu \
    -lcublas -lcublasLt -o train_gpt2cu
  echo "llmc_peer: built $LLMC_SRC/train_gpt2cu"
  ;;
run)
  LLMC=${LLMC:-$LLMC_SRC/train_gpt2cu}
  SOF=${SOF:-$( [ -x .gpu-bundle/bin/superoffload ] && echo .gpu-bundle/bin/superoffload || echo build/bin/superoffload)}
  HW=${HW:-inputs/hardware/h100-sxm.yaml}
  STEPS=${STEPS:-10}
  [ -x "$LLMC" ] || { echo "llmc_peer: no $LLMC (run: $0 source; $0 build)" >&2; exit 2; }
  bash scripts/gpu/bench_data.sh >/dev/null
  mkdir -p .peer # the two runs' logs (llmc_run.log, sof_run.log)
  tokens=65536
  echo "== llm.c: $LLMC -e d24 -b 16 -t 1024 -d $tokens -x $STEPS"
  "$LLMC" -i 'data/bench/gpt2_train_*.bin' -j 'data/bench/gpt2_val_*.bin' -e d24 -b 16 -t 1024 \
    -d $tokens -x "$STEPS" -l 3e-4 -u 0 -v 100000 -m 1 -s 0 -z 0 -r 0 -ge 0 | tee .peer/llmc_run.log
  # llm.c prints "step    k/N | loss ... | <ms> ms | <mfu>% bf16 MFU | <ema> tok/s": the median
  # step time of steps 3..N (the first two warm up, as ours)
  llmc_ms=$(awk -F'|' '/^step +[0-9]+\/[0-9]+ \|/ {split($1, a, "[ /]+"); if (a[2] > 2) {
      for (i = 1; i <= NF; i++) if ($i ~ / ms *$/) { gsub(/[^0-9.]/, "", $i); print $i } } }' \
    .peer/llmc_run.log | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')
  echo "== superoffload: $SOF bench train inputs/bench/gpt2-350m.yaml --variants no-offload"
  "$SOF" bench train inputs/bench/gpt2-350m.yaml --hardware "$HW" --steps "$STEPS" \
    --variants no-offload | tee .peer/sof_run.log
  sof_tok=$(awk '/^no offload \(state on device\)/ {print $7}' .peer/sof_run.log | tail -1)
  awk -v ms="$llmc_ms" -v t=$tokens -v s="$sof_tok" 'BEGIN {
    l = t / (ms / 1000); printf "llm.c train_gpt2cu:  %.0f tokens/s (median %.2f ms per 64K-token step)\n", l, ms;
    printf "superoffload:        %.0f tokens/s (no offload, bench train median)\n", s;
    printf "superoffload / llm.c: %.3f\n", s / l }'
  ;;
*)
  echo "usage: $0 source [GITDIR] | build | run" >&2
  exit 2
  ;;
esac
