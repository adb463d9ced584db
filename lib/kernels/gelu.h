// GELU, tanh approximation (GPT-2): forward and backward, elementwise. The forward fused into the
// matmul epilogue is matmul.h's pre_gelu; this op is the standalone form and the backward.
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

namespace cpu {
void gelu_forward(float* out, const float* inp, long N); // out, inp (N)
// dinp = gelu'(inp) * dout (dinp may alias dout)
void gelu_backward(float* dinp, const float* inp, const float* dout, long N);
} // namespace cpu

namespace cuda {
template <class T> void gelu_forward(T* out, const T* inp, long N, void* stream);
template <class T> void gelu_backward(T* dinp, const T* inp, const T* dout, long N, void* stream);
} // namespace cuda

template <class T> void gelu_forward(const Exec& ex, T* out, const T* inp, long N) {
    SOF_KERNEL_DISPATCH(ex, T, "gelu_forward", (cpu::gelu_forward(out, inp, N)),
                        (cuda::gelu_forward(out, inp, N, ex.stream)));
}

template <class T>
void gelu_backward(const Exec& ex, T* dinp, const T* inp, const T* dout, long N) {
    SOF_KERNEL_DISPATCH(ex, T, "gelu_backward", (cpu::gelu_backward(dinp, inp, dout, N)),
                        (cuda::gelu_backward(dinp, inp, dout, N, ex.stream)));
}

} // namespace sof::kernels
