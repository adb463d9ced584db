// Timing events of a Device (create_timing_event / elapsed_ms), checked the same way on the host
// device (tests/kernels/test_launch.cpp) and the CUDA device (tests/cuda/test_cuda_device.cpp).
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "device/device.h"

namespace sof::test {

// Events measure the stream's time, not the enqueue time: a host task that is held on the stream
// until the test has slept kHoldMs lies between e0 and e1, so elapsed(e0, e1) >= its own duration
// (read with the same steady clock inside the task) >= kHoldMs. No wall-clock race: the sleep only
// makes a lower bound true. Parts add up: elapsed(e0, e2) = elapsed(e0, e1) + elapsed(e1, e2)
// within the device's resolution (CUDA: float ms, ~0.5 us ticks).
inline void check_event_timing(device::Device& dev, double tolerance_ms) {
    constexpr double kHoldMs = 5.0;
    auto s = dev.create_stream("timing");
    auto e0 = dev.create_timing_event(), e1 = dev.create_timing_event();
    auto e2 = dev.create_timing_event();
    CHECK(e0->timing());
    CHECK_FALSE(dev.create_event()->timing());
    std::mutex mu;
    std::condition_variable cv;
    bool started = false, release = false;
    double task_ms = 0.0;
    dev.record(*e0, *s);
    dev.host_task(
        *s,
        [&] {
            const auto t0 = std::chrono::steady_clock::now();
            std::unique_lock<std::mutex> lk(mu);
            started = true;
            cv.notify_all();
            cv.wait(lk, [&] { return release; });
            task_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count();
        },
        "held");
    dev.record(*e1, *s);
    dev.host_task(
        *s, [] {}, "empty");
    dev.record(*e2, *s);
    {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return started; });
    }
    CHECK_FALSE(e1->query()); // the held task is between e0 and e1
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kHoldMs));
    {
        std::lock_guard<std::mutex> lk(mu);
        release = true;
    }
    cv.notify_all();
    const double a = dev.elapsed_ms(*e0, *e1), b = dev.elapsed_ms(*e1, *e2);
    const double whole = dev.elapsed_ms(*e0, *e2);
    dev.synchronize(*s);
    INFO("elapsed e0->e1 " << a << " ms, e1->e2 " << b << " ms, e0->e2 " << whole
                           << " ms, held task " << task_ms << " ms");
    CHECK(task_ms >= kHoldMs);
    CHECK(a >= task_ms - tolerance_ms);
    CHECK(b >= 0.0);
    CHECK(std::abs(whole - (a + b)) <= tolerance_ms);
    // misuse is an error, not a number
    auto plain = dev.create_event(), fresh = dev.create_timing_event();
    dev.record(*plain, *s);
    CHECK_THROWS_AS(dev.elapsed_ms(*plain, *e1), core::Error);
    CHECK_THROWS_AS(dev.elapsed_ms(*e0, *fresh), core::Error);
    dev.synchronize(*s);
}

} // namespace sof::test
