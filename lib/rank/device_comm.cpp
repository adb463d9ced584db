// Device-buffer collectives (see device_comm.h): direct, CUDA-aware, or staged in double-buffered
// chunks through pinned host memory on the rank's comm stream. Sums are rank-order everywhere.
#include "rank/device_comm.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "comm/world.h"
#include "core/strfmt.h"

namespace sof::rank {

using device::CopyKind;

namespace {
// Device scratch freed on every exit path (CUDA-aware reductions).
struct DeviceScratch {
    device::Device& d;
    float* p;
    DeviceScratch(device::Device& dev, size_t n, const char* what)
        : d(dev), p(static_cast<float*>(dev.alloc(n * sizeof(float), what))) {}
    ~DeviceScratch() { d.free(p); }
    DeviceScratch(const DeviceScratch&) = delete;
    DeviceScratch& operator=(const DeviceScratch&) = delete;
};
} // namespace

const char* transport_name(Transport t) {
    switch (t) {
    case Transport::Direct:
        return "direct (device memory is host memory)";
    case Transport::CudaAware:
        return "CUDA-aware MPI (device pointers)";
    case Transport::Staged:
        return "staged through pinned host buffers";
    }
    return "?";
}

namespace {

// Staged bytes per peer: chunk_bytes up to 8 ranks, then shrinking as 8 / P (at least 64 KiB), so
// the six pinned buffers of P chunks stay near 8 x chunk_bytes each (4 MiB chunks at 256 ranks
// would pin 6 GiB per communicator, out of the Grace memory that holds the optimizer state).
size_t staged_chunk_bytes(size_t chunk_bytes, size_t P) {
    size_t b = chunk_bytes;
    if (P > 8) b = std::max<size_t>(chunk_bytes * 8 / P, size_t{64} << 10);
    return std::max<size_t>(b / sizeof(float), 1) * sizeof(float);
}

} // namespace

DeviceComm::DeviceComm(DeviceSet& devs, comm::Group& group, Transport t, size_t chunk_bytes,
                       device::Stream* stream)
    : devs_(devs), g_(group), t_(t), s_(stream ? stream : &devs.comm()),
      chunk_bytes_(staged_chunk_bytes(chunk_bytes, static_cast<size_t>(group.size()))) {
    if (t_ != Transport::Staged) return;
    device::Device& d = devs_.device();
    const size_t P = static_cast<size_t>(g_.size());
    for (int i = 0; i < 2; i++) {
        send_[i] = d.alloc_pinned(P * chunk_bytes_, "collective staging (send)");
        recv_[i] = d.alloc_pinned(P * chunk_bytes_, "collective staging (receive)");
        ev_[i] = d.create_event();
    }
    scratch_ =
        static_cast<float*>(d.alloc_pinned(2 * P * chunk_bytes_, "collective staging (reduction)"));
}

DeviceComm::~DeviceComm() {
    device::Device& d = devs_.device();
    try {
        d.synchronize(*s_);
    } catch (...) { // an abandoned collective: nothing left to report it to
    }
    for (int i = 0; i < 2; i++) {
        d.free_pinned(send_[i]);
        d.free_pinned(recv_[i]);
    }
    d.free_pinned(scratch_);
}

void DeviceComm::d2h(void* host, const void* dev, size_t bytes) {
    devs_.device().copy(host, dev, bytes, CopyKind::DeviceToHost, *s_);
}

void DeviceComm::h2d(void* dev, const void* host, size_t bytes) {
    devs_.device().copy(dev, host, bytes, CopyKind::HostToDevice, *s_);
}

bool DeviceComm::local_only(void* dst, const void* src, size_t bytes) {
    if (g_.size() != 1 || t_ == Transport::Direct) return false;
    if (dst != src) {
        devs_.device().copy(dst, src, bytes, CopyKind::DeviceToDevice, *s_);
        devs_.device().synchronize(*s_);
    }
    return true;
}

size_t DeviceComm::allreduce_scratch(size_t n) const {
    const size_t P = static_cast<size_t>(g_.size());
    return 2 * P * ((n + P - 1) / P);
}

// Staged pattern for all of them: chunk i's inputs are copied to send_[i%2] (recorded on
// ev_[i%2]) one chunk ahead, so the copy of chunk i+1 runs while chunk i is on the wire; results
// go back from recv_[i%2] asynchronously (the stream is FIFO: chunk i+2's input event implies
// chunk i's results were copied out before recv_[i%2] is reused). stage_in(off, k, send)
// enqueues the input copies of the elements [off, off+k); transfer(send, recv, k) runs the
// collective on host buffers; stage_out(off, k, recv) enqueues the result copies.
void DeviceComm::pipeline(size_t n, size_t chunk,
                          const std::function<void(size_t, size_t, void*)>& stage_in,
                          const std::function<void(void*, void*, size_t)>& transfer,
                          const std::function<void(size_t, size_t, const void*)>& stage_out) {
    device::Device& d = devs_.device();
    auto enqueue = [&](size_t off, int b) {
        stage_in(off, std::min(chunk, n - off), send_[b]);
        d.record(*ev_[b], *s_);
    };
    if (n > 0) enqueue(0, 0);
    for (size_t off = 0, i = 0; off < n; off += chunk, i++) {
        int b = static_cast<int>(i % 2);
        size_t k = std::min(chunk, n - off);
        ev_[b]->synchronize();
        if (off + chunk < n) enqueue(off + chunk, 1 - b);
        transfer(send_[b], recv_[b], k);
        stage_out(off, k, recv_[b]);
    }
    d.synchronize(*s_);
}

template <class T>
void DeviceComm::allgather_t(const T* mine, T* all, size_t n, device::Event* after) {
    if (after) after->synchronize();
    if (local_only(all, mine, n * sizeof(T))) return;
    if (t_ != Transport::Staged) {
        g_.allgather(mine, all, n);
        return;
    }
    const size_t P = static_cast<size_t>(g_.size()), e = sizeof(T);
    pipeline(
        n, chunk_bytes_ / e,
        [&](size_t off, size_t k, void* send) { d2h(send, mine + off, k * e); },
        [&](void* send, void* recv, size_t k) {
            g_.allgather(static_cast<const T*>(send), static_cast<T*>(recv), k);
        },
        [&](size_t off, size_t k, const void* recv) {
            for (size_t q = 0; q < P; q++)
                h2d(all + q * n + off, static_cast<const T*>(recv) + q * k, k * e);
        });
}

void DeviceComm::allgather(const float* mine, float* all, size_t n, device::Event* after) {
    allgather_t(mine, all, n, after);
}

void DeviceComm::allgather(const uint16_t* mine, uint16_t* all, size_t n, device::Event* after) {
    allgather_t(mine, all, n, after);
}

void DeviceComm::reduce_scatter(const float* in, float* out, size_t n, device::Event* after,
                                float* scratch) {
    if (after) after->synchronize();
    if (local_only(out, in, n * sizeof(float))) return;
    device::Device& d = devs_.device();
    const size_t P = static_cast<size_t>(g_.size());
    if (t_ == Transport::Direct) {
        std::vector<float> own;
        if (!scratch) {
            own.resize(P * n);
            scratch = own.data();
        }
        g_.reduce_scatter(in, out, n, scratch);
        return;
    }
    if (t_ == Transport::CudaAware) { // all-to-all on device pointers, rank-order sum on device
        std::unique_ptr<DeviceScratch> own;
        if (!scratch) {
            own = std::make_unique<DeviceScratch>(d, P * n, "reduce-scatter scratch");
            scratch = own->p;
        }
        g_.alltoall(in, scratch, n, comm::CollKind::ReduceScatter);
        d.sum_chunks(scratch, g_.size(), n, out, *s_);
        d.synchronize(*s_);
        return;
    }
    pipeline(
        n, chunk_bytes_ / sizeof(float),
        [&](size_t off, size_t k, void* send) {
            for (size_t q = 0; q < P; q++)
                d2h(static_cast<float*>(send) + q * k, in + q * n + off, k * sizeof(float));
        },
        [&](void* send, void* recv, size_t k) {
            g_.reduce_scatter(static_cast<const float*>(send), static_cast<float*>(recv), k,
                              scratch_);
        },
        [&](size_t off, size_t k, const void* recv) { h2d(out + off, recv, k * sizeof(float)); });
}

void DeviceComm::allreduce(float* buf, size_t n, device::Event* after, float* scratch) {
    if (after) after->synchronize();
    if (g_.size() == 1) return;
    device::Device& d = devs_.device();
    const size_t P = static_cast<size_t>(g_.size());
    if (t_ == Transport::Direct) {
        std::vector<float> own;
        if (!scratch) {
            own.resize(allreduce_scratch(n));
            scratch = own.data();
        }
        g_.allreduce(buf, n, scratch);
        return;
    }
    if (t_ == Transport::CudaAware) { // reduce-scatter on device, then allgather
        std::unique_ptr<DeviceScratch> own;
        if (!scratch) {
            own = std::make_unique<DeviceScratch>(d, allreduce_scratch(n), "allreduce scratch");
            scratch = own->p;
        }
        const size_t c = (n + P - 1) / P;
        float* padded = scratch;       // (P*c) the input, zero-padded; then the reduced chunk
        float* recv = scratch + P * c; // (P*c) the chunks of every rank; then the gathered sums
        d.copy(padded, buf, n * sizeof(float), CopyKind::DeviceToDevice, *s_);
        d.memset(padded + n, 0, (P * c - n) * sizeof(float), *s_);
        d.synchronize(*s_);
        g_.alltoall(padded, recv, c, comm::CollKind::Allreduce);
        d.sum_chunks(recv, g_.size(), c, padded, *s_);
        d.synchronize(*s_);
        g_.allgather(padded, recv, c, comm::CollKind::Allreduce);
        d.copy(buf, recv, n * sizeof(float), CopyKind::DeviceToDevice, *s_);
        d.synchronize(*s_);
        return;
    }
    pipeline(
        n, chunk_bytes_ / sizeof(float),
        [&](size_t off, size_t k, void* send) { d2h(send, buf + off, k * sizeof(float)); },
        [&](void* send, void* recv, size_t k) {
            std::memcpy(recv, send, k * sizeof(float));
            g_.allreduce(static_cast<float*>(recv), k, scratch_);
        },
        [&](size_t off, size_t k, const void* recv) { h2d(buf + off, recv, k * sizeof(float)); });
}

template <class T>
void DeviceComm::alltoall_t(const T* send, T* recv, size_t n, device::Event* after) {
    if (after) after->synchronize();
    if (local_only(recv, send, n * sizeof(T))) return;
    if (t_ != Transport::Staged) {
        g_.alltoall(send, recv, n);
        return;
    }
    const size_t P = static_cast<size_t>(g_.size()), e = sizeof(T);
    pipeline(
        n, chunk_bytes_ / e,
        [&](size_t off, size_t k, void* dst) {
            for (size_t q = 0; q < P; q++)
                d2h(static_cast<T*>(dst) + q * k, send + q * n + off, k * e);
        },
        [&](void* s, void* r, size_t k) {
            g_.alltoall(static_cast<const T*>(s), static_cast<T*>(r), k);
        },
        [&](size_t off, size_t k, const void* r) {
            for (size_t q = 0; q < P; q++)
                h2d(recv + q * n + off, static_cast<const T*>(r) + q * k, k * e);
        });
}

void DeviceComm::alltoall(const float* send, float* recv, size_t n, device::Event* after) {
    alltoall_t(send, recv, n, after);
}

void DeviceComm::alltoall(const uint16_t* send, uint16_t* recv, size_t n, device::Event* after) {
    alltoall_t(send, recv, n, after);
}

Transport choose_transport(DeviceSet& devs, comm::Group& group, bool force_staged,
                           std::string* why) {
    device::Device& d = devs.device();
    if (force_staged) {
        *why = "staging forced (tests)";
        return Transport::Staged;
    }
    if (d.host_accessible()) {
        *why = "the host device's memory is host memory";
        return Transport::Direct;
    }
    // Every rank makes the same MPI calls whatever its own answers: each "any" below is a
    // collective on the group, taken before anything that depends on it (a rank that skipped the
    // probe's allreduce would meet another rank's "any" instead).
    comm::CudaAwareness a = comm::query_cuda_awareness();
    std::string detail = a.source;
    if (group.any(!a.supported)) {
        *why = detail + (a.supported ? "; another rank's MPI reports no CUDA support" : "");
        return Transport::Staged;
    }
    // confirm with a device-buffer round trip: every rank contributes rank+1
    float* buf = nullptr;
    std::vector<float> h(64, static_cast<float>(group.rank() + 1));
    bool ready = true;
    try {
        buf = static_cast<float*>(d.alloc(64 * sizeof(float), "CUDA-aware probe"));
        d.copy(buf, h.data(), h.size() * sizeof(float), CopyKind::HostToDevice, devs.comm());
        d.synchronize(devs.comm());
    } catch (const std::exception& e) {
        ready = false;
        detail += std::string("; the device-buffer probe could not be prepared: ") + e.what();
    }
    bool ok = false;
    if (!group.any(!ready)) {
        SOF_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, 64, MPI_FLOAT, MPI_SUM, group.comm()));
        try {
            d.copy(h.data(), buf, h.size() * sizeof(float), CopyKind::DeviceToHost, devs.comm());
            d.synchronize(devs.comm());
            const float want = static_cast<float>(group.size()) * (group.size() + 1) / 2.0f;
            ok = true;
            for (float x : h)
                ok &= x == want;
            if (!ok) detail += "; the device-buffer round trip returned wrong values";
        } catch (const std::exception& e) {
            detail += std::string("; the device-buffer round trip failed: ") + e.what();
        }
    } else if (ready) {
        detail += "; another rank could not prepare the device-buffer probe";
    }
    d.free(buf);
    bool everyone = !group.any(!ok); // one path for the whole group
    if (ok && !everyone) detail += "; another rank could not confirm it";
    *why = detail;
    return everyone ? Transport::CudaAware : Transport::Staged;
}

} // namespace sof::rank
