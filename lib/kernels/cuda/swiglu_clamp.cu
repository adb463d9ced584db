// CUDA twin of swiglu_clamp.h: one (gate, up) pair per thread, the header's element formulas in
// fp32 (the CPU twin's).
#include "kernels/swiglu_clamp.h"

#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

namespace {

template <class D>
__global__ void swiglu_clamp_forward_kernel(D* h, const D* gu, size_t total, int I,
                                            ClampedSwiglu a) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const size_t n = j / static_cast<size_t>(I);
        const int i = static_cast<int>(j % static_cast<size_t>(I));
        const D* row = gu + n * 2 * static_cast<size_t>(I);
        h[j] = from_float<D>(clamped_swiglu(to_float(row[clamped_gate_col(i, I, a.interleaved)]),
                                            to_float(row[clamped_up_col(i, I, a.interleaved)]), a));
    }
}

template <class D>
__global__ void swiglu_clamp_backward_kernel(D* dgu, const D* dh, const D* gu, size_t total, int I,
                                             ClampedSwiglu a) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const size_t n = j / static_cast<size_t>(I);
        const int i = static_cast<int>(j % static_cast<size_t>(I));
        const size_t row = n * 2 * static_cast<size_t>(I);
        const size_t gc = row + clamped_gate_col(i, I, a.interleaved);
        const size_t uc = row + clamped_up_col(i, I, a.interleaved);
        float dg, du;
        clamped_swiglu_grad(to_float(gu[gc]), to_float(gu[uc]), to_float(dh[j]), a, &dg, &du);
        dgu[gc] = from_float<D>(dg);
        dgu[uc] = from_float<D>(du);
    }
}

} // namespace

template <class T>
void swiglu_clamp_forward(T* h, const T* gu, int N, int I, const ClampedSwiglu& a, void* stream) {
    if (N <= 0 || I <= 0) return;
    const size_t total = static_cast<size_t>(N) * I;
    swiglu_clamp_forward_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(h), dev_ptr(gu), total, I, a);
    SOF_CHECK_LAUNCH("swiglu_clamp_forward");
}

template <class T>
void swiglu_clamp_backward(T* dgu, const T* dh, const T* gu, int N, int I, const ClampedSwiglu& a,
                           void* stream) {
    if (N <= 0 || I <= 0) return;
    const size_t total = static_cast<size_t>(N) * I;
    swiglu_clamp_backward_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(dgu), dev_ptr(dh), dev_ptr(gu), total, I, a);
    SOF_CHECK_LAUNCH("swiglu_clamp_backward");
}

template void swiglu_clamp_forward<float>(float*, const float*, int, int, const ClampedSwiglu&,
                                          void*);
template void swiglu_clamp_forward<core::bf16>(core::bf16*, const core::bf16*, int, int,
                                               const ClampedSwiglu&, void*);
template void swiglu_clamp_backward<float>(float*, const float*, const float*, int, int,
                                           const ClampedSwiglu&, void*);
template void swiglu_clamp_backward<core::bf16>(core::bf16*, const core::bf16*, const core::bf16*,
                                                int, int, const ClampedSwiglu&, void*);

} // namespace sof::kernels::cuda
