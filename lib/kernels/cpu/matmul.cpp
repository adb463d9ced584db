// CPU twin of matmul.h: OpenBLAS sgemm on fixed output tiles spread over OpenMP threads (one
// OpenBLAS thread), so every element comes from a call of the same shape: bitwise deterministic.
#include "kernels/matmul.h"

#include <cblas.h>

#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/gelu.h"

namespace sof::kernels::cpu {

namespace {

// C (M,N) = op(A) @ op(B) + beta * C on gemm.h's fixed tiles
void gemm_tiled(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
    Gemm g;
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.M = M;
    g.N = N;
    g.K = K;
    g.A = A;
    g.lda = lda;
    g.B = B;
    g.ldb = ldb;
    g.beta = beta;
    g.C = C;
    g.ldc = ldc;
    cpu::gemm_tiled(g);
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
