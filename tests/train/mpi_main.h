// doctest main for tests that need MPI (the trainer builds a comm::World): MPI_Init, run, finalize.
// Include in exactly one .cpp of a test executable.
#pragma once

#include <doctest/doctest.h>
#include <mpi.h>

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    doctest::Context ctx(argc, argv);
    int rc = ctx.run();
    MPI_Finalize();
    return rc;
}
