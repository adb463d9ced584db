// Mixture-of-Experts router: each token's top-k experts and their weights from the router logits
// (fp32 math), and the logits' gradient (with the auxiliary losses' terms of moe_aux.h).
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

// How the k weights come from the logits (transformers' modeling files):
//   SoftmaxTopk (Qwen3-MoE, Mixtral): p = softmax over the E logits, the k largest p, divided by
//     their sum when renorm (Qwen3-MoE's norm_topk_prob; Mixtral always);
//   TopkSoftmax (GPT-OSS): the k largest logits (router bias already added by the router's
//     matmul), softmax over those k.
// Selection: the k largest logits, ties broken by the lower expert index, in descending order
// (torch.topk's order). Softmax is monotone, so this is the top-k of p as well; selecting on the
// logits keeps both twins' choices identical even where two logits round to one fp32 p.
enum class RouterKind { SoftmaxTopk, TopkSoftmax };

struct RouterArgs {
    int N = 0; // tokens
    int E = 0; // experts, 1..kMaxExperts
    int K = 0; // experts per token, 1..min(E, kMaxTopK)
    RouterKind kind = RouterKind::SoftmaxTopk;
    bool renorm = false; // SoftmaxTopk: divide the k probabilities by their sum
};

inline constexpr int kMaxExperts = 512; // the CUDA twin keeps a token's logits in one warp
inline constexpr int kMaxTopK = 32;

// The selection order of both twins: true when expert a (logit va) ranks before expert b (vb):
// the larger logit, a NaN above every number (torch.topk's order), equal values by the lower
// index (-0 equals +0). A strict total order, so the k chosen never depend on the search order.
SOF_HD bool router_prefers(float va, int a, float vb, int b) {
    const bool na = va != va, nb = vb != vb;
    if (na != nb) return na;
    if (!na && va != vb) return va > vb;
    return a < b;
}

// The auxiliary losses' gradient terms folded into the router backward (moe_aux.h defines them):
// stats are the pooled statistics of every MoE layer (moe_aux_stats, in the Exec's memory), mask
// the (N) token weights of this layer (null: every token counts 1), d_aux / d_z the derivatives
// of the total loss with respect to the balance loss and the z-loss (coefficient times the
// loss's upstream scale; 0 turns a term off).
struct RouterAuxGrad {
    const float* stats = nullptr; // (moe_aux_stats_size(E))
    const float* mask = nullptr;  // (N) or null
    float d_aux = 0.0f;
    float d_z = 0.0f;
};

// Throws core::Error (Usage) naming the bad field unless 1 <= E <= kMaxExperts, 1 <= K <=
// min(E, kMaxTopK), N >= 0.
void check_router_args(const RouterArgs& a, const char* op);

namespace cpu {
// idx (N,K): the selected experts, descending; w (N,K) fp32 weights; logits (N,E).
void moe_router_forward(int* idx, float* w, const float* logits, const RouterArgs& a);
// dlogits (N,E) = d(sum(dw * w))/dlogits (+ the aux terms; overwritten). dw (N,K) may be null
// (no routing term: the aux terms alone).
void moe_router_backward(float* dlogits, const float* dw, const float* logits, const int* idx,
                         const RouterArgs& a, const RouterAuxGrad* aux);
} // namespace cpu

namespace cuda {
template <class T>
void moe_router_forward(int* idx, float* w, const T* logits, const RouterArgs& a, void* stream);
template <class T>
void moe_router_backward(T* dlogits, const float* dw, const T* logits, const int* idx,
                         const RouterArgs& a, const RouterAuxGrad* aux, void* stream);
} // namespace cuda

template <class T>
void moe_router_forward(const Exec& ex, int* idx, float* w, const T* logits, const RouterArgs& a) {
    check_router_args(a, "moe_router_forward");
    SOF_KERNEL_DISPATCH(ex, T, "moe_router_forward", (cpu::moe_router_forward(idx, w, logits, a)),
                        (cuda::moe_router_forward(idx, w, logits, a, ex.stream)));
}

// aux: null, or the aux terms (its pointers in the Exec's memory).
template <class T>
void moe_router_backward(const Exec& ex, T* dlogits, const float* dw, const T* logits,
                         const int* idx, const RouterArgs& a, const RouterAuxGrad* aux = nullptr) {
    check_router_args(a, "moe_router_backward");
    SOF_KERNEL_DISPATCH(ex, T, "moe_router_backward",
                        (cpu::moe_router_backward(dlogits, dw, logits, idx, a, aux)),
                        (cuda::moe_router_backward(dlogits, dw, logits, idx, a, aux, ex.stream)));
}

} // namespace sof::kernels
