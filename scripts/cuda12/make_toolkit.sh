#!/usr/bin/env bash
# A compile-only CUDA 12.4 toolkit in a folder, from packages (no NVIDIA installer): the compiler
# driver and its programs (nvcc, cicc, cudafe++, ptxas, fatbinary, nvlink) from Debian 13's
# nvidia-cuda-toolkit 12.4.131 (PyPI's nvidia-cuda-nvcc-cu12 wheels hold only ptxas and libnvvm), and
# the headers from the CUDA 12.4 wheels on PyPI: nvidia-cuda-nvcc-cu12 (crt/), -cuda-runtime-cu12,
# -cublas-cu12 (cublasLt.h), -cuda-cccl-cu12. Libraries are the runtime wheel's libcudart.so and
# empty link stubs: this toolkit compiles; nothing it links is meant to run.
# Usage: scripts/cuda12/make_toolkit.sh DIR   (idempotent; ~480 MB downloaded once, DIR ~60 MB)
set -euo pipefail
DIR=${1:?usage: make_toolkit.sh DIR}
DEB_VERSION=12.4.131~12.4.1-2   # Debian 13 (trixie) non-free: nvidia-cuda-toolkit
WHEELS=(nvidia-cuda-nvcc-cu12==12.4.131 nvidia-cuda-runtime-cu12==12.4.127
        nvidia-cublas-cu12==12.4.5.8 nvidia-cuda-cccl-cu12==12.4.127.post1)
MIRROR=${SOF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
want="$DEB_VERSION ${WHEELS[*]}"
if [ -f "$DIR/.sof-toolkit-ok" ] && [ "$(cat "$DIR/.sof-toolkit-ok")" = "$want" ]; then
  echo "make_toolkit: $DIR is ready ($("$DIR/bin/nvcc" --version | tail -2 | head -1))"
  exit 0
fi
rm -rf "$DIR" && mkdir -p "$DIR"
work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT

# 1. the compiler: apt-get with a private state (trixie's lists only here; the system's apt untouched)
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/deb"
echo "deb $MIRROR trixie non-free" >"$work/apt/sources.list"
A=(-o Dir::Etc::SourceList="$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
   -o Dir::State::Lists="$work/apt/lists" -o Dir::Cache="$work/apt/cache"
   -o APT::Architecture=amd64 -o Acquire::Languages=none -o APT::Sandbox::User=root)
apt-get "${A[@]}" update -qq
(cd "$work/deb" && apt-get "${A[@]}" download -qq "nvidia-cuda-toolkit=$DEB_VERSION")
dpkg-deb -x "$work"/deb/nvidia-cuda-toolkit_*.deb "$work/x"
tk="$work/x/usr/lib/nvidia-cuda-toolkit"
mkdir -p "$DIR/bin/crt" "$DIR/nvvm/libdevice" "$DIR/nvvm/lib64" "$DIR/include" "$DIR/lib64"
cp "$tk/bin/nvcc" "$tk/bin/cicc" "$DIR/bin/"
cp "$tk/bin/crt/"*.stub "$DIR/bin/crt/"
for p in cudafe++ ptxas fatbinary nvlink bin2c nvprune cuobjdump; do cp "$work/x/usr/bin/$p" "$DIR/bin/"; done
cp "$tk/libdevice/libdevice.10.bc" "$DIR/nvvm/libdevice/"
# the profile of NVIDIA's own layout: everything relative to bin/
cat >"$DIR/bin/nvcc.profile" <<'PROFILE'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
PROFILE
# nvcc runs cicc from nvvm/bin in NVIDIA's layout
mkdir -p "$DIR/nvvm/bin" && mv "$DIR/bin/cicc" "$DIR/nvvm/bin/"

# 2. the headers (and libcudart) from PyPI's CUDA 12.4 wheels
PY=$("$(dirname "$0")/../python_env.sh" tools) # the project's venv: a pip that works as root
"$PY" -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
  --python-version 3.11 -d "$work/whl" "${WHEELS[@]}"
for w in "$work"/whl/*.whl; do
  "$PY" - "$w" "$work/w" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
# headers and the runtime library only (the cublas wheel's 700 MB of libraries stay packed)
z.extractall(sys.argv[2], [n for n in z.namelist()
                           if "/include/" in n or n.endswith("libcudart.so.12") or "/nvvm/" in n])
PY
done
for d in cuda_nvcc cuda_runtime cublas cuda_cccl; do
  cp -r "$work/w/nvidia/$d/include/." "$DIR/include/"
done
rm -f "$DIR/include/__init__.py"
cp "$work/w/nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so" "$DIR/nvvm/lib64/"
cp "$work/w/nvidia/cuda_runtime/lib/libcudart.so.12" "$DIR/lib64/"
ln -sf libcudart.so.12 "$DIR/lib64/libcudart.so"
# nvcc links executables with -lcudart_static: a linker script that names the runtime wheel's shared
# libcudart instead (CMake's compiler check links one); empty stubs for the libraries CMake's
# FindCUDAToolkit looks for (nothing built here links them)
echo 'INPUT(-lcudart)' >"$DIR/lib64/libcudart_static.a"
ar rc "$DIR/lib64/libcudadevrt.a"
for l in cublas cublasLt; do gcc -shared -o "$DIR/lib64/lib$l.so" -x c /dev/null; done
echo "$want" >"$DIR/.sof-toolkit-ok"
echo "make_toolkit: $DIR is ready ($("$DIR/bin/nvcc" --version | tail -2 | head -1))"
