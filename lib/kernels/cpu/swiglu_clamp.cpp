// CPU twin of swiglu_clamp.h: the header's element formulas over rows, one row per task (each
// element written by one task: the same bits for any thread count).
#include "kernels/swiglu_clamp.h"

#include <cmath>

namespace sof::kernels::cpu {

void swiglu_clamp_forward(float* h, const float* gu, int N, int I, const ClampedSwiglu& a) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* row = gu + static_cast<size_t>(n) * 2 * I;
        float* o = h + static_cast<size_t>(n) * I;
        for (int i = 0; i < I; i++)
            o[i] = clamped_swiglu(row[clamped_gate_col(i, I, a.interleaved)],
                                  row[clamped_up_col(i, I, a.interleaved)], a);
    }
}

void swiglu_clamp_backward(float* dgu, const float* dh, const float* gu, int N, int I,
                           const ClampedSwiglu& a) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* row = gu + static_cast<size_t>(n) * 2 * I;
        const float* d = dh + static_cast<size_t>(n) * I;
        float* o = dgu + static_cast<size_t>(n) * 2 * I;
        for (int i = 0; i < I; i++) {
            const int gc = clamped_gate_col(i, I, a.interleaved);
            const int uc = clamped_up_col(i, I, a.interleaved);
            clamped_swiglu_grad(row[gc], row[uc], d[i], a, &o[gc], &o[uc]);
        }
    }
}

} // namespace sof::kernels::cpu
