// CPU twin of swiglu.h: silu(gate) * up and its derivative, one row per task.
// The formulas are the reference for the CUDA twin.
#include "kernels/swiglu.h"

#include <cmath>

namespace sof::kernels::cpu {

void swiglu_forward(float* h, const float* gu, int N, int I) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* g = gu + static_cast<size_t>(n) * 2 * I;
        const float* u = g + I;
        float* o = h + static_cast<size_t>(n) * I;
        for (int i = 0; i < I; i++)
            o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
}

void swiglu_backward(float* dgu, const float* dh, const float* gu, int N, int I) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* g = gu + static_cast<size_t>(n) * 2 * I;
        const float* u = g + I;
        const float* d = dh + static_cast<size_t>(n) * I;
        float* dg = dgu + static_cast<size_t>(n) * 2 * I;
        float* du = dg + I;
        for (int i = 0; i < I; i++) {
            const float s = 1.0f / (1.0f + std::exp(-g[i]));
            const float silu = g[i] * s;
            du[i] = d[i] * silu;
            dg[i] = d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        }
    }
}

} // namespace sof::kernels::cpu
