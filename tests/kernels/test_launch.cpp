// Device::launch on the host device (the CPU twin's Exec, in stream order, errors at the next
// synchronize) and the device ops built on it (grad_prep, casts, sum_chunks) against the kernels.
#include <atomic>
#include <stdexcept>

#include "device/host_device.h"
#include "kernels/event_timing_check.h"
#include "harness.h"
#include "kernels/cast.h"
#include "kernels/grad_stats.h"

using namespace sof;

TEST_CASE("Device::launch on the host device: CPU Exec, stream order, errors at synchronize" *
          doctest::test_suite("cpu")) {
    device::HostDevice dev(size_t(1) << 26, nullptr);
    auto s = dev.create_stream("launch");
    std::vector<int> order;
    std::atomic<int> cuda_seen{0};
    dev.host_task(
        *s, [&] { order.push_back(1); }, "first");
    dev.launch(*s, "op", [&](const kernels::Exec& ex) {
        if (ex.backend != kernels::Backend::Cpu || ex.stream || ex.blas) cuda_seen++;
        order.push_back(2);
    });
    dev.host_task(
        *s, [&] { order.push_back(3); }, "third");
    dev.synchronize(*s);
    CHECK(order == std::vector<int>{1, 2, 3});
    CHECK(cuda_seen == 0);
    // an op's exception surfaces at the next synchronize of the stream, once
    dev.launch(*s, "bad", [](const kernels::Exec&) { throw std::runtime_error("op failed"); });
    CHECK_THROWS_WITH(dev.synchronize(*s), "op failed");
    CHECK_NOTHROW(dev.synchronize(*s));
}

TEST_CASE("timing events on the host device: the stream's clock, parts add up" *
          doctest::test_suite("cpu")) {
    device::HostDevice dev(size_t(1) << 26, nullptr);
    test::check_event_timing(dev, 1e-9); // one steady clock, double arithmetic
}

TEST_CASE("device ops through launch equal the kernels (host device)" *
          doctest::test_suite("cpu")) {
    device::HostDevice dev(size_t(1) << 26, nullptr);
    auto s = dev.create_stream("ops");
    const size_t n = 70000;
    const auto g = ktest::randn(n, 5, 1e-2f);
    const std::vector<int64_t> bounds = {0, kernels::kStatPiece, int64_t(n)};
    std::vector<kernels::GradStats> st(2), want(2);
    std::vector<uint16_t> h(n), hw(n);
    dev.grad_prep(g.data(), n, bounds, 0.5f, st.data(), h.data(), *s);
    std::vector<float> back(n), backw(n), sum(n / 2), sumw(n / 2);
    dev.cast_bf16_to_f32(h.data(), back.data(), n, *s); // in stream order after grad_prep
    dev.sum_chunks(g.data(), 2, n / 2, sum.data(), *s);
    dev.synchronize(*s);
    kernels::grad_prep(kernels::cpu_exec(), g.data(), n, bounds, 0.5f, want.data(), hw.data());
    kernels::cast_bf16_to_f32(kernels::cpu_exec(), hw.data(), backw.data(), n);
    kernels::sum_chunks(kernels::cpu_exec(), g.data(), 2, n / 2, sumw.data());
    for (int i = 0; i < 2; i++) {
        CHECK(st[i].sumsq == want[i].sumsq);
        CHECK(st[i].nonfinite == want[i].nonfinite);
    }
    CHECK(h == hw);
    ktest::check_bitwise("device cast_bf16_to_f32 via launch", back, backw);
    ktest::check_bitwise("device sum_chunks via launch", sum, sumw);
    std::vector<uint16_t> h2(n);
    dev.cast_f32_to_bf16(g.data(), h2.data(), n, *s);
    dev.synchronize(*s);
    std::vector<uint16_t> h2w(n);
    kernels::cast_f32_to_bf16(kernels::cpu_exec(), g.data(), h2w.data(), n);
    CHECK(h2 == h2w);
    // bad piece bounds throw at the call, not later on the stream
    CHECK_THROWS(dev.grad_prep(g.data(), n, {0, 5}, 1.0f, st.data(), nullptr, *s));
}
