// CPU twin of layernorm.h (llm.c's math): row statistics in double, one row per task; the weight
// and bias grads sum rows in order per channel block.
#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/common.h"

namespace sof::kernels::cpu {

namespace {
constexpr float kLnEps = 1e-5f;
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* x = inp + static_cast<size_t>(n) * C;
        double s = 0.0;
        for (int i = 0; i < C; i++)
            s += x[i];
        const float m = static_cast<float>(s / C);
        double v = 0.0;
        for (int i = 0; i < C; i++) {
            const float d = x[i] - m;
            v += static_cast<double>(d) * d;
        }
        const float r = 1.0f / std::sqrt(static_cast<float>(v / C) + kLnEps);
        float* o = out + static_cast<size_t>(n) * C;
        for (int i = 0; i < C; i++)
            o[i] = (x[i] - m) * r * w[i] + b[i];
        mean[n] = m;
        rstd[n] = r;
    }
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* x = inp + static_cast<size_t>(n) * C;
        const float* d = dout + static_cast<size_t>(n) * C;
        const float m = mean[n], r = rstd[n];
        double s1 = 0.0, s2 = 0.0;
        for (int i = 0; i < C; i++) {
            const float norm = (x[i] - m) * r;
            const float dnorm = w[i] * d[i];
            s1 += dnorm;
            s2 += static_cast<double>(dnorm) * norm;
        }
        const float dnorm_mean = static_cast<float>(s1 / C);
        const float dnorm_norm_mean = static_cast<float>(s2 / C);
        float* di = dinp + static_cast<size_t>(n) * C;
        for (int i = 0; i < C; i++) {
            const float norm = (x[i] - m) * r;
            const float dnorm = w[i] * d[i];
            di[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
        }
    }
    const int nblk = (C + kChanBlock - 1) / kChanBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * kChanBlock, c1 = std::min(C, c0 + kChanBlock);
        for (int n = 0; n < N; n++) {
            const float* x = inp + static_cast<size_t>(n) * C;
            const float* d = dout + static_cast<size_t>(n) * C;
            const float m = mean[n], r = rstd[n];
            for (int i = c0; i < c1; i++) {
                dw[i] += (x[i] - m) * r * d[i];
                db[i] += d[i];
            }
        }
    }
}

} // namespace sof::kernels::cpu
