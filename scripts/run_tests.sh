#!/usr/bin/env bash
# Install deps, build everything, and run the whole test suite with ctest (what CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir build --output-on-failure -j 2 "$@"
