// CPU twin of rmsnorm.h: row statistics in double, one (row, head) per task; the weight grad sums
// rows in order per channel block (deterministic).
#include "kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/common.h"

namespace sof::kernels::cpu {

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int N, int H, int D,
                     size_t ld, float eps) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++) {
        for (int h = 0; h < H; h++) {
            const size_t o = static_cast<size_t>(n) * ld + static_cast<size_t>(h) * D;
            const float* xr = x + o;
            double ss = 0.0;
            for (int i = 0; i < D; i++)
                ss += static_cast<double>(xr[i]) * xr[i];
            const float r = static_cast<float>(1.0 / std::sqrt(ss / D + static_cast<double>(eps)));
            rstd[static_cast<size_t>(n) * H + h] = r;
            float* yr = out + o;
            for (int i = 0; i < D; i++)
                yr[i] = w[i] * (xr[i] * r);
        }
    }
}

void rmsnorm_backward(float* dx, bool accumulate, float* dw, const float* dout, const float* x,
                      const float* w, const float* rstd, int N, int H, int D, size_t ld) {
    // dw first: with accumulate = false, dx may alias dout, which the row loop below overwrites
    const int nblk = (D + kChanBlock - 1) / kChanBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * kChanBlock, c1 = std::min(D, c0 + kChanBlock);
        for (int n = 0; n < N; n++) {
            for (int h = 0; h < H; h++) {
                const size_t o = static_cast<size_t>(n) * ld + static_cast<size_t>(h) * D;
                const float r = rstd[static_cast<size_t>(n) * H + h];
                for (int i = c0; i < c1; i++)
                    dw[i] += dout[o + i] * (x[o + i] * r);
            }
        }
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++) {
        for (int h = 0; h < H; h++) {
            const size_t o = static_cast<size_t>(n) * ld + static_cast<size_t>(h) * D;
            const float* xr = x + o;
            const float* d = dout + o;
            const float r = rstd[static_cast<size_t>(n) * H + h];
            double s = 0.0; // sum of (w * dout) * x
            for (int i = 0; i < D; i++)
                s += static_cast<double>(w[i] * d[i]) * xr[i];
            const float k = static_cast<float>(s / D) * r * r * r;
            float* di = dx + o;
            for (int i = 0; i < D; i++) {
                const float g = w[i] * d[i] * r - xr[i] * k;
                di[i] = accumulate ? di[i] + g : g;
            }
        }
    }
}

} // namespace sof::kernels::cpu
