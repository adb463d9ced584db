// Pointwise math shared by the CUDA twins (fp32 in registers): the tanh-form GELU and its
// derivative (gelu.cu, matmul.cu's epilogue fallback), the same formulas as cpu/gelu.cpp.
#pragma once

#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

constexpr float kGeluScale = 0.7978845608028654f; // sqrt(2/pi)

__device__ __forceinline__ float gelu_tanh(float x) {
    const float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(kGeluScale * (x + cube)));
}

__device__ __forceinline__ float gelu_tanh_grad(float x) {
    const float cube = 0.044715f * x * x * x;
    const float th = tanhf(kGeluScale * (x + cube));
    const float sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

} // namespace sof::kernels::cuda
