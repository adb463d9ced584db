// The host build's floating-point flags (cmake/SofOptions.cmake, sof_flags): a*b+c stays two
// roundings, as on x86-64 without FMA, in the CUDA twins and in the scalar references.
#include <doctest/doctest.h>

#include <cmath>

namespace {

// Out of line, so the product is not shared with the caller's and can be contracted on its own.
__attribute__((noinline)) float mul_add(float a, float b, float c) {
    return a * b + c;
}

} // namespace

TEST_CASE("host code is built without FMA contraction (-ffp-contract=off)") {
    // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: the 2^-24 is half a float ulp above 1, rounded away (to
    // even) by a separate product, kept by a fused one. GCC contracts by default wherever the ISA
    // has FMA (aarch64 always; x86 with -mfma): without the flag this fails there.
    volatile float va = 1.0f + 0x1p-12f, vb = 1.0f + 0x1p-12f, vc = -1.0f;
    const float a = va, b = vb, c = vc;
    volatile float product = a * b;
    const float rounded = product + c;
    CHECK(rounded == 0x1p-11f);
    CHECK(std::fma(a, b, c) == 0x1p-11f + 0x1p-24f); // the data tell the two apart
    CHECK(mul_add(a, b, c) == rounded);
}
