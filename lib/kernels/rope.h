// Rotary position embeddings (LLaMA family), rotate-half pairs (i, i + hd/2), in place on strided
// rows of heads; the backward is the rotation by -angle.
#pragma once

#include <cstddef>

#include "kernels/exec.h"

namespace sof::kernels {

// In place on H heads of hd at x + n*ld + h*hd for n < N, at position positions[n]:
// (a, b) -> (a cos - b sin, b cos + a sin). cos, sin (maxpos, hd/2) fp32 tables.
namespace cpu {
void rope_forward(float* x, const float* cos, const float* sin, const int* positions, int N, int H,
                  int hd, size_t ld);
void rope_backward(float* dx, const float* cos, const float* sin, const int* positions, int N,
                   int H, int hd, size_t ld);
} // namespace cpu

namespace cuda {
template <class T>
void rope_forward(T* x, const float* cos, const float* sin, const int* positions, int N, int H,
                  int hd, size_t ld, void* stream);
template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, const int* positions, int N, int H,
                   int hd, size_t ld, void* stream);
} // namespace cuda

template <class T>
void rope_forward(const Exec& ex, T* x, const float* cos, const float* sin, const int* positions,
                  int N, int H, int hd, size_t ld) {
    SOF_KERNEL_DISPATCH(ex, T, "rope_forward",
                        (cpu::rope_forward(x, cos, sin, positions, N, H, hd, ld)),
                        (cuda::rope_forward(x, cos, sin, positions, N, H, hd, ld, ex.stream)));
}

template <class T>
void rope_backward(const Exec& ex, T* dx, const float* cos, const float* sin, const int* positions,
                   int N, int H, int hd, size_t ld) {
    SOF_KERNEL_DISPATCH(ex, T, "rope_backward",
                        (cpu::rope_backward(dx, cos, sin, positions, N, H, hd, ld)),
                        (cuda::rope_backward(dx, cos, sin, positions, N, H, hd, ld, ex.stream)));
}

} // namespace sof::kernels
