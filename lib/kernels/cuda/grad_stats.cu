// CUDA twin of grad_stats.h: per-piece fp64 sums of squares (+ bf16 copy and non-finite flag)
// bitwise equal to piece_stats on the host, and the rank-order chunk sum. Moved here from the
// CUDA device runtime.
#include "kernels/grad_stats.h"

#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/scratch.h"

namespace sof::kernels::cuda {

namespace {

// Elements of one statistics piece staged in shared memory per round of grad_prep.
constexpr int kStage = 2048;

// Scales (and rounds to bf16) the stage `st` of the piece [a, b) into buf as fp64 squares; threads
// first, first + step, ... of the block share the work. Sets *bad for a non-finite g'.
__device__ __forceinline__ void stage_in(const float* grad, int64_t a, int64_t b, int64_t st,
                                         float scale, uint16_t* bf16_out, double* buf, int first,
                                         int step, int* bad) {
    const int64_t base = a + st * kStage;
    const int len = static_cast<int>(b - base < kStage ? b - base : kStage);
    for (int j = first; j < len; j += step) {
        float x = __fmul_rn(grad[base + j], scale);
        if (bf16_out) {
            const uint16_t h = core::f32_to_bf16(x);
            bf16_out[base + j] = h;
            x = core::bf16_to_f32(h);
        }
        if (!isfinite(x)) *bad = 1;
        const double d = static_cast<double>(x);
        buf[j] = __dmul_rn(d, d);
    }
}

// One block per piece (grid-striding over pieces). The piece is staged kStage elements at a time
// into two shared buffers: while threads 0..3 each add their lane (element index % 4) of one
// stage in index order, warps 1.. scale the next stage into the other buffer. Same order and
// rounding as piece_stats on the host (explicit _rn intrinsics: no FMA), so the sums are bitwise
// equal to the CPU twin's. The lane sums are a serial chain: a piece of 65536 elements takes ~16K
// dependent adds whatever the GPU (see docs/performance.md).
__global__ void grad_prep_kernel(const float* grad, const int64_t* bounds, int64_t base,
                                 int64_t npieces, float scale, GradStats* stats,
                                 uint16_t* bf16_out) {
    __shared__ double sq[2][kStage]; // (2, kStage) squares of two staged stages
    __shared__ double lanes[4];
    __shared__ int bad;
    const int tid = static_cast<int>(threadIdx.x);
    for (int64_t pc = blockIdx.x; pc < npieces; pc += gridDim.x) {
        const int64_t a = bounds[pc] - base, b = bounds[pc + 1] - base;
        const int64_t nst = (b - a + kStage - 1) / kStage;
        if (tid == 0) bad = 0;
        double acc = 0.0;
        int my_bad = 0;
        if (nst > 0) stage_in(grad, a, b, 0, scale, bf16_out, sq[0], tid, blockDim.x, &my_bad);
        __syncthreads();
        for (int64_t st = 0; st < nst; st++) {
            if (tid >= 32) {
                if (st + 1 < nst)
                    stage_in(grad, a, b, st + 1, scale, bf16_out, sq[(st + 1) & 1], tid - 32,
                             static_cast<int>(blockDim.x) - 32, &my_bad);
            } else if (tid < 4) {
                const double* cur = sq[st & 1];
                const int64_t rest = b - (a + st * kStage);
                const int len = static_cast<int>(rest < kStage ? rest : kStage);
                int j = tid;
                for (; j + 28 < len; j += 32) { // 8 independent loads, then 8 ordered adds
                    double x[8];
#pragma unroll
                    for (int u = 0; u < 8; u++)
                        x[u] = cur[j + 4 * u];
#pragma unroll
                    for (int u = 0; u < 8; u++)
                        acc = __dadd_rn(acc, x[u]);
                }
                for (; j < len; j += 4)
                    acc = __dadd_rn(acc, cur[j]);
            }
            __syncthreads();
        }
        if (my_bad) atomicOr(&bad, 1); // an integer flag: order-free
        if (tid < 4) lanes[tid] = acc;
        __syncthreads();
        if (tid == 0) {
            GradStats r;
            r.sumsq = __dadd_rn(__dadd_rn(lanes[0], lanes[1]), __dadd_rn(lanes[2], lanes[3]));
            r.nonfinite = bad;
            r.reserved = 0;
            stats[pc] = r;
        }
        __syncthreads();
    }
}

// Rank-order sum of nchunks chunks: one thread per element, the same additions in the same order
// as the CPU twin, so the result is bitwise the host's.
__global__ void sum_chunks_kernel(const float* chunks, int nchunks, size_t n, float* out) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        float a = chunks[i];
        for (int q = 1; q < nchunks; q++)
            a = __fadd_rn(a, chunks[static_cast<size_t>(q) * n + i]);
        out[i] = a;
    }
}

// Keeps the host copy of the bounds alive until the stream has read it (deleted by a host
// function on the stream).
struct Keepalive {
    std::vector<int64_t> bounds;
};

void CUDART_CB drop_keepalive(void* arg) {
    delete static_cast<Keepalive*>(arg);
}

} // namespace

void grad_prep_pieces(const float* grad, const int64_t* bounds, int64_t npieces, int64_t base,
                      float scale, GradStats* stats, uint16_t* bf16_out, void* stream) {
    if (npieces <= 0) return;
    const cudaStream_t st = as_stream(stream);
    int dev = 0, sms = 1;
    SOF_CHECK_CUDA(cudaGetDevice(&dev));
    SOF_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int64_t cap = static_cast<int64_t>(sms > 0 ? sms : 1) * 16;
    const int grid = static_cast<int>(npieces < cap ? npieces : cap);
    grad_prep_kernel<<<grid, kThreads, 0, st>>>(grad, bounds, base, npieces, scale, stats,
                                                bf16_out);
    SOF_CHECK_LAUNCH("grad_prep");
}

void grad_prep(const float* grad, size_t n, const std::vector<int64_t>& bounds, float scale,
               GradStats* stats, uint16_t* bf16_out, void* stream, Scratch* scratch) {
    (void)n; // the bounds (checked by the dispatch) cover it
    const cudaStream_t st = as_stream(stream);
    const int64_t npieces = static_cast<int64_t>(bounds.size()) - 1;
    if (npieces <= 0) return;
    const size_t bytes = bounds_scratch_bytes(static_cast<size_t>(npieces));
    auto* dbounds = static_cast<int64_t*>(scratch_get(scratch, bytes, "grad_prep"));
    auto* keep = new Keepalive{bounds};
    cudaError_t e =
        cudaMemcpyAsync(dbounds, keep->bounds.data(), bytes, cudaMemcpyHostToDevice, st);
    if (e == cudaSuccess) e = cudaLaunchHostFunc(st, drop_keepalive, keep);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        cudaStreamSynchronize(st); // the copy, if enqueued, must finish before keep goes
        delete keep;
        SOF_CHECK_CUDA_STATUS(e, "grad_prep: bounds upload");
    }
    grad_prep_pieces(grad, dbounds, npieces, 0, scale, stats, bf16_out, stream);
}

void sum_chunks(const float* chunks, int nchunks, size_t n, float* out, void* stream) {
    if (n == 0) return;
    sum_chunks_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(chunks, nchunks, n, out);
    SOF_CHECK_LAUNCH("sum_chunks");
}

} // namespace sof::kernels::cuda
