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
    // chunk_bytes: staging chunk per peer (two pinned buffers of it for send, two for receive,
    // x group; above 8 ranks it shrinks as 8 / size, to no less than 64 KiB).
    // stream: where the staging copies and device-side sums run (null: the DeviceSet's comm
    // stream). One thread at a time calls a DeviceComm (the comm lane for the shard group, the
    // model's thread for the SP group); each has its own stream.
    DeviceComm(DeviceSet& devs, comm::Group& group, Transport t, size_t chunk_bytes = 4u << 20,
               device::Stream* stream = nullptr);
    ~DeviceComm();
    DeviceComm(const DeviceComm&) = delete;
    DeviceComm& operator=(const DeviceComm&) = delete;

    Transport transport() const { return t_; }
    comm::Group& group() { return g_; }
    device::Device& device() { return devs_.device(); }
    device::Stream& stream() { return *s_; }

    // Device buffers; `after` (may be null) is the event of the stream that produced the input
    // (the call blocks the calling thread on it: MPI is not stream-ordered). The results are in
    // device memory when the call returns, and nothing of the call is left on any stream.
    // all (size*n) = every rank's `mine` (n). collective: all ranks of the group
    void allgather(const float* mine, float* all, size_t n, device::Event* after);
    // The same for 16-bit elements (bf16 weights). collective: all ranks of the group
    void allgather(const uint16_t* mine, uint16_t* all, size_t n, device::Event* after);
    // out (n) = rank-order sum of every rank's in[rank*n ..]; in (size*n). scratch (device,
    // size*n; null: allocated for the call) receives the other ranks' chunks.
    // collective: all ranks of the group
    void reduce_scatter(const float* in, float* out, size_t n, device::Event* after,
                        float* scratch = nullptr);
    // buf (n) summed over ranks in rank order. scratch (device, allreduce_scratch(n) floats;
    // null: allocated for the call). collective: all ranks of the group
    void allreduce(float* buf, size_t n, device::Event* after, float* scratch = nullptr);
    size_t allreduce_scratch(size_t n) const; // 2 * size * ceil(n / size)
    // recv (size*n) chunk q from rank q; send (size*n). collective: all ranks of the group
    void alltoall(const float* send, float* recv, size_t n, device::Event* after);
    // The same for 16-bit elements (bf16 activations). collective: all ranks of the group
    void alltoall(const uint16_t* send, uint16_t* recv, size_t n, device::Event* after);

  private:
    template <class T> void allgather_t(const T* mine, T* all, size_t n, device::Event* after);
    template <class T> void alltoall_t(const T* send, T* recv, size_t n, device::Event* after);
    // A 1-rank group on a device MPI does not read directly: dst = src on the device.
    bool local_only(void* dst, const void* src, size_t bytes);
    // Staged building blocks: async copies of `bytes` between device and pinned host memory.
    void d2h(void* host, const void* dev, size_t bytes);
    void h2d(void* dev, const void* host, size_t bytes);
    // The double-buffered chunk loop of the staged path over n elements in chunks of `chunk`
    // elements per rank (see device_comm.cpp).
    void pipeline(size_t n, size_t chunk,
                  const std::function<void(size_t, size_t, void*)>& stage_in,
                  const std::function<void(void*, void*, size_t)>& transfer,
                  const std::function<void(size_t, size_t, const void*)>& stage_out);
    DeviceSet& devs_;
    comm::Group& g_;
    Transport t_;
    device::Stream* s_;
    size_t chunk_bytes_;                 // bytes per staged chunk per rank
    void* send_[2] = {nullptr, nullptr}; // (size*chunk_bytes_) pinned
    void* recv_[2] = {nullptr, nullptr}; // (size*chunk_bytes_) pinned
    float* scratch_ = nullptr;           // (2*size*chunk_bytes_) pinned, reductions
    std::unique_ptr<device::Event> ev_[2];
};

// Decides the transport of a device: Direct for a host-accessible device; CudaAware when the MPI
// library says so and a device-buffer allreduce round trip over `group` returns the right values;
// Staged otherwise (or when force_staged). `why` says how it was decided (for the first log lines).
// collective: all ranks of the group
Transport choose_transport(DeviceSet& devs, comm::Group& group, bool force_staged,
                           std::string* why);

} // namespace sof::rank
