// Collectives on device buffers, stream-ordered: each waits for the producer's event first (MPI is
// not stream-ordered), then passes device pointers to a CUDA-aware MPI, or stages chunks through
// pinned host buffers (the next chunk's copy overlapping the current chunk's transfer).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "comm/group.h"
#include "rank/device_set.h"

namespace sof::rank {

enum class Transport {
    Direct,    // the device memory is host memory (host device): MPI reads it directly
    CudaAware, // MPI takes device pointers (confirmed by a round trip at start)
    Staged     // chunks through pinned host buffers
};
const char* transport_name(Transport t);

class DeviceComm {
  public:
    // chunk_bytes: staging chunk (two pinned buffers of it for send, two for receive, x group).
    DeviceComm(DeviceSet& devs, comm::Group& group, Transport t, size_t chunk_bytes = 4u << 20);
    ~DeviceComm();
    DeviceComm(const DeviceComm&) = delete;
    DeviceComm& operator=(const DeviceComm&) = delete;

    Transport transport() const { return t_; }
    comm::Group& group() { return g_; }

    // Device buffers; `after` (may be null) is the event of the stream that produced the input.
    // The results are in device memory when the call returns.
    // all (size*n) = every rank's `mine` (n). collective: all ranks of the group
    void allgather(const float* mine, float* all, size_t n, device::Event* after);
    // out (n) = rank-order sum of every rank's in[rank*n ..]; in (size*n).
    // collective: all ranks of the group
    void reduce_scatter(const float* in, float* out, size_t n, device::Event* after);
    // buf (n) summed over ranks in rank order. collective: all ranks of the group
    void allreduce(float* buf, size_t n, device::Event* after);
    // recv (size*n) chunk q from rank q; send (size*n). collective: all ranks of the group
    void alltoall(const float* send, float* recv, size_t n, device::Event* after);

  private:
    // Staged building block: copies `n` floats at dev offset to/from pinned host memory.
    void d2h(float* host, const float* dev, size_t n);
    void h2d(float* dev, const float* host, size_t n);
    // The double-buffered chunk loop of the staged path (see device_comm.cpp).
    void pipeline(size_t n, const std::function<void(size_t, size_t, float*)>& stage_in,
                  const std::function<void(float*, float*, size_t)>& transfer,
                  const std::function<void(size_t, size_t, const float*)>& stage_out);
    DeviceSet& devs_;
    comm::Group& g_;
    Transport t_;
    size_t chunk_;                        // elements per staged chunk per rank
    float* send_[2] = {nullptr, nullptr}; // (size*chunk) pinned
    float* recv_[2] = {nullptr, nullptr}; // (size*chunk) pinned
    float* scratch_ = nullptr;            // (2*size*chunk) pinned, reductions
    std::unique_ptr<device::Event> ev_[2];
};

// Decides the transport of a device: Direct for a host-accessible device; CudaAware when the MPI
// library says so and a device-buffer allreduce round trip over `group` returns the right values;
// Staged otherwise (or when force_staged). `why` says how it was decided (for the first log lines).
// collective: all ranks of the group
Transport choose_transport(DeviceSet& devs, comm::Group& group, bool force_staged,
                           std::string* why);

} // namespace sof::rank
