# Source THERE (the GPU machine): unpacks the .debs of scripts/gpu/fetch_debs.sh into a prefix
# (never into /) and exports what the build and the runs need to find them.
# Usage: source scripts/gpu/env.sh [DEBS_DIR] [PREFIX]   (defaults: .debs, /tmp/sofdeps)
# shellcheck shell=bash
SOF_DEBS=${1:-.debs}
SOF_PREFIX=${2:-/tmp/sofdeps}
if [ ! -f "$SOF_PREFIX/.unpacked" ]; then
  mkdir -p "$SOF_PREFIX"
  for f in "$SOF_DEBS"/*.deb; do dpkg -x "$f" "$SOF_PREFIX"; done
  touch "$SOF_PREFIX/.unpacked"
fi
_sof_lib=$SOF_PREFIX/usr/lib/x86_64-linux-gnu
# Open MPI finds its components, help files and wrapper data under OPAL_PREFIX
export OPAL_PREFIX=$SOF_PREFIX/usr
export PATH=$SOF_PREFIX/usr/bin:$PATH
export LD_LIBRARY_PATH=$_sof_lib:$_sof_lib/openblas-pthread:$_sof_lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=$SOF_PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the CMake hints that the prefix cannot give by itself (no pkg-config, no alternatives links)
SOF_CMAKE_HINTS=(
  -DMPI_CXX_COMPILER="$SOF_PREFIX/usr/bin/mpicxx.openmpi"
  -DMPI_C_COMPILER="$SOF_PREFIX/usr/bin/mpicc.openmpi"
  -DMPIEXEC_EXECUTABLE="$SOF_PREFIX/usr/bin/mpirun.openmpi"
  -DBLAS_LIBRARIES="$_sof_lib/openblas-pthread/libopenblas.so"
  -DCBLAS_INCLUDE_DIR="$SOF_PREFIX/usr/include/x86_64-linux-gnu/openblas-pthread"
  -DHWLOC_LIBRARY="$_sof_lib/libhwloc.so"
  -DHWLOC_INCLUDE_DIR="$SOF_PREFIX/usr/include"
  -DNUMA_LIBRARY="$_sof_lib/libnuma.so"
  -DNUMA_INCLUDE_DIR="$SOF_PREFIX/usr/include"
)
export SOF_PREFIX
unset _sof_lib
