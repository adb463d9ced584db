#!/usr/bin/env bash
# The project's Python venvs with pinned packages (idempotent: installs only when the requirement
# file changed), outside the work tree so CI clones and worktrees share them. Prints its python.
# Usage: scripts/python_env.sh [tools|test]   (tools: scripts/prepare_data.py; test: + torch)
# Two venvs, ~/.cache/superoffload/pyenv-tools and pyenv-test: transformers imports torch when it
# is installed (seconds per process), so the tools' venv has none. SOF_PYENV overrides the path.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHAT=${1:-tools}
case "$WHAT" in tools|test) ;; *) echo "usage: $0 [tools|test]" >&2; exit 2;; esac
VENV=${SOF_PYENV:-$HOME/.cache/superoffload/pyenv-$WHAT}
REQ="$ROOT/scripts/requirements-$WHAT.txt"
if [ ! -x "$VENV/bin/python" ]; then
  if ! /usr/bin/python3 -c "import ensurepip" 2>/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    echo "python_env: installing python3-venv" >&2
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >&2
  fi
  mkdir -p "$(dirname "$VENV")"
  /usr/bin/python3 -m venv "$VENV" >&2
fi
# the stamp names the requirement files' contents: a changed pin reinstalls
SUM=$(cat "$ROOT/scripts/requirements-tools.txt" "$REQ" | sha256sum | cut -c1-16)
STAMP="$VENV/.installed-$WHAT-$SUM"
if [ ! -f "$STAMP" ]; then
  echo "python_env: installing $(basename "$REQ") into $VENV (once per machine)" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ" >&2
  touch "$STAMP"
fi
echo "$VENV/bin/python"
