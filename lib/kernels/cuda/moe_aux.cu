// CUDA twin of moe_aux.h: each row's softmax maximum and sum by one warp, then the pooled
// statistics as column sums over fixed row chunks (reduce.cuh: no atomics, the same bits always).
#include "kernels/moe_aux.h"

#include "kernels/cuda/moe_common.cuh"

namespace sof::kernels::cuda {

namespace {

// rowstat (N,2): the row's maximum and sum of exp(v - max).
template <class D>
__global__ void aux_rowstat_kernel(float* rowstat, const D* logits, int N, int E) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int n = static_cast<int>(blockIdx.x) * kRowWarps + (static_cast<int>(threadIdx.x) >> 5);
    if (n >= N) return;
    float v[kRowPerLane];
    load_row(v, logits + static_cast<size_t>(n) * E, E, lane);
    float m, s;
    row_softmax_stats(v, E, lane, &m, &s);
    if (lane == 0) {
        rowstat[2 * static_cast<size_t>(n)] = m;
        rowstat[2 * static_cast<size_t>(n) + 1] = s;
    }
}

// Column col of the (N, 2E+2) matrix whose column sums are the statistics (moe_aux.h's layout).
template <class D> struct AuxTerm {
    const D* logits;
    const int* idx;
    const float* mask;
    const float* rowstat;
    int E, K;
    __device__ void operator()(int r, int col, float* out) const {
        const float m = mask ? mask[r] : 1.0f;
        const float mx = rowstat[2 * static_cast<size_t>(r)];
        const float s = rowstat[2 * static_cast<size_t>(r) + 1];
        if (col < E) {
            out[0] =
                m * (expf(to_float(logits[static_cast<size_t>(r) * E + col]) - mx) * (1.0f / s));
        } else if (col < 2 * E) {
            float c = 0.0f;
            for (int k = 0; k < K; k++)
                c += idx[static_cast<size_t>(r) * K + k] == col - E ? 1.0f : 0.0f;
            out[0] = m * c;
        } else if (col == 2 * E) {
            out[0] = m;
        } else {
            const float lse = mx + logf(s);
            out[0] = m * (lse * lse);
        }
    }
};

} // namespace

template <class T>
void moe_aux_stats(float* stats, const T* logits, const int* idx, const float* mask, int N, int E,
                   int K, void* stream, Scratch* scratch) {
    SOF_CHECK(E >= 1 && E <= kMaxExperts && K >= 1 && K <= E && N >= 0,
              "moe_aux_stats: bad shape N=%d E=%d K=%d (E at most %d)", N, E, K, kMaxExperts);
    if (N == 0) return;
    const cudaStream_t st = as_stream(stream);
    // One scratch request for both: the column sums' partials at its start (column_sums asks
    // for them again and gets the same buffer: a smaller request never moves it), the per-row
    // max and log-sum-exp (2N floats) after them.
    const int cols = moe_aux_stats_size(E);
    const size_t part = moe_aux_partials_bytes(N, E);
    char* base =
        static_cast<char*>(scratch_get(scratch, moe_aux_scratch_bytes(N, E), "moe_aux_stats"));
    float* rowstat = reinterpret_cast<float*>(base + part);
    aux_rowstat_kernel<<<row_blocks(N), kRowWarps * 32, 0, st>>>(rowstat, dev_ptr(logits), N, E);
    SOF_CHECK_LAUNCH("moe_aux_stats");
    const AuxTerm<dev_t<T>> f{dev_ptr(logits), idx, mask, rowstat, E, K};
    column_sums<1>(ColOut<1>{{stats}}, N, cols, f, st, scratch, "moe_aux_stats");
}

template void moe_aux_stats<float>(float*, const float*, const int*, const float*, int, int, int,
                                   void*, Scratch*);
template void moe_aux_stats<core::bf16>(float*, const core::bf16*, const int*, const float*, int,
                                        int, int, void*, Scratch*);

} // namespace sof::kernels::cuda
