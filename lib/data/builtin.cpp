// The built-in Markov-chain corpus: permutation tables, integer sampling, exact entropy rate.
// Everything that decides a token uses integers only (see rng.h), so the corpus is portable.
#include "data/builtin.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "data/rng.h"

namespace sof::data {

MarkovChain::MarkovChain(int vocab, uint64_t seed) : vocab_(vocab) {
    if (vocab < 1 || vocab > 65536)
        SOF_FAIL(Config,
                 "the built-in corpus needs 1 <= model.vocab_size <= 65536 (tokens are uint16), "
                 "got %d",
                 vocab);
    const int K = kSuccessors;
    // Zipf weights w_k ~ 1/(k+1), rounded down to integers; the remainder goes to w_0.
    double norm = 0.0;
    for (int k = 0; k < K; k++)
        norm += 1.0 / (k + 1);
    const uint32_t total = 1u << kWeightBits;
    uint32_t sum = 0;
    for (int k = 0; k < K; k++) {
        weights_[k] = static_cast<uint32_t>(std::floor(total / ((k + 1) * norm)));
        sum += weights_[k];
    }
    weights_[0] += total - sum;
    uint32_t run = 0;
    for (int k = 0; k < K; k++) {
        run += weights_[k];
        cumulative_[k] = run;
    }

    const size_t V = static_cast<size_t>(vocab);
    succ_.resize(V * K);
    for (int k = 0; k < K; k++) {
        std::vector<int64_t> perm = permutation(vocab, derive_seed(seed, 0x7065726d, k));
        for (size_t i = 0; i < V; i++)
            succ_[i * K + k] = static_cast<uint32_t>(perm[i]);
    }

    // Entropy rate under the uniform stationary distribution, merging repeated successors.
    double h = 0.0;
    for (size_t i = 0; i < V; i++) {
        const uint32_t* s = &succ_[i * K];
        double row = 0.0;
        for (int k = 0; k < K; k++) {
            bool seen = false;
            for (int m = 0; m < k; m++)
                seen = seen || s[m] == s[k];
            if (seen) continue;
            uint32_t w = 0;
            for (int m = k; m < K; m++)
                if (s[m] == s[k]) w += weights_[m];
            double p = static_cast<double>(w) / total;
            row -= p * std::log(p);
        }
        h += row;
    }
    entropy_rate_ = h / static_cast<double>(V);
}

void MarkovChain::generate(uint64_t stream_seed, int64_t n, uint16_t* out) const {
    if (n <= 0) return;
    const int K = kSuccessors;
    SplitMix64 rng(stream_seed);
    uint32_t x = rng.below(static_cast<uint32_t>(vocab_));
    out[0] = static_cast<uint16_t>(x);
    for (int64_t i = 1; i < n; i++) {
        uint32_t u = static_cast<uint32_t>(rng.next() >> (64 - kWeightBits));
        int k = 0;
        while (u >= cumulative_[k])
            k++;
        x = succ_[static_cast<size_t>(x) * K + k];
        out[i] = static_cast<uint16_t>(x);
    }
}

double MarkovChain::log_prob(int from, int to) const {
    const int K = kSuccessors;
    uint32_t w = 0;
    for (int k = 0; k < K; k++)
        if (succ_[static_cast<size_t>(from) * K + k] == static_cast<uint32_t>(to)) w += weights_[k];
    if (w == 0) return -std::numeric_limits<double>::infinity();
    return std::log(static_cast<double>(w) / (1u << kWeightBits));
}

} // namespace sof::data
