// SwiGLU (LLaMA family MLP): h = silu(gate) * up over a fused [gate | up] row, and its backward.
// Elementwise; both twins compute in fp32.
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

namespace cpu {
// h (N,I) = silu(gate) * up, gu (N,2I) = [gate | up] per row.
void swiglu_forward(float* h, const float* gu, int N, int I);
// dgu (N,2I) from dh (N,I) and the forward input gu.
void swiglu_backward(float* dgu, const float* dh, const float* gu, int N, int I);
} // namespace cpu

namespace cuda {
template <class T> void swiglu_forward(T* h, const T* gu, int N, int I, void* stream);
template <class T>
void swiglu_backward(T* dgu, const T* dh, const T* gu, int N, int I, void* stream);
} // namespace cuda

template <class T> void swiglu_forward(const Exec& ex, T* h, const T* gu, int N, int I) {
    SOF_KERNEL_DISPATCH(ex, T, "swiglu_forward", (cpu::swiglu_forward(h, gu, N, I)),
                        (cuda::swiglu_forward(h, gu, N, I, ex.stream)));
}

template <class T>
void swiglu_backward(const Exec& ex, T* dgu, const T* dh, const T* gu, int N, int I) {
    SOF_KERNEL_DISPATCH(ex, T, "swiglu_backward", (cpu::swiglu_backward(dgu, dh, gu, N, I)),
                        (cuda::swiglu_backward(dgu, dh, gu, N, I, ex.stream)));
}

} // namespace sof::kernels
