// RMSNorm (LLaMA family): y = w * x * rstd, rstd = 1/sqrt(mean(x^2) + eps), over rows of D at a
// stride: whole (N,C) rows, or per head of a fused q|k|v row (qwen3 qk-norm).
#pragma once

#include <cstddef>

#include "kernels/exec.h"

namespace sof::kernels {

// Rows are (n, h) for n < N, h < H, at x + n*ld + h*D (H = 1, D = ld = C: the usual (N,C) norm;
// per-head norm of q: H = NH, D = hd, ld = the fused qkv row). out uses the same strides (another
// buffer, never x). rstd (N*H), w (D).
namespace cpu {
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int N, int H, int D,
                     size_t ld, float eps);
// dx += (accumulate) or = (overwrite; dx may then alias dout) the input grad; dw (D) += dout * x *
// rstd (fp32). Same row strides as the forward.
void rmsnorm_backward(float* dx, bool accumulate, float* dw, const float* dout, const float* x,
                      const float* w, const float* rstd, int N, int H, int D, size_t ld);
} // namespace cpu

namespace cuda {
template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* x, const T* w, int N, int H, int D, size_t ld,
                     float eps, void* stream);
template <class T>
void rmsnorm_backward(T* dx, bool accumulate, float* dw, const T* dout, const T* x, const T* w,
                      const float* rstd, int N, int H, int D, size_t ld, void* stream,
                      Scratch* scratch);
} // namespace cuda

template <class T>
void rmsnorm_forward(const Exec& ex, T* out, float* rstd, const T* x, const T* w, int N, int H,
                     int D, size_t ld, float eps) {
    SOF_KERNEL_DISPATCH(ex, T, "rmsnorm_forward",
                        (cpu::rmsnorm_forward(out, rstd, x, w, N, H, D, ld, eps)),
                        (cuda::rmsnorm_forward(out, rstd, x, w, N, H, D, ld, eps, ex.stream)));
}

template <class T>
void rmsnorm_backward(const Exec& ex, T* dx, bool accumulate, float* dw, const T* dout, const T* x,
                      const T* w, const float* rstd, int N, int H, int D, size_t ld) {
    SOF_KERNEL_DISPATCH(ex, T, "rmsnorm_backward",
                        (cpu::rmsnorm_backward(dx, accumulate, dw, dout, x, w, rstd, N, H, D, ld)),
                        (cuda::rmsnorm_backward(dx, accumulate, dw, dout, x, w, rstd, N, H, D, ld,
                                                ex.stream, ex.scratch)));
}

} // namespace sof::kernels
