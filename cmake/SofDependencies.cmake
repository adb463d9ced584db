# Third-party dependencies (see docs/dependencies.md for why each one is here).
# Everything comes from Debian packages installed by scripts/setup.sh.
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(MPI REQUIRED COMPONENTS CXX)
include(SofMpi)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED) # checkpoint manifests (lib/ckpt/json.cpp)
find_package(CLI11 2.1 REQUIRED) # the program's command line (app/cli.cpp), header-only
# hwloc through pkg-config where there is one; else (a GPU machine with the Debian packages
# unpacked into a prefix, scripts/gpu/) by its library and header on CMAKE_PREFIX_PATH
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
endif()
add_library(sof_hwloc INTERFACE)
if(TARGET PkgConfig::HWLOC)
  target_link_libraries(sof_hwloc INTERFACE PkgConfig::HWLOC)
else()
  find_library(HWLOC_LIBRARY hwloc REQUIRED)
  find_path(HWLOC_INCLUDE_DIR hwloc.h REQUIRED)
  target_link_libraries(sof_hwloc INTERFACE ${HWLOC_LIBRARY})
  target_include_directories(sof_hwloc SYSTEM INTERFACE ${HWLOC_INCLUDE_DIR})
endif()

find_library(NUMA_LIBRARY numa REQUIRED)
find_path(NUMA_INCLUDE_DIR numa.h REQUIRED)
add_library(sof_numa INTERFACE)
target_link_libraries(sof_numa INTERFACE ${NUMA_LIBRARY})
target_include_directories(sof_numa SYSTEM INTERFACE ${NUMA_INCLUDE_DIR})

set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread REQUIRED)
add_library(sof_blas INTERFACE)
target_link_libraries(sof_blas INTERFACE ${BLAS_LIBRARIES})
target_include_directories(sof_blas SYSTEM INTERFACE ${CBLAS_INCLUDE_DIR})

if(SOF_BUILD_TESTS)
  find_package(doctest REQUIRED)
endif()

if(SOF_HAVE_CUDA)
  find_package(CUDAToolkit REQUIRED)
endif()
