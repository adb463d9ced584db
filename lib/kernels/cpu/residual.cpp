// CPU twin of residual.h: elementwise sums (the residual stream forward, grad accumulation).
// OpenMP over elements.
#include "kernels/residual.h"

namespace sof::kernels::cpu {

void residual_forward(float* out, const float* a, const float* b, long N) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++)
        out[i] = a[i] + b[i];
}

void add_inplace(float* dst, const float* src, long N) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++)
        dst[i] += src[i];
}

} // namespace sof::kernels::cpu
