// Op driver cases of cast.h: fp32 -> bf16 round to nearest even (NaN kept, overflow to inf) and
// bf16 -> fp32; CPU twin vs a nearest-value reference in double, CUDA twin bitwise vs the CPU twin.
#include <cmath>
#include <cstring>
#include <limits>

#include "harness.h"
#include "kernels/cast.h"

using namespace sof;
using namespace sof::ktest;

namespace {

// The value of bf16 bits as a double; the pattern after the largest finite one counts as 2^128
// (the next value of the format, where rounding overflows to inf).
double bf16_value(uint32_t h) {
    const double sign = (h & 0x8000u) ? -1.0 : 1.0;
    if ((h & 0x7f80u) == 0x7f80u) return sign * std::ldexp(1.0, 128);
    return core::bits_f32(h << 16);
}

// Round to nearest, ties to even, written from the definition: of the two bf16 values around f
// (the truncation and the next one away from zero), the nearer; on a tie the even mantissa.
uint16_t ref_f32_to_bf16(float f) {
    const uint32_t u = core::f32_bits(f);
    const uint32_t t = u >> 16;
    if (std::isinf(f) || (u & 0xffffu) == 0) return static_cast<uint16_t>(t);
    const double x = f, lo = bf16_value(t), hi = bf16_value(t + 1);
    const double dl = std::fabs(x - lo), dh = std::fabs(hi - x);
    if (dl < dh) return static_cast<uint16_t>(t);
    if (dh < dl) return static_cast<uint16_t>(t + 1);
    return static_cast<uint16_t>((t & 1u) ? t + 1 : t);
}

std::vector<float> inputs(size_t n, uint32_t seed) {
    std::vector<float> v = randn(n, seed);
    const float scales[] = {1e-30f, 1e-3f, 1.0f, 1e3f, 1e30f};
    for (size_t i = 0; i < n; i++)
        v[i] *= scales[i % 5];
    const uint32_t special[] = {
        0x3f808000u, // 1 + 2^-8: a tie, rounds down to even
        0x3f818000u, // a tie that rounds up to even
        0xbf808000u, // the negative tie
        0x00000001u, // the smallest subnormal
        0x807fffffu, // the largest negative subnormal
        0x7f7fffffu, // FLT_MAX: rounds to inf
        0x7f7f7fffu, // just below the overflow midpoint: stays finite
        0x7f800000u, 0xff800000u, 0x80000000u, 0x00000000u,
        0x7fc00000u, // quiet NaN
        0x7f800001u, // signalling NaN: must stay NaN (not become inf)
        0xffffffffu, // negative NaN
    };
    for (size_t k = 0; k < sizeof(special) / sizeof(special[0]) && 17 * k < n; k++)
        v[17 * k] = core::bits_f32(special[k]);
    return v;
}

// CHECKs h against the reference rounding of f (NaN: a NaN of the same sign); returns mismatches
size_t check_rounding(const std::vector<float>& f, const std::vector<uint16_t>& h) {
    size_t bad = 0;
    for (size_t i = 0; i < f.size(); i++) {
        if (std::isnan(f[i])) {
            const float back = core::bf16_to_f32(h[i]);
            bad += !(std::isnan(back) && std::signbit(back) == std::signbit(f[i]));
        } else {
            bad += h[i] != ref_f32_to_bf16(f[i]);
        }
    }
    return bad;
}

} // namespace

SOF_OP_CPU("cast", "round to nearest even and widening against the definition") {
    CHECK(ref_f32_to_bf16(core::bits_f32(0x3f808000u)) == 0x3f80u); // the reference itself
    CHECK(ref_f32_to_bf16(core::bits_f32(0x3f818000u)) == 0x3f82u);
    CHECK(ref_f32_to_bf16(core::bits_f32(0x7f7fffffu)) == 0x7f80u);
    for (size_t n : {size_t(1), size_t(1000), size_t(65536 * 3 + 1)}) {
        INFO("n=" << n);
        const auto f = inputs(n, 3);
        std::vector<uint16_t> h(n, 0xdeadu);
        kernels::cast_f32_to_bf16(kernels::cpu_exec(), f.data(), h.data(), n);
        CHECK(check_rounding(f, h) == 0);
        // the check can fail: one value rounded the other way is caught
        std::vector<uint16_t> bad = h;
        bad[n / 2] ^= 1u;
        CHECK(check_rounding(f, bad) == 1);
        std::vector<float> back(n, NAN), ref(n);
        kernels::cast_bf16_to_f32(kernels::cpu_exec(), h.data(), back.data(), n);
        for (size_t i = 0; i < n; i++)
            ref[i] = core::bits_f32(uint32_t(h[i]) << 16);
        check_bitwise("cast bf16->fp32 n=" + std::to_string(n), back, ref);
    }
}

SOF_OP_GPU("cast", "bitwise against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // casts are exact functions of their input: the twins must agree bitwise
    for (size_t n : {size_t(1), size_t(1000), size_t(1) << 22}) {
        INFO("n=" << n);
        const auto f = inputs(n, 4);
        std::vector<uint16_t> h(n);
        std::vector<float> back(n);
        kernels::cast_f32_to_bf16(kernels::cpu_exec(), f.data(), h.data(), n);
        kernels::cast_bf16_to_f32(kernels::cpu_exec(), h.data(), back.data(), n);
        auto df = g->upload<float>(f);
        auto dh = g->upload_raw(std::vector<uint16_t>(n, 0));
        auto dback = g->upload<float>(std::vector<float>(n, 0.0f));
        kernels::cast_f32_to_bf16(g->exec(), df.get(), dh.get(), n);
        kernels::cast_bf16_to_f32(g->exec(), dh.get(), dback.get(), n);
        const auto gh = g->download_raw(dh.get(), n);
        std::vector<float> gh_f(n), h_f(n);
        for (size_t i = 0; i < n; i++) {
            gh_f[i] = core::bits_f32(gh[i]); // the 16 bits as a float's low half
            h_f[i] = core::bits_f32(h[i]);
        }
        check_bitwise("cast fp32->bf16 n=" + std::to_string(n), gh_f, h_f);
        check_bitwise("cast bf16->fp32 n=" + std::to_string(n), g->download(dback), back);
    }
}
