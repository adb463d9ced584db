// Throughput of the CUDA device's own kernels (not a ctest): casts and grad_prep over N fp32
// grads in pieces of kernels::kStatPiece. Usage: bench_cuda_device [N] [iterations].
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "device/cuda_device.h"
#include "kernels/grad_stats.h"

using namespace sof;

int main(int argc, char** argv) {
    if (device::cuda_device_count() == 0) {
        std::printf("SKIPPED: no usable CUDA device\n");
        return 77;
    }
    size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t(1) << 28);
    int iters = argc > 2 ? std::atoi(argv[2]) : 20;
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
    } catch (const core::Error& e) {
        std::fprintf(stderr, "bench_cuda_device: %s\n", e.what());
        return 2;
    }
    return 0;
}
