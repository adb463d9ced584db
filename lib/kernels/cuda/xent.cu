// CUDA twin of xent.h: one block per row; the max and the sum of exp over the first V logits are
// block reductions in a fixed order (reduce.cuh), stats (max, 1/sum) as the CPU twin lays them out.
#include "kernels/xent.h"

#include "kernels/cuda/reduce.cuh"

namespace sof::kernels::cuda {

namespace {

constexpr int kXentThreads = 512;

template <class D>
__global__ void xent_forward_kernel(float* losses, float* stats, const D* logits,
                                    const int* targets, int V, int Vp) {
    __shared__ float sh[32];
    const size_t row = blockIdx.x;
    const D* lg = logits + row * static_cast<size_t>(Vp);
    float m = -INFINITY;
    for (int i = static_cast<int>(threadIdx.x); i < V; i += blockDim.x)
        m = fmaxf(m, to_float(lg[i]));
    m = block_max(m, sh);
    float s = 0.0f;
    for (int i = static_cast<int>(threadIdx.x); i < V; i += blockDim.x)
        s += expf(to_float(lg[i]) - m);
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        stats[2 * row] = m;
        stats[2 * row + 1] = 1.0f / s;
        if (targets) {
            const int t = targets[row];
            // log-sum-exp form: exact even where the probability underflows
            losses[row] = t < 0 ? 0.0f : logf(s) - (to_float(lg[t]) - m);
        }
    }
}

// dlogits may alias logits: each element is read before it is written, by the same thread.
template <class D>
__global__ void xent_backward_kernel(D* dlogits, const D* logits, const float* stats,
                                     const int* targets, float dloss, int V, int Vp) {
    const size_t row = blockIdx.x;
    const D* lg = logits + row * static_cast<size_t>(Vp);
    D* d = dlogits + row * static_cast<size_t>(Vp);
    const int t = targets[row];
    const float m = stats[2 * row], inv = stats[2 * row + 1];
    for (int i = static_cast<int>(threadIdx.x); i < Vp; i += blockDim.x) {
        float g = 0.0f;
        if (t >= 0 && i < V) {
            const float p = expf(to_float(lg[i]) - m) * inv;
            g = (p - (i == t ? 1.0f : 0.0f)) * dloss;
        }
        d[i] = from_float<D>(g);
    }
}

} // namespace

template <class T>
void xent_forward(float* losses, float* stats, const T* logits, const int* targets, int N, int V,
                  int Vp, void* stream) {
    if (N <= 0) return;
    SOF_CHECK(V > 0 && V <= Vp, "xent_forward: need 0 < V=%d <= Vp=%d", V, Vp);
    xent_forward_kernel<<<static_cast<unsigned>(N), kXentThreads, 0, as_stream(stream)>>>(
        losses, stats, dev_ptr(logits), targets, V, Vp);
    SOF_CHECK_LAUNCH("xent_forward");
}

template <class T>
void xent_backward(T* dlogits, const T* logits, const float* stats, const int* targets, float dloss,
                   int N, int V, int Vp, void* stream) {
    if (N <= 0) return;
    SOF_CHECK(V > 0 && V <= Vp, "xent_backward: need 0 < V=%d <= Vp=%d", V, Vp);
    xent_backward_kernel<<<static_cast<unsigned>(N), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(dlogits), dev_ptr(logits), stats, targets, dloss, V, Vp);
    SOF_CHECK_LAUNCH("xent_backward");
}

template void xent_forward<float>(float*, float*, const float*, const int*, int, int, int, void*);
template void xent_forward<core::bf16>(float*, float*, const core::bf16*, const int*, int, int, int,
                                       void*);
template void xent_backward<float>(float*, const float*, const float*, const int*, float, int, int,
                                   int, void*);
template void xent_backward<core::bf16>(core::bf16*, const core::bf16*, const float*, const int*,
                                        float, int, int, int, void*);

} // namespace sof::kernels::cuda
