// Mixture-of-Experts dispatch, dropless and deterministic: a stable counting sort of the (token,
// k) pairs by expert, the gather of their rows, and the weighted combine over k in a fixed order.
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

// The plan of one MoE layer's N tokens, K experts each (P = N * K pairs, pair q = n * K + k):
//   offsets (E+1): expert e owns rows [offsets[e], offsets[e+1]) of the sorted buffers; an
//                  expert that got no token owns an empty range;
//   order (P):     order[r] = the pair q of sorted row r; within an expert, pairs in q order
//                  (token order: a stable sort);
//   slot (P):      slot[q] = the sorted row of pair q (the inverse of order).
// host_offsets (E+1): the same offsets in host memory (the grouped product's shapes are host
// values). The CUDA twin copies them and waits for the stream (one synchronization per MoE
// layer's forward; the backward reuses the plan). idx (N,K): experts in [0, E); the CPU twin
// throws naming the token and slot otherwise, the CUDA twin after its copy (it counts them).
namespace cpu {
void moe_plan(int* order, int* slot, int* offsets, int* host_offsets, const int* idx, int N, int K,
              int E);
// xs (P,C): row r = x[order[r] / K]; x (N,C).
void moe_gather(float* xs, const float* x, const int* order, int N, int K, int C);
// dx (N,C) = sum over k = 0..K-1, in that order, of dxs[slot[n*K+k]] (overwritten).
void moe_gather_backward(float* dx, const float* dxs, const int* slot, int N, int K, int C);
// y (N,C) = sum over k = 0..K-1, in that order, of w[n,k] * ys[slot[n*K+k]] (fp32; overwritten).
void moe_combine(float* y, const float* ys, const float* w, const int* slot, int N, int K, int C);
// dys (P,C): row slot[n*K+k] = w[n,k] * dy[n]; dw (N,K) = dot(dy[n], ys[slot[n*K+k]]) (fp32,
// summed over C in order; overwritten).
void moe_combine_backward(float* dys, float* dw, const float* dy, const float* ys, const float* w,
                          const int* slot, int N, int K, int C);
} // namespace cpu

namespace cuda {
// The per-chunk counts live in the stream's scratch.
void moe_plan(int* order, int* slot, int* offsets, int* host_offsets, const int* idx, int N, int K,
              int E, void* stream, Scratch* scratch);
template <class T>
void moe_gather(T* xs, const T* x, const int* order, int N, int K, int C, void* stream);
template <class T>
void moe_gather_backward(T* dx, const T* dxs, const int* slot, int N, int K, int C, void* stream);
template <class T>
void moe_combine(T* y, const T* ys, const float* w, const int* slot, int N, int K, int C,
                 void* stream);
template <class T>
void moe_combine_backward(T* dys, float* dw, const T* dy, const T* ys, const float* w,
                          const int* slot, int N, int K, int C, void* stream);
} // namespace cuda

// order, slot, offsets, idx in the Exec's memory; host_offsets in host memory (the CPU twin
// copies offsets there; it may be offsets itself).
inline void moe_plan(const Exec& ex, int* order, int* slot, int* offsets, int* host_offsets,
                     const int* idx, int N, int K, int E) {
    SOF_KERNEL_DISPATCH(
        ex, float, "moe_plan", (cpu::moe_plan(order, slot, offsets, host_offsets, idx, N, K, E)),
        (cuda::moe_plan(order, slot, offsets, host_offsets, idx, N, K, E, ex.stream, ex.scratch)));
}

template <class T>
void moe_gather(const Exec& ex, T* xs, const T* x, const int* order, int N, int K, int C) {
    SOF_KERNEL_DISPATCH(ex, T, "moe_gather", (cpu::moe_gather(xs, x, order, N, K, C)),
                        (cuda::moe_gather(xs, x, order, N, K, C, ex.stream)));
}

template <class T>
void moe_gather_backward(const Exec& ex, T* dx, const T* dxs, const int* slot, int N, int K,
                         int C) {
    SOF_KERNEL_DISPATCH(ex, T, "moe_gather_backward",
                        (cpu::moe_gather_backward(dx, dxs, slot, N, K, C)),
                        (cuda::moe_gather_backward(dx, dxs, slot, N, K, C, ex.stream)));
}

template <class T>
void moe_combine(const Exec& ex, T* y, const T* ys, const float* w, const int* slot, int N, int K,
                 int C) {
    SOF_KERNEL_DISPATCH(ex, T, "moe_combine", (cpu::moe_combine(y, ys, w, slot, N, K, C)),
                        (cuda::moe_combine(y, ys, w, slot, N, K, C, ex.stream)));
}

template <class T>
void moe_combine_backward(const Exec& ex, T* dys, float* dw, const T* dy, const T* ys,
                          const float* w, const int* slot, int N, int K, int C) {
    SOF_KERNEL_DISPATCH(ex, T, "moe_combine_backward",
                        (cpu::moe_combine_backward(dys, dw, dy, ys, w, slot, N, K, C)),
                        (cuda::moe_combine_backward(dys, dw, dy, ys, w, slot, N, K, C, ex.stream)));
}

} // namespace sof::kernels
