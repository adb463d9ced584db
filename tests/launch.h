// How tests start the program and its ranks as shell command lines: the configured MPI's launcher
// (Open MPI or MPICH, cmake/SofMpi.cmake) and, in a cross build, the emulator before the program.
#pragma once

#include <string>

#ifndef SOF_MPIEXEC // set by sof_test / sof_test_launch_defs (cmake/SofHelpers.cmake)
#error "tests/launch.h needs SOF_MPIEXEC and SOF_EXEC_PREFIX (sof_test_launch_defs)"
#endif

namespace sof::test {

// "'mpiexec' '--oversubscribe' -n N " (Open MPI) or "'mpiexec.mpich' -n N " (MPICH): N ranks of
// the program that follows.
inline std::string mpiexec(int ranks) {
    return std::string(SOF_MPIEXEC) + " -n " + std::to_string(ranks) + " ";
}

// The launcher alone, for MPMD lines ("... -n 1 prog : -n 1 prog").
inline std::string mpiexec_bare() {
    return std::string(SOF_MPIEXEC) + " ";
}

// "'<build>/bin/superoffload'", behind the emulator in a cross build ("'qemu-aarch64' '-L' ...").
inline std::string program() {
    return std::string(SOF_EXEC_PREFIX) + "'" SOF_BINARY_DIR "/bin/superoffload'";
}

// True in a cross build whose programs run under an emulator.
inline bool emulated() {
    return std::string(SOF_EXEC_PREFIX).size() > 0;
}

} // namespace sof::test
