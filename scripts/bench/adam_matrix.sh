#!/bin/bash
# Runs `bench adam` for 1 and all threads x bf16 copy on/off (each run: in place and separate,
# ceiling = best of the strategies, paired ratios) and prints one summary line per mode, with the
# load average before each run (the build host is shared: read ratios, not absolute GB/s).
# Usage: adam_matrix.sh [BUILD_DIR] [PARAMS] [PAIRS]  (defaults build, 268435456, 11)
# Needs BUILD_DIR/bin/superoffload or BUILD_DIR/bin/adam_bench_driver and BUILD_DIR/plugins.
set -euo pipefail
build=${1:-build}
params=${2:-268435456}
pairs=${3:-11}
if [[ -x "$build/bin/superoffload" ]]; then
  bench=("$build/bin/superoffload" bench adam)
elif [[ -x "$build/bin/adam_bench_driver" ]]; then
  bench=("$build/bin/adam_bench_driver" adam)
else
  echo "adam_matrix.sh: build first (no $build/bin/superoffload or adam_bench_driver)" >&2
  exit 2
fi
all=$(nproc)
for threads in 1 "$all"; do
  for copy in on off; do
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    "${bench[@]}" --params "$params" --threads "$threads" --bf16-copy "$copy" --pairs "$pairs" \
      --plugin-dir "$build/plugins" --json |
      LOAD="$load" python3 -c '
import json, os, sys
d = json.load(sys.stdin)
t = d["threads"]
copy = "on " if d["bf16_copy"] else "off"
for k, m in d["modes"].items():
    print("threads %d copy %s %-9s ceiling %5.1f GB/s (%s | %s) plugin %5.1f GB/s  fraction %5.1f%% "
          "(%.0f-%.0f)  per thread %5.1f GB/s  load %s"
          % (t, copy, k, m["ceiling_gbps"], m["ceiling_strategy"], m["ceiling_strategy2"], m["gbps"],
             100 * m["fraction_of_ceiling"], 100 * m["fraction_min"], 100 * m["fraction_max"],
             m["gbps"] / t, os.environ["LOAD"]))
'
  done
done
