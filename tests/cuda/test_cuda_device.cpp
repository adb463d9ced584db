// The CUDA device against the host device: copies, memset, casts and grad_prep statistics must
// agree bitwise; streams, events, host tasks, errors and memory accounting behave as device.h says.
#include <doctest/doctest.h>

#include "case_names.h" // each case named in the log before it runs

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "config/config.h"
#include "core/dtype.h"
#include "core/error.h"
#include "device/cuda_device.h"
#include "device/host_device.h"
#include "kernels/event_timing_check.h"

using namespace sof;
using device::CopyKind;
using device::Device;
using device::GradStats;

namespace {

std::unique_ptr<Device> make_gpu(double memory_gb = 0.0) {
    config::DeviceConfig cfg;
    cfg.type = config::DeviceType::Cuda;
    cfg.memory_gb = memory_gb;
    cfg.id = -1;
    return device::make_device(cfg, 0, nullptr); // through the factory: the CUDA branch
}

std::unique_ptr<Device> make_host() {
    return std::make_unique<device::HostDevice>(size_t(1) << 30, nullptr);
}

// Grads with edge values: NaN-free unless asked, ties for bf16 rounding, subnormals, large.
std::vector<float> grads(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1e-2f);
    std::vector<float> g(n);
    for (size_t i = 0; i < n; i++)
        g[i] = nd(rng);
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x00000001u,
                                0x80400000u, 0x5f000000u, 0x33000000u, 0x477ff000u};
    for (size_t k = 0; k < 8 && 97 * k < n; k++)
        g[97 * k] = core::bits_f32(special[k]);
    return g;
}

// Copies host data into fresh device memory of `d` and returns the pointer (freed by caller).
template <class T> T* upload(Device& d, const std::vector<T>& h) {
    auto s = d.create_stream("upload");
    void* p = d.alloc(h.size() * sizeof(T), "test buffer");
    d.copy(p, h.data(), h.size() * sizeof(T), CopyKind::HostToDevice, *s);
    d.synchronize(*s);
    return static_cast<T*>(p);
}

template <class T> std::vector<T> download(Device& d, const T* p, size_t n) {
    auto s = d.create_stream("download");
    std::vector<T> h(n);
    d.copy(h.data(), p, n * sizeof(T), CopyKind::DeviceToHost, *s);
    d.synchronize(*s);
    return h;
}

// grad_prep on one device: returns the stats and (when with_bf16) the bf16 output.
struct PrepOut {
    std::vector<GradStats> stats;
    std::vector<uint16_t> bf16;
};

PrepOut run_prep(Device& d, const std::vector<float>& g, const std::vector<int64_t>& bounds,
                 float scale, bool with_bf16) {
    float* dg = upload(d, g);
    size_t np = bounds.size() - 1;
    auto* ds = static_cast<GradStats*>(d.alloc(np * sizeof(GradStats), "stats"));
    uint16_t* db = with_bf16 ? static_cast<uint16_t*>(d.alloc(g.size() * 2, "bf16")) : nullptr;
    auto s = d.create_stream("prep");
    d.grad_prep(dg, g.size(), bounds, scale, ds, db, *s);
    d.synchronize(*s);
    PrepOut out;
    out.stats = download(d, ds, np);
    if (db) out.bf16 = download(d, db, g.size());
    d.free(dg);
    d.free(ds);
    d.free(db);
    return out;
}

} // namespace

TEST_CASE("describe, capacity and the factory's CUDA branch") {
    auto gpu = make_gpu();
    CHECK(gpu->kind() == device::Kind::Cuda);
    CHECK_FALSE(gpu->host_accessible());
    CHECK(gpu->capacity() > (size_t(1) << 30));
    MESSAGE(gpu->describe());
    auto small = make_gpu(0.001); // ~1 MiB accounting limit
    CHECK(small->capacity() == static_cast<size_t>(0.001 * double(size_t(1) << 30)));
    void* a = small->alloc(512 * 1024, "half");
    CHECK(small->used() == 512 * 1024);
    try {
        small->alloc(2 << 20, "too big");
        FAIL("an allocation over the accounting limit was accepted");
    } catch (const core::Error& e) {
        CHECK(e.kind() == core::ErrorKind::Runtime);
        std::string m = e.what();
        CHECK(m.find("too big") != std::string::npos);
        CHECK(m.find("device.memory_gb") != std::string::npos);
        CHECK(m.find("half") != std::string::npos); // largest buffer named
    }
    small->free(a);
    CHECK(small->used() == 0);
    CHECK(small->peak() == 512 * 1024);
    config::DeviceConfig bad;
    bad.type = config::DeviceType::Cuda;
    bad.id = 4096;
    CHECK_THROWS_AS(device::make_device(bad, 0, nullptr), core::Error);
}

TEST_CASE("copies H2D, D2D, D2H and memset, odd sizes, pinned and pageable host memory") {
    auto gpu = make_gpu();
    for (size_t bytes : {size_t(1), size_t(7), size_t(4099), size_t(3) << 20}) {
        CAPTURE(bytes);
        std::vector<unsigned char> src(bytes);
        for (size_t i = 0; i < bytes; i++)
            src[i] = static_cast<unsigned char>(i * 131 + 7);
        auto s = gpu->create_stream("copy");
        void* a = gpu->alloc(bytes, "a");
        void* b = gpu->alloc(bytes, "b");
        auto* pinned = static_cast<unsigned char*>(gpu->alloc_pinned(bytes, "pinned"));
        gpu->copy(a, src.data(), bytes, CopyKind::HostToDevice, *s);
        gpu->copy(b, a, bytes, CopyKind::DeviceToDevice, *s);
        gpu->copy(pinned, b, bytes, CopyKind::DeviceToHost, *s);
        gpu->synchronize(*s);
        CHECK(std::memcmp(pinned, src.data(), bytes) == 0);
        gpu->memset(b, 0xAB, bytes / 2, *s);
        gpu->copy(pinned, b, bytes, CopyKind::DeviceToHost, *s);
        gpu->synchronize(*s);
        size_t bad = 0;
        for (size_t i = 0; i < bytes; i++)
            bad += pinned[i] != (i < bytes / 2 ? 0xAB : src[i]);
        CHECK(bad == 0);
        gpu->free(a);
        gpu->free(b);
        gpu->free_pinned(pinned);
    }
}

TEST_CASE("casts equal the host device's bitwise (RNE ties, NaN, Inf, subnormals)") {
    auto gpu = make_gpu();
    auto host = make_host();
    const size_t n = 1000003;
    std::mt19937 rng(11);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++)
        f[i] = core::bits_f32(rng());
    const uint32_t special[] = {0x7fc00001u, 0xffc12345u, 0x7f800001u, 0x7f800000u,
                                0xff800000u, 0x3f808000u, 0x3f818000u, 0x00000001u};
    for (size_t k = 0; k < 8; k++)
        f[k] = core::bits_f32(special[k]);
    std::vector<uint16_t> want16(n), got16;
    for (size_t i = 0; i < n; i++)
        want16[i] = core::f32_to_bf16(f[i]);
    for (Device* d : {gpu.get(), host.get()}) {
        float* src = upload(*d, f);
        auto* dst = static_cast<uint16_t*>(d->alloc(2 * n, "bf16"));
        auto* back = static_cast<float*>(d->alloc(4 * n, "f32"));
        auto s = d->create_stream("cast");
        d->cast_f32_to_bf16(src, dst, n, *s);
        d->cast_bf16_to_f32(dst, back, n, *s);
        d->synchronize(*s);
        got16 = download(*d, dst, n);
        std::vector<float> gotf = download(*d, back, n);
        CHECK(std::memcmp(got16.data(), want16.data(), 2 * n) == 0);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            float w = core::bf16_to_f32(want16[i]);
            bad += std::memcmp(&gotf[i], &w, 4) != 0;
        }
        CHECK(bad == 0);
        d->free(src);
        d->free(dst);
        d->free(back);
    }
}

TEST_CASE("grad_prep: statistics and bf16 output equal the host device's bitwise") {
    auto gpu = make_gpu();
    auto host = make_host();
    const size_t n = 300007;
    std::vector<float> g = grads(n, 3);
    // pieces of 65536 (the engine's kStatPiece), an empty piece, a short odd one, the rest
    std::vector<int64_t> bounds = {0,      65536,  131072, 131072,
                                   131075, 200001, 265537, static_cast<int64_t>(n)};
    for (bool with_bf16 : {false, true}) {
        for (float scale : {1.0f, 0.37f}) {
            CAPTURE(with_bf16);
            CAPTURE(scale);
            PrepOut a = run_prep(*gpu, g, bounds, scale, with_bf16);
            PrepOut b = run_prep(*host, g, bounds, scale, with_bf16);
            REQUIRE(a.stats.size() == b.stats.size());
            for (size_t i = 0; i < a.stats.size(); i++) {
                CAPTURE(i);
                CHECK(a.stats[i].sumsq == b.stats[i].sumsq); // bitwise: same order, no FMA
                CHECK(a.stats[i].nonfinite == 0);
                CHECK(b.stats[i].nonfinite == 0);
            }
            CHECK(a.stats[2].sumsq == 0.0);
            if (with_bf16) CHECK(std::memcmp(a.bf16.data(), b.bf16.data(), 2 * n) == 0);
        }
    }
    // non-finite grads flag exactly their pieces; a finite grad overflowing once scaled too
    std::vector<float> h = g;
    h[70000] = NAN;
    h[131073] = INFINITY;
    h[250000] = 3e38f;
    PrepOut a = run_prep(*gpu, h, bounds, 4.0f, true);
    PrepOut b = run_prep(*host, h, bounds, 4.0f, true);
    for (size_t i = 0; i < a.stats.size(); i++) {
        CAPTURE(i);
        CHECK(a.stats[i].nonfinite == b.stats[i].nonfinite);
        CHECK(a.stats[i].nonfinite == ((i == 1 || i == 3 || i == 5) ? 1 : 0));
        if (!a.stats[i].nonfinite) CHECK(a.stats[i].sumsq == b.stats[i].sumsq);
    }
    CHECK_THROWS_AS(
        gpu->grad_prep(nullptr, 10, {0, 5}, 1.0f, nullptr, nullptr, *gpu->create_stream("bad")),
        core::Error);
}

TEST_CASE("streams, events and host tasks: order, cross-stream waits, errors") {
    auto gpu = make_gpu();
    const size_t n = 1 << 20;
    auto s1 = gpu->create_stream("one");
    auto s2 = gpu->create_stream("two");
    CHECK(s1->native() != nullptr);
    CHECK(s1->native() != s2->native());
    auto ev = gpu->create_event();
    CHECK(ev->query()); // never recorded: complete

    // s1: memset then D2H into pinned memory, then a host task reading it (after the copy)
    auto* d = static_cast<unsigned char*>(gpu->alloc(n, "buf"));
    auto* pinned = static_cast<unsigned char*>(gpu->alloc_pinned(n, "pinned"));
    std::memset(pinned, 0, n);
    std::atomic<int> seen{-1};
    gpu->memset(d, 0x5A, n, *s1);
    gpu->copy(pinned, d, n, CopyKind::DeviceToHost, *s1);
    gpu->host_task(
        *s1, [&] { seen = pinned[n - 1]; }, "check");
    gpu->record(*ev, *s1);
    // s2 waits for s1's event, then overwrites the device buffer and copies back
    gpu->wait(*s2, *ev);
    gpu->memset(d, 0x11, n, *s2);
    auto* pinned2 = static_cast<unsigned char*>(gpu->alloc_pinned(n, "pinned2"));
    gpu->copy(pinned2, d, n, CopyKind::DeviceToHost, *s2);
    gpu->synchronize(*s2);
    CHECK(ev->query());
    CHECK(seen.load() == 0x5A);
    CHECK(pinned[0] == 0x5A);
    CHECK(pinned2[n - 1] == 0x11);

    // a host task that throws: the error comes back from synchronize of its stream, once
    std::atomic<bool> later{false};
    gpu->host_task(
        *s1, [] { throw std::runtime_error("host task failed on purpose"); }, "boom");
    gpu->host_task(
        *s1, [&] { later = true; }, "after");
    CHECK_THROWS_WITH(gpu->synchronize(*s1), "host task failed on purpose");
    CHECK(later.load());
    CHECK_NOTHROW(gpu->synchronize(*s1));
    gpu->host_task(
        *s2, [] { throw std::runtime_error("device-wide"); }, "boom2");
    CHECK_THROWS_WITH(gpu->synchronize(), "device-wide");
    ev->synchronize();
    gpu->free(d);
    gpu->free_pinned(pinned);
    gpu->free_pinned(pinned2);
}

TEST_CASE("timing events: device time between records, parts add up, misuse throws") {
    auto gpu = make_gpu();
    test::check_event_timing(*gpu, 0.01); // cudaEventElapsedTime: float ms, ~0.5 us resolution
}

int main(int argc, char** argv) {
    if (device::cuda_device_count() == 0) {
        std::printf("SKIPPED: no usable CUDA device\n");
        return 77;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
