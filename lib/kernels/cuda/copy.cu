// CUDA twin of copy.h: cudaMemcpy2DAsync for strided rows, cudaMemsetAsync for fills.
// Both asynchronous on the Exec's stream.
#include "kernels/copy.h"
#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

void copy_rows(void* dst, size_t ldd, const void* src, size_t lds, size_t rows, size_t width,
               size_t elem, void* stream) {
    if (rows == 0 || width == 0) return;
    SOF_CHECK_CUDA(cudaMemcpy2DAsync(dst, ldd * elem, src, lds * elem, width * elem, rows,
                                     cudaMemcpyDefault, as_stream(stream)));
}

void zero(void* dst, size_t bytes, void* stream) {
    if (bytes == 0) return;
    SOF_CHECK_CUDA(cudaMemsetAsync(dst, 0, bytes, as_stream(stream)));
}

} // namespace sof::kernels::cuda
