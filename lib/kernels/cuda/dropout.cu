// CUDA twin of dropout.h: one element per thread (grid-stride), its keep bit drawn from the
// element's global index exactly as the CPU twin does (the same Philox words: the same bits).
#include "kernels/dropout.h"

#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

namespace {

// Element i of the call, (b, rest) = (i / TC, i % TC), has the global index
// ((batch0 + b) * tokens + token0) * C + rest: a batch row's T * C elements are consecutive.
template <class D>
__global__ void dropout_kernel(D* out, const D* x, size_t n, size_t TC, uint64_t batch0,
                               uint64_t row_stride, uint64_t offset, DropoutMask m) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        const uint64_t b = i / TC, e = (batch0 + b) * row_stride + offset + (i - b * TC);
        const float v = to_float(x[i]);
        out[i] = from_float<D>(m.keep(e) ? v * m.scale : 0.0f);
    }
}

template <class D> __global__ void copy_kernel(D* out, const D* x, size_t n) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = x[i];
}

} // namespace

template <class T> void dropout_forward(T* out, const T* x, const DropoutArgs& a, void* stream) {
    const char* op = "dropout";
    int tokens = 0;
    detail::check_dropout_args(a, op, &tokens);
    const DropoutMask m = dropout_mask(a.p, a.key, op);
    const size_t TC = static_cast<size_t>(a.T) * a.C, n = static_cast<size_t>(a.B) * TC;
    if (n == 0) return;
    const cudaStream_t s = as_stream(stream);
    if (!m.active()) {
        if (out != x) copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(dev_ptr(out), dev_ptr(x), n);
    } else {
        const uint64_t C = static_cast<uint64_t>(a.C);
        dropout_kernel<<<blocks_for(n), kThreads, 0, s>>>(
            dev_ptr(out), dev_ptr(x), n, TC, a.key.batch0, static_cast<uint64_t>(tokens) * C,
            static_cast<uint64_t>(a.key.token0) * C, m);
    }
    SOF_CHECK_LAUNCH("dropout");
}

template void dropout_forward<float>(float*, const float*, const DropoutArgs&, void*);
template void dropout_forward<core::bf16>(core::bf16*, const core::bf16*, const DropoutArgs&,
                                          void*);

} // namespace sof::kernels::cuda
