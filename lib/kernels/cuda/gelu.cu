// CUDA twin of gelu.h: tanh-form GELU and its derivative (pointwise.cuh, cpu/gelu.cpp's formulas),
// one element per thread in fp32, grid-stride.
#include "kernels/gelu.h"

#include "kernels/cuda/pointwise.cuh"

namespace sof::kernels::cuda {

namespace {

template <class D> __global__ void gelu_forward_kernel(D* out, const D* inp, size_t n) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = from_float<D>(gelu_tanh(to_float(inp[i])));
}

// dinp may alias dout: each element is read before it is written, by the same thread.
template <class D>
__global__ void gelu_backward_kernel(D* dinp, const D* inp, const D* dout, size_t n) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        dinp[i] = from_float<D>(gelu_tanh_grad(to_float(inp[i])) * to_float(dout[i]));
}

} // namespace

template <class T> void gelu_forward(T* out, const T* inp, long N, void* stream) {
    if (N <= 0) return;
    const size_t n = static_cast<size_t>(N);
    gelu_forward_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(dev_ptr(out),
                                                                           dev_ptr(inp), n);
    SOF_CHECK_LAUNCH("gelu_forward");
}

template <class T> void gelu_backward(T* dinp, const T* inp, const T* dout, long N, void* stream) {
    if (N <= 0) return;
    const size_t n = static_cast<size_t>(N);
    gelu_backward_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(dinp), dev_ptr(inp), dev_ptr(dout), n);
    SOF_CHECK_LAUNCH("gelu_backward");
}

template void gelu_forward<float>(float*, const float*, long, void*);
template void gelu_forward<core::bf16>(core::bf16*, const core::bf16*, long, void*);
template void gelu_backward<float>(float*, const float*, const float*, long, void*);
template void gelu_backward<core::bf16>(core::bf16*, const core::bf16*, const core::bf16*, long,
                                        void*);

} // namespace sof::kernels::cuda
