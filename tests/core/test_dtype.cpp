// The tree's one rounding (core/dtype.h) against the conversions it replaced, bit for bit: the
// safetensors reader's own bf16/fp16 widening (lib/ckpt/safetensors.cpp until issue 17) on all
// 2^16 inputs, and in CUDA builds the CUDA headers' host conversions that the CUDA twins used
// (__float2bfloat16_rn, __bfloat162float, __half2float, __float2half_rn). NaN: core keeps sign and
// top payload bits (quiet); where the CUDA conversions canonicalize a NaN only NaN-ness must agree.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ios>
#include <random>
#include <vector>

#include "core/dtype.h"

#if defined(SOF_HAVE_CUDA)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

using namespace sof;

namespace {

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// lib/ckpt/safetensors.cpp before issue 17 (verbatim logic): bf16 and fp16 widening.
float old_bf16_to_float(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    return from_bits(u);
}
float old_f16_to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { // subnormal: normalize
            int e = -1;
            uint32_t m = man;
            do {
                e++;
                m <<= 1;
            } while ((m & 0x400u) == 0);
            u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | man << 13;
    } else {
        u = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    return from_bits(u);
}

// fp32 inputs for the narrowing conversions: every upper half (all 2^16 bf16 values, NaN and Inf
// included) with lower halves that hit every rounding case (exact, just above/below and at the
// tie, the largest) plus random ones; and fp16's range boundaries (subnormals, overflow).
std::vector<uint32_t> narrowing_inputs() {
    std::vector<uint32_t> in;
    std::mt19937 rng(17);
    for (uint32_t hi = 0; hi < 65536; hi++)
        for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu,
                            static_cast<uint32_t>(rng() & 0xffffu)})
            in.push_back(hi << 16 | lo);
    for (uint32_t h = 0; h < 65536; h++) // every fp16 value widened, and its neighbours' midpoints
        for (int d : {-1, 0, 1}) {
            const uint32_t u = bits(old_f16_to_float(static_cast<uint16_t>(h)));
            in.push_back(u + static_cast<uint32_t>(d * 0x1000));
        }
    return in;
}

bool is_nan_bits(uint32_t u) {
    return (u & 0x7fffffffu) > 0x7f800000u;
}

} // namespace

TEST_CASE("bf16 and fp16 widening: core equals the safetensors reader's, all 2^16 inputs") {
    int nans = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const uint16_t x = static_cast<uint16_t>(h);
        INFO("input 0x" << std::hex << h);
        REQUIRE(bits(core::bf16_to_f32(x)) == bits(old_bf16_to_float(x)));
        REQUIRE(bits(core::f16_to_f32(x)) == bits(old_f16_to_float(x)));
        nans += std::isnan(core::f16_to_f32(x));
    }
    CHECK(nans == 2 * 1023); // every fp16 NaN payload, both signs, kept as a NaN
}

TEST_CASE("bf16 narrowing: NaN keeps sign and top payload bits, quiet; ties to even") {
    CHECK(core::f32_to_bf16(from_bits(0x7f800001u)) == 0x7fc0); // signalling NaN -> quiet
    CHECK(core::f32_to_bf16(from_bits(0xffa50000u)) == 0xffe5); // sign and payload kept
    CHECK(core::f32_to_bf16(from_bits(0x3f808000u)) == 0x3f80); // tie -> even
    CHECK(core::f32_to_bf16(from_bits(0x3f818000u)) == 0x3f82); // tie -> even (up)
    CHECK(core::f32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80); // rounds up to Inf
    CHECK(core::f32_to_f16(from_bits(0x7fc02000u)) == 0x7e01);  // fp16 NaN payload kept
}

// The narrowing's reference, independent of any bit trick: the result is the representable value
// nearest to the input (distances in double, exact for these operands), a tie goes to the even
// code, and Inf only past the largest finite value plus half its ulp.
static void check_nearest(float f, uint16_t h, float (*widen)(uint16_t), uint16_t max_finite) {
    const uint16_t sign = h & 0x8000u, mag = h & 0x7fffu;
    const double r = widen(h);
    if (std::isinf(r)) {
        const double m = widen(max_finite), ulp = m - widen(static_cast<uint16_t>(max_finite - 1));
        REQUIRE(std::fabs(static_cast<double>(f)) >= m + ulp / 2);
        REQUIRE(std::signbit(r) == std::signbit(f));
        return;
    }
    const double d = std::fabs(static_cast<double>(f) - r);
    for (int step : {-1, 1}) {
        const int n = static_cast<int>(mag) + step;
        if (n < 0 || n > max_finite) continue;
        const double dn =
            std::fabs(static_cast<double>(f) - widen(static_cast<uint16_t>(sign | n)));
        REQUIRE(d <= dn);
        if (d == dn) REQUIRE((mag & 1u) == 0u);
    }
    if (f == 0.0f) REQUIRE(std::signbit(r) == std::signbit(f));
}

TEST_CASE("bf16 and fp16 narrowing: round to nearest even on every rounding case (distances)") {
    int nans = 0;
    for (uint32_t u : narrowing_inputs()) {
        const float f = from_bits(u);
        INFO("input 0x" << std::hex << u);
        if (is_nan_bits(u)) {
            REQUIRE(std::isnan(core::bf16_to_f32(core::f32_to_bf16(f))));
            REQUIRE(std::isnan(core::f16_to_f32(core::f32_to_f16(f))));
            nans++;
            continue;
        }
        check_nearest(f, core::f32_to_bf16(f), core::bf16_to_f32, 0x7f7fu);
        check_nearest(f, core::f32_to_f16(f), core::f16_to_f32, 0x7bffu);
    }
    CHECK(nans > 0); // the inputs reach the NaN codes too
}

#if defined(SOF_HAVE_CUDA)
TEST_CASE("CUDA's host conversions equal core on every non-NaN input; NaN stays NaN") {
    const std::vector<uint32_t> in = narrowing_inputs();
    size_t nan_payload_differs = 0;
    for (uint32_t u : in) {
        const float f = from_bits(u);
        INFO("input 0x" << std::hex << u);
        const uint16_t cb = __bfloat16_as_ushort(__float2bfloat16_rn(f));
        const uint16_t ch = __half_as_ushort(__float2half_rn(f));
        if (!is_nan_bits(u)) {
            REQUIRE(cb == core::f32_to_bf16(f));
            REQUIRE(ch == core::f32_to_f16(f));
        } else {
            REQUIRE(std::isnan(core::bf16_to_f32(cb)));
            REQUIRE(std::isnan(core::bf16_to_f32(core::f32_to_bf16(f))));
            REQUIRE(std::isnan(core::f16_to_f32(core::f32_to_f16(f))));
            nan_payload_differs += cb != core::f32_to_bf16(f);
        }
    }
    // the reason the CUDA twins now round through core: CUDA canonicalizes NaNs
    MESSAGE(
        "NaN inputs whose bf16 bits differ (CUDA canonical NaN vs core): " << nan_payload_differs);
    CHECK(nan_payload_differs > 0);
    for (uint32_t h = 0; h < 65536; h++) {
        const uint16_t x = static_cast<uint16_t>(h);
        INFO("input 0x" << std::hex << h);
        REQUIRE(bits(__bfloat162float(__ushort_as_bfloat16(x))) == bits(core::bf16_to_f32(x)));
        const float cf = __half2float(__ushort_as_half(x));
        if (!std::isnan(cf))
            REQUIRE(bits(cf) == bits(core::f16_to_f32(x)));
        else
            REQUIRE(std::isnan(core::f16_to_f32(x)));
    }
}
#endif
