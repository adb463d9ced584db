// Throughput of the CUDA device's own kernels (not a ctest): casts and grad_prep over N fp32
// grads in pieces of kernels::kStatPiece; with --link also the host link (pinned H2D and D2H
// copies from 0.25 to 1024 MiB, timed with the device's timing events), printed as the h2d/d2h
// curves of a hardware profile (inputs/hardware/*.yaml).
// Usage: bench_cuda_device [N] [iterations] [--link].
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "device/cuda_device.h"
#include "kernels/grad_stats.h"

using namespace sof;

namespace {

// Pinned host <-> device copies of 0.25..1024 MiB on one stream, timed between timing events
// (median of 5 after a warm-up), as "h2d: [[MiB, GB/s], ...]" for a hardware profile.
void link_curves(device::Device& dev, device::Stream& s) {
    const std::vector<double> mib = {0.25, 1, 4, 16, 64, 256, 1024};
    const size_t most = static_cast<size_t>(mib.back() * (1 << 20));
    void* host = dev.alloc_pinned(most, "link bench (pinned)");
    void* devbuf = dev.alloc(most, "link bench (device)");
    std::memset(host, 1, most);
    auto a = dev.create_timing_event(), b = dev.create_timing_event();
    for (bool h2d : {true, false}) {
        std::printf("%s: [", h2d ? "h2d" : "d2h");
        for (size_t k = 0; k < mib.size(); k++) {
            const size_t bytes = static_cast<size_t>(mib[k] * (1 << 20));
            std::vector<double> ms;
            for (int r = 0; r < 6; r++) {
                dev.record(*a, s);
                if (h2d)
                    dev.copy(devbuf, host, bytes, device::CopyKind::HostToDevice, s);
                else
                    dev.copy(host, devbuf, bytes, device::CopyKind::DeviceToHost, s);
                dev.record(*b, s);
                if (r > 0) ms.push_back(dev.elapsed_ms(*a, *b));
            }
            std::sort(ms.begin(), ms.end());
            const double gbps = static_cast<double>(bytes) / (ms[ms.size() / 2] / 1e3) / 1e9;
            std::printf("%s[%g, %.1f]", k ? ", " : "", mib[k], gbps);
        }
        std::printf("]\n");
    }
    dev.free(devbuf);
    dev.free_pinned(host);
}

} // namespace

int main(int argc, char** argv) {
    if (device::cuda_device_count() == 0) {
        std::printf("SKIPPED: no usable CUDA device\n");
        return 77;
    }
    bool link = false;
    std::vector<const char*> pos;
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--link") == 0)
            link = true;
        else
            pos.push_back(argv[i]);
    }
    size_t n = pos.size() > 0 ? std::strtoull(pos[0], nullptr, 10) : (size_t(1) << 28);
    int iters = pos.size() > 1 ? std::atoi(pos[1]) : 20;
    try {
        config::DeviceConfig cfg;
        cfg.type = config::DeviceType::Cuda;
        auto dev = device::make_cuda_device(cfg, 0, nullptr);
        auto s = dev->create_stream("bench");
        auto* g = static_cast<float*>(dev->alloc(4 * n, "grads"));
        auto* h = static_cast<uint16_t*>(dev->alloc(2 * n, "bf16"));
        auto* f = static_cast<float*>(dev->alloc(4 * n, "fp32"));
        std::vector<int64_t> bounds;
        for (size_t a = 0; a < n; a += kernels::kStatPiece)
            bounds.push_back(static_cast<int64_t>(a));
        bounds.push_back(static_cast<int64_t>(n));
        auto* st = static_cast<device::GradStats*>(
            dev->alloc(bounds.size() * sizeof(device::GradStats), "stats"));
        dev->memset(g, 0x3c, 4 * n, *s); // finite values (0x3c3c3c3c ~ 0.0115)
        dev->synchronize(*s);
        std::printf("%s\nparams %zu, pieces %zu, iterations %d\n", dev->describe().c_str(), n,
                    bounds.size() - 1, iters);
        auto time_it = [&](const char* what, double bytes_per_elem, auto&& op) {
            op();
            dev->synchronize(*s);
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < iters; i++)
                op();
            dev->synchronize(*s);
            double sec =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                iters;
            std::printf("%-28s %8.3f ms  %8.1f GB/s  %7.1f Gelem/s\n", what, sec * 1e3,
                        bytes_per_elem * static_cast<double>(n) / sec / 1e9,
                        static_cast<double>(n) / sec / 1e9);
        };
        time_it("cast fp32->bf16 (6 B/elem)", 6.0, [&] { dev->cast_f32_to_bf16(g, h, n, *s); });
        time_it("cast bf16->fp32 (6 B/elem)", 6.0, [&] { dev->cast_bf16_to_f32(h, f, n, *s); });
        time_it("grad_prep stats (4 B/elem)", 4.0,
                [&] { dev->grad_prep(g, n, bounds, 0.5f, st, nullptr, *s); });
        time_it("grad_prep +bf16 (6 B/elem)", 6.0,
                [&] { dev->grad_prep(g, n, bounds, 0.5f, st, h, *s); });
        time_it("D2D copy fp32 (8 B/elem)", 8.0,
                [&] { dev->copy(f, g, 4 * n, device::CopyKind::DeviceToDevice, *s); });
        dev->free(g);
        dev->free(h);
        dev->free(f);
        dev->free(st);
        if (link) link_curves(*dev, *s);
    } catch (const core::Error& e) {
        std::fprintf(stderr, "bench_cuda_device: %s\n", e.what());
        return 2;
    }
    return 0;
}
