#!/usr/bin/env bash
# Install build dependencies from Debian packages (idempotent) and configure + build superoffload.
# Usage: scripts/setup.sh [BUILD_DIR] [extra cmake args...]   (default BUILD_DIR=build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
shift || true

PKGS=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libhwloc-dev libnuma-dev
      libyaml-cpp-dev doctest-dev libopenblas-dev g++-aarch64-linux-gnu qemu-user
      clang-format nlohmann-json3-dev libcli11-dev python3-matplotlib python3-venv)
missing=()
# tests/slurm: a one-node Slurm on localhost (scripts/slurm/local_cluster.sh); PMIx for srun --mpi=pmix
PKGS+=(munge slurmctld slurmd slurm-client libpmix-dev)
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

# Python tools (scripts/prepare_data.py: tokenizers, transformers) in the project's venv, pinned
# versions (scripts/requirements-tools.txt), installed once per machine; without the package index
# the build still goes on (scripts/run_tests.sh installs them strictly)
scripts/python_env.sh tools >/dev/null ||
  echo "setup: warning: could not install the Python tools (scripts/python_env.sh tools);" \
       "scripts/prepare_data.py needs them" >&2

JOBS=$(nproc)
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$BUILD_DIR" -j "$JOBS"
