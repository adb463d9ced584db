#!/usr/bin/env bash
# Install build dependencies from Debian packages (idempotent) and configure + build superoffload.
# Usage: scripts/setup.sh [--main] [BUILD_DIR] [extra cmake args...]   (default BUILD_DIR=build)
#   --main: only what the main job needs (scripts/run_tiny.sh): the build packages, then the program
#           and the host optimizer plugin; no test packages, no Python tools, no tests. A new build
#           directory on a machine without an NVIDIA GPU is configured without CUDA (the main job
#           runs on the host device); an existing one keeps its options.
#   default: everything the test suite needs (scripts/run_tests.sh, CI): all packages, the Python
#           tools' venv, tests and (where nvcc is found) CUDA, every target built.
# Works on x86-64 and aarch64 (arm64 Debian 12 / Ubuntu 24.04): the package names are the same;
# only x86-64 adds the aarch64 cross compiler (tests/grace cross-builds grace_adam, run under qemu).
set -euo pipefail
cd "$(dirname "$0")/.."
MAIN=0
if [ "${1:-}" = "--main" ]; then MAIN=1; shift; fi
BUILD_DIR=${1:-build}
shift || true

# the build (and the main job)
PKGS=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libhwloc-dev libnuma-dev
      libyaml-cpp-dev libopenblas-dev nlohmann-json3-dev libcli11-dev)
if [ "$MAIN" = 0 ]; then
  # the tests: doctest, clang-format (check_format), qemu (grace_adam at four SVE lengths),
  # matplotlib (plot scripts), a one-node Slurm (tests/slurm; PMIx for srun --mpi=pmix)
  PKGS+=(doctest-dev qemu-user clang-format python3-matplotlib python3-venv
         munge slurmctld slurmd slurm-client libpmix-dev)
  case "$(uname -m)" in
    x86_64) PKGS+=(g++-aarch64-linux-gnu) ;; # on aarch64 the native g++ builds tests/grace
  esac
fi
scripts/apt_install.sh "${PKGS[@]}"

ARGS=(-DCMAKE_BUILD_TYPE=Release)
TARGETS=()
if [ "$MAIN" = 1 ]; then
  TARGETS=(--target superoffload sof_host_plugins)
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    ARGS+=(-DSOF_BUILD_TESTS=OFF)
    # the main job trains on the host device: CUDA only where a GPU could use it
    if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
      ARGS+=(-DSOF_CUDA=OFF)
    fi
  fi
else
  ARGS+=(-DSOF_BUILD_TESTS=ON -DSOF_CUDA=AUTO) # a build dir first made by --main gets them back
  # Python tools (scripts/prepare_data.py: tokenizers, transformers) in the project's venv, pinned
  # versions (scripts/requirements-tools.txt), installed once per machine; without the package
  # index the build still goes on (scripts/run_tests.sh installs them strictly)
  scripts/python_env.sh tools >/dev/null ||
    echo "setup: warning: could not install the Python tools (scripts/python_env.sh tools);" \
         "scripts/prepare_data.py needs them" >&2
fi

cmake -S . -B "$BUILD_DIR" "${ARGS[@]}" "$@"
cmake --build "$BUILD_DIR" -j "$(nproc)" "${TARGETS[@]}"
