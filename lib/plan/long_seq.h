// Long sequences in the planner: the driver's activation shape for a deck (tiled loss and MLP,
// offloaded checkpoints), the checkpoints' link traffic and what tiling recomputes in backward.
#pragma once

#include <string>

#include "config/config.h"
#include "model/activations.h"
#include "model/layout.h"
#include "plan/planner.h"

namespace sof::plan {

// Saved activations of one micro-batch on one rank, bytes (see docs/planner.md "Activations").
struct ActivationEstimate {
    double per_layer = 0;    // one block's saved tensors (with recompute: its working set)
    double layer_inputs = 0; // recompute only: the L block inputs kept for the re-run
    double blocks = 0;       // all blocks: L * per_layer, or per_layer + layer_inputs
    double head = 0;         // embedding output, final norm output (+ its rstd)
    double logits = 0;       // the logits buffer (B*T or one tile of rows, Vp)
    double total = 0;        // blocks + head + logits: device memory
    double host = 0;         // offloaded checkpoints in pinned host memory
};
// B sequences of T tokens, Ulysses degree sp (T/sp tokens per rank outside attention, NH/sp heads
// inside), `eb` bytes per saved element (2 = bf16), per-layer recomputation on or off.
// GPT-2 (llm.c layout): 16*C per token + 2 (B, NH, T, T) score/prob maps + 4 LayerNorm stats.
// LLaMA family: norms 2C + rstd, fused qkv (NH*hd + 2*NKV*hd), post-RoPE q and k, qk-norm outputs
// and rstd (qwen3), the (B, NH, T, T) probabilities, attention output NH*hd, the residual after
// attention and the block output 2C, SwiGLU gate and up 2I and their product I.
ActivationEstimate activation_estimate(const model::ArchConfig& m, double batch, double seq_len,
                                       double sp, double eb, bool recompute);
// The same for any driver shape (tiles, offloaded checkpoints).
ActivationEstimate activation_estimate(const model::ArchConfig& m, const model::ActShape& shape);

// The activation shape the trainer builds for a deck: B, T/sp local tokens, sp, recompute, the
// tile requests and offloaded checkpoints; act_bytes per element (4 on the host device's CPU
// twins, the working precision on a GPU).
model::ActShape activation_shape(const config::Config& cfg, double act_bytes);

// Per micro-batch on one rank, beyond the activations on the device.
struct LongSeqCost {
    double host_bytes = 0;  // offloaded checkpoints: pinned host memory (the driver's list)
    double ckpt_bytes = 0;  // checkpoint bytes over the CPU<->GPU link (out in forward + back)
    double ckpt_link_s = 0; // their link time
    double ckpt_fwd_exposed_s = 0; // link time not hidden behind the block that overlaps it
    double ckpt_bwd_exposed_s = 0;
    double extra_bwd_flops = 0; // backward work beyond 2x the forward: the LM head's forward
                                // of every loss tile but the last; the MLP's up projection per
                                // tile without recompute (with recompute it is recomputed
                                // anyway); FlashAttention's recomputed scores (attention's
                                // backward is 2.5x its forward)
};

// fwd_s, bwd_s: one micro-batch's forward and backward compute (the checkpoint copies overlap
// one block each: the forward copy of res[l] with block l+1, the backward fetch of res[l-1] with
// block l's recompute and backward).
LongSeqCost long_seq_cost(const model::ArchConfig& m, const model::ActShape& a,
                          const HardwareProfile& hw, double fwd_s, double bwd_s);

// Forward FLOPs of one micro-batch on one rank: 2 x tokens x (the blocks' active parameters, see
// model::block_params, + LM head) and the causal attention the tiled kernels compute (the
// T(T+1)/2 query-key pairs of each sequence, or those inside a layer's sliding window, for this
// rank's NH/sp heads: 4 x pairs x NH*hd / sp per layer).
double forward_flops(const model::ArchConfig& m, double active_block_params, double batch,
                     double seq_len, double sp);

// One line for the plan's notes when the deck tiles the loss or the MLP or offloads checkpoints
// (tile sizes, host bytes, link time per step and the part not hidden); "" otherwise. ls: one
// micro-batch's checkpoint costs (long_seq_cost), grad_accum micro-batches per step.
std::string long_seq_note(const config::Config& cfg, const model::ArchConfig& m,
                          const LongSeqCost& ls, int grad_accum);

} // namespace sof::plan
