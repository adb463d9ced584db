// Seeded permutations for the data module (Fisher-Yates over SplitMix64, integers only).
// Used for the shuffled shard/batch order and the built-in corpus's transition tables.
#include "data/rng.h"

#include <cstddef>
#include <utility>

namespace sof::data {

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
    std::vector<int64_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++)
        p[static_cast<size_t>(i)] = i;
    SplitMix64 rng(seed);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j;
        if (i + 1 < (int64_t(1) << 32))
            j = rng.below(static_cast<uint32_t>(i + 1));
        else
            j = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(i + 1));
        std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
    }
    return p;
}

} // namespace sof::data
