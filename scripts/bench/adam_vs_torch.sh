#!/usr/bin/env bash
# Runs `superoffload bench adam` and the PyTorch CPU AdamW baseline on this machine and prints
# both with the ratio. Usage: scripts/bench/adam_vs_torch.sh [PARAMS] [TORCH_PARAMS] [THREADS]
# (defaults 268435456, 16777216, 2). Needs build/bin/superoffload (or build/bin/adam_bench_driver).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
params="${1:-268435456}"
torch_params="${2:-16777216}"
threads="${3:-2}"
build="${SOF_BUILD_DIR:-$root/build}"
if [[ -x "$build/bin/superoffload" ]]; then
  bench=("$build/bin/superoffload" bench adam)
elif [[ -x "$build/bin/adam_bench_driver" ]]; then
  bench=("$build/bin/adam_bench_driver" adam)
else
  echo "adam_vs_torch.sh: build first (no $build/bin/superoffload or adam_bench_driver)" >&2
  exit 2
fi
ours="$("${bench[@]}" --params "$params" --threads "$threads" --json)"
theirs="$(/usr/bin/python3 "$root/scripts/bench/torch_adamw.py" --params "$torch_params" \
          --threads "$threads" --json)"
/usr/bin/python3 - "$ours" "$theirs" <<'PY'
import json, sys
o, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"superoffload {o['plugin']} ({o['variant']}), {o['params']} params, {o['threads']} threads, "
      f"bf16 copy {'on' if o['bf16_copy'] else 'off'}:")
for mode, m in o["modes"].items():
    print(f"  {mode:9s} {m['params_per_s'] / 1e9:7.3f} Gparam/s  {m['gbps']:6.1f} GB/s  "
          f"{100 * m['fraction_of_ceiling']:5.1f}% of ceiling ({m['ceiling_params_per_s'] / 1e9:.3f})  "
          f"{m['params_per_s'] / t['params_per_s']:6.1f}x torch")
print(f"torch.optim.AdamW {t['torch_version']} (foreach={t['foreach']}), {t['params']} params: "
      f"{t['params_per_s'] / 1e9:.4f} Gparam/s")
print(json.dumps({"superoffload": o, "torch": t,
                  "ratio_in_place": o["modes"]["in_place"]["params_per_s"] / t["params_per_s"],
                  "ratio_separate": o["modes"]["separate"]["params_per_s"] / t["params_per_s"]}))
PY
