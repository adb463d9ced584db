// Philox4x32-10, the tree's one counter-based random generator: header-only, callable from host
// and CUDA device code (SOF_HD), so dropout masks and stochastic rounding draw the same bits on
// every twin, thread count, rank count and resume. (Salmon et al., SC'11; the cuRAND/Random123
// one.)
#pragma once

#include <cstdint>

#include "core/dtype.h" // SOF_HD

namespace sof::core {

struct Philox4 {
    uint32_t v[4]; // four independent 32-bit words of one draw
};

// The round constants (vector implementations, e.g. cpu_adam's AVX2/AVX-512 lanes, use them too):
// multipliers of counter words 0 and 2, and the Weyl increments of key words 0 and 1.
constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;
constexpr int kPhiloxRounds = 10;

SOF_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
    const uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
    *hi = static_cast<uint32_t>(p >> 32);
    *lo = static_cast<uint32_t>(p);
}

// One draw: the 128-bit counter (c0..c3) under the 64-bit key (k0, k1), ten rounds.
SOF_HD Philox4 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                          uint32_t k1) {
    for (int round = 0; round < kPhiloxRounds; ++round) {
        uint32_t hi0, lo0, hi1, lo1;
        philox_mulhilo(kPhiloxMul0, c0, &hi0, &lo0);
        philox_mulhilo(kPhiloxMul1, c2, &hi1, &lo1);
        const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
        k0 += kPhiloxWeyl0;
        k1 += kPhiloxWeyl1;
    }
    return Philox4{{c0, c1, c2, c3}};
}

// The usual keying of the tree: `seed` is the key; the counter is (index lo, index hi, a, b),
// where `index` numbers the draws of one stream (element / 4 for four draws per call) and (a, b)
// name the stream (for example step and layer, or step and a purpose tag).
SOF_HD Philox4 philox_draw(uint64_t seed, uint64_t index, uint32_t a, uint32_t b) {
    return philox4x32(static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), a, b,
                      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// A uniform float in [0, 1) from the top 24 bits of a word (exact: multiples of 2^-24).
SOF_HD float philox_uniform(uint32_t word) {
    return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

} // namespace sof::core
