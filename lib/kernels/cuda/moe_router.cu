// CUDA twin of moe_router.h: one warp per token, the row's logits in registers; the top-k by K
// rounds of a warp arg-max under router_prefers (a total order: the CPU twin's choices exactly).
#include "kernels/moe_router.h"

#include "kernels/cuda/moe_common.cuh"

namespace sof::kernels::cuda {

namespace {

// The preferred of (v, i) and (pv, pi); i < 0 is "none".
__device__ __forceinline__ void keep_better(float& v, int& i, float pv, int pi) {
    if (pi >= 0 && (i < 0 || router_prefers(pv, pi, v, i))) {
        v = pv;
        i = pi;
    }
}

template <class D>
__global__ void router_forward_kernel(int* idx, float* w, const D* logits, RouterArgs a) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int n = static_cast<int>(blockIdx.x) * kRowWarps + (static_cast<int>(threadIdx.x) >> 5);
    if (n >= a.N) return; // whole warps leave together
    float v[kRowPerLane];
    load_row(v, logits + static_cast<size_t>(n) * a.E, a.E, lane);
    unsigned taken = 0;             // bit t: expert lane + 32 t already chosen
    int my_sel = -1;                // lane k < K: the k-th choice
    float my_val = 0.0f;            // and its logit
    for (int k = 0; k < a.K; k++) { // K rounds of arg-max over the experts not yet taken
        float bv = 0.0f;
        int bi = -1;
#pragma unroll
        for (int t = 0; t < kRowPerLane; t++) {
            const int j = lane + 32 * t;
            if (j < a.E && !((taken >> t) & 1u)) keep_better(bv, bi, v[t], j);
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float pv = __shfl_xor_sync(0xffffffffu, bv, o);
            const int pi = __shfl_xor_sync(0xffffffffu, bi, o);
            keep_better(bv, bi, pv, pi);
        }
        if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
        if (lane == k) {
            my_sel = bi;
            my_val = bv;
        }
    }
    const bool mine = lane < a.K;
    float wk;
    if (a.kind == RouterKind::SoftmaxTopk) {
        float m, s;
        row_softmax_stats(v, a.E, lane, &m, &s);
        wk = mine ? expf(my_val - m) * (1.0f / s) : 0.0f;
        if (a.renorm) wk = wk / warp_sum(wk);
    } else {
        const float m = __shfl_sync(0xffffffffu, my_val, 0); // the first choice: the maximum
        const float e = mine ? expf(my_val - m) : 0.0f;
        wk = e / warp_sum(e);
    }
    if (mine) {
        idx[static_cast<size_t>(n) * a.K + lane] = my_sel;
        w[static_cast<size_t>(n) * a.K + lane] = wk;
    }
}

// d[t] += add for the expert ix (its owner lane and register), for a value held by every lane.
__device__ __forceinline__ void add_at(float (&d)[kRowPerLane], int lane, int ix, float add) {
#pragma unroll
    for (int t = 0; t < kRowPerLane; t++)
        if (ix == lane + 32 * t) d[t] += add;
}

template <class D>
__global__ void router_backward_kernel(D* dlogits, const float* dw, const D* logits, const int* idx,
                                       RouterArgs a, RouterAuxGrad aux, bool use_aux) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int n = static_cast<int>(blockIdx.x) * kRowWarps + (static_cast<int>(threadIdx.x) >> 5);
    if (n >= a.N) return;
    const D* row = logits + static_cast<size_t>(n) * a.E;
    float v[kRowPerLane];
    load_row(v, row, a.E, lane);
    const bool mine = lane < a.K;
    const int ix = mine ? idx[static_cast<size_t>(n) * a.K + lane] : -1;
    const float dwk = (mine && dw) ? dw[static_cast<size_t>(n) * a.K + lane] : 0.0f;
    const float vk = mine ? to_float(row[ix]) : 0.0f;
    const bool full = a.kind == RouterKind::SoftmaxTopk || use_aux;
    float m = 0.0f, s = 1.0f;
    if (full) row_softmax_stats(v, a.E, lane, &m, &s);
    const float inv = 1.0f / s;
    float g[kRowPerLane];
#pragma unroll
    for (int t = 0; t < kRowPerLane; t++)
        g[t] = 0.0f;
    if (dw && a.kind == RouterKind::SoftmaxTopk) {
        const float pk = mine ? expf(vk - m) * inv : 0.0f;
        float gk = dwk;
        if (a.renorm) {
            const float S = warp_sum(pk);
            const float c = warp_sum(mine ? dwk * (pk / S) : 0.0f);
            gk = (dwk - c) / S;
        }
        for (int k = 0; k < a.K; k++)
            add_at(g, lane, __shfl_sync(0xffffffffu, ix, k), __shfl_sync(0xffffffffu, gk, k));
    }
    float aux_scale = 0.0f, z_scale = 0.0f; // the CPU twin's expressions of the pooled count
    if (use_aux) {
        const float M = aux.stats[2 * a.E];
        aux_scale = aux.d_aux * static_cast<float>(a.E) / (M * M);
        z_scale = aux.d_z * 2.0f / M;
    }
    const float mn = use_aux ? (aux.mask ? aux.mask[n] : 1.0f) : 0.0f;
    if (use_aux && aux_scale != 0.0f) {
#pragma unroll
        for (int t = 0; t < kRowPerLane; t++) {
            const int j = lane + 32 * t;
            if (j < a.E) g[t] += aux_scale * mn * aux.stats[a.E + j];
        }
    }
    float d[kRowPerLane];
    float pg = 0.0f;
#pragma unroll
    for (int t = 0; t < kRowPerLane; t++) {
        d[t] = full ? expf(v[t] - m) * inv : 0.0f; // p
        if (lane + 32 * t < a.E) pg += d[t] * g[t];
    }
    pg = full ? warp_sum(pg) : 0.0f;
    const float zc = z_scale * mn * (m + logf(s));
#pragma unroll
    for (int t = 0; t < kRowPerLane; t++)
        d[t] = full ? d[t] * (g[t] - pg + zc) : 0.0f;
    if (dw && a.kind == RouterKind::TopkSoftmax) {
        const float m0 = __shfl_sync(0xffffffffu, vk, 0);
        const float S = warp_sum(mine ? expf(vk - m0) : 0.0f);
        const float wk = mine ? expf(vk - m0) / S : 0.0f;
        const float c = warp_sum(mine ? dwk * wk : 0.0f);
        const float dk = wk * (dwk - c);
        for (int k = 0; k < a.K; k++)
            add_at(d, lane, __shfl_sync(0xffffffffu, ix, k), __shfl_sync(0xffffffffu, dk, k));
    }
    D* out = dlogits + static_cast<size_t>(n) * a.E;
#pragma unroll
    for (int t = 0; t < kRowPerLane; t++) {
        const int j = lane + 32 * t;
        if (j < a.E) out[j] = from_float<D>(d[t]);
    }
}

} // namespace

template <class T>
void moe_router_forward(int* idx, float* w, const T* logits, const RouterArgs& a, void* stream) {
    if (a.N == 0) return;
    router_forward_kernel<<<row_blocks(a.N), kRowWarps * 32, 0, as_stream(stream)>>>(
        idx, w, dev_ptr(logits), a);
    SOF_CHECK_LAUNCH("moe_router_forward");
}

template <class T>
void moe_router_backward(T* dlogits, const float* dw, const T* logits, const int* idx,
                         const RouterArgs& a, const RouterAuxGrad* aux, void* stream) {
    const bool use_aux = aux && (aux->d_aux != 0.0f || aux->d_z != 0.0f);
    SOF_CHECK(!use_aux || aux->stats, "moe_router_backward: aux terms without their stats");
    if (a.N == 0) return;
    router_backward_kernel<<<row_blocks(a.N), kRowWarps * 32, 0, as_stream(stream)>>>(
        dev_ptr(dlogits), dw, dev_ptr(logits), idx, a, use_aux ? *aux : RouterAuxGrad{}, use_aux);
    SOF_CHECK_LAUNCH("moe_router_backward");
}

template void moe_router_forward<float>(int*, float*, const float*, const RouterArgs&, void*);
template void moe_router_forward<core::bf16>(int*, float*, const core::bf16*, const RouterArgs&,
                                             void*);
template void moe_router_backward<float>(float*, const float*, const float*, const int*,
                                         const RouterArgs&, const RouterAuxGrad*, void*);
template void moe_router_backward<core::bf16>(core::bf16*, const float*, const core::bf16*,
                                              const int*, const RouterArgs&, const RouterAuxGrad*,
                                              void*);

} // namespace sof::kernels::cuda
