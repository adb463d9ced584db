# Toolchain file: cross-build for aarch64 Linux (Grace) with Debian's g++-aarch64-linux-gnu against
# an arm64 Debian root used as sysroot (scripts/arm64/make_root.sh); executables run under qemu.
#
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DSOF_ARM64_ROOT=$HOME/.cache/superoffload/arm64-bookworm -DSOF_CUDA=OFF
#
# The root must hold the arm64 -dev packages of the dependencies (libopenmpi-dev, libhwloc-dev,
# libnuma-dev, libyaml-cpp-dev, libopenblas-dev, doctest-dev, nlohmann-json3-dev, libcli11-dev) and
# the links their postinst scripts would make (make_root.sh does both). ctest runs every test
# executable through CMAKE_CROSSCOMPILING_EMULATOR (qemu-aarch64 -L ROOT); tests that start ranks
# use the host's mpiexec, which launches the emulated ranks (SOF_MPIEXEC_EMULATOR, tests/README).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

# The root comes from -DSOF_ARM64_ROOT or the environment; try_compile projects re-read this file
# and see only the environment, hence the ENV round trip.
if(SOF_ARM64_ROOT)
  set(ENV{SOF_ARM64_ROOT} "${SOF_ARM64_ROOT}")
else()
  set(SOF_ARM64_ROOT "$ENV{SOF_ARM64_ROOT}")
endif()
if(NOT SOF_ARM64_ROOT OR NOT EXISTS "${SOF_ARM64_ROOT}/usr/include/aarch64-linux-gnu")
  message(FATAL_ERROR "aarch64 toolchain: SOF_ARM64_ROOT='${SOF_ARM64_ROOT}' is not an arm64 root "
                      "with -dev packages; make one with scripts/arm64/make_root.sh DIR and pass "
                      "-DSOF_ARM64_ROOT=DIR")
endif()

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_SYSROOT "${SOF_ARM64_ROOT}")
set(CMAKE_FIND_ROOT_PATH "${SOF_ARM64_ROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER) # programs (qemu, mpiexec, python) are the host's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# pkg-config (hwloc) reads the root's .pc files and prefixes their paths with the root
set(ENV{PKG_CONFIG_DIR} "")
set(ENV{PKG_CONFIG_LIBDIR}
    "${SOF_ARM64_ROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${SOF_ARM64_ROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${SOF_ARM64_ROOT}")

# MPI: the root's Open MPI, given directly (its mpicxx wrapper is an arm64 program that cannot
# be interrogated here). C bindings only, as the program uses.
set(_ompi "${SOF_ARM64_ROOT}/usr/lib/aarch64-linux-gnu/openmpi")
set(MPI_CXX_SKIP_MPICXX ON CACHE BOOL "")
set(MPI_CXX_INCLUDE_PATH "${_ompi}/include" CACHE STRING "")
set(MPI_CXX_LIB_NAMES mpi CACHE STRING "")
set(MPI_mpi_LIBRARY "${_ompi}/lib/libmpi.so" CACHE FILEPATH "")
# ranks are started by the host's Open MPI (same version as the root's), each under qemu
find_program(MPIEXEC_EXECUTABLE NAMES mpiexec.openmpi mpirun.openmpi mpiexec)

find_program(SOF_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${SOF_QEMU_AARCH64};-L;${SOF_ARM64_ROOT}")
