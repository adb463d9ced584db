// SOF_CHECK_CUDA / SOF_CHECK_CUBLAS / SOF_CHECK_CUDNN: a failed CUDA runtime, cuBLAS(Lt) or cuDNN
// call throws core::Error (Runtime) with file:line, the call and the library's own message.
#pragma once

// Only the macros live here: include the library's header (cuda_runtime.h, cublasLt.h, cudnn.h)
// before using the matching macro. Header-only so core itself never links CUDA. SOF_CHECK_CUBLAS
// names the status with cuBLASLt's functions (cuBLAS and cuBLASLt share cublasStatus_t).
#include "core/cuda_sync.h"
#include "core/error.h"

namespace sof::core {
[[noreturn]] inline void throw_library_error(const char* lib, const char* file, int line,
                                             const char* call, const char* name, const char* text,
                                             const char* hint = "") {
    throw_error(ErrorKind::Runtime, strfmt("%s:%d: %s call %s failed: %s (%s)%s", file, line, lib,
                                           call, name, text, hint));
}
} // namespace sof::core

// The errors of a fault in earlier device work (sticky: the context is unusable afterwards),
// which the CUDA call that reports them did not cause (core/cuda_sync.h's hint goes with them).
#define SOF_CUDA_ASYNC_FAULT(e)                                                                    \
    ((e) == cudaErrorIllegalAddress || (e) == cudaErrorLaunchFailure ||                            \
     (e) == cudaErrorMisalignedAddress || (e) == cudaErrorAssert ||                                \
     (e) == cudaErrorIllegalInstruction || (e) == cudaErrorInvalidPc ||                            \
     (e) == cudaErrorInvalidAddressSpace || (e) == cudaErrorHardwareStackError ||                  \
     (e) == cudaErrorLaunchTimeout)

// cudaGetLastError() clears the thread's non-sticky error so the next call does not inherit it.
#define SOF_CHECK_CUDA(call)                                                                       \
    do {                                                                                           \
        const cudaError_t sof_e_ = (call);                                                         \
        if (sof_e_ != cudaSuccess) {                                                               \
            (void)cudaGetLastError();                                                              \
            ::sof::core::throw_library_error(                                                      \
                "CUDA", __FILE__, __LINE__, #call, cudaGetErrorName(sof_e_),                       \
                cudaGetErrorString(sof_e_),                                                        \
                SOF_CUDA_ASYNC_FAULT(sof_e_) ? ::sof::core::kCudaSyncHint : "");                   \
        }                                                                                          \
    } while (0)

// A status already in hand (a call whose other results were looked at first), named `call`.
#define SOF_CHECK_CUDA_STATUS(status, call)                                                        \
    do {                                                                                           \
        const cudaError_t sof_e_ = (status);                                                       \
        if (sof_e_ != cudaSuccess) {                                                               \
            (void)cudaGetLastError();                                                              \
            ::sof::core::throw_library_error(                                                      \
                "CUDA", __FILE__, __LINE__, call, cudaGetErrorName(sof_e_),                        \
                cudaGetErrorString(sof_e_),                                                        \
                SOF_CUDA_ASYNC_FAULT(sof_e_) ? ::sof::core::kCudaSyncHint : "");                   \
        }                                                                                          \
    } while (0)

// After a kernel launch: the launch configuration error, if any.
#define SOF_CHECK_LAUNCH(what) SOF_CHECK_CUDA(((void)(what), cudaGetLastError()))

#define SOF_CHECK_CUBLAS(call)                                                                     \
    do {                                                                                           \
        const cublasStatus_t sof_s_ = (call);                                                      \
        if (sof_s_ != CUBLAS_STATUS_SUCCESS)                                                       \
            ::sof::core::throw_library_error("cuBLAS", __FILE__, __LINE__, #call,                  \
                                             cublasLtGetStatusName(sof_s_),                        \
                                             cublasLtGetStatusString(sof_s_));                     \
    } while (0)

#define SOF_CHECK_CUDNN(call)                                                                      \
    do {                                                                                           \
        const cudnnStatus_t sof_s_ = (call);                                                       \
        if (sof_s_ != CUDNN_STATUS_SUCCESS)                                                        \
            ::sof::core::throw_library_error("cuDNN", __FILE__, __LINE__, #call, "cudnnStatus_t",  \
                                             cudnnGetErrorString(sof_s_));                         \
    } while (0)
