// fatal_all / fatal_one, after LAMMPS's Error::all and Error::one.
// The only place in the program that ends the process on an error.
#include "fatal.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace sof::app {

std::string printable(const std::string& msg) {
    std::string out;
    out.reserve(msg.size());
    const size_t n = msg.size();
    for (size_t i = 0; i < n;) {
        const unsigned char u = static_cast<unsigned char>(msg[i]);
        // length of a well-formed UTF-8 sequence starting here (0: not one)
        size_t len = u < 0x80           ? 1
                     : (u >> 5) == 0x6  ? 2
                     : (u >> 4) == 0xe  ? 3
                     : (u >> 3) == 0x1e ? 4
                                        : 0;
        for (size_t k = 1; k < len; k++)
            if (i + k >= n || (static_cast<unsigned char>(msg[i + k]) & 0xc0) != 0x80) len = 0;
        const bool c0 = len == 1 && ((u < 0x20 && u != '\n' && u != '\t') || u == 0x7f);
        const bool c1 = len == 2 && u == 0xc2 && static_cast<unsigned char>(msg[i + 1]) < 0xa0;
        if (len == 0 || c0 || c1) { // a control byte, C1 control, or a byte that is not UTF-8
            out += core::strfmt("\\x%02x", u);
            i++;
            continue;
        }
        out.append(msg, i, len);
        i += len;
    }
    return out;
}

int exit_code_for(core::ErrorKind kind) {
    switch (kind) {
    case core::ErrorKind::Usage:
    case core::ErrorKind::Config:
        return 2;
    case core::ErrorKind::Io:
        return 3;
    case core::ErrorKind::Format:
        return 4;
    case core::ErrorKind::Runtime:
        return 1;
    case core::ErrorKind::Internal:
        return 70;
    }
    return 1;
}

void fatal_all(int rank, core::ErrorKind kind, const std::string& msg) {
    if (rank == 0) {
        std::fprintf(stderr, "superoffload: %s: %s\n", core::error_kind_name(kind),
                     printable(msg).c_str());
        std::fflush(stderr);
    }
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Finalize();
    std::exit(exit_code_for(kind));
}

void fatal_one(int rank, int world_size, core::ErrorKind kind, const std::string& msg) {
    if (world_size > 1)
        std::fprintf(stderr, "[rank %d] superoffload: %s: %s\n", rank, core::error_kind_name(kind),
                     printable(msg).c_str());
    else
        std::fprintf(stderr, "superoffload: %s: %s\n", core::error_kind_name(kind),
                     printable(msg).c_str());
    std::fflush(stderr);
    if (world_size > 1) {
        // The launcher forwards our stderr through a pipe and handles the abort on another
        // socket of the same poll loop: aborting at once lets it kill the job before it has read
        // the message (MPICH's Hydra under load: 1 run in 12 lost it, tests/mpi/test_failure).
        // The job is ending anyway; one second lets the message out first.
        std::this_thread::sleep_for(std::chrono::seconds(1));
        MPI_Abort(MPI_COMM_WORLD, exit_code_for(kind));
    }
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Finalize();
    std::exit(exit_code_for(kind));
}

} // namespace sof::app
