// CUDA twin of bias_grad.h: dbias (OC) += column sums of dout (N,OC) in fp32, deterministic
// (fixed row chunks and a fixed tree: reduce.cuh's column_sums; no float atomics).
#include "kernels/bias_grad.h"

#include "kernels/cuda/reduce.cuh"

namespace sof::kernels::cuda {

namespace {

template <class D> struct DoutElem {
    const D* dout;
    int OC;
    __device__ void operator()(int r, int c, float* v) const {
        v[0] = to_float(dout[static_cast<size_t>(r) * OC + c]);
    }
};

} // namespace

template <class T>
void bias_grad(float* dbias, const T* dout, int N, int OC, void* stream, Scratch* scratch) {
    ColOut<1> out{{dbias}};
    column_sums<1>(out, N, OC, DoutElem<dev_t<T>>{dev_ptr(dout), OC}, as_stream(stream), scratch,
                   "bias_grad");
}

template void bias_grad<float>(float*, const float*, int, int, void*, Scratch*);
template void bias_grad<core::bf16>(float*, const core::bf16*, int, int, void*, Scratch*);

} // namespace sof::kernels::cuda
