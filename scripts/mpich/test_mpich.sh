#!/usr/bin/env bash
# The multi-rank tests (label mpi) against Debian's MPICH 4.0 instead of Open MPI: configure with
# -DMPI_CXX_COMPILER=mpicxx.mpich (the launcher follows: mpiexec.mpich), build what the label runs,
# run it, then a 2-rank tiny run under mpiexec.mpich whose losses must equal Open MPI's bitwise
# (build/, when it has the program). Run by .ci/run with the label minus its two long families
# (test_parallel_np*, test_longseq_*: minutes each); by hand the whole label:
# scripts/mpich/test_mpich.sh -L mpi. Open MPI stays the system default (Debian's alternatives
# rank it above MPICH).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${SOF_MPICH_BUILD:-build-mpich}
scripts/apt_install.sh mpich libmpich-dev
t0=$(date +%s)
mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSOF_CUDA=OFF -DMPI_CXX_COMPILER=mpicxx.mpich \
  >"$BUILD/sof-configure.log" 2>&1 || { tail -30 "$BUILD/sof-configure.log"; exit 1; }
grep "superoffload: MPI" "$BUILD/sof-configure.log"
grep -q "superoffload: MPI MPICH" "$BUILD/sof-configure.log" || { echo "test_mpich: not configured for MPICH"; exit 1; }
# what label mpi runs (ctest -N -L mpi lists it) and the program its scripts start
targets=(superoffload sof_host_plugins test_comm test_stop test_failure)
[ $# -gt 0 ] && targets+=(test_parallel test_longseq)
cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}"
echo "test_mpich: build $(( $(date +%s) - t0 )) s"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ $# -gt 0 ] || set -- -L mpi -E "^(test_parallel_np|test_longseq_)"
ctest --test-dir "$BUILD" --output-on-failure -j 2 "$@"

# the main job on 2 ranks under each library: the same losses, bitwise
tiny=(train inputs/tiny.yaml --set train.steps=20 --set train.batch_size=4 --set train.log_every=1
      --set runtime.threads=1)
mpiexec.mpich -n 2 "$BUILD/bin/superoffload" "${tiny[@]}" --set runtime.out_dir="$BUILD/tiny-mpich" \
  --set train.checkpoint_dir="$BUILD/tiny-mpich/ckpt" \
  >"$BUILD/tiny-mpich.log" 2>&1 || { tail -20 "$BUILD/tiny-mpich.log"; exit 1; }
grep -m1 "MPI: MPICH" "$BUILD/tiny-mpich.log" || { echo "test_mpich: the log names no MPICH"; exit 1; }
if [ -x build/bin/superoffload ]; then
  mpiexec.openmpi -n 2 --oversubscribe build/bin/superoffload "${tiny[@]}" \
    --set runtime.out_dir="$BUILD/tiny-openmpi" --set train.checkpoint_dir="$BUILD/tiny-openmpi/ckpt" \
    >"$BUILD/tiny-openmpi.log" 2>&1 ||
    { tail -20 "$BUILD/tiny-openmpi.log"; exit 1; }
  losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }
  if [ "$(losses "$BUILD/tiny-mpich")" != "$(losses "$BUILD/tiny-openmpi")" ]; then
    diff <(losses "$BUILD/tiny-mpich") <(losses "$BUILD/tiny-openmpi") | head
    echo "test_mpich: the 2-rank losses differ between MPICH and Open MPI"; exit 1
  fi
  echo "test_mpich: 2-rank tiny run: $(losses "$BUILD/tiny-mpich" | wc -l) losses equal (MPICH == Open MPI, bitwise)"
fi
echo "test_mpich: done in $(( $(date +%s) - t0 )) s"
