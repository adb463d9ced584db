#!/usr/bin/env bash
# Sliding-window attention on the CPU twin (issue 26): forward + backward at several T with a
# fixed window W (`superoffload bench attention --window W --baseline 0`), CPU time (all threads:
# the work, robust to other load on the cores) and peak memory per token: both stay flat when the
# cost is O(T W) (a T x T algorithm's would double with T).
# Usage: scripts/bench/attention_window.sh [W] [THREADS] [T ...]   (defaults 4096, 2, 8192 16384
# 32768 65536; C = 256, 4 heads of 64, B = 1, best of 2). SOF_BUILD_DIR: the build (./build).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
window="${1:-4096}"
threads="${2:-2}"
shift $(( $# > 2 ? 2 : $# ))
seqs=("$@")
[ ${#seqs[@]} -eq 0 ] && seqs=(8192 16384 32768 65536)
build="${SOF_BUILD_DIR:-$root/build}"
export OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY=passive
summary=()
for t in "${seqs[@]}"; do
  out=$("$build/bin/superoffload" bench attention --seq "$t" --window "$window" \
          --threads "$threads" --reps 2 --baseline 0)
  echo "$out"
  # the op's line: time (s), GFLOP/s, peak (MiB), cpu (s)
  read -r secs gflops peak cpu < <(awk '/tiled \(kernels::attention\)/ {
      print $(NF-3), $(NF-2), $(NF-1), $NF }' <<<"$out")
  summary+=("$(awk -v t="$t" -v s="$secs" -v g="$gflops" -v p="$peak" -v c="$cpu" 'BEGIN {
    printf "  %7d %9.2f %9.2f %14.2f %10.1f %12.3f %9.1f", t, s, c, c / t * 1e6, p, p * 1024 / t, g
  }')")
done
echo
echo "sliding window W=$window, $threads threads: forward + backward of B=1, C=256, 4 heads of 64"
printf '  %7s %9s %9s %14s %10s %12s %9s\n' T "time (s)" "cpu (s)" "cpu us / token" \
  "peak (MiB)" "KiB / token" "GFLOP/s"
printf '%s\n' "${summary[@]}"
