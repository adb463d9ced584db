// A process group (an MPI communicator with a name) and the host-memory collectives the trainer
// uses: allgather, reduce-scatter, allreduce, all-to-all, each counting the bytes it moves.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sof::comm {

enum class CollKind { Allgather = 0, ReduceScatter, Allreduce, Alltoall, Small };
constexpr int kNumCollKinds = 5;
const char* coll_kind_name(CollKind k); // "allgather", "reduce_scatter", ...

// Bytes this rank sent and received, per collective kind (payload only: what leaves this rank for
// other ranks; a ring or direct algorithm moves the same amount). Thread-safe counters.
struct CommBytes {
    std::array<uint64_t, kNumCollKinds> sent{}, recv{};
    uint64_t total_sent() const;
    uint64_t total_recv() const;
    CommBytes operator-(const CommBytes& o) const;
};

class Group {
  public:
    // Splits `parent` by color (ranks with equal color form one group, ordered by key).
    // collective: all ranks of parent
    Group(MPI_Comm parent, int color, int key, std::string name);
    ~Group();
    Group(const Group&) = delete;
    Group& operator=(const Group&) = delete;

    MPI_Comm comm() const { return comm_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    const std::string& name() const { return name_; }

    // all (size*n) = the n elements of every rank, in rank order. `as`: the kind its bytes are
    // counted under (a device-buffer allreduce built of an alltoall and an allgather counts both
    // as Allreduce, like the host allreduce).
    // collective: all ranks of this group
    void allgather(const float* mine, float* all, size_t n, CollKind as = CollKind::Allgather);
    // The same for 16-bit elements (bf16 weights: half the bytes).
    // collective: all ranks of this group
    void allgather(const uint16_t* mine, uint16_t* all, size_t n);
    // out (n) = sum over ranks q, in rank order 0..size-1, of in_q[rank*n .. rank*n+n); in is
    // (size*n). Deterministic: the same additions in the same order on every run. scratch
    // (size*n) receives the other ranks' chunks.
    // collective: all ranks of this group
    void reduce_scatter(const float* in, float* out, size_t n, float* scratch);
    // buf (n) = sum over ranks, in rank order (reduce-scatter + allgather; every rank gets the
    // same bits). scratch: (2 * size * ceil(n/size)) floats.
    // collective: all ranks of this group
    void allreduce(float* buf, size_t n, float* scratch);
    // recv (size*n): chunk q = what rank q sent to this rank; send (size*n): chunk q goes to q.
    // `as`: the kind its bytes are counted under (a device-buffer reduce-scatter is an alltoall
    // plus a sum on the device: counted as ReduceScatter, like the host one).
    // collective: all ranks of this group
    void alltoall(const float* send, float* recv, size_t n, CollKind as = CollKind::Alltoall);
    // The same for 16-bit elements (bf16 activations of the Ulysses exchange).
    // collective: all ranks of this group
    void alltoall(const uint16_t* send, uint16_t* recv, size_t n);
    // Every rank's value, summed in rank order (bitwise the same on every rank).
    // collective: all ranks of this group
    double ordered_sum(double mine);
    // collective: all ranks of this group
    bool any(bool mine);
    // Every rank's value (size), in rank order.
    // collective: all ranks of this group
    std::vector<double> allgather_value(double mine);
    // collective: all ranks of this group
    void barrier();

    CommBytes bytes() const; // since construction

  private:
    // collective: all ranks of this group
    void allgather_raw(const void* mine, void* all, size_t n, MPI_Datatype type, size_t elem_bytes,
                       CollKind as);
    // collective: all ranks of this group
    void alltoall_raw(const void* send, void* recv, size_t n, MPI_Datatype type, size_t elem_bytes,
                      CollKind as);
    void count(CollKind k, uint64_t sent, uint64_t recv);
    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0, size_ = 1;
    std::string name_;
    std::array<std::atomic<uint64_t>, kNumCollKinds> sent_{}, recv_{};
};

// MPI's own statement about device-buffer support.
struct CudaAwareness {
    bool supported = false; // the library says device pointers may be passed
    std::string source;     // how we know: "MPIX_Query_cuda_support() = 1", "no mpi-ext.h", ...
};
// Asks the library this program was built against. Open MPI: MPIX_Query_cuda_support (mpi-ext.h).
// MPICH and its derivatives (Cray MPICH): the run-time switch MPICH_GPU_SUPPORT_ENABLED (its value
// is `mpich_gpu_env`, null when unset; anything but "1" turns support off), then
// MPIX_GPU_query_support where mpi.h declares it (MPICH 4 and later); without that query the switch
// alone decides (older Cray MPICH). Needs MPI initialised where a query is compiled in.
CudaAwareness query_cuda_awareness(const char* mpich_gpu_env);
// The same with MPICH_GPU_SUPPORT_ENABLED read from the environment.
CudaAwareness query_cuda_awareness();

} // namespace sof::comm
