// The transformer driver's activation buffers for one micro-batch shape, as ONE list: the driver
// allocates exactly these from the rank's Device, the planner sums the same list.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/block_spec.h"

namespace sof::model {

// What a buffer holds. Per-block buffers come in `sets` copies (L, or 1 with recompute); the rest
// once. Shapes with BT = B*T local positions, P the Ulysses degree (act: the activation dtype).
enum class Act {
    // once
    Tokens,    // (BT) int32 input ids
    Targets,   // (BT) int32 target ids (< 0: ignored position)
    Positions, // (BT) int32 position of each token (RoPE angle / wpe row)
    Segments,  // (B, P*T) int32 document ids of the whole sequence (packed batches)
    RopeCos,   // (P*T, hd/2) fp32 (RoPE only): every position of the whole sequence
    RopeSin,   // (P*T, hd/2) fp32 (RoPE only)
    Res,       // (L+1, BT, C) act: the residual stream, res[0] = embeddings
    Lnf,       // (BT, C) act
    LnfMean,   // (BT) fp32 (LayerNorm only)
    LnfRstd,   // (BT) fp32
    Logits,    // (BT, Vp) act; dlogits after backward
    XentStats, // (BT, 2) fp32: row max, 1/sum
    Losses,    // (BT) fp32
    DRes,      // (BT, C) act: grad of the residual stream
    DLn,       // (BT, C) act: grad of a norm's output
    DAtty,     // (BT, Q) act
    DQkv,      // (BT, W) act
    DFc,       // (BT, fc_rows) act: grad of the up projection's output
    DAct,      // (BT, I) act: grad of the MLP activation
    Delta,     // (BT*NH) fp32: attention backward workspace
    QLoc,      // (BT, Q) act, Ulysses: q rows (forward) / dq rows (backward) in token layout
    KvLoc,     // (BT, 2*KV) act, Ulysses
    DAttyh,    // (BT, Q) act, Ulysses: grad of the attention output, head layout
    DQh,       // (BT, Q) act, Ulysses
    DKvh,      // (BT, 2*KV) act, Ulysses
    // per block set
    Ln1,     // (BT, C) act
    Ln1Mean, // (BT) fp32 (LayerNorm only)
    Ln1Rstd, // (BT) fp32
    QkvRaw,  // (BT, W) act: projections before qk-norm (qk_norm only)
    QRstd,   // (BT*NH) fp32 (qk_norm only)
    KRstd,   // (BT*NKV) fp32 (qk_norm only)
    Qkv,     // (BT, W) act: after qk-norm and RoPE, what attention reads
    Lse,     // (BT*NH) fp32: attention row log-sum-exp
    Qh,      // (BT, Q) act, Ulysses: every token of this rank's query heads
    Kvh,     // (BT, 2*KV) act, Ulysses
    Attyh,   // (BT, Q) act, Ulysses: attention output of this rank's heads
    Atty,    // (BT, Q) act: attention output, token layout
    Res2,    // (BT, C) act: residual after attention
    Ln2,     // (BT, C) act
    Ln2Mean, // (BT) fp32 (LayerNorm only)
    Ln2Rstd, // (BT) fp32
    FcPre,   // (BT, fc_rows) act: up projection output (GELU: pre-activation; SwiGLU: [gate|up])
    FcAct,   // (BT, I) act: MLP activation (GELU output / silu(gate)*up)
    kCount
};

struct ActShape {
    int B = 1, T = 1;       // local micro-batch (T: this rank's positions)
    int P = 1;              // Ulysses degree
    bool recompute = false; // one block set, recomputed in backward
    int act_bytes = 4;      // 4 (fp32) or 2 (bf16)
};

struct ActBuffer {
    Act id;
    int set;          // block set (0..sets-1), -1 for buffers held once
    std::string name; // "ln1[3]", "logits"
    size_t bytes;
};

// Every buffer, in allocation order. Buffers a model does not use (LayerNorm means for RMSNorm,
// Ulysses staging at P = 1, qk-norm inputs without qk_norm) are not in the list.
std::vector<ActBuffer> activation_buffers(const BlockSpec& s, const ActShape& a);

// Sum of the list's bytes, each rounded up as a device allocation is (round_to bytes).
double activation_bytes(const BlockSpec& s, const ActShape& a, size_t round_to = 256);

} // namespace sof::model
