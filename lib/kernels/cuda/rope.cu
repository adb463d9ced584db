// CUDA twin of rope.h: rotate-half rotary embedding in place on strided heads, one (row, head,
// pair) per thread in fp32; the backward rotates by the negative angle.
#include "kernels/rope.h"

#include "kernels/cuda/common.cuh"

namespace sof::kernels::cuda {

namespace {

template <class D>
__global__ void rope_kernel(D* x, const float* cos, const float* sin, float sign,
                            const int* positions, size_t total, int H, int hd, size_t ld) {
    const int half = hd / 2;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
         j += stride) {
        const int i = static_cast<int>(j % static_cast<size_t>(half));
        const size_t nh = j / static_cast<size_t>(half);
        const int h = static_cast<int>(nh % static_cast<size_t>(H));
        const size_t n = nh / static_cast<size_t>(H);
        const size_t t = static_cast<size_t>(positions[n]) * half + i;
        const float c = cos[t], s = sign * sin[t];
        D* v = x + n * ld + static_cast<size_t>(h) * hd;
        const float a = to_float(v[i]), e = to_float(v[i + half]);
        v[i] = from_float<D>(a * c - e * s);
        v[i + half] = from_float<D>(e * c + a * s);
    }
}

template <class T>
void rope_apply(T* x, const float* cos, const float* sin, float sign, const int* positions, int N,
                int H, int hd, size_t ld, void* stream, const char* what) {
    const size_t total = static_cast<size_t>(N) * H * (hd / 2);
    if (N <= 0 || H <= 0 || total == 0) return;
    rope_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(dev_ptr(x), cos, sin, sign,
                                                                       positions, total, H, hd, ld);
    SOF_CHECK_LAUNCH(what);
}

} // namespace

template <class T>
void rope_forward(T* x, const float* cos, const float* sin, const int* positions, int N, int H,
                  int hd, size_t ld, void* stream) {
    rope_apply(x, cos, sin, 1.0f, positions, N, H, hd, ld, stream, "rope_forward");
}

template <class T>
void rope_backward(T* dx, const float* cos, const float* sin, const int* positions, int N, int H,
                   int hd, size_t ld, void* stream) {
    rope_apply(dx, cos, sin, -1.0f, positions, N, H, hd, ld, stream, "rope_backward");
}

template void rope_forward<float>(float*, const float*, const float*, const int*, int, int, int,
                                  size_t, void*);
template void rope_forward<core::bf16>(core::bf16*, const float*, const float*, const int*, int,
                                       int, int, size_t, void*);
template void rope_backward<float>(float*, const float*, const float*, const int*, int, int, int,
                                   size_t, void*);
template void rope_backward<core::bf16>(core::bf16*, const float*, const float*, const int*, int,
                                        int, int, size_t, void*);

} // namespace sof::kernels::cuda
