// CPU twin of matmul.h: OpenBLAS sgemm on fixed output tiles spread over OpenMP threads (one
// OpenBLAS thread), so every element comes from a call of the same shape: bitwise deterministic.
#include "kernels/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "kernels/gelu.h"

namespace sof::kernels::cpu {

namespace {

constexpr int kTileM = 64, kTileN = 256; // sgemm output tile (fixed: results must not depend on
                                         // the thread count)

// C (M,N) = op(A) (M,K) @ op(B) (K,N) + beta * C, row-major, as independent sgemm calls on
// fixed kTileM x kTileN tiles of C. K is never split.
void gemm_tiled(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
    const int mt = (M + kTileM - 1) / kTileM, nt = (N + kTileN - 1) / kTileN;
#pragma omp parallel for collapse(2) schedule(static)
    for (int i = 0; i < mt; i++) {
        for (int j = 0; j < nt; j++) {
            const int r0 = i * kTileM, rows = std::min(M, r0 + kTileM) - r0;
            const int c0 = j * kTileN, cols = std::min(N, c0 + kTileN) - c0;
            const float* a = trans_a ? A + r0 : A + static_cast<size_t>(r0) * lda;
            const float* b = trans_b ? B + static_cast<size_t>(c0) * ldb : B + c0;
            cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                        trans_b ? CblasTrans : CblasNoTrans, rows, cols, K, 1.0f, a, lda, b, ldb,
                        beta, C + static_cast<size_t>(r0) * ldc + c0, ldc);
        }
    }
}

} // namespace

void use_single_threaded_blas() {
    openblas_set_num_threads(1);
}

void matmul_forward(float* out, float* pre_gelu, const float* inp, const float* w,
                    const float* bias, int N, int C, int OC) {
    float* prod = pre_gelu ? pre_gelu : out;
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            std::memcpy(prod + static_cast<size_t>(n) * OC, bias, sizeof(float) * OC);
    }
    gemm_tiled(false, true, N, OC, C, inp, C, w, C, bias ? 1.0f : 0.0f, prod, OC);
    if (pre_gelu) gelu_forward(out, pre_gelu, static_cast<long>(N) * OC);
}

void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                     int N, int C, int OC) {
    if (dinp) // (N,C) = dout (N,OC) @ w (OC,C)
        gemm_tiled(false, false, N, C, OC, dout, OC, w, C, 0.0f, dinp, C);
    // dw (OC,C) += dout^T (OC,N) @ inp (N,C)
    gemm_tiled(true, false, OC, C, N, dout, OC, inp, C, 1.0f, dw, C);
}

} // namespace sof::kernels::cpu
