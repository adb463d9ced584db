#!/usr/bin/env bash
# The main job: install deps, build, and train the tiny GPT-2 on the built-in dataset (< 3 min, 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build/bin/superoffload train inputs/tiny.yaml "$@"
