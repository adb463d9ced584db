// The CPU twins' one matrix product: OpenBLAS sgemm on fixed output tiles (one OpenBLAS thread,
// the tiles spread over OpenMP), so every element comes from a call of the same shape.
#pragma once

#include <cstddef>

namespace sof::kernels::cpu {

constexpr int kTileM = 64, kTileN = 256; // sgemm output tile (fixed: results must not depend on
                                         // the thread count)

// C (M,N) = op(A) (M,K) @ op(B) (K,N) + beta * C, row-major; A is stored (K,M) when trans_a,
// B (N,K) when trans_b. K is never split.
struct Gemm {
    bool trans_a = false, trans_b = false;
    int M = 0, N = 0, K = 0;
    const float* A = nullptr;
    int lda = 0;
    const float* B = nullptr;
    int ldb = 0;
    float beta = 0.0f;
    float* C = nullptr;
    int ldc = 0;
};

// The number of output tiles of g (row-major over the tile grid), and tile t of them.
int gemm_tiles(const Gemm& g);
void gemm_tile(const Gemm& g, int t);
// Every tile of g, over OpenMP threads.
void gemm_tiled(const Gemm& g);

} // namespace sof::kernels::cpu
