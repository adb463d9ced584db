// The planner's equations against hand-computed values: link curve interpolation, saturating
// bucket, paper Eq. 1-3 (weight-flow efficiency, Fig. 6), Eq. 4-5 (tail buckets), DOS Eq. 1 (k).
#include <doctest/doctest.h>

#include <cmath>

#include "plan/planner.h"

using namespace sof::plan;

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}

TEST_CASE("bandwidth curve: log-size interpolation and clamping") {
    std::vector<BandwidthPoint> c = {{1 * kMiB, 10}, {4 * kMiB, 30}};
    CHECK(bandwidth_gbps(c, 0.5 * kMiB) == doctest::Approx(10));
    CHECK(bandwidth_gbps(c, 1 * kMiB) == doctest::Approx(10));
    CHECK(bandwidth_gbps(c, 2 * kMiB) == doctest::Approx(20)); // halfway in log(size)
    CHECK(bandwidth_gbps(c, 4 * kMiB) == doctest::Approx(30));
    CHECK(bandwidth_gbps(c, 1024 * kMiB) == doctest::Approx(30));
    CHECK(transfer_seconds(c, 4 * kMiB) == doctest::Approx(4 * kMiB / 30e9));
    CHECK(transfer_seconds(c, 0) == 0);
}

TEST_CASE("saturating bucket: the smallest power of two at 95% of the best, both directions") {
    HardwareProfile hw = default_host_profile();
    // this host: best 10 GB/s; 2 MiB sits exactly at 9.5 GB/s (halfway between 1 and 4 MiB)
    CHECK(saturating_bucket_bytes(hw) == doctest::Approx(2 * kMiB));
    hw.d2h = {{1 * kMiB, 1}, {64 * kMiB, 100}};
    // d2h: 95 GB/s at 2^(log2(64)*94/99) MiB ~ 51.6 MiB -> 64 MiB
    CHECK(saturating_bucket_bytes(hw) == doctest::Approx(64 * kMiB));
}

TEST_CASE("paper Eq. 1-3: weight-flow efficiency (Fig. 6, 450 GB/s C2C, 989 TFLOPS)") {
    // eff = B*T*bw / (B*T*bw + peak): B=4, T=1024: 1843.2 / (1843.2 + 989)
    CHECK(weight_flow_efficiency(4, 1024, 989e12, 450e9) ==
          doctest::Approx(0.650801).epsilon(1e-5));
    CHECK(weight_flow_efficiency(2, 1024, 989e12, 450e9) ==
          doctest::Approx(0.482362).epsilon(1e-5));
    CHECK(weight_flow_efficiency(1, 1024, 989e12, 450e9) ==
          doctest::Approx(0.317837).epsilon(1e-5));
    // the paper: batch >= 4 at seq 1024 is needed for > 60%
    int first = 0;
    for (int b = 1; b <= 64 && !first; b *= 2)
        if (weight_flow_efficiency(b, 1024, 989e12, 450e9) > 0.6) first = b;
    CHECK(first == 4);
    // a PCIe Gen4 link (32 GB/s) needs 16x more tokens for the same efficiency
    CHECK(weight_flow_efficiency(64, 1024, 989e12, 32e9) ==
          doctest::Approx(weight_flow_efficiency(4, 1024, 989e12, 512e9)));
}

TEST_CASE("paper Eq. 4-5: tail buckets for the last CPU bucket") {
    // per tail bucket: bwd = 4 * 1000 tokens * 1e6 params / 4e12 = 1 ms, GPU step = 1e6/1e9 = 1 ms
    // last bucket: 1 + 4 + 1 = 6 ms -> n = 3
    CHECK(tail_buckets_eq45(0.001, 0.004, 0.001, 1e6, 1000, 4e12, 1e9) == 3);
    CHECK(tail_buckets_eq45(0.001, 0.0041, 0.001, 1e6, 1000, 4e12, 1e9) == 4);
    CHECK(tail_buckets_eq45(0.0, 0.0, 0.0, 1e6, 1000, 4e12, 1e9) == 0);
    CHECK(tail_buckets_eq45(0.0005, 0.0005, 0.0005, 1e6, 1000, 4e12, 1e9) == 1);
}

TEST_CASE("Deep Optimizer States Eq. 1: update stride k") {
    // DOS paper, 4xV100 machine: B = 3, Ug = 35, Uc = 2, Dc = 8.7 (G params/s) -> k = 2
    // k = (3/3 + 1/35) / (1/2 + 1/8.7 - 1/6) = 1.0285714 / 0.4482759 = 2.29451
    double k = dos_interleave_k(3e9, 35e9, 2e9, 8.7e9);
    CHECK(k == doctest::Approx(2.29451).epsilon(1e-5));
    CHECK(std::lround(k) == 2);
    // independent of the unit (scale every rate)
    CHECK(dos_interleave_k(3, 35, 2, 8.7) == doctest::Approx(k));
    // CPU fast enough for the link: no GPU subgroups
    CHECK(std::isinf(dos_interleave_k(1e9, 35e9, 1e10, 1e10)));
}
