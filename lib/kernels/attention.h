// Causal self-attention that never materializes T x T: online softmax over key tiles (forward,
// saving each row's log-sum-exp) and the FlashAttention-2 backward that recomputes them.
#pragma once

#include <cstddef>

#include "kernels/dropout.h"
#include "kernels/exec.h"

namespace sof::kernels {

// Which CUDA kernel runs (the CPU twin has one and ignores this). Auto: the tensor-core
// FlashAttention-2 (cuda/flash_*.cuh) where it applies (bf16, head_dim 64 or 128, q_begin 0),
// the CUDA-core kernel elsewhere; CudaCores: the CUDA-core kernel always (debug.attention_kernel:
// cuda_cores, for a GPU whose tensor-core kernel misbehaves); TensorCores: the tensor-core kernel
// or a Config error naming why it does not apply (the op driver and bench attention use it).
enum class AttnKernel { Auto, CudaCores, TensorCores };

// Strided views of q (B,T,NH,hd), k and v (B,T,NKV,hd) and the output (B,T,NH,hd): row (b,t) of q
// starts at q + (b*T+t)*ldq (likewise k, v and o). Query head h reads kv head h / (NH/NKV)
// (grouped-query attention; NKV = NH is plain multi-head attention). Scores are
// s(t, t2) = q_t.k_t2 / sqrt(hd); key t2 is seen by query t when t2 <= t, with a sliding window
// W > 0 also t2 > t - W (the band of W keys ending at t, as transformers' masking_utils
// sliding_window_overlay: kv_idx > q_idx - W), and, with segments (B,T) given, segments[b,t2..t]
// are all equal: a document is a run of equal ids, so packed documents never attend across their
// boundary (ids need only differ between neighbouring documents).
// Sinks (GPT-OSS): a per-head logit z_h joins every row's softmax and is dropped from the output:
//   P(t, t2) = exp(s(t, t2)) / (sum over seen t3 of exp(s(t, t3)) + exp(z_h)),
//   out_t = sum over seen t2 of P(t, t2) D(t, t2) v_t2,
// where D = keep / (1 - p) is the attention dropout (dropout.h; D = 1 without dropout: p = 0).
// lse, saved by the forward for the backward, is the log of that whole denominator (sink
// included). Cost and memory: O(T * min(T, W)) work, O(tile) memory per thread (CPU) or block.
// (E: the element type, float or bf16; T is the sequence length.)
template <class E> struct AttnArgs {
    const E* q;
    const E* k;
    const E* v;
    size_t ldq, ldk, ldv, ldo;
    int B, T, num_heads, num_kv_heads, head_dim;
    const int* segments; // (B,T) or null
    // Forward only: compute query rows q_begin..T-1 (out, lse rows before it are not written);
    // decoding with a KV cache runs its new rows against every cached key. 0 in training (the
    // backward requires 0).
    int q_begin;
    AttnKernel kernel = AttnKernel::Auto; // the CUDA twin's kernel (above)
    int window = 0;                       // W > 0: the sliding window (above); 0: full causal
    const float* sinks = nullptr; // (num_heads) fp32 sink logits of the call's heads, or null
                                  // (Ulysses: the rank's heads, sinks + head0)
    float dropout = 0.0f;         // attention-probability dropout rate p, 0 <= p < 1
    DropoutKey dropout_key{};     // its mask: tag AttnProbs; batch0, head0, heads (dropout.h)
};

// Gradients of q, k, v with their own strides (overwritten by the backward).
template <class E> struct AttnGrads {
    E* q;
    E* k;
    E* v;
    size_t ldq, ldk, ldv;
    // (num_heads) fp32, with AttnArgs::sinks: dsinks[h] += -sum over (b, t) of
    // exp(z_h - lse[b,h,t]) * delta[b,h,t], summed in a fixed order (deterministic); null: not
    // computed
    float* dsinks = nullptr;
};

namespace detail {
// Throws core::Error (Config) naming op when the shape is not one attention can run.
void check_attention_args(int B, int T, int num_heads, int num_kv_heads, int head_dim,
                          const char* op);
// Throws core::Error (Internal: a caller's bug) when a row stride is shorter than its heads or
// q_begin is outside 0..T. Both twins call it (a GPU would read and write overlapping rows).
void check_attention_layout(size_t ldq, size_t ldk, size_t ldv, size_t ldo, int num_heads,
                            int num_kv_heads, int head_dim, int q_begin, int T, const char* op);
// The attention dropout's mask and element numbering (AttnArgs::dropout, dropout_key; inactive
// when p = 0), after checking window >= 0, p and the key (head0 + num_heads <= heads, indices in
// 64 bits); throws core::Error (Config) naming op.
struct AttnDropout {
    DropoutMask mask;
    uint64_t batch0 = 0;
    uint32_t head0 = 0, heads = 0, T = 0;
    // Global index of probability (b, h, t, key 0); key t2 adds t2.
    SOF_HD uint64_t row(int b, int h, int t) const {
        return (((batch0 + static_cast<uint64_t>(b)) * heads + head0 + static_cast<uint32_t>(h)) *
                    T +
                static_cast<uint32_t>(t)) *
               T;
    }
};
AttnDropout check_attention_features(int window, float dropout, const DropoutKey& key, int B, int T,
                                     int num_heads, const char* op);
} // namespace detail

// CPU twin: FlashAttention-2 tiles through OpenBLAS sgemm, called from OpenMP threads: run with
// one OpenBLAS thread (cpu::use_single_threaded_blas, matmul.h); bitwise the same result for any
// OpenMP thread count. Memory: O(tile) per thread.
namespace cpu {
// out (strided, ldo); lse (B,NH,T): natural log of the softmax denominator: sum of exp(score)
// over the keys seen, plus exp(sink) with sinks (fp32).
void attention_forward(float* out, float* lse, const AttnArgs<float>& a);
// dout, out: (strided, ldo); delta (B,NH,T): workspace (sum over d of dout*out per row; with
// dropout too, the row's sum over keys of P D dP).
void attention_backward(const AttnGrads<float>& d, const float* dout, const float* out,
                        const float* lse, float* delta, const AttnArgs<float>& a);
} // namespace cpu

namespace cuda {
template <class T> void attention_forward(T* out, float* lse, const AttnArgs<T>& a, void* stream);
template <class T>
void attention_backward(const AttnGrads<T>& d, const T* dout, const T* out, const float* lse,
                        float* delta, const AttnArgs<T>& a, void* stream);
} // namespace cuda

template <class T>
void attention_forward(const Exec& ex, T* out, float* lse, const AttnArgs<T>& a) {
    SOF_KERNEL_DISPATCH(ex, T, "attention_forward", (cpu::attention_forward(out, lse, a)),
                        (cuda::attention_forward(out, lse, a, ex.stream)));
}

template <class T>
void attention_backward(const Exec& ex, const AttnGrads<T>& d, const T* dout, const T* out,
                        const float* lse, float* delta, const AttnArgs<T>& a) {
    SOF_KERNEL_DISPATCH(ex, T, "attention_backward",
                        (cpu::attention_backward(d, dout, out, lse, delta, a)),
                        (cuda::attention_backward(d, dout, out, lse, delta, a, ex.stream)));
}

} // namespace sof::kernels
