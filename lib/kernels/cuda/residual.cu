// CUDA twin of residual.h: out = a + b and dst += src, one element per thread in fp32 (out may
// alias a or b: each element is read before it is written, by the same thread).
#include "kernels/residual.h"

#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

namespace {

template <class D> __global__ void residual_kernel(D* out, const D* a, const D* b, size_t n) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = from_float<D>(to_float(a[i]) + to_float(b[i]));
}

} // namespace

template <class T> void residual_forward(T* out, const T* a, const T* b, long N, void* stream) {
    if (N <= 0) return;
    const size_t n = static_cast<size_t>(N);
    residual_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(dev_ptr(out), dev_ptr(a),
                                                                       dev_ptr(b), n);
    SOF_CHECK_LAUNCH("residual_forward");
}

template <class T> void add_inplace(T* dst, const T* src, long N, void* stream) {
    if (N <= 0) return;
    const size_t n = static_cast<size_t>(N);
    residual_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(dev_ptr(dst), dev_ptr(dst),
                                                                       dev_ptr(src), n);
    SOF_CHECK_LAUNCH("add_inplace");
}

template void residual_forward<float>(float*, const float*, const float*, long, void*);
template void residual_forward<core::bf16>(core::bf16*, const core::bf16*, const core::bf16*, long,
                                           void*);
template void add_inplace<float>(float*, const float*, long, void*);
template void add_inplace<core::bf16>(core::bf16*, const core::bf16*, long, void*);

} // namespace sof::kernels::cuda
