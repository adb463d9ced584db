// CUDA twin of layernorm.h: one warp per row (two-pass mean and variance in fp32, fixed shuffle
// order); the weight and bias grads are deterministic column sums (reduce.cuh).
#include "kernels/layernorm.h"

#include "kernels/cuda/reduce.cuh"

namespace sof::kernels::cuda {

namespace {

constexpr float kLnEps = 1e-5f;
constexpr int kRowsPerBlock = kThreads / 32; // one warp per row

template <class D>
__global__ void layernorm_forward_kernel(D* out, float* mean, float* rstd, const D* inp, const D* w,
                                         const D* b, int N, int C) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int row =
        static_cast<int>(blockIdx.x) * kRowsPerBlock + (static_cast<int>(threadIdx.x) >> 5);
    if (row >= N) return; // whole warps leave; no block barrier below
    const D* x = inp + static_cast<size_t>(row) * C;
    float s = 0.0f;
    for (int i = lane; i < C; i += 32)
        s += to_float(x[i]);
    const float m = warp_sum(s) / static_cast<float>(C);
    float v = 0.0f;
    for (int i = lane; i < C; i += 32) {
        const float d = to_float(x[i]) - m;
        v += d * d;
    }
    const float r = 1.0f / sqrtf(warp_sum(v) / static_cast<float>(C) + kLnEps);
    D* o = out + static_cast<size_t>(row) * C;
    for (int i = lane; i < C; i += 32)
        o[i] = from_float<D>((to_float(x[i]) - m) * r * to_float(w[i]) + to_float(b[i]));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

// dinp += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd, dnorm = w * dout.
template <class D>
__global__ void layernorm_backward_kernel(D* dinp, const D* dout, const D* inp, const D* w,
                                          const float* mean, const float* rstd, int N, int C) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int row =
        static_cast<int>(blockIdx.x) * kRowsPerBlock + (static_cast<int>(threadIdx.x) >> 5);
    if (row >= N) return;
    const size_t o = static_cast<size_t>(row) * C;
    const float m = mean[row], r = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
    for (int i = lane; i < C; i += 32) {
        const float norm = (to_float(inp[o + i]) - m) * r;
        const float dnorm = to_float(w[i]) * to_float(dout[o + i]);
        s1 += dnorm;
        s2 += dnorm * norm;
    }
    const float dnorm_mean = warp_sum(s1) / static_cast<float>(C);
    const float dnorm_norm_mean = warp_sum(s2) / static_cast<float>(C);
    for (int i = lane; i < C; i += 32) {
        const float norm = (to_float(inp[o + i]) - m) * r;
        const float dnorm = to_float(w[i]) * to_float(dout[o + i]);
        const float g = (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
        dinp[o + i] = from_float<D>(to_float(dinp[o + i]) + g);
    }
}

// (dw, db) elements of row r, column c: (norm * dout, dout).
template <class D> struct LnGradElem {
    const D* dout;
    const D* inp;
    const float* mean;
    const float* rstd;
    int C;
    __device__ void operator()(int r, int c, float* v) const {
        const size_t i = static_cast<size_t>(r) * C + c;
        const float d = to_float(dout[i]);
        v[0] = (to_float(inp[i]) - mean[r]) * rstd[r] * d;
        v[1] = d;
    }
};

unsigned int row_blocks(int N) {
    return static_cast<unsigned int>((N + kRowsPerBlock - 1) / kRowsPerBlock);
}

} // namespace

template <class T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* w, const T* b,
                       int N, int C, void* stream) {
    if (N <= 0 || C <= 0) return;
    layernorm_forward_kernel<<<row_blocks(N), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(out), mean, rstd, dev_ptr(inp), dev_ptr(w), dev_ptr(b), N, C);
    SOF_CHECK_LAUNCH("layernorm_forward");
}

template <class T>
void layernorm_backward(T* dinp, float* dw, float* db, const T* dout, const T* inp, const T* w,
                        const float* mean, const float* rstd, int N, int C, void* stream,
                        Scratch* scratch) {
    if (N <= 0 || C <= 0) return;
    const cudaStream_t st = as_stream(stream);
    layernorm_backward_kernel<<<row_blocks(N), kThreads, 0, st>>>(
        dev_ptr(dinp), dev_ptr(dout), dev_ptr(inp), dev_ptr(w), mean, rstd, N, C);
    SOF_CHECK_LAUNCH("layernorm_backward");
    ColOut<2> grads{{dw, db}};
    column_sums<2>(grads, N, C, LnGradElem<dev_t<T>>{dev_ptr(dout), dev_ptr(inp), mean, rstd, C},
                   st, scratch, "layernorm_backward");
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*,
                                       const float*, int, int, void*);
template void layernorm_forward<core::bf16>(core::bf16*, float*, float*, const core::bf16*,
                                            const core::bf16*, const core::bf16*, int, int, void*);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*,
                                        const float*, const float*, const float*, int, int, void*,
                                        Scratch*);
template void layernorm_backward<core::bf16>(core::bf16*, float*, float*, const core::bf16*,
                                             const core::bf16*, const core::bf16*, const float*,
                                             const float*, int, int, void*, Scratch*);

} // namespace sof::kernels::cuda
