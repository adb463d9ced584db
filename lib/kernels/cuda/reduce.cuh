// Deterministic reductions of the CUDA twins: warp and block sums/maxima in a fixed shuffle order
// (every lane ends with the same bits), and column sums over fixed row chunks (no float atomics).
#pragma once

#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/scratch.h"

namespace sof::kernels::cuda {

// Butterfly over the 32 lanes: each step adds two equal-valued groups, and fp32 addition is
// commutative, so all lanes hold the same bits and the order never depends on timing.
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024; 1-D blocks). sh: 32 floats of
// shared memory. Every thread gets the same result; the block must call it uniformly.
__device__ __forceinline__ float block_sum(float v, float* sh) {
    const int lane = static_cast<int>(threadIdx.x) & 31, wid = static_cast<int>(threadIdx.x) >> 5;
    const int nw = static_cast<int>(blockDim.x) >> 5;
    v = warp_sum(v);
    __syncthreads(); // sh may still be read by a previous call
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    return warp_sum(lane < nw ? sh[lane] : 0.0f);
}

__device__ __forceinline__ float block_max(float v, float* sh) {
    const int lane = static_cast<int>(threadIdx.x) & 31, wid = static_cast<int>(threadIdx.x) >> 5;
    const int nw = static_cast<int>(blockDim.x) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    return warp_max(lane < nw ? sh[lane] : -INFINITY);
}

// ---- column sums -----------------------------------------------------------------------------
// out_k[col] += sum over rows r of f(r, col)[k] (k < NOUT, fp32), for a (rows, cols) matrix whose
// elements f reads. The rows are cut into chunks whose size depends on `rows` only
// (kernels/scratch.h colsum_chunk_rows); a block of (32 columns x kColRowThreads) sums one chunk:
// thread y takes rows y, y + kColRowThreads, ... in order, then a fixed tree over y; a second
// kernel adds the chunks in order. Bitwise the same on every run and every GPU. The columns go in
// groups of kColGroup through the stream's scratch (the partials of one group at a time).

constexpr int kColTile = 32;      // columns per block (one warp along x: coalesced rows)
constexpr int kColRowThreads = 8; // row threads per block

template <int NOUT> struct ColOut { float* p[NOUT]; };

// partial (NOUT, gridDim.y, ncols): the chunk sums of columns c0 .. c0+ncols-1
template <int NOUT, class F>
__global__ void colsum_partial_kernel(float* partial, int rows, int c0, int ncols, int chunk_rows,
                                      F f) {
    __shared__ float sh[NOUT][kColRowThreads][kColTile + 1];
    const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y);
    const int lc = static_cast<int>(blockIdx.x) * kColTile + x; // column within the group
    const int r0 = static_cast<int>(blockIdx.y) * chunk_rows;
    const int r1 = min(rows, r0 + chunk_rows);
    float acc[NOUT];
#pragma unroll
    for (int k = 0; k < NOUT; k++)
        acc[k] = 0.0f;
    if (lc < ncols) {
        for (int r = r0 + y; r < r1; r += kColRowThreads) {
            float v[NOUT];
            f(r, c0 + lc, v);
#pragma unroll
            for (int k = 0; k < NOUT; k++)
                acc[k] += v[k];
        }
    }
#pragma unroll
    for (int k = 0; k < NOUT; k++)
        sh[k][y][x] = acc[k];
    __syncthreads();
    for (int s = kColRowThreads / 2; s > 0; s >>= 1) {
        if (y < s) {
#pragma unroll
            for (int k = 0; k < NOUT; k++)
                sh[k][y][x] += sh[k][y + s][x];
        }
        __syncthreads();
    }
    if (y == 0 && lc < ncols) {
#pragma unroll
        for (int k = 0; k < NOUT; k++)
            partial[(static_cast<size_t>(k) * gridDim.y + blockIdx.y) * ncols + lc] = sh[k][0][x];
    }
}

template <int NOUT>
__global__ void colsum_finish_kernel(ColOut<NOUT> out, const float* partial, int nchunks, int c0,
                                     int ncols) {
    const int lc = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (lc >= ncols) return;
#pragma unroll
    for (int k = 0; k < NOUT; k++) {
        float acc = 0.0f;
        for (int c = 0; c < nchunks; c++)
            acc += partial[(static_cast<size_t>(k) * nchunks + c) * ncols + lc];
        out.p[k][c0 + lc] += acc;
    }
}

// Enqueues the column sums on st (f: a functor with __device__ void operator()(int row, int col,
// float* v) const); the partials live in `scratch` (colsum_scratch_bytes; op names the caller).
template <int NOUT, class F>
void column_sums(ColOut<NOUT> out, int rows, int cols, F f, cudaStream_t st, Scratch* scratch,
                 const char* op) {
    if (rows <= 0 || cols <= 0) return;
    const int chunk_rows = colsum_chunk_rows(rows);
    const int nchunks = colsum_chunks(rows);
    float* partial =
        static_cast<float*>(scratch_get(scratch, colsum_scratch_bytes(NOUT, rows, cols), op));
    for (int c0 = 0; c0 < cols; c0 += kColGroup) {
        const int nc = std::min(kColGroup, cols - c0);
        const dim3 grid(static_cast<unsigned>((nc + kColTile - 1) / kColTile),
                        static_cast<unsigned>(nchunks));
        colsum_partial_kernel<NOUT, F>
            <<<grid, dim3(kColTile, kColRowThreads), 0, st>>>(partial, rows, c0, nc, chunk_rows, f);
        SOF_CHECK_LAUNCH(op);
        const unsigned fin = static_cast<unsigned>((nc + kThreads - 1) / kThreads);
        colsum_finish_kernel<NOUT><<<fin, kThreads, 0, st>>>(out, partial, nchunks, c0, nc);
        SOF_CHECK_LAUNCH(op);
    }
}

} // namespace sof::kernels::cuda
