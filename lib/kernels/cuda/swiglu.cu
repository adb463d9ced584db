// CUDA twin of swiglu.h: h = silu(gate) * up over fused [gate | up] rows and its derivative, one
// element of h per thread in fp32 (cpu/swiglu.cpp's formulas).
#include "kernels/swiglu.h"

#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

namespace {

template <class D> __global__ void swiglu_forward_kernel(D* h, const D* gu, size_t total, int I) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const size_t n = j / static_cast<size_t>(I), i = j % static_cast<size_t>(I);
        const D* g = gu + n * 2 * static_cast<size_t>(I);
        const float x = to_float(g[i]), u = to_float(g[i + static_cast<size_t>(I)]);
        h[j] = from_float<D>(x / (1.0f + expf(-x)) * u);
    }
}

template <class D>
__global__ void swiglu_backward_kernel(D* dgu, const D* dh, const D* gu, size_t total, int I) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const size_t n = j / static_cast<size_t>(I), i = j % static_cast<size_t>(I);
        const size_t row = n * 2 * static_cast<size_t>(I);
        const float x = to_float(gu[row + i]), u = to_float(gu[row + I + i]);
        const float d = to_float(dh[j]);
        const float s = 1.0f / (1.0f + expf(-x));
        dgu[row + I + i] = from_float<D>(d * (x * s));
        dgu[row + i] = from_float<D>(d * u * s * (1.0f + x * (1.0f - s)));
    }
}

} // namespace

template <class T> void swiglu_forward(T* h, const T* gu, int N, int I, void* stream) {
    if (N <= 0 || I <= 0) return;
    const size_t total = static_cast<size_t>(N) * I;
    swiglu_forward_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(h), dev_ptr(gu), total, I);
    SOF_CHECK_LAUNCH("swiglu_forward");
}

template <class T>
void swiglu_backward(T* dgu, const T* dh, const T* gu, int N, int I, void* stream) {
    if (N <= 0 || I <= 0) return;
    const size_t total = static_cast<size_t>(N) * I;
    swiglu_backward_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(dgu), dev_ptr(dh), dev_ptr(gu), total, I);
    SOF_CHECK_LAUNCH("swiglu_backward");
}

template void swiglu_forward<float>(float*, const float*, int, int, void*);
template void swiglu_forward<core::bf16>(core::bf16*, const core::bf16*, int, int, void*);
template void swiglu_backward<float>(float*, const float*, const float*, int, int, void*);
template void swiglu_backward<core::bf16>(core::bf16*, const core::bf16*, const core::bf16*, int,
                                          int, void*);

} // namespace sof::kernels::cuda
