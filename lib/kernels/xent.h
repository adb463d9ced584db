// Fused softmax cross-entropy over the first V of Vp logit columns: per-row loss and the row's
// softmax statistics (forward); dlogits recomputed from them, written over the logits (backward).
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

// A target < 0 is an ignored position (a loss mask): its loss is 0 and its dlogits row 0.
// stats (N,2): per row the max logit and 1/sum(exp(logit - max)) over the first V columns; the
// backward recomputes p = exp(logit - max) * inv exactly as the forward did.
namespace cpu {
// logits (N,Vp); losses (N) = -log softmax[target] (log-sum-exp form), 0 for ignored positions;
// targets may be null (no losses, stats only).
void xent_forward(float* losses, float* stats, const float* logits, const int* targets, int N,
                  int V, int Vp);
// dlogits (N,Vp) = (softmax - onehot(target)) * dloss for the first V columns, 0 for the padding
// and for ignored rows. dlogits may alias logits.
void xent_backward(float* dlogits, const float* logits, const float* stats, const int* targets,
                   float dloss, int N, int V, int Vp);
} // namespace cpu

namespace cuda {
template <class T>
void xent_forward(float* losses, float* stats, const T* logits, const int* targets, int N, int V,
                  int Vp, void* stream);
template <class T>
void xent_backward(T* dlogits, const T* logits, const float* stats, const int* targets, float dloss,
                   int N, int V, int Vp, void* stream);
} // namespace cuda

template <class T>
void xent_forward(const Exec& ex, float* losses, float* stats, const T* logits, const int* targets,
                  int N, int V, int Vp) {
    SOF_KERNEL_DISPATCH(ex, T, "xent_forward",
                        (cpu::xent_forward(losses, stats, logits, targets, N, V, Vp)),
                        (cuda::xent_forward(losses, stats, logits, targets, N, V, Vp, ex.stream)));
}

template <class T>
void xent_backward(const Exec& ex, T* dlogits, const T* logits, const float* stats,
                   const int* targets, float dloss, int N, int V, int Vp) {
    SOF_KERNEL_DISPATCH(
        ex, T, "xent_backward",
        (cpu::xent_backward(dlogits, logits, stats, targets, dloss, N, V, Vp)),
        (cuda::xent_backward(dlogits, logits, stats, targets, dloss, N, V, Vp, ex.stream)));
}

} // namespace sof::kernels
