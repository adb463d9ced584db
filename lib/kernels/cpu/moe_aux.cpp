// CPU twin of moe_aux.h: the pooled statistics over fixed chunks of tokens (each chunk's sums in
// token order, then the chunks in order: bitwise the same for any thread count), and the losses.
#include "kernels/moe_aux.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sof::kernels {

MoeAuxLosses moe_aux_losses(const float* host_stats, int E) {
    SOF_CHECK(E >= 1, "moe_aux_losses: %d experts", E);
    const double M = host_stats[2 * E];
    if (!(M > 0.0))
        SOF_FAIL(Runtime,
                 "moe_aux_losses: the statistics count %g tokens (every token masked, or "
                 "moe_aux_stats never ran)",
                 M);
    MoeAuxLosses r;
    double s = 0.0;
    for (int e = 0; e < E; e++)
        s +=
            (static_cast<double>(host_stats[E + e]) / M) * (static_cast<double>(host_stats[e]) / M);
    r.balance = s * E;
    r.z = static_cast<double>(host_stats[2 * E + 1]) / M;
    return r;
}

namespace cpu {

namespace {
constexpr int kTokenChunk = 256; // tokens per partial sum (fixed: the sums' order)
}

void moe_aux_stats(float* stats, const float* logits, const int* idx, const float* mask, int N,
                   int E, int K) {
    SOF_CHECK(E >= 1 && K >= 1 && K <= E && N >= 0, "moe_aux_stats: bad shape N=%d E=%d K=%d", N, E,
              K);
    for (size_t j = 0; j < static_cast<size_t>(N) * K; j++)
        if (idx[j] < 0 || idx[j] >= E)
            SOF_FAIL(Usage, "moe_aux_stats: token %zu slot %zu names expert %d of %d", j / K, j % K,
                     idx[j], E);
    const int S = moe_aux_stats_size(E);
    const int chunks = (N + kTokenChunk - 1) / kTokenChunk;
    std::vector<float> part(static_cast<size_t>(chunks) * S, 0.0f);
#pragma omp parallel
    {
        std::vector<float> p(static_cast<size_t>(E));
#pragma omp for schedule(static)
        for (int c = 0; c < chunks; c++) {
            float* acc = part.data() + static_cast<size_t>(c) * S;
            const int n1 = std::min(N, (c + 1) * kTokenChunk);
            for (int n = c * kTokenChunk; n < n1; n++) {
                const float* v = logits + static_cast<size_t>(n) * E;
                const float m = mask ? mask[n] : 1.0f;
                float mx = v[0];
                for (int e = 1; e < E; e++)
                    mx = std::fmax(mx, v[e]);
                float s = 0.0f;
                for (int e = 0; e < E; e++) {
                    p[static_cast<size_t>(e)] = std::exp(v[e] - mx);
                    s += p[static_cast<size_t>(e)];
                }
                const float inv = 1.0f / s;
                for (int e = 0; e < E; e++)
                    acc[e] += m * (p[static_cast<size_t>(e)] * inv);
                for (int k = 0; k < K; k++)
                    acc[E + idx[static_cast<size_t>(n) * K + k]] += m;
                const float lse = mx + std::log(s);
                acc[2 * E] += m;
                acc[2 * E + 1] += m * (lse * lse);
            }
        }
    }
    for (int c = 0; c < chunks; c++)
        for (int j = 0; j < S; j++)
            stats[j] += part[static_cast<size_t>(c) * S + j];
}

} // namespace cpu

} // namespace sof::kernels
