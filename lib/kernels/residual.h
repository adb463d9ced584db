// Residual adds: out = a + b (forward), and dst += src (the backward's gradient accumulation).
// Elementwise; out may alias a or b.
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

namespace cpu {
void residual_forward(float* out, const float* a, const float* b, long N); // all (N)
void add_inplace(float* dst, const float* src, long N);                    // dst += src
} // namespace cpu

namespace cuda {
template <class T> void residual_forward(T* out, const T* a, const T* b, long N, void* stream);
template <class T> void add_inplace(T* dst, const T* src, long N, void* stream);
} // namespace cuda

template <class T> void residual_forward(const Exec& ex, T* out, const T* a, const T* b, long N) {
    SOF_KERNEL_DISPATCH(ex, T, "residual_forward", (cpu::residual_forward(out, a, b, N)),
                        (cuda::residual_forward(out, a, b, N, ex.stream)));
}

template <class T> void add_inplace(const Exec& ex, T* dst, const T* src, long N) {
    SOF_KERNEL_DISPATCH(ex, T, "add_inplace", (cpu::add_inplace(dst, src, N)),
                        (cuda::add_inplace(dst, src, N, ex.stream)));
}

} // namespace sof::kernels
