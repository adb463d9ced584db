// Data movement inside one memory: strided row copies (the fused q|k|v row split for the Ulysses
// exchange, qk-norm's pass-through of v) and zero fills, on the same Exec as the other ops.
#pragma once

#include <cstddef>

#include "kernels/exec.h"

namespace sof::kernels {

namespace cpu {
// dst[r*ldd + i] = src[r*lds + i] for r < rows, i < width (elements of `elem` bytes).
void copy_rows(void* dst, size_t ldd, const void* src, size_t lds, size_t rows, size_t width,
               size_t elem);
void zero(void* dst, size_t bytes);
} // namespace cpu

namespace cuda {
void copy_rows(void* dst, size_t ldd, const void* src, size_t lds, size_t rows, size_t width,
               size_t elem, void* stream);
void zero(void* dst, size_t bytes, void* stream);
} // namespace cuda

template <class T>
void copy_rows(const Exec& ex, T* dst, size_t ldd, const T* src, size_t lds, size_t rows,
               size_t width) {
#if defined(SOF_HAVE_CUDA)
    if (ex.backend == Backend::Cuda) {
        cuda::copy_rows(dst, ldd, src, lds, rows, width, sizeof(T), ex.stream);
        return detail::cuda_op_done("copy_rows", ex.stream);
    }
#else
    if (ex.backend == Backend::Cuda) detail::no_cuda_build("copy_rows");
#endif
    cpu::copy_rows(dst, ldd, src, lds, rows, width, sizeof(T));
}

inline void zero(const Exec& ex, void* dst, size_t bytes) {
#if defined(SOF_HAVE_CUDA)
    if (ex.backend == Backend::Cuda) {
        cuda::zero(dst, bytes, ex.stream);
        return detail::cuda_op_done("zero", ex.stream);
    }
#else
    if (ex.backend == Backend::Cuda) detail::no_cuda_build("zero");
#endif
    cpu::zero(dst, bytes);
}

} // namespace sof::kernels
