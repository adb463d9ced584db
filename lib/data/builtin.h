// The built-in corpus: a seeded first-order Markov chain over the model's vocabulary whose
// entropy rate (the best achievable loss, nats/token) is known in closed form.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace sof::data {

// Transition matrix P = sum_k (w_k / 2^16) * Pi_k, where Pi_1..Pi_K are seeded random permutation
// matrices and w_k are fixed Zipf weights (w_k ~ 1/k). A convex combination of permutation
// matrices is doubly stochastic, so the uniform distribution is stationary; a chain started
// uniformly is a stationary process with entropy rate H = (1/V) sum_i H(P[i, :]) exactly (rows
// where two permutations pick the same successor merge those weights). See docs/data.md.
class MarkovChain {
  public:
    static constexpr int kSuccessors = 8;  // K: permutations mixed (successors per token)
    static constexpr int kWeightBits = 16; // weights are integers summing to 2^16

    MarkovChain(int vocab, uint64_t seed);

    // n tokens: x0 uniform in [0, V), then x_{i+1} ~ P[x_i, :], all drawn from stream_seed.
    void generate(uint64_t stream_seed, int64_t n, uint16_t* out) const;

    double entropy_rate() const { return entropy_rate_; } // nats/token
    double log_prob(int from, int to) const;              // log P[from, to]; -inf if 0
    int vocab() const { return vocab_; }
    // Integer weight of permutation k (sums to 2^kWeightBits over k).
    uint32_t weight(int k) const { return weights_[k]; }

  private:
    int vocab_;
    std::vector<uint32_t> succ_;                     // (V, K) successor of token i under Pi_k
    std::array<uint32_t, kSuccessors> weights_{};    // (K) integer weights, sum 2^16
    std::array<uint32_t, kSuccessors> cumulative_{}; // (K) running sums of weights_
    double entropy_rate_ = 0.0;
};

} // namespace sof::data
