#!/usr/bin/env bash
# shellcheck disable=SC2016 # the stub and the probe expand in the child shells
# sof_cray_mpich_env (scripts/slurm/job_lib.sh) against three linkings of an executable, with `ldd`
# replaced by a stub: Cray MPICH with its GPU transport layer (switch on, a user's value kept),
# Cray MPICH without it (switch off: on would abort MPI_Init), another MPI (left alone).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# stub ldd: prints the libraries named in $FAKE_LIBS
mkdir -p "$work/bin"
printf '#!/bin/sh\nfor l in $FAKE_LIBS; do echo "\t$l => /opt/$l (0x0)"; done\n' >"$work/bin/ldd"
chmod +x "$work/bin/ldd"

# runs sof_cray_mpich_env in a fresh shell; prints "<MPICH_GPU_SUPPORT_ENABLED>|<thread safety>"
probe() {
  env -u MPICH_GPU_SUPPORT_ENABLED -u MPICH_MAX_THREAD_SAFETY PATH="$work/bin:$PATH" \
    FAKE_LIBS="$1" ${2:+MPICH_GPU_SUPPORT_ENABLED=$2} bash -c \
    'source "$0/scripts/slurm/job_lib.sh"; sof_cray_mpich_env /bin/true >/dev/null
     echo "${MPICH_GPU_SUPPORT_ENABLED-unset}|${MPICH_MAX_THREAD_SAFETY-unset}"' "$root"
}

got=$(probe "libmpi_gnu_123.so.12 libmpi_gtl_cuda.so.0 libcudart.so.12")
[ "$got" = "1|multiple" ] || fail "Cray MPICH with GTL: got $got, want 1|multiple"
got=$(probe "libmpi_gnu_123.so.12 libmpi_gtl_cuda.so.0" 0)
[ "$got" = "0|multiple" ] || fail "a user's 0 with GTL linked: got $got, want 0|multiple"
got=$(probe "libmpi_cray.so.12 libcudart.so.12" 1)
[ "$got" = "0|multiple" ] || fail "Cray MPICH without GTL: got $got, want 0|multiple (1 aborts)"
got=$(probe "libmpi.so.40 libopen-pal.so.40")
[ "$got" = "unset|multiple" ] || fail "Open MPI: got $got, want unset|multiple"
echo "PASS"
