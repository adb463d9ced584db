// MPI world wrapper: ranks, node-local ranks and tiny collectives used for error agreement.
// Every function that communicates says which group must call it.
#include "comm/world.h"

#include <cctype>

namespace sof::comm {

void throw_mpi_error(const char* file, int line, const char* call, int rc) {
    char msg[MPI_MAX_ERROR_STRING] = {0};
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw core::Error(core::ErrorKind::Runtime,
                      core::strfmt("%s:%d: %s failed: %s", file, line, call, msg));
}

std::string mpi_library() {
    char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "unknown MPI library";
    std::string out;
    for (int i = 0; i < len && buf[i] != '\0' && buf[i] != '\n'; i++) {
        bool space = std::isspace(static_cast<unsigned char>(buf[i])) != 0;
        if (space && (out.empty() || out.back() == ' ')) continue;
        out += space ? ' ' : buf[i];
    }
    while (!out.empty() && out.back() == ' ')
        out.pop_back();
    return out.empty() ? "unknown MPI library" : out;
}

World::World(MPI_Comm comm) : comm_(comm) {
    SOF_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
    SOF_CHECK_MPI(MPI_Comm_size(comm_, &size_));
    SOF_CHECK_MPI(
        MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_));
    SOF_CHECK_MPI(MPI_Comm_rank(node_comm_, &local_rank_));
    SOF_CHECK_MPI(MPI_Comm_size(node_comm_, &local_size_));
}

World::~World() {
    if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
}

bool World::any(bool mine) const {
    int in = mine ? 1 : 0, out = 0;
    SOF_CHECK_MPI(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LOR, comm_));
    return out != 0;
}

double World::sum(double mine) const {
    double out = 0.0;
    SOF_CHECK_MPI(MPI_Allreduce(&mine, &out, 1, MPI_DOUBLE, MPI_SUM, comm_));
    return out;
}

void World::barrier() const {
    SOF_CHECK_MPI(MPI_Barrier(comm_));
}

} // namespace sof::comm
