#!/usr/bin/env python3
# Text <-> token ids with a Hugging Face model directory's tokenizer (tokenizer.json,
# tokenizer_config.json with its chat template), for `superoffload generate`; runs in the
# project's tools venv (scripts/python_env.sh tools) like scripts/prepare_data.py.
#
#   hf_tokenize.py encode --tokenizer DIR (--text TEXT | --chat FILE)
#       prints {"ids": [...], "stop": [...]}: the prompt's ids (as AutoTokenizer(text).input_ids,
#       or apply_chat_template(messages, add_generation_prompt=True, tokenize=True) for a chat
#       file: a JSON list of {"role", "content"} messages, or {"messages": [...]}), and the ids
#       that end a reply (the tokenizer's EOS and generation_config.json's eos_token_id)
#   hf_tokenize.py decode --tokenizer DIR --ids 1,2,3 [--keep-special]
#       prints the text of the ids (special tokens skipped unless --keep-special)
import argparse
import json
import os
import sys


def _reexec_in_venv():
    """tokenizers/transformers live in the project's venv (scripts/python_env.sh tools)."""
    venv = os.environ.get("SOF_PYENV", os.path.expanduser("~/.cache/superoffload/pyenv-tools"))
    py = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) != os.path.realpath(venv) and os.path.exists(py):
        os.execv(py, [py] + sys.argv)
    sys.exit("hf_tokenize.py: transformers is not installed; run scripts/python_env.sh tools "
             "(scripts/setup.sh does) and try again")


# transformers' import-time notices ("[transformers] PyTorch was not found. Models won't be
# available...": the tools venv has no torch on purpose) are not for the user of `generate`, who
# must see only superoffload's output; its errors still show (TRANSFORMERS_VERBOSITY=info or
# warning in the environment brings the notices back)
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
try:
    import transformers
except ImportError:
    _reexec_in_venv()


def fail(msg):
    sys.stderr.write(f"hf_tokenize.py: {msg}\n")
    sys.exit(2)


def load(path):
    if not os.path.isfile(os.path.join(path, "tokenizer.json")) and \
            not os.path.isfile(os.path.join(path, "tokenizer_config.json")):
        fail(f"{path} has no tokenizer.json / tokenizer_config.json (give the model's Hugging "
             "Face directory as --tokenizer)")
    return transformers.AutoTokenizer.from_pretrained(path)


def stop_ids(tok, path):
    ids = [] if tok.eos_token_id is None else [int(tok.eos_token_id)]
    gc = os.path.join(path, "generation_config.json")
    if os.path.isfile(gc):
        with open(gc) as f:
            e = json.load(f).get("eos_token_id")
        for i in (e if isinstance(e, list) else [e]):
            if isinstance(i, int) and i not in ids:
                ids.append(i)
    return ids


def read_chat(path):
    try:
        with open(path, encoding="utf-8") as f:
            msgs = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not a JSON file of chat messages: {e}")
    if isinstance(msgs, dict):
        msgs = msgs.get("messages")
    if not isinstance(msgs, list) or not msgs or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and
            isinstance(m.get("content"), str) for m in msgs):
        fail(f"{path}: expected a list of {{\"role\": ..., \"content\": ...}} messages "
             "(or {\"messages\": [...]})")
    return msgs


def main():
    ap = argparse.ArgumentParser(description="text <-> ids with a Hugging Face tokenizer")
    ap.add_argument("mode", choices=["encode", "decode"])
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--text")
    ap.add_argument("--chat")
    ap.add_argument("--ids", default="")
    ap.add_argument("--keep-special", action="store_true")
    a = ap.parse_args()
    tok = load(a.tokenizer)
    if a.mode == "encode":
        if (a.text is None) == (a.chat is None):
            fail("encode needs exactly one of --text and --chat")
        if a.chat is not None:
            if not tok.chat_template:
                fail(f"{a.tokenizer}: the tokenizer has no chat template (tokenizer_config.json "
                     "chat_template); give the prompt as text instead")
            ids = tok.apply_chat_template(read_chat(a.chat), add_generation_prompt=True,
                                          tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
        else:
            ids = tok(a.text).input_ids
        json.dump({"ids": [int(i) for i in ids], "stop": stop_ids(tok, a.tokenizer)}, sys.stdout)
    else:
        ids = [int(x) for x in a.ids.split(",") if x]
        sys.stdout.write(tok.decode(ids, skip_special_tokens=not a.keep_special))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
