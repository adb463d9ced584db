// Mixture-of-Experts auxiliary losses: the load-balancing loss exactly as transformers 5.x
// computes it (load_balancing_loss_func: pooled over every MoE layer) and a router z-loss.
#pragma once

#include "kernels/exec.h"

namespace sof::kernels {

// The pooled statistics, fp32, accumulated over the MoE layers of one forward (zero them first):
//   [0, E)    prob_sum[e] = sum over layers, tokens n of mask[n] * softmax(logits[n])[e]
//   [E, 2E)   count[e]    = sum over layers, tokens n, slots k of mask[n] * (idx[n,k] == e)
//   2E        tokens      = sum over layers, tokens of mask[n]
//   2E + 1    lse2_sum    = sum over layers, tokens of mask[n] * logsumexp(logits[n])^2
// mask (N): 1 for a token that counts, 0 for padding (transformers' attention_mask); null: all 1.
inline constexpr int moe_aux_stats_size(int E) {
    return 2 * E + 2;
}

// The losses of the pooled statistics (host values; the stats copied to the host):
//   balance = E * sum_e (count[e] / tokens) * (prob_sum[e] / tokens), transformers'
//             load_balancing_loss_func (the model adds router_aux_loss_coef * balance);
//   z       = lse2_sum / tokens: the mean over all layers' tokens of logsumexp^2 (ST-MoE's router
//             z-loss, pooled as transformers' switch_transformers router_z_loss_func pools it).
// The gradient of coef * loss into each layer's logits is moe_router_backward's RouterAuxGrad.
struct MoeAuxLosses {
    double balance = 0.0;
    double z = 0.0;
};
MoeAuxLosses moe_aux_losses(const float* host_stats, int E);

namespace cpu {
// stats (moe_aux_stats_size(E)) += this layer's terms; logits (N,E), idx (N,K), mask (N) or null.
void moe_aux_stats(float* stats, const float* logits, const int* idx, const float* mask, int N,
                   int E, int K);
} // namespace cpu

namespace cuda {
template <class T>
void moe_aux_stats(float* stats, const T* logits, const int* idx, const float* mask, int N, int E,
                   int K, void* stream,
                   Scratch* scratch); // row statistics + column sums in scratch
} // namespace cuda

template <class T>
void moe_aux_stats(const Exec& ex, float* stats, const T* logits, const int* idx, const float* mask,
                   int N, int E, int K) {
    SOF_KERNEL_DISPATCH(
        ex, T, "moe_aux_stats", (cpu::moe_aux_stats(stats, logits, idx, mask, N, E, K)),
        (cuda::moe_aux_stats(stats, logits, idx, mask, N, E, K, ex.stream, ex.scratch)));
}

} // namespace sof::kernels
