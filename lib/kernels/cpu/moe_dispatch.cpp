// CPU twin of moe_dispatch.h: the counting sort (one pass, in pair order: stable), row gathers
// and the combine over k in order, one token or row per task (any thread count, the same bits).
#include "kernels/moe_dispatch.h"

#include <cstring>
#include <vector>

namespace sof::kernels::cpu {

void moe_plan(int* order, int* slot, int* offsets, int* host_offsets, const int* idx, int N, int K,
              int E) {
    SOF_CHECK(N >= 0 && K >= 1 && E >= 1, "moe_plan: bad shape N=%d K=%d E=%d", N, K, E);
    const size_t P = static_cast<size_t>(N) * K;
    for (int e = 0; e <= E; e++)
        offsets[e] = 0;
    for (size_t q = 0; q < P; q++) {
        if (idx[q] < 0 || idx[q] >= E)
            SOF_FAIL(Usage, "moe_plan: token %zu slot %zu names expert %d; experts are 0..%d",
                     q / K, q % K, idx[q], E - 1);
        offsets[idx[q] + 1]++;
    }
    for (int e = 0; e < E; e++)
        offsets[e + 1] += offsets[e];
    std::vector<int> cur(offsets, offsets + E); // the next free row of each expert
    for (size_t q = 0; q < P; q++) {
        const int r = cur[static_cast<size_t>(idx[q])]++;
        order[r] = static_cast<int>(q);
        slot[q] = r;
    }
    if (host_offsets && host_offsets != offsets)
        std::memcpy(host_offsets, offsets, sizeof(int) * (static_cast<size_t>(E) + 1));
}

void moe_gather(float* xs, const float* x, const int* order, int N, int K, int C) {
    const long P = static_cast<long>(N) * K;
#pragma omp parallel for schedule(static)
    for (long r = 0; r < P; r++)
        std::memcpy(xs + static_cast<size_t>(r) * C, x + static_cast<size_t>(order[r] / K) * C,
                    sizeof(float) * C);
}

void moe_gather_backward(float* dx, const float* dxs, const int* slot, int N, int K, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float* d = dx + static_cast<size_t>(n) * C;
        const float* s0 = dxs + static_cast<size_t>(slot[static_cast<size_t>(n) * K]) * C;
        for (int c = 0; c < C; c++)
            d[c] = s0[c];
        for (int k = 1; k < K; k++) {
            const float* s = dxs + static_cast<size_t>(slot[static_cast<size_t>(n) * K + k]) * C;
            for (int c = 0; c < C; c++)
                d[c] += s[c];
        }
    }
}

void moe_combine(float* y, const float* ys, const float* w, const int* slot, int N, int K, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float* o = y + static_cast<size_t>(n) * C;
        for (int c = 0; c < C; c++)
            o[c] = 0.0f;
        for (int k = 0; k < K; k++) {
            const size_t q = static_cast<size_t>(n) * K + k;
            const float wk = w[q];
            const float* s = ys + static_cast<size_t>(slot[q]) * C;
            for (int c = 0; c < C; c++)
                o[c] += wk * s[c];
        }
    }
}

void moe_combine_backward(float* dys, float* dw, const float* dy, const float* ys, const float* w,
                          const int* slot, int N, int K, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* g = dy + static_cast<size_t>(n) * C;
        for (int k = 0; k < K; k++) {
            const size_t q = static_cast<size_t>(n) * K + k;
            const size_t r = static_cast<size_t>(slot[q]);
            float* d = dys + r * C;
            const float* s = ys + r * C;
            const float wk = w[q];
            float dot = 0.0f;
            for (int c = 0; c < C; c++) {
                d[c] = wk * g[c];
                dot += g[c] * s[c];
            }
            dw[q] = dot;
        }
    }
}

} // namespace sof::kernels::cpu
