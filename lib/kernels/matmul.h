// Matrix products of the transformer: out = inp @ w^T (+ bias) (+ GELU), and the backward.
// CPU twin: OpenBLAS sgemm on fixed tiles (deterministic); CUDA twin: cuBLASLt, bf16 or fp32 in.
#pragma once

#include <cstddef>

#include "kernels/exec.h"

namespace sof::kernels {

namespace cpu {
// OpenBLAS to one thread (process-wide): the products parallelize over fixed tiles with OpenMP,
// bitwise the same for any thread count, and no second thread pool competes with OpenMP's.
void use_single_threaded_blas();
// out (N,OC) = inp (N,C) @ w^T (w: (OC,C)) + bias (OC, may be null). With pre_gelu non-null:
// pre_gelu (N,OC) = that product, out = gelu(pre_gelu) (tanh form, gelu.h).
void matmul_forward(float* out, float* pre_gelu, const float* inp, const float* w,
                    const float* bias, int N, int C, int OC);
// dinp (N,C) = dout (N,OC) @ w (overwritten; skipped when null); dw (OC,C) += dout^T @ inp.
void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                     int N, int C, int OC);
} // namespace cpu

namespace cuda {
// T = float or bf16 (inputs, weights, outputs); dw is fp32 and accumulated (beta = 1); fp32
// compute. bias and GELU run in cuBLASLt's epilogue (GELU_AUX_BIAS writes pre_gelu).
template <class T>
void matmul_forward(Blas& blas, T* out, T* pre_gelu, const T* inp, const T* w, const T* bias, int N,
                    int C, int OC, void* stream);
template <class T>
void matmul_backward(Blas& blas, T* dinp, float* dw, const T* dout, const T* inp, const T* w, int N,
                     int C, int OC, void* stream);
} // namespace cuda

template <class T>
void matmul_forward(const Exec& ex, T* out, T* pre_gelu, const T* inp, const T* w, const T* bias,
                    int N, int C, int OC) {
    SOF_KERNEL_DISPATCH(
        ex, T, "matmul_forward", (cpu::matmul_forward(out, pre_gelu, inp, w, bias, N, C, OC)),
        (cuda::matmul_forward(*ex.blas, out, pre_gelu, inp, w, bias, N, C, OC, ex.stream)));
}

template <class T>
void matmul_backward(const Exec& ex, T* dinp, float* dw, const T* dout, const T* inp, const T* w,
                     int N, int C, int OC) {
    SOF_KERNEL_DISPATCH(
        ex, T, "matmul_backward", (cpu::matmul_backward(dinp, dw, dout, inp, w, N, C, OC)),
        (cuda::matmul_backward(*ex.blas, dinp, dw, dout, inp, w, N, C, OC, ex.stream)));
}

} // namespace sof::kernels
