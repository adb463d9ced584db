#!/usr/bin/env bash
# CPU attention forward + backward (issue 18's target): the tiled op and the T x T baseline
# (`superoffload bench attention`) and PyTorch's scaled_dot_product_attention, same shape, same
# threads. Usage: scripts/bench/attention.sh [SEQ] [THREADS] (defaults 4096, 2; C=256, 4 heads).
# TORCH_PYTHON: a python with torch >= 2.0 (SDPA). Debian's python3-torch 1.13 has none; one way:
#   python3 -m venv ~/venv-sdpa && ~/venv-sdpa/bin/pip install torch==2.5.1
#   TORCH_PYTHON=~/venv-sdpa/bin/python scripts/bench/attention.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
seq="${1:-4096}"
threads="${2:-2}"
build="${SOF_BUILD_DIR:-$root/build}"
py="${TORCH_PYTHON:-python3}"
export OMP_NUM_THREADS="$threads"
"$build/bin/superoffload" bench attention --seq "$seq" --threads "$threads"
if "$py" -c 'import torch.nn.functional as F; F.scaled_dot_product_attention' 2>/dev/null; then
  "$py" "$root/scripts/bench/attention_torch.py" --seq "$seq" --threads "$threads"
else
  echo "  torch SDPA: skipped ($py has no torch >= 2.0; set TORCH_PYTHON, see the header)"
fi
