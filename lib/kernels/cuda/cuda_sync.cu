// SOF_CUDA_SYNC for the CUDA twins (exec.h detail::cuda_op_done): after each op's enqueue, with the
// switch on, synchronize its stream and name the op when its work (or any before it) failed.
#include <cuda_runtime.h>

#include "core/cuda_sync.h"
#include "core/error.h"
#include "kernels/exec.h"

namespace sof::kernels::detail {

void cuda_op_done(const char* op, void* stream) {
    if (!core::cuda_sync_mode()) return;
    cudaError_t e = cudaGetLastError();
    const char* when = "at launch";
    if (e == cudaSuccess) {
        e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
        when = "while running (SOF_CUDA_SYNC: the stream was synchronized after the op)";
    }
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    SOF_FAIL(Runtime, "CUDA op %s failed %s: %s (%s)", op, when, cudaGetErrorName(e),
             cudaGetErrorString(e));
}

} // namespace sof::kernels::detail
