// CPU twin of rope.h: rotate-half rotary embedding in place, one position per task; the backward
// rotates by the negative angle.
#include "kernels/rope.h"

namespace sof::kernels::cpu {

namespace {

void rope_apply(float* x, const float* cos, const float* sin, float sign, const int* positions,
                int N, int H, int hd, size_t ld) {
    const int half = hd / 2;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* c = cos + static_cast<size_t>(positions[n]) * half;
        const float* s = sin + static_cast<size_t>(positions[n]) * half;
        float* row = x + static_cast<size_t>(n) * ld;
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

} // namespace

void rope_forward(float* x, const float* cos, const float* sin, const int* positions, int N, int H,
                  int hd, size_t ld) {
    rope_apply(x, cos, sin, 1.0f, positions, N, H, hd, ld);
}

void rope_backward(float* dx, const float* cos, const float* sin, const int* positions, int N,
                   int H, int hd, size_t ld) {
    rope_apply(dx, cos, sin, -1.0f, positions, N, H, hd, ld);
}

} // namespace sof::kernels::cpu
