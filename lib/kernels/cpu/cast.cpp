// CPU twin of cast.h: core/dtype.h's round-to-nearest-even per element, serial (the host device
// runs it on a stream's worker thread, beside the trainer's OpenMP threads).
#include "kernels/cast.h"

namespace sof::kernels::cpu {

void cast_f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = core::f32_to_bf16(src[i]);
}

void cast_bf16_to_f32(const uint16_t* src, float* dst, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = core::bf16_to_f32(src[i]);
}

} // namespace sof::kernels::cpu
