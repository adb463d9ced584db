// CPU twin of embedding.h: row gathers forward; the backward's column sums split over channel
// blocks so that every grad element sums its rows in position order (deterministic).
#include "kernels/embedding.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/common.h"

namespace sof::kernels::cpu {

void embedding_forward(float* out, const int* tokens, const int* positions, const float* wte,
                       const float* wpe, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float* o = out + static_cast<size_t>(n) * C;
        const float* we = wte + static_cast<size_t>(tokens[n]) * C;
        if (!wpe) {
            std::memcpy(o, we, sizeof(float) * C);
            continue;
        }
        const float* pe = wpe + static_cast<size_t>(positions[n]) * C;
        for (int i = 0; i < C; i++)
            o[i] = we[i] + pe[i];
    }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens,
                        const int* positions, int N, int C) {
    const int nblk = (C + kChanBlock - 1) / kChanBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * kChanBlock, c1 = std::min(C, c0 + kChanBlock);
        for (int n = 0; n < N; n++) {
            const float* d = dout + static_cast<size_t>(n) * C;
            float* we = dwte + static_cast<size_t>(tokens[n]) * C;
            for (int i = c0; i < c1; i++)
                we[i] += d[i];
            if (!dwpe) continue;
            float* pe = dwpe + static_cast<size_t>(positions[n]) * C;
            for (int i = c0; i < c1; i++)
                pe[i] += d[i];
        }
    }
}

} // namespace sof::kernels::cpu
