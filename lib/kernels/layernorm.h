// LayerNorm over the last dim (GPT-2): eps 1e-5, biased variance; mean and rstd kept for backward.
// Grads of the weight and bias are fp32 and accumulated; each column summed in row order.
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

namespace cpu {
// out, inp (N,C); mean, rstd (N); w, b (C)
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C);
// dinp (N,C) += d/dinp; dw (C) += ...; db (C) += ...
void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C);
} // namespace cpu

namespace cuda {
template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* b,
                       int N, int C, void* stream);
template <class T>
void layernorm_backward(T* dinp, float* dw, float* db, const T* dout, const T* inp, const T* w,
                        const float* mean, const float* rstd, int N, int C, void* stream,
                        Scratch* scratch);
} // namespace cuda

template <class T>
void layernorm_forward(const Exec& ex, T* out, float* mean, float* rstd, const T* inp, const T* w,
                       const T* b, int N, int C) {
    SOF_KERNEL_DISPATCH(ex, T, "layernorm_forward",
                        (cpu::layernorm_forward(out, mean, rstd, inp, w, b, N, C)),
                        (cuda::layernorm_forward(out, mean, rstd, inp, w, b, N, C, ex.stream)));
}

template <class T>
void layernorm_backward(const Exec& ex, T* dinp, float* dw, float* db, const T* dout, const T* inp,
                        const T* w, const float* mean, const float* rstd, int N, int C) {
    SOF_KERNEL_DISPATCH(ex, T, "layernorm_backward",
                        (cpu::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C)),
                        (cuda::layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C,
                                                  ex.stream, ex.scratch)));
}

} // namespace sof::kernels
