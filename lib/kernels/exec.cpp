// Errors of the dispatch (exec.h) and, in builds without CUDA, the cuBLASLt context's stand-in
// that says so; the op twins live in cpu/ and cuda/.
#include "kernels/exec.h"

#include "kernels/blas.h"
#include "kernels/grad_stats.h"

namespace sof::kernels {

namespace detail {
void no_cpu_dtype(const char* op) {
    SOF_FAIL(Internal,
             "kernel %s: the CPU twin runs in fp32 only (bf16 activations are a CUDA feature; "
             "the CPU model keeps fp32 activations holding bf16 values)",
             op);
}
void no_cuda_build(const char* op) {
    SOF_FAIL(Config,
             "kernel %s: this superoffload was built without CUDA (-DSOF_CUDA=OFF or no nvcc); "
             "use device.type: host or rebuild with the CUDA Toolkit",
             op);
}
} // namespace detail

void check_piece_bounds(const std::vector<int64_t>& bounds, size_t n) {
    SOF_CHECK(bounds.size() >= 2 && bounds.front() == 0 && bounds.back() == static_cast<int64_t>(n),
              "grad_prep: piece bounds must run from 0 to n=%zu", n);
    for (size_t i = 0; i + 1 < bounds.size(); i++)
        SOF_CHECK(bounds[i] <= bounds[i + 1], "grad_prep: piece bounds must ascend (at %zu)", i);
}

} // namespace sof::kernels

#if !defined(SOF_HAVE_CUDA)
namespace sof::kernels::cuda {
struct Blas::Impl {};
std::unique_ptr<Blas> Blas::create(void*, size_t) {
    detail::no_cuda_build("matmul (cuBLASLt)");
}
Blas::~Blas() = default;
size_t Blas::workspace_bytes() const {
    return 0;
}
size_t Blas::cached_shapes() const {
    return 0;
}
} // namespace sof::kernels::cuda
#endif
