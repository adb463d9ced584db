# Which MPI library the build uses (Open MPI, MPICH and its derivatives such as Cray MPICH), and how
# tests start ranks with it: SOF_MPI_VENDOR, SOF_MPIEXEC_FLAGS, SOF_TEST_EMULATOR, sof_mpi_launch().
include(CheckCXXSymbolExists)

# Recheck when the MPI changes in an existing build directory (-DMPI_CXX_COMPILER=mpicxx.mpich).
set(_sof_mpi_key "${MPI_CXX_COMPILER}|${MPI_CXX_INCLUDE_DIRS}|${MPI_CXX_LIBRARIES}")
if(NOT "${_sof_mpi_key}" STREQUAL "${SOF_MPI_KEY}")
  unset(SOF_MPI_IS_OPENMPI CACHE)
  unset(SOF_MPI_IS_MPICH CACHE)
  unset(SOF_MPIEXEC_FLAGS CACHE)
  set(SOF_MPI_KEY "${_sof_mpi_key}" CACHE INTERNAL "")
endif()
set(CMAKE_REQUIRED_LIBRARIES MPI::MPI_CXX)
set(CMAKE_REQUIRED_QUIET ON)
check_cxx_symbol_exists(OPEN_MPI mpi.h SOF_MPI_IS_OPENMPI)
check_cxx_symbol_exists(MPICH_VERSION mpi.h SOF_MPI_IS_MPICH)
unset(CMAKE_REQUIRED_LIBRARIES)
unset(CMAKE_REQUIRED_QUIET)
if(SOF_MPI_IS_OPENMPI)
  set(SOF_MPI_VENDOR "Open MPI")
elseif(SOF_MPI_IS_MPICH)
  set(SOF_MPI_VENDOR "MPICH")
else()
  set(SOF_MPI_VENDOR "unknown")
endif()

# The launcher must belong to the same library: FindMPI takes the first mpiexec on PATH, which on
# Debian is Open MPI's even when MPI_CXX_COMPILER=mpicxx.mpich. Ask it, and take the library's own
# (mpiexec.mpich / mpiexec.hydra, mpiexec.openmpi) when it is another one's. Not in a cross build:
# there the host's launcher starts emulated ranks of the same Open MPI version.
if(NOT CMAKE_CROSSCOMPILING AND MPIEXEC_EXECUTABLE AND (SOF_MPI_IS_OPENMPI OR SOF_MPI_IS_MPICH))
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _out ERROR_VARIABLE _out
                  RESULT_VARIABLE _rc TIMEOUT 20)
  set(_launcher other)
  if(_out MATCHES "Open MPI|OpenRTE")
    set(_launcher openmpi)
  elseif(_out MATCHES "HYDRA")
    set(_launcher mpich)
  endif()
  set(_names "")
  if(SOF_MPI_IS_OPENMPI AND NOT _launcher STREQUAL "openmpi")
    set(_names mpiexec.openmpi mpirun.openmpi)
  elseif(SOF_MPI_IS_MPICH AND NOT _launcher STREQUAL "mpich")
    set(_names mpiexec.mpich mpiexec.hydra)
  endif()
  if(_names)
    get_filename_component(_hint "${MPI_CXX_COMPILER}" DIRECTORY)
    unset(_sof_mpiexec CACHE)
    find_program(_sof_mpiexec NAMES ${_names} HINTS ${_hint} NO_CACHE)
    if(_sof_mpiexec)
      message(STATUS "superoffload: ${MPIEXEC_EXECUTABLE} belongs to another MPI than "
                     "${SOF_MPI_VENDOR}'s mpi.h; using ${_sof_mpiexec}")
      set(MPIEXEC_EXECUTABLE "${_sof_mpiexec}" CACHE FILEPATH "Executable for running MPI programs." FORCE)
    else()
      message(WARNING "${MPIEXEC_EXECUTABLE} is not ${SOF_MPI_VENDOR}'s launcher and none of "
                      "${_names} was found: multi-rank tests will fail; set -DMPIEXEC_EXECUTABLE=...")
    endif()
  endif()
endif()

# Open MPI's mpiexec refuses more ranks than cores without --oversubscribe (tests start up to 4 on
# 2 cores); MPICH's Hydra oversubscribes by default and does not know the flag.
set(_flags "")
if(SOF_MPI_IS_OPENMPI)
  set(_flags --oversubscribe)
endif()
set(SOF_MPIEXEC_FLAGS "${_flags}" CACHE STRING "Flags the tests pass to MPIEXEC_EXECUTABLE")

# A cross build (cmake/aarch64-linux-gnu.cmake) runs test programs under its emulator; the ranks of
# a multi-rank test are started by the host's launcher, each inside the emulator.
set(SOF_TEST_EMULATOR "")
if(CMAKE_CROSSCOMPILING AND CMAKE_CROSSCOMPILING_EMULATOR)
  set(SOF_TEST_EMULATOR ${CMAKE_CROSSCOMPILING_EMULATOR})
endif()
message(STATUS "superoffload: MPI ${SOF_MPI_VENDOR} (${MPI_CXX_VERSION}), tests launch ranks "
               "with ${MPIEXEC_EXECUTABLE} ${SOF_MPIEXEC_FLAGS}")

# sof_mpi_launch(OUT N): the command line, as a list, that starts N ranks of the program that is
# appended to it: ${OUT} $<TARGET_FILE:t> args...
function(sof_mpi_launch out n)
  set(${out} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${SOF_MPIEXEC_FLAGS}
      ${MPIEXEC_PREFLAGS} ${SOF_TEST_EMULATOR} PARENT_SCOPE)
endfunction()

# The same as shell words, for tests that build command lines (tests/launch.h): the launcher with
# its flags, and the prefix that runs a program of this build (the emulator, or nothing).
set(_q "")
foreach(_w ${MPIEXEC_EXECUTABLE} ${SOF_MPIEXEC_FLAGS} ${MPIEXEC_PREFLAGS})
  string(APPEND _q "'${_w}' ")
endforeach()
string(STRIP "${_q}" SOF_MPIEXEC_SHELL)
set(SOF_EXEC_PREFIX_SHELL "")
foreach(_w ${SOF_TEST_EMULATOR})
  string(APPEND SOF_EXEC_PREFIX_SHELL "'${_w}' ")
endforeach()
