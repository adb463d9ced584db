// CPU kernels of the LLaMA family (embedding, RMSNorm, RoPE, SwiGLU); see kernels_llama.h.
// Parallel loops split independent outputs; column sums (dw, dwte) run serially over rows.
#include "model/kernels_llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sof::model::cpu {

namespace {
constexpr int kChanBlock = 64; // channels per task in the column-sum loops (dw, dwte)
}

void embedding_forward(float* out, const int* inp, const float* wte, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        std::memcpy(out + static_cast<size_t>(n) * C, wte + static_cast<size_t>(inp[n]) * C,
                    sizeof(float) * C);
}

void embedding_backward(float* dwte, const float* dout, const int* inp, int N, int C) {
    const int nblk = (C + kChanBlock - 1) / kChanBlock;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * kChanBlock, c1 = std::min(C, c0 + kChanBlock);
        for (int n = 0; n < N; n++) {
            const float* d = dout + static_cast<size_t>(n) * C;
            float* we = dwte + static_cast<size_t>(inp[n]) * C;
            for (int i = c0; i < c1; i++)
                we[i] += d[i];
        }
    }
}

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

namespace {

void rope_apply(float* x, const float* cos, const float* sin, float sign, int B, int T, int H,
                int hd, size_t ld, int pos0) {
    const int half = hd / 2;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float* c = cos + static_cast<size_t>(pos0 + t) * half;
            const float* s = sin + static_cast<size_t>(pos0 + t) * half;
            float* row = x + (static_cast<size_t>(b) * T + t) * ld;
            for (int h = 0; h < H; h++) {
                float* v = row + static_cast<size_t>(h) * hd;
                for (int i = 0; i < half; i++) {
                    const float a = v[i], e = v[i + half], si = sign * s[i];
                    v[i] = a * c[i] - e * si;
                    v[i + half] = e * c[i] + a * si;
                }
            }
        }
    }
}

} // namespace

void rope_forward(float* x, const float* cos, const float* sin, int B, int T, int H, int hd,
                  size_t ld, int pos0) {
    rope_apply(x, cos, sin, 1.0f, B, T, H, hd, ld, pos0);
}

void rope_backward(float* dx, const float* cos, const float* sin, int B, int T, int H, int hd,
                   size_t ld, int pos0) {
    rope_apply(dx, cos, sin, -1.0f, B, T, H, hd, ld, pos0);
}

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

} // namespace sof::model::cpu
