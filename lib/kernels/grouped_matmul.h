// The experts' matrix products: one product per expert over its rows of the sorted buffer
// (moe_dispatch.h's plan), forward, dX, dW and the expert biases. No float atomics, fixed tiling.
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

// The shape of one grouped product: E experts, each out = inp @ w[e]^T (+ bias[e]) over its rows
// [offsets[e], offsets[e+1]) of the (P, C) input, P = offsets[E].
//   w (E,OC,C): expert e's (OC,C) matrix (matmul.h's layout); bias (E,OC) or null.
// offsets: the plan's (E+1) offsets in the Exec's memory; host_offsets: the same on the host
// (the CUDA twin needs the shapes on the host; the CPU twin reads host_offsets only).
struct GroupedShape {
    int E = 0, C = 0, OC = 0;
    const int* offsets = nullptr;
    const int* host_offsets = nullptr;
};

// Throws core::Error (Usage) naming the bad value: E, C, OC >= 1; host_offsets non-decreasing
// from 0.
void check_grouped_shape(const GroupedShape& s, const char* op);

namespace cpu {
// out (P,OC). Every expert's rows on gemm.h's fixed tiles, all experts' tiles in one OpenMP loop.
void grouped_matmul_forward(float* out, const float* inp, const float* w, const float* bias,
                            const GroupedShape& s);
// dinp (P,C) = per expert dout @ w[e] (overwritten; skipped when null); dw (E,OC,C) += per
// expert dout^T @ inp; dbias (E,OC) += per expert column sums of dout, rows in order (null: none).
// An expert without rows leaves its dw and dbias as they were.
void grouped_matmul_backward(float* dinp, float* dw, float* dbias, const float* dout,
                             const float* inp, const float* w, const GroupedShape& s);
} // namespace cpu

namespace cuda {
// T = float or bf16; fp32 compute. Forward and dinp: cublasGemmGroupedBatchedEx (one group per
// expert with rows, one launch); dw (fp32, accumulated): cublasGemmEx per expert on the stream
// (the grouped interface has no bf16-in fp32-out form); bias add and dbias: kernels summing each
// column's rows in order. The grouped call's pointer array lives in the stream's scratch.
template <class T>
void grouped_matmul_forward(Blas& blas, T* out, const T* inp, const T* w, const T* bias,
                            const GroupedShape& s, void* stream, Scratch* scratch);
template <class T>
void grouped_matmul_backward(Blas& blas, T* dinp, float* dw, float* dbias, const T* dout,
                             const T* inp, const T* w, const GroupedShape& s, void* stream,
                             Scratch* scratch);
} // namespace cuda

template <class T>
void grouped_matmul_forward(const Exec& ex, T* out, const T* inp, const T* w, const T* bias,
                            const GroupedShape& s) {
    check_grouped_shape(s, "grouped_matmul_forward");
    SOF_KERNEL_DISPATCH(
        ex, T, "grouped_matmul_forward", (cpu::grouped_matmul_forward(out, inp, w, bias, s)),
        (cuda::grouped_matmul_forward(*ex.blas, out, inp, w, bias, s, ex.stream, ex.scratch)));
}

template <class T>
void grouped_matmul_backward(const Exec& ex, T* dinp, float* dw, float* dbias, const T* dout,
                             const T* inp, const T* w, const GroupedShape& s) {
    check_grouped_shape(s, "grouped_matmul_backward");
    SOF_KERNEL_DISPATCH(ex, T, "grouped_matmul_backward",
                        (cpu::grouped_matmul_backward(dinp, dw, dbias, dout, inp, w, s)),
                        (cuda::grouped_matmul_backward(*ex.blas, dinp, dw, dbias, dout, inp, w, s,
                                                       ex.stream, ex.scratch)));
}

} // namespace sof::kernels
