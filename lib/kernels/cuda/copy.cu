// CUDA twin of copy.h: cudaMemcpy2DAsync for strided rows, cudaMemsetAsync for fills.
// Both asynchronous on the Exec's stream.
#include "kernels/copy.h"
#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

// cudaMemcpy2DAsync refuses a pitch above the device's cudaDevAttrMaxPitch (2^31 - 1 bytes on
// current GPUs): Ulysses' rows reach it at long sequences (one batch row of a rank's slice,
// T/sp x heads x head_dim elements: 2^31 bytes at T = 2^18, sp = 2, 8192 bf16 channels).
constexpr size_t kMaxPitchBytes = 2147483647;

void copy_rows(void* dst, size_t ldd, const void* src, size_t lds, size_t rows, size_t width,
               size_t elem, void* stream) {
    if (rows == 0 || width == 0) return;
    cudaStream_t s = as_stream(stream);
    const size_t wb = width * elem, db = ldd * elem, sb = lds * elem;
    if (rows == 1 || (db == wb && sb == wb)) { // one contiguous range
        SOF_CHECK_CUDA(cudaMemcpyAsync(dst, src, rows * wb, cudaMemcpyDefault, s));
        return;
    }
    if (db <= kMaxPitchBytes && sb <= kMaxPitchBytes) {
        SOF_CHECK_CUDA(cudaMemcpy2DAsync(dst, db, src, sb, wb, rows, cudaMemcpyDefault, s));
        return;
    }
    for (size_t r = 0; r < rows; r++) // pitches past the limit: few, very long rows
        SOF_CHECK_CUDA(cudaMemcpyAsync(static_cast<char*>(dst) + r * db,
                                       static_cast<const char*>(src) + r * sb, wb,
                                       cudaMemcpyDefault, s));
}

void zero(void* dst, size_t bytes, void* stream) {
    if (bytes == 0) return;
    SOF_CHECK_CUDA(cudaMemsetAsync(dst, 0, bytes, as_stream(stream)));
}

} // namespace sof::kernels::cuda
