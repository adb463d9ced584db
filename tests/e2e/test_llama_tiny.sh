#!/bin/bash
# inputs/llama-tiny.yaml as shipped (300 steps on the built-in corpus, through the engine): it must
# finish, learn (val loss falls by more than half), and its checkpoint must export to a HF dir.
# Usage: test_llama_tiny.sh SUPEROFFLOAD SOURCE_DIR SCRATCH
set -euo pipefail
so=$1 src=$2 d=$3
rm -rf "$d" && mkdir -p "$d" && cd "$d"
source "$src/tests/e2e/launch.sh" # a cross build runs the program under its emulator
so=$(sof_launch_setup "$so" "$d")
out=$("$so" train "$src/inputs/llama-tiny.yaml" --set runtime.out_dir="$d/run" \
  --set train.checkpoint_dir="$d/ckpt" 2>&1)
line=$(printf '%s\n' "$out" | grep '^done: ' || true)
echo "$line"
[[ -n "$line" ]] || { printf '%s\n' "$out" | tail -20; echo "FAIL: no done line"; exit 1; }
read -r first last < <(printf '%s\n' "$line" | sed -E 's/.*val loss ([0-9.]+) -> ([0-9.]+).*/\1 \2/')
python3 -c "import sys; f, l = $first, $last; sys.exit(0 if l < 0.5 * f else 1)" ||
  { echo "FAIL: val loss $first -> $last did not halve"; exit 1; }
"$so" export --hf "$d/hf" "$d/ckpt" >/dev/null
[[ -f "$d/hf/config.json" && -f "$d/hf/model.safetensors" ]] || { echo "FAIL: no HF export"; exit 1; }
grep -q '"LlamaForCausalLM"' "$d/hf/config.json" || { echo "FAIL: config.json architecture"; exit 1; }
# bf16 with stochastic rounding: the same bytes on every export of a checkpoint, not nearest's
for k in 1 2; do "$so" export --hf "$d/hf_sr$k" "$d/ckpt" --rounding stochastic >/dev/null; done
cmp -s "$d/hf_sr1/model.safetensors" "$d/hf_sr2/model.safetensors" ||
  { echo "FAIL: two stochastic exports of one checkpoint differ"; exit 1; }
cmp -s "$d/hf/model.safetensors" "$d/hf_sr1/model.safetensors" &&
  { echo "FAIL: the stochastic export equals the nearest one"; exit 1; }
echo "ok: llama-tiny trained (val loss $first -> $last) and exported (nearest, stochastic)"
