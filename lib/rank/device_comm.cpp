// Device-buffer collectives (see device_comm.h): direct, CUDA-aware, or staged in double-buffered
// chunks through pinned host memory on the rank's comm stream. Sums are rank-order everywhere.
#include "rank/device_comm.h"

#include <algorithm>
#include <cstring>
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

DeviceComm::DeviceComm(DeviceSet& devs, comm::Group& group, Transport t, size_t chunk_bytes)
    : devs_(devs), g_(group), t_(t), chunk_(std::max<size_t>(chunk_bytes / sizeof(float), 1)) {
    if (t_ != Transport::Staged) return;
    device::Device& d = devs_.device();
    const size_t P = static_cast<size_t>(g_.size());
    for (int i = 0; i < 2; i++) {
        send_[i] = static_cast<float*>(
            d.alloc_pinned(P * chunk_ * sizeof(float), "collective staging (send)"));
        recv_[i] = static_cast<float*>(
            d.alloc_pinned(P * chunk_ * sizeof(float), "collective staging (receive)"));
        ev_[i] = d.create_event();
    }
    scratch_ = static_cast<float*>(
        d.alloc_pinned(2 * P * chunk_ * sizeof(float), "collective staging (reduction)"));
}

DeviceComm::~DeviceComm() {
    device::Device& d = devs_.device();
    try {
        d.synchronize(devs_.comm());
    } catch (...) { // an abandoned collective: nothing left to report it to
    }
    for (int i = 0; i < 2; i++) {
        d.free_pinned(send_[i]);
        d.free_pinned(recv_[i]);
    }
    d.free_pinned(scratch_);
}

void DeviceComm::d2h(float* host, const float* dev, size_t n) {
    devs_.device().copy(host, dev, n * sizeof(float), CopyKind::DeviceToHost, devs_.comm());
}

void DeviceComm::h2d(float* dev, const float* host, size_t n) {
    devs_.device().copy(dev, host, n * sizeof(float), CopyKind::HostToDevice, devs_.comm());
}

// Staged pattern for all four: chunk i's inputs are copied to send_[i%2] (recorded on ev_[i%2])
// one chunk ahead, so the copy of chunk i+1 runs while chunk i is on the wire; results go back
// from recv_[i%2] asynchronously (the stream is FIFO: chunk i+2's input event implies chunk i's
// results were copied out before recv_[i%2] is reused). stage_in(off, k, send) enqueues the
// input copies of the chunk [off, off+k); transfer(send, recv, k) runs the collective on host
// buffers; stage_out(off, k, recv) enqueues the result copies.
void DeviceComm::pipeline(size_t n, const std::function<void(size_t, size_t, float*)>& stage_in,
                          const std::function<void(float*, float*, size_t)>& transfer,
                          const std::function<void(size_t, size_t, const float*)>& stage_out) {
    device::Device& d = devs_.device();
    auto enqueue = [&](size_t off, int b) {
        stage_in(off, std::min(chunk_, n - off), send_[b]);
        d.record(*ev_[b], devs_.comm());
    };
    if (n > 0) enqueue(0, 0);
    for (size_t off = 0, i = 0; off < n; off += chunk_, i++) {
        int b = static_cast<int>(i % 2);
        size_t k = std::min(chunk_, n - off);
        ev_[b]->synchronize();
        if (off + chunk_ < n) enqueue(off + chunk_, 1 - b);
        transfer(send_[b], recv_[b], k);
        stage_out(off, k, recv_[b]);
    }
    d.synchronize(devs_.comm());
}

void DeviceComm::allgather(const float* mine, float* all, size_t n, device::Event* after) {
    if (after) after->synchronize();
    if (t_ != Transport::Staged) {
        g_.allgather(mine, all, n);
        return;
    }
    const size_t P = static_cast<size_t>(g_.size());
    pipeline(
        n, [&](size_t off, size_t k, float* send) { d2h(send, mine + off, k); },
        [&](float* send, float* recv, size_t k) { g_.allgather(send, recv, k); },
        [&](size_t off, size_t k, const float* recv) {
            for (size_t q = 0; q < P; q++)
                h2d(all + q * n + off, recv + q * k, k);
        });
}

void DeviceComm::reduce_scatter(const float* in, float* out, size_t n, device::Event* after) {
    if (after) after->synchronize();
    device::Device& d = devs_.device();
    const size_t P = static_cast<size_t>(g_.size());
    if (t_ == Transport::Direct) {
        std::vector<float> scratch(P * n);
        g_.reduce_scatter(in, out, n, scratch.data());
        return;
    }
    if (t_ == Transport::CudaAware) { // all-to-all on device pointers, rank-order sum on device
        DeviceScratch tmp(d, P * n, "reduce-scatter scratch");
        g_.alltoall(in, tmp.p, n);
        d.sum_chunks(tmp.p, g_.size(), n, out, devs_.comm());
        d.synchronize(devs_.comm());
        return;
    }
    pipeline(
        n,
        [&](size_t off, size_t k, float* send) {
            for (size_t q = 0; q < P; q++)
                d2h(send + q * k, in + q * n + off, k);
        },
        [&](float* send, float* recv, size_t k) { g_.reduce_scatter(send, recv, k, scratch_); },
        [&](size_t off, size_t k, const float* recv) { h2d(out + off, recv, k); });
}

void DeviceComm::allreduce(float* buf, size_t n, device::Event* after) {
    if (after) after->synchronize();
    device::Device& d = devs_.device();
    const size_t P = static_cast<size_t>(g_.size());
    if (t_ == Transport::Direct) {
        std::vector<float> scratch(2 * P * ((n + P - 1) / P));
        g_.allreduce(buf, n, scratch.data());
        return;
    }
    if (t_ == Transport::CudaAware) { // reduce-scatter on device, then allgather
        size_t c = (n + P - 1) / P;
        DeviceScratch tmp(d, 3 * P * c, "allreduce scratch");
        float* padded = tmp.p;
        float* recv = tmp.p + P * c;
        float* gathered = tmp.p + 2 * P * c;
        d.copy(padded, buf, n * sizeof(float), CopyKind::DeviceToDevice, devs_.comm());
        d.memset(padded + n, 0, (P * c - n) * sizeof(float), devs_.comm());
        d.synchronize(devs_.comm());
        g_.alltoall(padded, recv, c);
        d.sum_chunks(recv, g_.size(), c, padded, devs_.comm());
        d.synchronize(devs_.comm());
        g_.allgather(padded, gathered, c);
        d.copy(buf, gathered, n * sizeof(float), CopyKind::DeviceToDevice, devs_.comm());
        d.synchronize(devs_.comm());
        return;
    }
    pipeline(
        n, [&](size_t off, size_t k, float* send) { d2h(send, buf + off, k); },
        [&](float* send, float* recv, size_t k) {
            std::memcpy(recv, send, k * sizeof(float));
            g_.allreduce(recv, k, scratch_);
        },
        [&](size_t off, size_t k, const float* recv) { h2d(buf + off, recv, k); });
}

void DeviceComm::alltoall(const float* send, float* recv, size_t n, device::Event* after) {
    if (after) after->synchronize();
    if (t_ != Transport::Staged) {
        g_.alltoall(send, recv, n);
        return;
    }
    const size_t P = static_cast<size_t>(g_.size());
    pipeline(
        n,
        [&](size_t off, size_t k, float* dst) {
            for (size_t q = 0; q < P; q++)
                d2h(dst + q * k, send + q * n + off, k);
        },
        [&](float* s, float* r, size_t k) { g_.alltoall(s, r, k); },
        [&](size_t off, size_t k, const float* r) {
            for (size_t q = 0; q < P; q++)
                h2d(recv + q * n + off, r + q * k, k);
        });
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
    comm::CudaAwareness a = comm::query_cuda_awareness();
    bool ok = a.supported;
    std::string detail = a.source;
    if (ok) { // confirm with a device-buffer round trip: every rank contributes rank+1
        float* buf = nullptr;
        try {
            buf = static_cast<float*>(d.alloc(64 * sizeof(float), "CUDA-aware probe"));
            std::vector<float> h(64, static_cast<float>(group.rank() + 1));
            d.copy(buf, h.data(), h.size() * sizeof(float), CopyKind::HostToDevice, devs.comm());
            d.synchronize(devs.comm());
            SOF_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf, 64, MPI_FLOAT, MPI_SUM, group.comm()));
            d.copy(h.data(), buf, h.size() * sizeof(float), CopyKind::DeviceToHost, devs.comm());
            d.synchronize(devs.comm());
            float want = static_cast<float>(group.size()) * (group.size() + 1) / 2.0f;
            for (float x : h)
                ok &= x == want;
            if (!ok) detail += "; the device-buffer round trip returned wrong values";
        } catch (const std::exception& e) {
            ok = false;
            detail += std::string("; the device-buffer round trip failed: ") + e.what();
        }
        d.free(buf);
    }
    bool everyone = !group.any(!ok); // one path for the whole group
    if (ok && !everyone) detail += "; another rank could not confirm it";
    *why = detail;
    return everyone ? Transport::CudaAware : Transport::Staged;
}

} // namespace sof::rank
