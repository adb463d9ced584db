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
class Scratch; // device scratch of one stream (scratch.h)

struct Exec {
    Backend backend = Backend::Cpu;
    void* stream = nullptr;     // cudaStream_t (Cuda); the ops are asynchronous on it
    cuda::Blas* blas = nullptr; // Cuda: matmul's cuBLASLt context for this stream
    // Cuda: the stream's scratch for the ops that need temporary device memory (column sums of
    // the norm and bias backwards, the embedding backward, grad_prep with host bounds)
    Scratch* scratch = nullptr;
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
// After a CUDA twin has enqueued its work (every dispatch calls it): with SOF_CUDA_SYNC=1 in the
// environment, synchronizes the stream and throws core::Error (Runtime) naming op when it or any
// earlier work failed, so a kernel fault names its kernel instead of surfacing at a later
// synchronization; without it, nothing (cuda_sync.cu; CUDA builds only).
void cuda_op_done(const char* op, void* stream);
} // namespace detail

} // namespace sof::kernels

// The body of an op's dispatch: the CPU twin for fp32 (the only CPU activation type), the CUDA
// twin for fp32 and bf16. CPU_CALL / CUDA_CALL are the twin calls (parenthesised expressions).
#if defined(SOF_HAVE_CUDA)
#define SOF_KERNEL_DISPATCH(ex, T, name, CPU_CALL, CUDA_CALL)                                      \
    do {                                                                                           \
        if ((ex).backend == ::sof::kernels::Backend::Cuda) {                                       \
            CUDA_CALL;                                                                             \
            ::sof::kernels::detail::cuda_op_done(name, (ex).stream);                               \
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
