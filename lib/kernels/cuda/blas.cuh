// The inside of cuda::Blas (blas.h) for the CUDA twins: one cuBLASLt product in column-major terms,
// with its descriptors and the heuristic's algorithm cached per (shape, dtypes, epilogue,
// alignment).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "kernels/blas.h"
#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

// D (m x n) = op(A) (m x k) @ op(B) (k x n) [+ D when accumulate], column-major as cuBLASLt sees
// it; A is stored (k x m) when trans_a, else (m x k); B is stored (n x k) when trans_b, else
// (k x n). A and B share ab_type; C is D (same layout and d_type). fp32 compute and scale.
struct GemmShape {
    bool trans_a = false, trans_b = false;
    int m = 0, n = 0, k = 0;
    int64_t lda = 0, ldb = 0, ldd = 0;
    cudaDataType_t ab_type = CUDA_R_32F, d_type = CUDA_R_32F;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    int64_t aux_ld = 0;      // GELU input matrix (the _AUX epilogues), in elements of d_type
    bool accumulate = false; // beta = 1 (D += product), else beta = 0
};

struct GemmPtrs {
    const void* a = nullptr;
    const void* b = nullptr;
    void* d = nullptr;
    const void* bias = nullptr; // (m) of d_type, for the _BIAS epilogues
    void* aux = nullptr;        // (m x n, ld aux_ld) of d_type, for the _AUX epilogues
};

struct Blas::Impl {
    cudaStream_t stream = nullptr;
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr; // workspace_bytes of device memory, used by one product at a time
    size_t workspace_bytes = 0;

    // The classic cuBLAS handle on `stream` (grouped_matmul's cublasGemmGroupedBatchedEx and
    // cublasGemmEx), created on first use; fp32 products stay fp32 (no TF32: default math mode)
    // and bf16 ones reduce split-K partials in fp32 (no reduced-precision reduction).
    cublasHandle_t classic();
    cublasHandle_t classic_handle = nullptr;

    // Enqueues the product on `stream`. Returns false, enqueuing nothing, when cuBLASLt has no
    // algorithm for it that launches (an epilogue it lacks for this shape or alignment); the
    // reason is in `refused`. Throws on other errors.
    bool gemm(const GemmShape& g, const GemmPtrs& p);

    ~Impl();

    // Candidates asked of the heuristic per product, best first: a launch that refuses one
    // (NOT_SUPPORTED, INVALID_VALUE: seen for fused epilogues with mixed alignments) tries the
    // next; the first that launches is kept for the product from then on.
    static constexpr int kCandidates = 8;
    struct Plan {
        cublasLtMatmulDesc_t desc = nullptr;
        cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
        cublasLtMatmulAlgo_t algos[kCandidates]{};
        int nalgos = 0;    // candidates left (algos[0] first; refused ones are dropped)
        bool kept = false; // algos[0] has launched: the product's algorithm from now on
        bool ok() const { return nalgos > 0; }
    };
    std::string refused; // why the last product without an algorithm had none
    using Key = std::array<int64_t, 18>;
    std::mutex mu;             // plans and the descriptors' per-call pointers
    std::map<Key, Plan> plans; // one per distinct product
};

// The cuBLASLt element type of a twin's T.
template <class T> constexpr cudaDataType_t cuda_dtype();
template <> constexpr cudaDataType_t cuda_dtype<float>() {
    return CUDA_R_32F;
}
template <> constexpr cudaDataType_t cuda_dtype<core::bf16>() {
    return CUDA_R_16BF;
}

} // namespace sof::kernels::cuda
