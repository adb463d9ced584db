// CPU kernels shared by the architectures (GPT-2: the math of llm.c's train_gpt2.c; GQA attention).
// OpenMP + OpenBLAS; every kernel is deterministic: no reduction order depends on the threads.
#pragma once

#include <cstddef>

namespace sof::model::cpu {

// Sets OpenBLAS to one thread (process-wide). The matmuls below parallelize over fixed-size row
// blocks with OpenMP instead: bitwise the same result for any thread count, and no second thread
// pool (OpenBLAS's pthreads) competing with OpenMP's for the cores.
void use_single_threaded_blas();

// out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T,
                     int C); // out (B,T,C), inp (B,T), wte (Vp,C), wpe (maxT,C)
// dwte[inp[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:]
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T,
                      int C); // dwte (Vp,C), dwpe (maxT,C), dout (B,T,C)

// LayerNorm over the last dim, eps 1e-5, biased variance. mean/rstd are saved for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int N, int C); // out, inp (N,C); mean, rstd (N); w, b (C)
// dinp += d/dinp; dw += ...; db += ...
void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int N, int C);

// out (N,OC) = inp (N,C) @ w^T (w: (OC,C)) + bias (OC, may be null)
void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int N, int C,
                    int OC);
// dinp (N,C) = dout @ w (overwritten; skipped when null); dw (OC,C) += dout^T @ inp;
// dbias (OC) += sum over N of dout (skipped when null)
void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp,
                     const float* w, int N, int C, int OC);

// Strided views of q (B,T,NH,hd), k and v (B,T,NKV,hd) and the attention output (B,T,NH,hd): row
// (b,t) of q starts at q + (b*T+t)*ldq (likewise k, v, and the output with ldo). Query head h reads
// kv head h / (NH/NKV) (grouped-query attention; NKV = NH is plain multi-head attention).
struct AttnView {
    const float* q;
    const float* k;
    const float* v;
    size_t ldq, ldk, ldv, ldo;
    int num_heads, num_kv_heads, head_dim;
};
// Causal attention, softmax(q k^T / sqrt(hd)). att (B,NH,T,T) rows, zero above the diagonal.
void attention_forward(float* out, float* att, const AttnView& v, int B, int T);
// The grads of q, k, v (same shapes as AttnView's, own strides); overwritten by the backward.
struct AttnGrad {
    float* q;
    float* k;
    float* v;
    size_t ldq, ldk, ldv;
};
// dout (B,T,NH*hd) with stride v.ldo.
void attention_backward(const AttnGrad& d, const float* dout, const AttnView& v, const float* att,
                        int B, int T);

// Causal self-attention. qkv (B,T,3C) = [q | k | v], heads of size hs = C/NH.
// att (B,NH,T,T): softmax(q k^T / sqrt(hs)) rows, zero above the diagonal. out (B,T,C).
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
// dqkv (B,T,3C) is overwritten; dout (B,T,C).
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                        int T, int C, int NH);

// GELU, tanh approximation. out/inp (N)
void gelu_forward(float* out, const float* inp, long N);
// dinp = gelu'(inp) * dout (dinp may alias dout)
void gelu_backward(float* dinp, const float* inp, const float* dout, long N);

// out = a + b, all (N)
void residual_forward(float* out, const float* a, const float* b, long N);

// probs (N,Vp): softmax over the first V logits, probs[V..Vp) = 0. losses (N) = -log probs[target]
// when targets is non-null; 0 where the target is -1 (ignored: a masked position, see
// model/unit_loop.h; keep this when the kernel moves to lib/kernels/).
void softmax_crossentropy_forward(float* probs, float* losses, const float* logits,
                                  const int* targets, int N, int V, int Vp);
// dlogits (N,Vp) = (probs - onehot(target)) * dloss for the first V columns, 0 for the padding;
// the whole row 0 where the target is -1 (ignored). dlogits may alias probs.
void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets,
                                   float dloss, int N, int V, int Vp);

} // namespace sof::model::cpu
