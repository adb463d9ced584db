#!/usr/bin/env bash
# aarch64 (Grace) without an Arm machine: cross-builds the project (CUDA off) with Debian's
# g++-aarch64-linux-gnu against an arm64 Debian 12 root (make_root.sh) as sysroot
# (cmake/aarch64-linux-gnu.cmake), then runs tests under qemu-aarch64 (multi-rank ones with the
# host's Open MPI launching emulated ranks) and compares the main job's losses with the native
# x86-64 program's (test_cross_losses).
# Usage: scripts/arm64/cross_test.sh [--losses|--full]
#   default (CI): grace_adam and the tests of CI_TESTS below (no program: its cross build alone is
#                 ~9 min of CPU, which CI's time does not have)
#   --losses:     the program too, and the main job's first 4 steps against build/bin/superoffload
#                 (built by scripts/run_tests.sh): test_cross_losses
#   --full:       every target and every test that can run under qemu-user (see EXCLUDE), and the
#                 whole main job (300 steps, or SOF_CROSS_LOSS_STEPS); docs/running-on-clusters.md
#                 has its last result
# Env: SOF_ARM64_ROOT (default ~/.cache/superoffload/arm64-bookworm), SOF_ARM64_BUILD (build-arm64).
set -euo pipefail
cd "$(dirname "$0")/../.."
FULL=0
LOSSES=0
[ "${1:-}" = "--full" ] && FULL=1
[ "${1:-}" = "--losses" ] && LOSSES=1
ROOT=${SOF_ARM64_ROOT:-$HOME/.cache/superoffload/arm64-bookworm}
BUILD=${SOF_ARM64_BUILD:-build-arm64}
NATIVE=$(pwd)/build/bin/superoffload
t0=$(date +%s)
stamp() { echo "cross_test: $1 at $(( $(date +%s) - t0 )) s"; }

case "$(uname -m)" in
  x86_64) ;;
  *) echo "cross_test: this host is $(uname -m); on aarch64 run scripts/run_tests.sh natively"; exit 0 ;;
esac
scripts/apt_install.sh g++-aarch64-linux-gnu qemu-user debootstrap
scripts/arm64/make_root.sh "$ROOT"
stamp "arm64 root ready"

steps=4
[ "$FULL" = 1 ] && steps=${SOF_CROSS_LOSS_STEPS:-300}
native_arg=()
[ -x "$NATIVE" ] && native_arg=(-DSOF_NATIVE_SUPEROFFLOAD="$NATIVE")
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DSOF_ARM64_ROOT="$ROOT" \
  -DCMAKE_BUILD_TYPE=Release -DSOF_CUDA=OFF -DSOF_CROSS_LOSS_STEPS="$steps" "${native_arg[@]}" \
  >"$BUILD/sof-configure.log" 2>&1 || { tail -30 "$BUILD/sof-configure.log"; exit 1; }
grep -E "superoffload: MPI|grace_adam|cpu_adam" "$BUILD/sof-configure.log" || true

# Tests that cannot run under qemu-user here, and why:
# - style: check_format reads the sources, not the build: it ran natively already
# - slurm: slurmd starts the ranks itself (no emulator in between)
# - the Python references that start the program by its path (test_hf_transformers,
#   test_generate_reference, test_llama_reference, test_hf_train_reference): Python execs an
#   aarch64 file directly, which needs a binfmt_misc entry for aarch64; --full registers one
#   (qemu-aarch64, the root through QEMU_LD_PREFIX) where the kernel lets root mount binfmt_misc,
#   and runs them then
# - test_peak_rss*: peak RSS = the plan is a native check: under qemu-user the process is the
#   emulator, whose own memory grows as it translates code (measured 2026-11-29: 17.6-18.5 MiB
#   above the plan for plans of 167 to 304 MiB, the same offset whatever the model)
PY_REFS='test_hf_transformers|test_generate_reference|test_llama_reference|test_hf_train_reference'
EXCLUDE_BASE='check_format|test_kernels_structure|test_kernels_model_seam|slurm_.*|test_peak_rss.*'
EXCLUDE="^($EXCLUDE_BASE|$PY_REFS)\$"
. scripts/arm64/binfmt.sh
# CI: what proves the port in the time CI has (qemu-user emulates floating point in software: one
# step of the main job costs ~20 s of CPU under it, ~0.05 s natively): grace_adam loads, is scored
# and chosen, and steps bitwise as the reference (test_optim_loader, test_abi_c_grace_adam), ranks
# under the emulator (test_comm: 3 ranks, collectives and the MPI library's queries), decks
# (test_deck), the host build's floating-point flags (test_build_flags: no FMA contraction, which
# GCC does by default on aarch64). --losses adds the program and test_cross_losses.
CI_TESTS=(test_optim_loader test_abi_c_grace_adam test_comm test_deck test_build_flags)
CI_TARGETS=(sof_host_plugins test_optim_loader test_abi_c test_comm test_deck test_build_flags)
if [ "$LOSSES" = 1 ]; then
  CI_TESTS+=(test_cross_losses)
  CI_TARGETS+=(superoffload)
fi
if [ "$FULL" = 1 ]; then
  cmake --build "$BUILD" -j "$(nproc)"
else
  cmake --build "$BUILD" -j "$(nproc)" --target "${CI_TARGETS[@]}"
fi
stamp "built"
file "$BUILD/bin/test_deck" | grep -q "ARM aarch64" || { echo "cross_test: not an aarch64 program"; exit 1; }
[ -f "$BUILD/plugins/libgrace_adam.so" ] || { echo "cross_test: grace_adam was not built"; exit 1; }
[ ! -e "$BUILD/plugins/libcpu_adam.so" ] || { echo "cross_test: cpu_adam was built on aarch64"; exit 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$FULL" = 1 ]; then
  if sof_binfmt_aarch64; then
    export QEMU_LD_PREFIX="$ROOT"
    EXCLUDE="^($EXCLUDE_BASE)\$"
    echo "cross_test: binfmt_misc runs aarch64 files through qemu-aarch64: the Python references run too"
  else
    echo "cross_test: no binfmt_misc entry for aarch64 (needs root and a kernel that allows it): $PY_REFS not run"
  fi
  # every test's TIMEOUT is set for native speed; qemu-user emulates floating point in software
  # (~100x slower): scaled in the generated test files (the next configure writes them anew)
  SCALE=${SOF_CROSS_TIMEOUT_SCALE:-20} find "$BUILD" -name CTestTestfile.cmake -exec \
    perl -pi -e 's/TIMEOUT "(\d+)"/sprintf("TIMEOUT \"%d\"", $1 * $ENV{SCALE})/ge' {} +
  ctest --test-dir "$BUILD" --output-on-failure -j 2 -E "$EXCLUDE" --timeout 3000 "${@:2}"
else
  regex="^($(IFS='|'; echo "${CI_TESTS[*]}"))\$"
  ctest --test-dir "$BUILD" --output-on-failure -j 2 -R "$regex" --timeout 1500
fi
stamp "done"
