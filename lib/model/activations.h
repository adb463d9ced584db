// The transformer driver's activation buffers for one micro-batch shape, as ONE list: the driver
// allocates exactly these from the rank's Device, the planner sums the same list.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/block_spec.h"

namespace sof::model {

// What a buffer holds. Per-block buffers come in `sets` copies (L, or 1 with recompute); the rest
// once. Shapes with BT = B*T local positions, P the Ulysses degree (act: the activation dtype),
// RL = loss_rows (the LM head + loss tile), RM = mlp_rows (the MLP tile; BT when untiled).
enum class Act {
    // once
    Tokens,    // (BT) int32 input ids
    Targets,   // (BT) int32 target ids (< 0: ignored position)
    Positions, // (BT) int32 position of each token (RoPE angle / wpe row)
    Segments,  // (B, P*T) int32 document ids of the whole sequence (packed batches)
    RopeCos,   // (B*T, hd/2) fp32 (RoPE only): row j = position t0 + j of this rank's slice
               // (unpacked), or row n = token n's own position (packed: positions restart)
    RopeSin,   // (B*T, hd/2) fp32 (RoPE only)
    Res,       // (L+1, BT, C) act: the residual stream, res[0] = embeddings; with offloaded
               // checkpoints (K+2, BT, C): res[l] in slot l for l < K (kept on the device),
               // else in slot K + (l - K) % 2
    ResHost,   // (L-1-K, BT, C) act, pinned host memory (offloaded checkpoints): res[K..L-2]
    Lnf,       // (RL, C) act: the final norm of one loss tile
    LnfMean,   // (BT) fp32 (LayerNorm only)
    LnfRstd,   // (BT) fp32
    Logits,    // (RL, Vp) act: logits of one tile (dlogits after backward)
    XentStats, // (BT, 2) fp32: row max, 1/sum
    Losses,    // (BT) fp32
    DRes,      // (BT, C) act: grad of the residual stream
    DLn,       // (BT, C) act: grad of a norm's output
    DAtty,     // (BT, Q) act
    DQkv,      // (BT, W) act
    DFc,       // (RM, fc_rows) act: grad of the up projection's output
    DAct,      // (RM, I) act: grad of the MLP activation
    Delta,     // (BT*NH) fp32: attention backward workspace
    Sinks,     // (NH) fp32: a block's attention sinks widened from bf16 weights (sinks, 2-byte
               // activations only; fp32 weights are read in place)
    QLoc,      // (BT, Q) act, Ulysses: q rows (forward) / dq rows (backward) in token layout;
               // not allocated: the DAtty buffer (DAtty is dead once exchanged to heads)
    KvLoc,     // (BT, 2*KV) act, Ulysses
    // mixture of experts (a model with sparse blocks; P = BT*K routed rows, docs/moe.md)
    MoeStats,   // (2E+2) fp32: the load-balancing statistics pooled over the forward's layers
    MoeDys,     // (P, C) act: grad of the experts' outputs; later the router's input grad
    MoeDw,      // (P) fp32: grad of the routing weights
    MoeDh,      // (P, IE) act
    MoeDgu,     // (P, 2*IE) act
    MoeDxs,     // (P, C) act: grad of the gathered rows
    MoeDlogits, // (BT, E) act
    DAttyh,     // (BT, Q) act, Ulysses: grad of the attention output, head layout; with
                // recompute and Q <= C not allocated: the Res2 buffer (shared_buffer)
    DQh,        // (BT, Q) act, Ulysses; with recompute not allocated: the Atty buffer
    DKvh,       // (BT, 2*KV) act, Ulysses; with recompute and 2*KV <= C: the DLn buffer
    XRecv,      // (BT, max(Q, 2*KV)) act, Ulysses: the all-to-all's received chunks; with
                // recompute and max(Q, 2*KV) <= C: the Ln2 buffer
    // per block set
    Ln1,     // (BT, C) act
    Ln1Mean, // (BT) fp32 (LayerNorm only)
    Ln1Rstd, // (BT) fp32
    QkvRaw,  // (BT, W) act: projections before qk-norm (qk_norm only)
    QRstd,   // (BT*NH) fp32 (qk_norm only)
    KRstd,   // (BT*NKV) fp32 (qk_norm only)
    Qkv,     // (BT, W) act: after qk-norm and RoPE, what attention reads; with Ulysses not
             // allocated: the DQkv buffer (the exchange copies it out, the backward never reads
             // it)
    Lse,     // (BT*NH) fp32: attention row log-sum-exp
    Qh,      // (BT, Q) act, Ulysses: every token of this rank's query heads
    Kvh,     // (BT, 2*KV) act, Ulysses
    Attyh,   // (BT, Q) act, Ulysses: attention output of this rank's heads
    Atty,    // (BT, Q) act: attention output, token layout
    Res2,    // (BT, C) act: residual after attention
    Ln2,     // (BT, C) act
    Ln2Mean, // (BT) fp32 (LayerNorm only)
    Ln2Rstd, // (BT) fp32
    FcPre,   // (RM, fc_rows) act: up projection output (GELU: pre-activation; SwiGLU: [gate|up]);
             // held once (not per set) when the MLP is tiled
    FcAct,   // (RM, I) act: MLP activation (GELU output / silu(gate)*up); once when tiled
    // per sparse block set (a sparse block's MLP is never tiled)
    MoeLogits, // (BT, E) act: router logits
    MoeIdx,    // (BT*K) int32: each token's experts
    MoeW,      // (BT*K) fp32: their weights
    MoeOrder,  // (P) int32: the plan's sorted pairs
    MoeSlot,   // (P) int32: each pair's sorted row
    MoeOff,    // (E+1) int32: each expert's first sorted row
    MoeXs,     // (P, C) act: the gathered rows
    MoeGu,     // (P, 2*IE) act: [gate | up] of every routed row
    MoeH,      // (P, IE) act: silu(gate) * up
    MoeYs,     // (P, C) act: the experts' outputs before the weighted combine
    kCount
};

// Tile requests (model.loss_tile / model.mlp_tile): kTileAuto, kTileOff (untiled) or N > 0
// tokens per tile. Auto tiles by kAutoTileRows when the rank's B*T exceeds it (the MLP only with
// recompute: without it the MLP's buffers are per block, recomputing them per tile is the cost of
// recompute without its saving). docs/model.md "Long sequences".
constexpr int kTileAuto = -1, kTileOff = 0;
constexpr int kAutoTileRows = 4096;

struct ActShape {
    int B = 1, T = 1;          // local micro-batch (T: this rank's positions)
    int P = 1;                 // Ulysses degree
    bool recompute = false;    // one block set, recomputed in backward
    int act_bytes = 4;         // 4 (fp32) or 2 (bf16)
    int loss_tile = kTileAuto; // LM head + loss rows per tile (request)
    int mlp_tile = kTileAuto;  // MLP rows per tile (request)
    bool offload = false;      // block inputs (checkpoints) in pinned host memory (recompute)
    int device_ckpt = 0;       // with offload: the first K block inputs stay on the device
};

// K: block inputs kept in device memory with offloaded checkpoints (0..L-1)
inline int kept_checkpoints(const ActShape& a, int L) {
    return a.device_ckpt < 0 ? 0 : (a.device_ckpt > L - 1 ? L - 1 : a.device_ckpt);
}

// Rows of one LM head + loss tile (1..B*T; B*T = untiled) and of one MLP tile (1..B*T; B*T =
// untiled) for the shape's requests.
int loss_rows(const ActShape& a);
int mlp_rows(const ActShape& a);
inline bool mlp_tiled(const ActShape& a) {
    return mlp_rows(a) < a.B * a.T;
}

struct ActBuffer {
    Act id;
    int set;          // block set (0..sets-1), -1 for buffers held once
    std::string name; // "ln1[3]", "logits"
    size_t bytes;
    bool host = false; // pinned host memory (Device::alloc_pinned), not device memory
};

// Buffers whose lifetimes do not meet share memory: the buffer `id` lives in `shared_buffer(s,
// a, id)`'s memory, or in its own (Act::kCount). With Ulysses the qkv projection is the DQkv
// buffer and the q rows the DAtty buffer. With Ulysses and recompute (one block set), the
// backward's head-layout buffers live in the block set's buffers that the block's backward has
// consumed by then (its MLP and ln2 backward read Ln2 and Res2, the output projection's backward
// Atty): d(attention out) heads in Res2, dq heads in Atty, dk|dv heads in DLn (dead between the
// ln2 and the qkv backward), and the all-to-all's receive buffer in Ln2 (written only after the
// block's exchanges, read before the backward's). Each only where it fits (Q, 2*KV <= C).
Act shared_buffer(const BlockSpec& s, const ActShape& a, Act id);

// Every buffer, in allocation order. Buffers a model does not use (LayerNorm means for RMSNorm,
// Ulysses staging at P = 1, qk-norm inputs without qk_norm) and buffers that share another's
// memory (shared_buffer) are not in the list.
std::vector<ActBuffer> activation_buffers(const BlockSpec& s, const ActShape& a);

// Sum of the list's device bytes (host = false) or pinned host bytes (host = true), each rounded
// up as an allocation is (round_to bytes).
double activation_bytes(const BlockSpec& s, const ActShape& a, size_t round_to = 256,
                        bool host = false);

} // namespace sof::model
