#!/usr/bin/env python3
# A GGUF file of a Llama-family model -> a Hugging Face directory (fp32 safetensors, config,
# tokenizer) for `model.init_from`: transformers dequantizes it (finetune_smollm2_prepare.sh).
"""Usage: gguf_to_hf.py GGUF_DIR GGUF_FILE OUT_DIR [TEXT_FILE]

Needs torch and transformers (the test venv, scripts/python_env.sh test) and the packages gguf and
accelerate on PYTHONPATH (transformers' GGUF loader). transformers will not save a model loaded
from GGUF (it stays marked as quantized), so the dequantized weights are copied into a plain model
built from the same config. TEXT_FILE: print the model's loss on its first 256 tokens (a sanity
check of the conversion: a wrong tensor layout gives a loss near ln(vocab) ~ 10.8, not ~3-5).
"""
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    src, gguf_file, out = sys.argv[1:4]
    tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf_file)
    quant = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf_file, dtype=torch.float32)
    cfg = quant.config
    del cfg.quantization_config
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.load_state_dict(quant.state_dict(), strict=True)
    model.eval()
    if len(sys.argv) == 5:
        with open(sys.argv[4]) as f:
            ids = tok(f.read()[:8000], return_tensors="pt").input_ids[:, :256]
        with torch.no_grad():
            print(f"gguf_to_hf.py: loss on the first {ids.shape[1]} tokens of {sys.argv[4]}: "
                  f"{float(model(ids, labels=ids).loss):.4f}")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    print(f"gguf_to_hf.py: wrote {out} ({sum(p.numel() for p in model.parameters())} params)")


if __name__ == "__main__":
    main()
