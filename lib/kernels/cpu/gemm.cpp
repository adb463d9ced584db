// The CPU twins' tiled sgemm (gemm.h): each tile one cblas_sgemm call of a shape fixed by the
// problem, so the result is bitwise the same for any OpenMP thread count.
#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>

namespace sof::kernels::cpu {

int gemm_tiles(const Gemm& g) {
    if (g.M <= 0 || g.N <= 0) return 0;
    return ((g.M + kTileM - 1) / kTileM) * ((g.N + kTileN - 1) / kTileN);
}

void gemm_tile(const Gemm& g, int t) {
    const int nt = (g.N + kTileN - 1) / kTileN;
    const int i = t / nt, j = t % nt;
    const int r0 = i * kTileM, rows = std::min(g.M, r0 + kTileM) - r0;
    const int c0 = j * kTileN, cols = std::min(g.N, c0 + kTileN) - c0;
    float* c = g.C + static_cast<size_t>(r0) * g.ldc + c0;
    if (g.K == 0) { // an empty sum: C = beta * C (OpenBLAS may not touch C for K = 0)
        for (int r = 0; r < rows; r++)
            for (int q = 0; q < cols; q++)
                c[static_cast<size_t>(r) * g.ldc + q] =
                    g.beta == 0.0f ? 0.0f : g.beta * c[static_cast<size_t>(r) * g.ldc + q];
        return;
    }
    const float* a = g.trans_a ? g.A + r0 : g.A + static_cast<size_t>(r0) * g.lda;
    const float* b = g.trans_b ? g.B + static_cast<size_t>(c0) * g.ldb : g.B + c0;
    cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                g.trans_b ? CblasTrans : CblasNoTrans, rows, cols, g.K, 1.0f, a, g.lda, b, g.ldb,
                g.beta, c, g.ldc);
}

void gemm_tiled(const Gemm& g) {
    const int tiles = gemm_tiles(g);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < tiles; t++)
        gemm_tile(g, t);
}

} // namespace sof::kernels::cpu
