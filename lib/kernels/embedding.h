// Token (+ learned position) embeddings: out[n] = wte[tokens[n]] (+ wpe[positions[n]]), and the
// backward into fp32 grads. Deterministic on both twins (no float atomics).
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

namespace cpu {
// out (N,C) = wte[tokens[n], :] + (wpe ? wpe[positions[n], :] : 0); wte (Vp,C), wpe (maxT,C)
void embedding_forward(float* out, const int* tokens, const int* positions, const float* wte,
                       const float* wpe, int N, int C);
// dwte[tokens[n], :] += dout[n, :]; dwpe[positions[n], :] += dout[n, :] (dwpe may be null)
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens,
                        const int* positions, int N, int C);
} // namespace cpu

namespace cuda {
template <class T>
void embedding_forward(T* out, const int* tokens, const int* positions, const T* wte, const T* wpe,
                       int N, int C, void* stream);
// host_tokens / host_positions: the same ids in host memory (the twin sorts them on the host to
// sum each row's contributions in position order without atomics; the plan goes to the device
// through the stream's scratch: embedding_scratch_bytes).
template <class T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const int* tokens,
                        const int* positions, const int* host_tokens, const int* host_positions,
                        int N, int C, void* stream, Scratch* scratch);
} // namespace cuda

// tokens, positions: (N) ids in the Exec's memory; host_tokens, host_positions: the same in host
// memory (positions may be null when wpe is null).
template <class T>
void embedding_forward(const Exec& ex, T* out, const int* tokens, const int* positions,
                       const T* wte, const T* wpe, int N, int C) {
    SOF_KERNEL_DISPATCH(
        ex, T, "embedding_forward",
        (cpu::embedding_forward(out, tokens, positions, wte, wpe, N, C)),
        (cuda::embedding_forward(out, tokens, positions, wte, wpe, N, C, ex.stream)));
}

template <class T>
void embedding_backward(const Exec& ex, float* dwte, float* dwpe, const T* dout, const int* tokens,
                        const int* positions, const int* host_tokens, const int* host_positions,
                        int N, int C) {
    (void)host_tokens, (void)host_positions; // the CPU twin reads tokens, positions directly
    SOF_KERNEL_DISPATCH(ex, T, "embedding_backward",
                        (cpu::embedding_backward(dwte, dwpe, dout, tokens, positions, N, C)),
                        (cuda::embedding_backward(dwte, dwpe, dout, tokens, positions, host_tokens,
                                                  host_positions, N, C, ex.stream, ex.scratch)));
}

} // namespace sof::kernels
