// Deterministic reductions of the CUDA twins: warp and block sums/maxima in a fixed shuffle order
// (every lane ends with the same bits), and column sums over fixed row chunks (no float atomics).
#pragma once

#include <cmath>

#include "kernels/cuda/common.cuh"

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
// elements f reads. The rows are cut into chunks whose size depends on `rows` only; a block of
// (32 columns x kColRowThreads) sums one chunk: thread y takes rows y, y + kColRowThreads, ... in
// order, then a fixed tree over y; a second kernel adds the chunks in order. Bitwise the same on
// every run and every GPU.

constexpr int kColTile = 32;       // columns per block (one warp along x: coalesced rows)
constexpr int kColRowThreads = 8;  // row threads per block
constexpr int kColMinChunk = 64;   // rows per chunk, at least
constexpr int kColMaxChunks = 128; // chunks, at most (bounds the scratch: chunks x cols x NOUT)

template <int NOUT> struct ColOut { float* p[NOUT]; };

template <int NOUT, class F>
__global__ void colsum_partial_kernel(float* partial, int rows, int cols, int chunk_rows, F f) {
    __shared__ float sh[NOUT][kColRowThreads][kColTile + 1];
    const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y);
    const int col = static_cast<int>(blockIdx.x) * kColTile + x;
    const int r0 = static_cast<int>(blockIdx.y) * chunk_rows;
    const int r1 = min(rows, r0 + chunk_rows);
    float acc[NOUT];
#pragma unroll
    for (int k = 0; k < NOUT; k++)
        acc[k] = 0.0f;
    if (col < cols) {
        for (int r = r0 + y; r < r1; r += kColRowThreads) {
            float v[NOUT];
            f(r, col, v);
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
    if (y == 0 && col < cols) {
#pragma unroll
        for (int k = 0; k < NOUT; k++)
            partial[(static_cast<size_t>(k) * gridDim.y + blockIdx.y) * cols + col] = sh[k][0][x];
    }
}

template <int NOUT>
__global__ void colsum_finish_kernel(ColOut<NOUT> out, const float* partial, int nchunks,
                                     int cols) {
    const int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (col >= cols) return;
#pragma unroll
    for (int k = 0; k < NOUT; k++) {
        float acc = 0.0f;
        for (int c = 0; c < nchunks; c++)
            acc += partial[(static_cast<size_t>(k) * nchunks + c) * cols + col];
        out.p[k][col] += acc;
    }
}

// Enqueues the column sums on st (f: a functor with __device__ void operator()(int row, int col,
// float* v) const). The partial sums live in stream-ordered scratch (cudaMallocAsync).
template <int NOUT, class F>
void column_sums(ColOut<NOUT> out, int rows, int cols, F f, cudaStream_t st) {
    if (rows <= 0 || cols <= 0) return;
    int chunk_rows = (rows + kColMaxChunks - 1) / kColMaxChunks;
    if (chunk_rows < kColMinChunk) chunk_rows = kColMinChunk;
    const int nchunks = (rows + chunk_rows - 1) / chunk_rows;
    float* partial = nullptr;
    const size_t bytes = sizeof(float) * NOUT * static_cast<size_t>(nchunks) * cols;
    SOF_CHECK_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&partial), bytes, st));
    const dim3 grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile),
                    static_cast<unsigned>(nchunks));
    colsum_partial_kernel<NOUT, F>
        <<<grid, dim3(kColTile, kColRowThreads), 0, st>>>(partial, rows, cols, chunk_rows, f);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) {
        const unsigned fin = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
        colsum_finish_kernel<NOUT><<<fin, kThreads, 0, st>>>(out, partial, nchunks, cols);
        e = cudaGetLastError();
    }
    const cudaError_t f_err = cudaFreeAsync(partial, st);
    SOF_CHECK_CUDA(e);
    SOF_CHECK_CUDA(f_err);
}

} // namespace sof::kernels::cuda
