// Double-precision references of the Mixture-of-Experts ops (router, aux losses, dispatch) for
// the op driver's cases: written from transformers' formulas, not from the twins.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/moe_router.h"

namespace sof::ktest::moe {

// The K experts of row v (E): descending value, ties by the lower index (no NaN in the tests).
inline std::vector<int> topk(const float* v, int E, int K) {
    std::vector<int> ix(static_cast<size_t>(E));
    std::iota(ix.begin(), ix.end(), 0);
    std::stable_sort(ix.begin(), ix.end(), [&](int a, int b) { return v[a] > v[b]; });
    ix.resize(static_cast<size_t>(K));
    return ix;
}

inline std::vector<double> softmax(const double* v, int E) {
    double m = v[0];
    for (int e = 1; e < E; e++)
        m = std::max(m, v[e]);
    std::vector<double> p(static_cast<size_t>(E));
    double s = 0.0;
    for (int e = 0; e < E; e++)
        s += p[static_cast<size_t>(e)] = std::exp(v[e] - m);
    for (double& x : p)
        x /= s;
    return p;
}

inline double logsumexp(const double* v, int E) {
    double m = v[0];
    for (int e = 1; e < E; e++)
        m = std::max(m, v[e]);
    double s = 0.0;
    for (int e = 0; e < E; e++)
        s += std::exp(v[e] - m);
    return m + std::log(s);
}

// w (N,K) of logits (N,E) for the given selection idx (N,K), as transformers computes them.
inline std::vector<double> router_weights(const std::vector<double>& logits,
                                          const std::vector<int>& idx,
                                          const kernels::RouterArgs& a) {
    std::vector<double> w(static_cast<size_t>(a.N) * a.K);
    for (int n = 0; n < a.N; n++) {
        const double* v = logits.data() + static_cast<size_t>(n) * a.E;
        const int* ix = idx.data() + static_cast<size_t>(n) * a.K;
        double* wn = w.data() + static_cast<size_t>(n) * a.K;
        if (a.kind == kernels::RouterKind::SoftmaxTopk) {
            const std::vector<double> p = softmax(v, a.E);
            double s = 0.0;
            for (int k = 0; k < a.K; k++)
                s += wn[k] = p[static_cast<size_t>(ix[k])];
            if (a.renorm)
                for (int k = 0; k < a.K; k++)
                    wn[k] /= s;
        } else {
            std::vector<double> sel(static_cast<size_t>(a.K));
            for (int k = 0; k < a.K; k++)
                sel[static_cast<size_t>(k)] = v[ix[k]];
            const std::vector<double> p = softmax(sel.data(), a.K);
            for (int k = 0; k < a.K; k++)
                wn[k] = p[static_cast<size_t>(k)];
        }
    }
    return w;
}

// The pooled statistics of moe_aux.h in double over layers (each: logits (N,E), idx (N,K)).
struct AuxStats {
    std::vector<double> prob, count; // (E)
    double tokens = 0.0, lse2 = 0.0;
};

inline void aux_accumulate(AuxStats& s, const std::vector<double>& logits,
                           const std::vector<int>& idx, const float* mask, int N, int E, int K) {
    s.prob.resize(static_cast<size_t>(E), 0.0);
    s.count.resize(static_cast<size_t>(E), 0.0);
    for (int n = 0; n < N; n++) {
        const double m = mask ? mask[n] : 1.0;
        const double* v = logits.data() + static_cast<size_t>(n) * E;
        const std::vector<double> p = softmax(v, E);
        for (int e = 0; e < E; e++)
            s.prob[static_cast<size_t>(e)] += m * p[static_cast<size_t>(e)];
        for (int k = 0; k < K; k++)
            s.count[static_cast<size_t>(idx[static_cast<size_t>(n) * K + k])] += m;
        s.tokens += m;
        const double l = logsumexp(v, E);
        s.lse2 += m * l * l;
    }
}

// transformers' load_balancing_loss_func of the pooled statistics, and the z-loss.
inline double aux_balance(const AuxStats& s, int E) {
    double r = 0.0;
    for (int e = 0; e < E; e++)
        r += (s.count[static_cast<size_t>(e)] / s.tokens) *
             (s.prob[static_cast<size_t>(e)] / s.tokens);
    return r * E;
}
inline double aux_z(const AuxStats& s) {
    return s.lse2 / s.tokens;
}

} // namespace sof::ktest::moe
