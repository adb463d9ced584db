// CUDA twin of rmsnorm.h: one warp per (row, head) at its stride (fp32 sums, fixed shuffle order);
// the weight grad is a deterministic column sum over the (row, head) pairs (reduce.cuh).
#include "kernels/rmsnorm.h"

#include "kernels/cuda/reduce.cuh"

namespace sof::kernels::cuda {

namespace {

constexpr int kRowsPerBlock = kThreads / 32; // one warp per (n, h)

// Offset of the row (n, h) = (r / H, r % H).
__device__ __forceinline__ size_t row_offset(int r, int H, int D, size_t ld) {
    return static_cast<size_t>(r / H) * ld + static_cast<size_t>(r % H) * D;
}

template <class E>
__global__ void rmsnorm_forward_kernel(E* out, float* rstd, const E* x, const E* w, int rows, int H,
                                       int D, size_t ld, float eps) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int r =
        static_cast<int>(blockIdx.x) * kRowsPerBlock + (static_cast<int>(threadIdx.x) >> 5);
    if (r >= rows) return;
    const size_t o = row_offset(r, H, D, ld);
    float ss = 0.0f;
    for (int i = lane; i < D; i += 32) {
        const float v = to_float(x[o + i]);
        ss += v * v;
    }
    const float rs = 1.0f / sqrtf(warp_sum(ss) / static_cast<float>(D) + eps);
    for (int i = lane; i < D; i += 32)
        out[o + i] = from_float<E>(to_float(w[i]) * (to_float(x[o + i]) * rs));
    if (lane == 0) rstd[r] = rs;
}

// g = w*dout*rstd - x * (sum(w*dout*x) / D) * rstd^3; dx = (accumulate ? dx : 0) + g. dx may
// alias dout (overwrite): each lane reads its elements before it writes them.
template <class E>
__global__ void rmsnorm_backward_kernel(E* dx, bool accumulate, const E* dout, const E* x,
                                        const E* w, const float* rstd, int rows, int H, int D,
                                        size_t ld) {
    const int lane = static_cast<int>(threadIdx.x) & 31;
    const int r =
        static_cast<int>(blockIdx.x) * kRowsPerBlock + (static_cast<int>(threadIdx.x) >> 5);
    if (r >= rows) return;
    const size_t o = row_offset(r, H, D, ld);
    const float rs = rstd[r];
    float s = 0.0f;
    for (int i = lane; i < D; i += 32)
        s += to_float(w[i]) * to_float(dout[o + i]) * to_float(x[o + i]);
    const float k = warp_sum(s) / static_cast<float>(D) * rs * rs * rs;
    for (int i = lane; i < D; i += 32) {
        const float g = to_float(w[i]) * to_float(dout[o + i]) * rs - to_float(x[o + i]) * k;
        dx[o + i] = from_float<E>(accumulate ? to_float(dx[o + i]) + g : g);
    }
}

// dw element of row r = (n, h), channel c: dout * (x * rstd).
template <class E> struct RmsGradElem {
    const E* dout;
    const E* x;
    const float* rstd;
    int H, D;
    size_t ld;
    __device__ void operator()(int r, int c, float* v) const {
        const size_t i = row_offset(r, H, D, ld) + c;
        v[0] = to_float(dout[i]) * (to_float(x[i]) * rstd[r]);
    }
};

unsigned int row_blocks(int rows) {
    return static_cast<unsigned int>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

} // namespace

template <class T>
void rmsnorm_forward(T* out, float* rstd, const T* x, const T* w, int N, int H, int D, size_t ld,
                     float eps, void* stream) {
    const int rows = N * H;
    if (rows <= 0 || D <= 0) return;
    rmsnorm_forward_kernel<<<row_blocks(rows), kThreads, 0, as_stream(stream)>>>(
        dev_ptr(out), rstd, dev_ptr(x), dev_ptr(w), rows, H, D, ld, eps);
    SOF_CHECK_LAUNCH("rmsnorm_forward");
}

template <class T>
void rmsnorm_backward(T* dx, bool accumulate, float* dw, const T* dout, const T* x, const T* w,
                      const float* rstd, int N, int H, int D, size_t ld, void* stream,
                      Scratch* scratch) {
    const int rows = N * H;
    if (rows <= 0 || D <= 0) return;
    const cudaStream_t st = as_stream(stream);
    // dw first: with accumulate = false, dx may alias dout, which the row kernel overwrites
    ColOut<1> grads{{dw}};
    column_sums<1>(grads, rows, D, RmsGradElem<dev_t<T>>{dev_ptr(dout), dev_ptr(x), rstd, H, D, ld},
                   st, scratch, "rmsnorm_backward");
    rmsnorm_backward_kernel<<<row_blocks(rows), kThreads, 0, st>>>(
        dev_ptr(dx), accumulate, dev_ptr(dout), dev_ptr(x), dev_ptr(w), rstd, rows, H, D, ld);
    SOF_CHECK_LAUNCH("rmsnorm_backward");
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int, int, int,
                                     size_t, float, void*);
template void rmsnorm_forward<core::bf16>(core::bf16*, float*, const core::bf16*, const core::bf16*,
                                          int, int, int, size_t, float, void*);
template void rmsnorm_backward<float>(float*, bool, float*, const float*, const float*,
                                      const float*, const float*, int, int, int, size_t, void*,
                                      Scratch*);
template void rmsnorm_backward<core::bf16>(core::bf16*, bool, float*, const core::bf16*,
                                           const core::bf16*, const core::bf16*, const float*, int,
                                           int, int, size_t, void*, Scratch*);

} // namespace sof::kernels::cuda
