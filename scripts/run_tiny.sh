#!/usr/bin/env bash
# The main job: install the build deps, build the program and its host optimizer plugin (nothing
# else: scripts/setup.sh --main), and train the tiny GPT-2 on the built-in dataset (README.md says
# what was measured, on a fresh machine and with the build done).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --main build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build/bin/superoffload train inputs/tiny.yaml "$@"
