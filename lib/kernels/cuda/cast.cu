// CUDA twin of cast.h: fp32 <-> bf16 with core/dtype.h's rounding (the tree's one rounding, NaN
// kept), one element per thread, grid-stride. Moved here from the CUDA device runtime.
#include "kernels/cast.h"

#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

namespace {

__global__ void cast_f32_to_bf16_kernel(const float* src, uint16_t* dst, size_t n) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = core::f32_to_bf16(src[i]);
}

__global__ void cast_bf16_to_f32_kernel(const uint16_t* src, float* dst, size_t n) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = core::bf16_to_f32(src[i]);
}

} // namespace

void cast_f32_to_bf16(const float* src, uint16_t* dst, size_t n, void* stream) {
    if (n == 0) return;
    cast_f32_to_bf16_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(src, dst, n);
    SOF_CHECK_LAUNCH("cast_f32_to_bf16");
}

void cast_bf16_to_f32(const uint16_t* src, float* dst, size_t n, void* stream) {
    if (n == 0) return;
    cast_bf16_to_f32_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(src, dst, n);
    SOF_CHECK_LAUNCH("cast_bf16_to_f32");
}

} // namespace sof::kernels::cuda
