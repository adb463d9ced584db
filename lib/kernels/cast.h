// Casts between fp32 and bf16 tensors (round to nearest even, NaN kept: core/dtype.h's rounding
// on both twins), and a copy that widens or narrows while it copies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/exec.h"

namespace sof::kernels {

namespace cpu {
void cast_f32_to_bf16(const float* src, uint16_t* dst, size_t n);
void cast_bf16_to_f32(const uint16_t* src, float* dst, size_t n);
} // namespace cpu

namespace cuda {
void cast_f32_to_bf16(const float* src, uint16_t* dst, size_t n, void* stream);
void cast_bf16_to_f32(const uint16_t* src, float* dst, size_t n, void* stream);
} // namespace cuda

// src, dst: n elements in the Exec's memory.
inline void cast_f32_to_bf16(const Exec& ex, const float* src, uint16_t* dst, size_t n) {
    SOF_KERNEL_DISPATCH(ex, float, "cast_f32_to_bf16", (cpu::cast_f32_to_bf16(src, dst, n)),
                        (cuda::cast_f32_to_bf16(src, dst, n, ex.stream)));
}
inline void cast_bf16_to_f32(const Exec& ex, const uint16_t* src, float* dst, size_t n) {
    SOF_KERNEL_DISPATCH(ex, float, "cast_bf16_to_f32", (cpu::cast_bf16_to_f32(src, dst, n)),
                        (cuda::cast_bf16_to_f32(src, dst, n, ex.stream)));
}

} // namespace sof::kernels
