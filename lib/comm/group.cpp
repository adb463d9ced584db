// Process groups and deterministic host-memory collectives (see group.h). Reductions are done by
// this code, in rank order, over MPI_Alltoall / MPI_Allgather: never by MPI_SUM, whose order the
// library chooses.
#include "comm/group.h"

#include <climits>
#include <cstdlib>
#include <cstring>

#if defined(OPEN_MPI) && __has_include(<mpi-ext.h>) // Open MPI's extensions (CUDA query)
#include <mpi-ext.h>
#define SOF_HAVE_MPI_EXT 1
#endif

#include "comm/world.h"
#include "core/error.h"

namespace sof::comm {

const char* coll_kind_name(CollKind k) {
    switch (k) {
    case CollKind::Allgather:
        return "allgather";
    case CollKind::ReduceScatter:
        return "reduce_scatter";
    case CollKind::Allreduce:
        return "allreduce";
    case CollKind::Alltoall:
        return "alltoall";
    case CollKind::Small:
        return "small";
    }
    return "?";
}

uint64_t CommBytes::total_sent() const {
    uint64_t s = 0;
    for (uint64_t x : sent)
        s += x;
    return s;
}

uint64_t CommBytes::total_recv() const {
    uint64_t s = 0;
    for (uint64_t x : recv)
        s += x;
    return s;
}

CommBytes CommBytes::operator-(const CommBytes& o) const {
    CommBytes d;
    for (int i = 0; i < kNumCollKinds; i++) {
        d.sent[static_cast<size_t>(i)] =
            sent[static_cast<size_t>(i)] - o.sent[static_cast<size_t>(i)];
        d.recv[static_cast<size_t>(i)] =
            recv[static_cast<size_t>(i)] - o.recv[static_cast<size_t>(i)];
    }
    return d;
}

namespace {
int checked_count(size_t n, int size, const char* what) {
    if (n * static_cast<size_t>(size) > static_cast<size_t>(INT_MAX))
        SOF_FAIL(Runtime,
                 "%s of %zu elements x %d ranks exceeds MPI's int count; use more ranks or "
                 "smaller units",
                 what, n, size);
    return static_cast<int>(n);
}
} // namespace

Group::Group(MPI_Comm parent, int color, int key, std::string name) : name_(std::move(name)) {
    SOF_CHECK_MPI(MPI_Comm_split(parent, color, key, &comm_));
    SOF_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
    SOF_CHECK_MPI(MPI_Comm_size(comm_, &size_));
}

Group::~Group() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Group::count(CollKind k, uint64_t sent, uint64_t recv) {
    sent_[static_cast<size_t>(k)] += sent;
    recv_[static_cast<size_t>(k)] += recv;
}

CommBytes Group::bytes() const {
    CommBytes b;
    for (int i = 0; i < kNumCollKinds; i++) {
        b.sent[static_cast<size_t>(i)] = sent_[static_cast<size_t>(i)].load();
        b.recv[static_cast<size_t>(i)] = recv_[static_cast<size_t>(i)].load();
    }
    return b;
}

void Group::allgather_raw(const void* mine, void* all, size_t n, MPI_Datatype type,
                          size_t elem_bytes, CollKind as) {
    int c = checked_count(n, size_, "allgather");
    if (size_ == 1) {
        if (all != mine) std::memcpy(all, mine, n * elem_bytes);
        return;
    }
    SOF_CHECK_MPI(MPI_Allgather(mine, c, type, all, c, type, comm_));
    uint64_t b = static_cast<uint64_t>(size_ - 1) * n * elem_bytes;
    count(as, b, b);
}

void Group::allgather(const float* mine, float* all, size_t n, CollKind as) {
    allgather_raw(mine, all, n, MPI_FLOAT, sizeof(float), as);
}

void Group::allgather(const uint16_t* mine, uint16_t* all, size_t n) {
    allgather_raw(mine, all, n, MPI_UINT16_T, sizeof(uint16_t), CollKind::Allgather);
}

void Group::reduce_scatter(const float* in, float* out, size_t n, float* scratch) {
    int c = checked_count(n, size_, "reduce-scatter");
    if (size_ == 1) {
        if (out != in) std::memcpy(out, in, n * sizeof(float));
        return;
    }
    SOF_CHECK_MPI(MPI_Alltoall(in, c, MPI_FLOAT, scratch, c, MPI_FLOAT, comm_));
    uint64_t b = static_cast<uint64_t>(size_ - 1) * n * sizeof(float);
    count(CollKind::ReduceScatter, b, b);
    for (size_t i = 0; i < n; i++)
        out[i] = scratch[i];
    for (int q = 1; q < size_; q++) {
        const float* s = scratch + static_cast<size_t>(q) * n;
        for (size_t i = 0; i < n; i++)
            out[i] += s[i];
    }
}

void Group::allreduce(float* buf, size_t n, float* scratch) {
    if (size_ == 1) return;
    const size_t P = static_cast<size_t>(size_);
    const size_t chunk = (n + P - 1) / P;
    float* padded = scratch;           // (P*chunk)
    float* recv = scratch + P * chunk; // (P*chunk)
    std::memcpy(padded, buf, n * sizeof(float));
    std::fill(padded + n, padded + P * chunk, 0.0f);
    int c = checked_count(chunk, size_, "allreduce");
    SOF_CHECK_MPI(MPI_Alltoall(padded, c, MPI_FLOAT, recv, c, MPI_FLOAT, comm_));
    float* mine = padded; // reuse: the reduced chunk, then the allgather input
    for (size_t i = 0; i < chunk; i++)
        mine[i] = recv[i];
    for (size_t q = 1; q < P; q++)
        for (size_t i = 0; i < chunk; i++)
            mine[i] += recv[q * chunk + i];
    SOF_CHECK_MPI(MPI_Allgather(mine, c, MPI_FLOAT, recv, c, MPI_FLOAT, comm_));
    std::memcpy(buf, recv, n * sizeof(float));
    uint64_t b = 2 * static_cast<uint64_t>(size_ - 1) * chunk * sizeof(float);
    count(CollKind::Allreduce, b, b);
}

void Group::alltoall_raw(const void* send, void* recv, size_t n, MPI_Datatype type,
                         size_t elem_bytes, CollKind as) {
    int c = checked_count(n, size_, "all-to-all");
    if (size_ == 1) {
        if (recv != send) std::memcpy(recv, send, n * elem_bytes);
        return;
    }
    SOF_CHECK_MPI(MPI_Alltoall(send, c, type, recv, c, type, comm_));
    uint64_t b = static_cast<uint64_t>(size_ - 1) * n * elem_bytes;
    count(as, b, b);
}

void Group::alltoall(const float* send, float* recv, size_t n, CollKind as) {
    alltoall_raw(send, recv, n, MPI_FLOAT, sizeof(float), as);
}

void Group::alltoall(const uint16_t* send, uint16_t* recv, size_t n) {
    alltoall_raw(send, recv, n, MPI_UINT16_T, sizeof(uint16_t), CollKind::Alltoall);
}

std::vector<double> Group::allgather_value(double mine) {
    std::vector<double> all(static_cast<size_t>(size_));
    SOF_CHECK_MPI(MPI_Allgather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, comm_));
    uint64_t b = static_cast<uint64_t>(size_ - 1) * sizeof(double);
    count(CollKind::Small, b, b);
    return all;
}

double Group::ordered_sum(double mine) {
    double s = 0.0;
    for (double x : allgather_value(mine))
        s += x;
    return s;
}

bool Group::any(bool mine) {
    int in = mine ? 1 : 0, out = 0;
    SOF_CHECK_MPI(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LOR, comm_));
    return out != 0;
}

void Group::barrier() {
    SOF_CHECK_MPI(MPI_Barrier(comm_));
}

CudaAwareness query_cuda_awareness(const char* mpich_gpu_env) {
    CudaAwareness a;
#if defined(OPEN_MPI)
    (void)mpich_gpu_env; // Cray MPICH's switch means nothing to Open MPI
#if defined(SOF_HAVE_MPI_EXT) && defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    // built with CUDA (the macro); the call says whether this run has it
    a.supported = MPIX_Query_cuda_support() == 1;
    a.source = a.supported ? "MPIX_Query_cuda_support() = 1" : "MPIX_Query_cuda_support() = 0";
#else
    a.source = "Open MPI built without CUDA support (mpi-ext.h: no MPIX_CUDA_AWARE_SUPPORT = 1)";
#endif
#else // MPICH and its derivatives (Cray MPICH), or another library
    const std::string env =
        mpich_gpu_env ? std::string("MPICH_GPU_SUPPORT_ENABLED=") + mpich_gpu_env : "";
    if (mpich_gpu_env && std::strcmp(mpich_gpu_env, "1") != 0) {
        a.source = env + " (device buffers are not passed to MPI)";
        return a;
    }
#if defined(MPIX_GPU_SUPPORT_CUDA)
    // MPICH 4 and later (Debian's mpich, Cray MPICH based on it): mpi.h declares the query
    int yes = 0;
    if (MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &yes) != MPI_SUCCESS) yes = 0;
    a.supported = yes != 0;
    a.source = core::strfmt("MPIX_GPU_query_support(CUDA) = %d", yes);
    if (mpich_gpu_env) a.source = env + ", " + a.source; // the library's answer decides
    if (mpich_gpu_env && !a.supported)
        a.source += ": the switch is on but this MPI library cannot take device buffers; with Cray "
                    "MPICH, link its GPU transport layer (libmpi_gtl_cuda: build with the "
                    "craype-accel-nvidia90 module or the uenv's cray-mpich); staging through host "
                    "memory meanwhile (slower)";
#else
    // older Cray MPICH: no query; device buffers work only when the switch is on
    a.supported = mpich_gpu_env != nullptr;
    a.source = mpich_gpu_env ? env + " (this MPI library has no CUDA query)"
                             : "this MPI library has no CUDA query (MPIX_GPU_query_support) "
                               "and MPICH_GPU_SUPPORT_ENABLED is not set";
#endif
#endif
    return a;
}

CudaAwareness query_cuda_awareness() {
    return query_cuda_awareness(std::getenv("MPICH_GPU_SUPPORT_ENABLED"));
}

} // namespace sof::comm
