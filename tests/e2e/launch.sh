# Sourced by the e2e scripts after they set their scratch dir: sof_launch_setup BIN DIR prints the
# program to run (BIN, or in a cross build a wrapper in DIR that runs BIN under the emulator), and
# mpi N ... starts N ranks with the configured MPI's launcher (SOF_MPIEXEC, SOF_EXEC_PREFIX: shell
# words from cmake/SofMpi.cmake via the tests' ENVIRONMENT; Open MPI's defaults by hand).
eval "sof_launch=(${SOF_MPIEXEC:-mpirun --oversubscribe})"
sof_launch_setup() {
  if [ -z "${SOF_EXEC_PREFIX:-}" ]; then echo "$1"; return; fi
  printf '#!/bin/sh\nexec %s %q "$@"\n' "$SOF_EXEC_PREFIX" "$1" >"$2/superoffload-emulated"
  chmod +x "$2/superoffload-emulated"
  echo "$2/superoffload-emulated"
}
mpi() { local n=$1; shift; "${sof_launch[@]}" -n "$n" "$@"; }
