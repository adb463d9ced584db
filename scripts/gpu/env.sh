# Source THERE (the GPU machine): unpacks the .debs of scripts/gpu/fetch_debs.sh into a prefix
# (never into /) and exports what the build and the runs need to find them.
# Usage: source scripts/gpu/env.sh [DEBS_DIR] [PREFIX]   (defaults: .debs, /tmp/sofdeps)
# DEBS_DIR/*.deb are unpacked into PREFIX and always used; DEBS_DIR/fallback/*.deb (gcc's OpenMP
# runtime, udev, zlib) into PREFIX/fallback, and only the sonames the machine lacks are put on the
# library path (PREFIX/fallback-lib), so the machine's own newer copies are never shadowed.
# shellcheck shell=bash
SOF_DEBS=${1:-.debs}
SOF_PREFIX=${2:-/tmp/sofdeps}
# unpack DEB DIR: dpkg -x, or (an image without dpkg) the deb's data archive through ar and tar
_sof_unpack() {
  if command -v dpkg >/dev/null; then dpkg -x "$1" "$2"; else
    local m; m=$(ar t "$1" | grep '^data\.tar')
    ar p "$1" "$m" | tar -x -C "$2" "$([[ $m == *.xz ]] && echo -J || ([[ $m == *.zst ]] && echo --zstd || echo -z))"
  fi
}
if [ ! -f "$SOF_PREFIX/.unpacked" ]; then
  mkdir -p "$SOF_PREFIX/fallback" "$SOF_PREFIX/fallback-lib"
  for f in "$SOF_DEBS"/*.deb; do _sof_unpack "$f" "$SOF_PREFIX"; done
  for f in "$SOF_DEBS"/fallback/*.deb; do [ -e "$f" ] && _sof_unpack "$f" "$SOF_PREFIX/fallback"; done
  for so in "$SOF_PREFIX"/fallback/usr/lib/x86_64-linux-gnu/*.so.* \
    "$SOF_PREFIX"/fallback/lib/x86_64-linux-gnu/*.so.*; do
    [ -e "$so" ] || continue
    name=$(basename "$so")
    # a soname (libz.so.1), not the versioned file it points to (libz.so.1.2.13)
    [[ $name =~ \.so\.[0-9]+$ ]] || continue
    ldconfig -p 2>/dev/null | grep -q " $name " || ln -sf "$so" "$SOF_PREFIX/fallback-lib/$name"
  done
  touch "$SOF_PREFIX/.unpacked"
fi
_sof_lib=$SOF_PREFIX/usr/lib/x86_64-linux-gnu
# Open MPI finds its components, help files and wrapper data under OPAL_PREFIX; PMIx (Debian's is
# installed under /usr/lib/x86_64-linux-gnu/pmix2) its help files under PMIX_DESTDIR and its
# plugins where the component path says (its pmix-mca-params.conf names the path in /)
export OPAL_PREFIX=$SOF_PREFIX/usr PMIX_DESTDIR=$SOF_PREFIX
export PMIX_MCA_mca_base_component_path=$SOF_PREFIX/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export PATH=$SOF_PREFIX/usr/bin:$PATH
_sof_ld=$_sof_lib:$_sof_lib/openblas-pthread:$_sof_lib/openmpi/lib:$SOF_PREFIX/fallback-lib
# CUDA's libraries (cudart, cuBLASLt) from the machine: the loader's cache, else the toolkit's
# folder, else the pip wheels of the machine's Python (nvidia-cublas, nvidia-cuda-runtime)
if ! ldconfig -p 2>/dev/null | grep -q "libcublasLt.so.13 "; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/libcublasLt.so.13" ] && { _sof_ld=$_sof_ld:$d; break; }
  done
  if ! [[ $_sof_ld == *cuda* ]] && command -v python3 >/dev/null; then
    _sof_py=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
    for d in "$_sof_py"/nvidia/cu13/lib "$_sof_py"/nvidia/cublas/lib "$_sof_py"/nvidia/cuda_runtime/lib; do
      [ -d "$d" ] && _sof_ld=$_sof_ld:$d
    done
  fi
fi
export LD_LIBRARY_PATH=$_sof_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=$SOF_PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI on one node of a machine without ssh/rsh, possibly under gVisor:
# - plm isolated launches the local ranks itself (plm rsh refuses to start without an ssh/rsh
#   agent, also for a singleton's orted: "plm_rsh_agent: ssh : rsh ... could not be found"; an
#   empty agent, the other cure, is set too in case isolated is not selected)
# - shared memory and self only (no network transports, whose components need libraries we do not
#   carry); no single-copy mechanism (CMA/process_vm_readv is refused under gVisor)
# - no error lines for the components that cannot load here (ucx, ofi, psm, openib)
# - the rest of Debian's /etc/openmpi/openmpi-mca-params.conf, which the prefix does not relocate
export OMPI_MCA_plm=isolated OMPI_MCA_plm_rsh_agent='' OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
export OMPI_MCA_mtl=^ofi
export OMPI_MCA_osc=^ucx,pt2pt OMPI_MCA_btl_base_warn_component_unused=0
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_MCA_rmaps_base_oversubscribe=1
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
unset _sof_lib _sof_ld _sof_py
unset -f _sof_unpack
