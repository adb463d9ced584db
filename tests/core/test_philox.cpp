// core/philox.h against the published known-answer vectors of Philox4x32-10 (Random123's
// kat_vectors), and the uniform map's range and first two moments over many draws.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "core/philox.h"

using sof::core::Philox4;

namespace {

void check_kat(const Philox4& got, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    CHECK(got.v[0] == a);
    CHECK(got.v[1] == b);
    CHECK(got.v[2] == c);
    CHECK(got.v[3] == d);
}

} // namespace

TEST_CASE("philox4x32-10 known answers") {
    using sof::core::philox4x32;
    check_kat(philox4x32(0, 0, 0, 0, 0, 0), 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
    check_kat(philox4x32(~0u, ~0u, ~0u, ~0u, ~0u, ~0u), 0x408f276d, 0x41c83b0e, 0xa20bc7c6,
              0x6d5451fd);
    check_kat(philox4x32(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0),
              0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1);
}

TEST_CASE("philox_draw keys the counter with seed, index and the stream words") {
    const uint64_t seed = 0x0123456789abcdefull, index = 0xfedcba9876543210ull;
    const Philox4 a = sof::core::philox_draw(seed, index, 7, 9);
    const Philox4 e =
        sof::core::philox4x32(0x76543210u, 0xfedcba98u, 7, 9, 0x89abcdefu, 0x01234567u);
    check_kat(a, e.v[0], e.v[1], e.v[2], e.v[3]);
    // every key and counter word changes the draw
    CHECK(sof::core::philox_draw(seed + 1, index, 7, 9).v[0] != a.v[0]);
    CHECK(sof::core::philox_draw(seed, index + 1, 7, 9).v[0] != a.v[0]);
    CHECK(sof::core::philox_draw(seed, index, 8, 9).v[0] != a.v[0]);
    CHECK(sof::core::philox_draw(seed, index, 7, 10).v[0] != a.v[0]);
}

TEST_CASE("philox_uniform: [0, 1), mean 1/2 and variance 1/12 within 5 sigma") {
    CHECK(sof::core::philox_uniform(0) == 0.0f);
    CHECK(sof::core::philox_uniform(~0u) < 1.0f);
    CHECK(sof::core::philox_uniform(~0u) == 1.0f - 1.0f / 16777216.0f);
    const int n = 1 << 20; // draws (words)
    double sum = 0, sumsq = 0;
    for (int i = 0; i < n / 4; ++i) {
        const Philox4 r = sof::core::philox_draw(42, static_cast<uint64_t>(i), 1, 2);
        for (uint32_t w : r.v) {
            const double u = sof::core::philox_uniform(w);
            sum += u;
            sumsq += u * u;
        }
    }
    const double mean = sum / n, var = sumsq / n - mean * mean;
    // sd of the mean of n uniforms: sqrt(1/12/n); of the second moment about sqrt(4/45/n)
    CHECK(std::fabs(mean - 0.5) < 5 * std::sqrt(1.0 / 12.0 / n));
    CHECK(std::fabs(var - 1.0 / 12.0) < 5 * std::sqrt(4.0 / 45.0 / n));
}
