// CPU kernels of the LLaMA family: token embedding, RMSNorm (whole rows or per head), rotary
// embeddings, SwiGLU. OpenMP; deterministic: no sum depends on the thread count.
#pragma once

#include <cstddef>

namespace sof::model::cpu {

// out (N,C) = wte[inp[n], :]; wte (Vp,C), inp (N)
void embedding_forward(float* out, const int* inp, const float* wte, int N, int C);
// dwte[inp[n], :] += dout[n, :]; dout (N,C)
void embedding_backward(float* dwte, const float* dout, const int* inp, int N, int C);

// RMSNorm over rows of D elements: y = w * x * rstd, rstd = 1/sqrt(mean(x^2) + eps). Rows are
// (n, h) for n < N, h < H, at x + n*ld + h*D (H = 1, D = ld = C: the usual (N,C) norm; per-head
// norm of q: H = NH, D = hd, ld = the fused qkv row). out uses the same strides (may be another
// buffer, never x). rstd (N*H), w (D).
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int N, int H, int D,
                     size_t ld, float eps);
// dx += (accumulate) or = (overwrite; dx may then alias dout) the input grad; dw (D) += dout * x *
// rstd. Same row strides as the forward.
void rmsnorm_backward(float* dx, bool accumulate, float* dw, const float* dout, const float* x,
                      const float* w, const float* rstd, int N, int H, int D, size_t ld);

// Rotary embedding in place on H heads of hd at x + (b*T + t)*ld + h*hd, position pos0 + t,
// rotate-half pairs (i, i + hd/2): (a, b) -> (a cos - b sin, b cos + a sin). cos, sin
// (maxpos, hd/2) tables.
void rope_forward(float* x, const float* cos, const float* sin, int B, int T, int H, int hd,
                  size_t ld, int pos0);
// The transpose (rotation by -angle), in place on the grads.
void rope_backward(float* dx, const float* cos, const float* sin, int B, int T, int H, int hd,
                   size_t ld, int pos0);

// h (N,I) = silu(gate) * up, gu (N,2I) = [gate | up] per row.
void swiglu_forward(float* h, const float* gu, int N, int I);
// dgu (N,2I) from dh (N,I) and the forward input gu.
void swiglu_backward(float* dgu, const float* dh, const float* gu, int N, int I);

} // namespace sof::model::cpu
