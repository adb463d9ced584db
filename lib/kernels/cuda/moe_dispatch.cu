// CUDA twin of moe_dispatch.h: the counting sort in three passes over fixed chunks of pairs
// (count, scan in chunk order, stable scatter: the CPU twin's plan exactly), gathers, combine.
#include "kernels/moe_dispatch.h"

#include "kernels/cuda/reduce.cuh"

namespace sof::kernels::cuda {

namespace {

constexpr int kChunk = kMoePlanChunk; // pairs per chunk = threads per block of the plan's passes
constexpr int kMaxPlanExperts = 8192; // the count pass keeps one int per expert in shared memory

// counts (chunks, E): the pairs of each chunk per expert (integer atomics in shared memory: the
// totals do not depend on their order); bad: the pairs naming no expert.
__global__ void plan_count_kernel(int* counts, int* bad, const int* idx, int P, int E) {
    extern __shared__ int cnt[];
    for (int e = static_cast<int>(threadIdx.x); e < E; e += kChunk)
        cnt[e] = 0;
    __syncthreads();
    const int q = static_cast<int>(blockIdx.x) * kChunk + static_cast<int>(threadIdx.x);
    if (q < P) {
        const int e = idx[q];
        if (e >= 0 && e < E)
            atomicAdd(&cnt[e], 1);
        else
            atomicAdd(bad, 1);
    }
    __syncthreads();
    for (int e = static_cast<int>(threadIdx.x); e < E; e += kChunk)
        counts[static_cast<size_t>(blockIdx.x) * E + e] = cnt[e];
}

// counts -> each chunk's first row per expert (in place, relative to the expert's start), and
// offsets (E+1): one thread per expert over the chunks in order, then one thread over experts.
__global__ void plan_scan_kernel(int* counts, int* offsets, int chunks, int E) {
    extern __shared__ int total[];
    for (int e = static_cast<int>(threadIdx.x); e < E; e += kChunk) {
        int run = 0;
        for (int c = 0; c < chunks; c++) {
            int* x = counts + static_cast<size_t>(c) * E + e;
            const int n = *x;
            *x = run;
            run += n;
        }
        total[e] = run;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int run = 0;
        for (int e = 0; e < E; e++) {
            offsets[e] = run;
            run += total[e];
        }
        offsets[E] = run;
    }
}

// Each pair's row: its expert's start + its chunk's start in the expert + the pairs of the same
// expert before it in the chunk (a stable sort).
__global__ void plan_scatter_kernel(int* order, int* slot, const int* base, const int* offsets,
                                    const int* idx, int P, int E) {
    __shared__ int s_idx[kChunk];
    const int i = static_cast<int>(threadIdx.x);
    const int q = static_cast<int>(blockIdx.x) * kChunk + i;
    s_idx[i] = q < P ? idx[q] : -1;
    __syncthreads();
    if (q >= P) return;
    const int e = s_idx[i];
    if (e < 0 || e >= E) return; // counted as bad; the host throws
    int rank = 0;
    for (int j = 0; j < i; j++)
        rank += s_idx[j] == e ? 1 : 0;
    const int r = offsets[e] + base[static_cast<size_t>(blockIdx.x) * E + e] + rank;
    order[r] = q;
    slot[q] = r;
}

template <class D>
__global__ void gather_kernel(D* xs, const D* x, const int* order, size_t total, int K, int C) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const size_t r = j / static_cast<size_t>(C), c = j % static_cast<size_t>(C);
        xs[j] = x[static_cast<size_t>(order[r] / K) * C + c];
    }
}

template <class D>
__global__ void gather_backward_kernel(D* dx, const D* dxs, const int* slot, size_t total, int K,
                                       int C) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const size_t n = j / static_cast<size_t>(C), c = j % static_cast<size_t>(C);
        float acc = to_float(dxs[static_cast<size_t>(slot[n * K]) * C + c]);
        for (int k = 1; k < K; k++)
            acc = __fadd_rn(acc, to_float(dxs[static_cast<size_t>(slot[n * K + k]) * C + c]));
        dx[j] = from_float<D>(acc);
    }
}

template <class D>
__global__ void combine_kernel(D* y, const D* ys, const float* w, const int* slot, size_t total,
                               int K, int C) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const size_t n = j / static_cast<size_t>(C), c = j % static_cast<size_t>(C);
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
            const size_t q = n * K + k;
            acc += w[q] * to_float(ys[static_cast<size_t>(slot[q]) * C + c]);
        }
        y[j] = from_float<D>(acc);
    }
}

template <class D>
__global__ void combine_dys_kernel(D* dys, const D* dy, const float* w, const int* slot,
                                   size_t total, int K, int C) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) { // j over (N, K, C)
        const size_t q = j / static_cast<size_t>(C), c = j % static_cast<size_t>(C);
        const size_t n = q / static_cast<size_t>(K);
        dys[static_cast<size_t>(slot[q]) * C + c] = from_float<D>(w[q] * to_float(dy[n * C + c]));
    }
}

// dw[q] = dot(dy[n], ys[slot[q]]): one warp per pair, lanes over C in order, then the butterfly.
template <class D>
__global__ void combine_dw_kernel(float* dw, const D* dy, const D* ys, const int* slot, int P,
                                  int K, int C) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int q =
        static_cast<int>(blockIdx.x) * (kThreads / 32) + (static_cast<int>(threadIdx.x) >> 5);
    if (q >= P) return;
    const D* a = dy + static_cast<size_t>(q / K) * C;
    const D* b = ys + static_cast<size_t>(slot[q]) * C;
    float acc = 0.0f;
    for (int c = lane; c < C; c += 32)
        acc += to_float(a[c]) * to_float(b[c]);
    acc = warp_sum(acc);
    if (lane == 0) dw[q] = acc;
}

} // namespace

void moe_plan(int* order, int* slot, int* offsets, int* host_offsets, const int* idx, int N, int K,
              int E, void* stream, Scratch* scratch) {
    SOF_CHECK(N >= 0 && K >= 1 && E >= 1, "moe_plan: bad shape N=%d K=%d E=%d", N, K, E);
    SOF_CHECK(E <= kMaxPlanExperts, "moe_plan (CUDA): %d experts; at most %d", E, kMaxPlanExperts);
    SOF_CHECK(host_offsets, "moe_plan (CUDA): host_offsets is required");
    const cudaStream_t st = as_stream(stream);
    const int P = N * K;
    const int chunks = (P + kChunk - 1) / kChunk;
    // [bad (1) | counts (chunks, E)]
    int* bad = static_cast<int*>(scratch_get(scratch, moe_plan_scratch_bytes(N, K, E), "moe_plan"));
    int* counts = bad + 1;
    const size_t smem = sizeof(int) * static_cast<size_t>(E);
    cudaError_t e = cudaMemsetAsync(bad, 0, sizeof(int), st);
    if (e == cudaSuccess && chunks > 0) {
        plan_count_kernel<<<chunks, kChunk, smem, st>>>(counts, bad, idx, P, E);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) {
        plan_scan_kernel<<<1, kChunk, smem, st>>>(counts, offsets, chunks, E);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess && chunks > 0) {
        plan_scatter_kernel<<<chunks, kChunk, 0, st>>>(order, slot, counts, offsets, idx, P, E);
        e = cudaGetLastError();
    }
    int n_bad = 0;
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(host_offsets, offsets, sizeof(int) * (static_cast<size_t>(E) + 1),
                            cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaMemcpyAsync(&n_bad, bad, sizeof(int), cudaMemcpyDeviceToHost, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    SOF_CHECK_CUDA(e);
    if (n_bad > 0)
        SOF_FAIL(Usage,
                 "moe_plan (CUDA): %d of the %d (token, k) pairs name an expert index out of range "
                 "(experts are 0..%d)",
                 n_bad, P, E - 1);
}

template <class T>
void moe_gather(T* xs, const T* x, const int* order, int N, int K, int C, void* stream) {
    const size_t total = static_cast<size_t>(N) * K * C;
    if (total == 0) return;
    gather_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(dev_ptr(xs), dev_ptr(x),
                                                                         order, total, K, C);
    SOF_CHECK_LAUNCH("moe_gather");
}

template <class T>
void moe_gather_backward(T* dx, const T* dxs, const int* slot, int N, int K, int C, void* stream) {
    const size_t total = static_cast<size_t>(N) * C;
    if (total == 0) return;
    gather_backward_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(dx), dev_ptr(dxs), slot, total, K, C);
    SOF_CHECK_LAUNCH("moe_gather_backward");
}

template <class T>
void moe_combine(T* y, const T* ys, const float* w, const int* slot, int N, int K, int C,
                 void* stream) {
    const size_t total = static_cast<size_t>(N) * C;
    if (total == 0) return;
    combine_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(dev_ptr(y), dev_ptr(ys),
                                                                          w, slot, total, K, C);
    SOF_CHECK_LAUNCH("moe_combine");
}

template <class T>
void moe_combine_backward(T* dys, float* dw, const T* dy, const T* ys, const float* w,
                          const int* slot, int N, int K, int C, void* stream) {
    const size_t total = static_cast<size_t>(N) * K * C;
    if (total == 0) return;
    const cudaStream_t st = as_stream(stream);
    combine_dys_kernel<<<blocks_for(total), kThreads, 0, st>>>(dev_ptr(dys), dev_ptr(dy), w, slot,
                                                               total, K, C);
    SOF_CHECK_LAUNCH("moe_combine_backward dys");
    const int P = N * K, per_block = kThreads / 32;
    combine_dw_kernel<<<(P + per_block - 1) / per_block, kThreads, 0, st>>>(
        dw, dev_ptr(dy), dev_ptr(ys), slot, P, K, C);
    SOF_CHECK_LAUNCH("moe_combine_backward dw");
}

#define SOF_MOE_DISPATCH_INST(T)                                                                   \
    template void moe_gather<T>(T*, const T*, const int*, int, int, int, void*);                   \
    template void moe_gather_backward<T>(T*, const T*, const int*, int, int, int, void*);          \
    template void moe_combine<T>(T*, const T*, const float*, const int*, int, int, int, void*);    \
    template void moe_combine_backward<T>(T*, float*, const T*, const T*, const float*,            \
                                          const int*, int, int, int, void*);
SOF_MOE_DISPATCH_INST(float)
SOF_MOE_DISPATCH_INST(core::bf16)
#undef SOF_MOE_DISPATCH_INST

} // namespace sof::kernels::cuda
