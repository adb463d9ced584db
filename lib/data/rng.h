// Small integer random number tools for the data module: SplitMix64, bounded draws, permutations.
// Only integer arithmetic, so every machine and compiler produces the same corpus and the same
// order.
#pragma once

#include <cstdint>
#include <vector>

namespace sof::data {

// The SplitMix64 finalizer: a bijective 64-bit mix, used to derive independent seeds.
inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// SplitMix64 generator (Steele, Lea, Flood 2014): state advances by the golden-ratio constant.
struct SplitMix64 {
    uint64_t state;
    explicit SplitMix64(uint64_t seed) : state(seed) {}
    uint64_t next() {
        state += 0x9e3779b97f4a7c15ULL;
        return mix64(state);
    }
    // Uniform integer in [0, n) for 0 < n < 2^32 (multiply-shift on the top 32 bits; the bias,
    // below n / 2^32, is irrelevant here and the result is the same on every machine).
    uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }
};

// Seed of a named stream (tag a, index b) derived from a base seed by integer mixing only.
inline uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b = 0) {
    return mix64(seed ^ mix64(a + 0x632be59bd9b4e019ULL) ^ mix64(mix64(b + 0x8cb92ba72f3d8dd7ULL)));
}

// A uniformly shuffled permutation of 0..n-1 (Fisher-Yates from the last element down).
std::vector<int64_t> permutation(int64_t n, uint64_t seed);

} // namespace sof::data
