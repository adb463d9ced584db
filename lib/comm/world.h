// MPI world and process groups for one job: rank, size, node-local rank; error agreement.
// One World object per process, created by the app after MPI_Init; nothing here is global state.
#pragma once

#include <mpi.h>

#include <string>

#include "core/error.h"

// SOF_CHECK_MPI(call): throws a Runtime error with file:line and MPI's own message.
#define SOF_CHECK_MPI(call)                                                                        \
    do {                                                                                           \
        int sof_mpi_rc_ = (call);                                                                  \
        if (sof_mpi_rc_ != MPI_SUCCESS)                                                            \
            ::sof::comm::throw_mpi_error(__FILE__, __LINE__, #call, sof_mpi_rc_);                  \
    } while (0)

namespace sof::comm {

[[noreturn]] void throw_mpi_error(const char* file, int line, const char* call, int rc);

// The MPI library this process runs on, one line: the first line of MPI_Get_library_version with
// runs of white space made one blank ("Open MPI v4.1.4, package: ...", "MPICH Version: 4.0.2",
// "MPI VERSION : CRAY MPICH version 8.1.28 ..."). May be called before MPI_Init.
std::string mpi_library();

class World {
  public:
    // Wraps an existing communicator (MPI must be initialised). Computes the node-local rank with
    // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
    // collective: all ranks of comm
    explicit World(MPI_Comm comm);
    ~World();
    World(const World&) = delete;
    World& operator=(const World&) = delete;

    MPI_Comm comm() const { return comm_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    int local_rank() const { return local_rank_; }
    int local_size() const { return local_size_; }

    // True when any rank passes true.
    // collective: all ranks of this world
    bool any(bool mine) const;
    // Sum of a double over ranks.
    // collective: all ranks of this world
    double sum(double mine) const;
    // collective: all ranks of this world
    void barrier() const;

  private:
    MPI_Comm comm_;
    MPI_Comm node_comm_ = MPI_COMM_NULL;
    int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

} // namespace sof::comm
