// CPU twin of xent.h: softmax statistics and log-sum-exp losses per row (sum in double); the
// backward recomputes each probability exactly as the forward formed it.
#include "kernels/xent.h"

#include <algorithm>
#include <cmath>

namespace sof::kernels::cpu {

void xent_forward(float* losses, float* stats, const float* logits, const int* targets, int N,
                  int V, int Vp) {
    (void)Vp;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* lg = logits + static_cast<size_t>(n) * Vp;
        float maxv = -INFINITY;
        for (int i = 0; i < V; i++)
            maxv = std::max(maxv, lg[i]);
        double sum = 0.0;
        for (int i = 0; i < V; i++)
            sum += std::exp(lg[i] - maxv);
        stats[2 * static_cast<size_t>(n)] = maxv;
        stats[2 * static_cast<size_t>(n) + 1] = static_cast<float>(1.0 / sum);
        if (!targets) continue;
        const int tgt = targets[n];
        // log-sum-exp form: exact even where the probability underflows
        losses[n] = tgt < 0 ? 0.0f : static_cast<float>(std::log(sum) - (lg[tgt] - maxv));
    }
}

void xent_backward(float* dlogits, const float* logits, const float* stats, const int* targets,
                   float dloss, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* lg = logits + static_cast<size_t>(n) * Vp;
        float* d = dlogits + static_cast<size_t>(n) * Vp;
        const int tgt = targets[n];
        if (tgt < 0) { // ignored position (loss mask)
            for (int i = 0; i < Vp; i++)
                d[i] = 0.0f;
            continue;
        }
        const float maxv = stats[2 * static_cast<size_t>(n)];
        const float inv = stats[2 * static_cast<size_t>(n) + 1];
        for (int i = 0; i < V; i++) {
            const float p = std::exp(lg[i] - maxv) * inv;
            d[i] = (p - (i == tgt ? 1.0f : 0.0f)) * dloss;
        }
        for (int i = V; i < Vp; i++)
            d[i] = 0.0f;
    }
}

} // namespace sof::kernels::cpu
