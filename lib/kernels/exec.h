// Where a kernel runs: the CPU twin (OpenMP/OpenBLAS, on the calling thread) or the CUDA twin (on
// a stream, asynchronously). Every op X.h of this module dispatches on an Exec.
#pragma once

#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace sof::kernels {

enum class Backend { Cpu, Cuda };

namespace cuda {
class Blas; // cuBLASLt handle, workspace and per-shape heuristics of one stream (cuda/blas.h)
}

struct Exec {
    Backend backend = Backend::Cpu;
    void* stream = nullptr;     // cudaStream_t (Cuda); the ops are asynchronous on it
    cuda::Blas* blas = nullptr; // Cuda: matmul's cuBLASLt context for this stream
};

inline Exec cpu_exec() {
    return Exec{};
}

// True in builds with the CUDA twins (SOF_HAVE_CUDA).
constexpr bool have_cuda() {
#if defined(SOF_HAVE_CUDA)
    return true;
#else
    return false;
#endif
}

using core::bf16;

namespace detail {
[[noreturn]] void no_cpu_dtype(const char* op);
[[noreturn]] void no_cuda_build(const char* op);
} // namespace detail

} // namespace sof::kernels

// The body of an op's dispatch: the CPU twin for fp32 (the only CPU activation type), the CUDA
// twin for fp32 and bf16. CPU_CALL / CUDA_CALL are the twin calls (parenthesised expressions).
#if defined(SOF_HAVE_CUDA)
#define SOF_KERNEL_DISPATCH(ex, T, name, CPU_CALL, CUDA_CALL)                                      \
    do {                                                                                           \
        if ((ex).backend == ::sof::kernels::Backend::Cuda) {                                       \
            CUDA_CALL;                                                                             \
        } else if constexpr (std::is_same_v<T, float>) {                                           \
            CPU_CALL;                                                                              \
        } else {                                                                                   \
            ::sof::kernels::detail::no_cpu_dtype(name);                                            \
        }                                                                                          \
    } while (0)
#else
#define SOF_KERNEL_DISPATCH(ex, T, name, CPU_CALL, CUDA_CALL)                                      \
    do {                                                                                           \
        if ((ex).backend == ::sof::kernels::Backend::Cuda) {                                       \
            ::sof::kernels::detail::no_cuda_build(name);                                           \
        } else if constexpr (std::is_same_v<T, float>) {                                           \
            CPU_CALL;                                                                              \
        } else {                                                                                   \
            ::sof::kernels::detail::no_cpu_dtype(name);                                            \
        }                                                                                          \
    } while (0)
#endif
