// CPU twin of gelu.h: tanh-form GELU and its derivative, elementwise (llm.c's formulas).
// OpenMP over elements.
#include "kernels/gelu.h"

#include <cmath>

namespace sof::kernels::cpu {

namespace {
constexpr float kGeluScale = 0.7978845608028654f; // sqrt(2/pi)
}

void gelu_forward(float* out, const float* inp, long N) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) {
        const float x = inp[i];
        const float cube = 0.044715f * x * x * x;
        out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + cube)));
    }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, long N) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) {
        const float x = inp[i];
        const float cube = 0.044715f * x * x * x;
        const float th = std::tanh(kGeluScale * (x + cube));
        const float sech2 = 1.0f - th * th;
        const float local =
            0.5f * (1.0f + th) + x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = local * dout[i];
    }
}

} // namespace sof::kernels::cpu
