// Bias gradients: the column sums of a (N, OC) gradient, added into an fp32 (OC) grad.
// Deterministic on both twins: each column is summed over the rows in one fixed order.
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

namespace cpu {
// dbias (OC) += sum over n of dout (N,OC)
void bias_grad(float* dbias, const float* dout, int N, int OC);
} // namespace cpu

namespace cuda {
// scratch: the stream's (column-sum partials)
template <class T>
void bias_grad(float* dbias, const T* dout, int N, int OC, void* stream, Scratch* scratch);
} // namespace cuda

template <class T> void bias_grad(const Exec& ex, float* dbias, const T* dout, int N, int OC) {
    SOF_KERNEL_DISPATCH(ex, T, "bias_grad", (cpu::bias_grad(dbias, dout, N, OC)),
                        (cuda::bias_grad(dbias, dout, N, OC, ex.stream, ex.scratch)));
}

} // namespace sof::kernels
