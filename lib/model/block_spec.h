// The transformer block as data: which norm, position encoding, MLP, biases, qk-norm and head a
// model has, its sizes, and where each tensor of a unit sits. GPT-2, Llama, Qwen2 and Qwen3 are
// configurations of it (block_spec(ArchConfig)); the one driver (transformer.h) reads only this.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include "model/layout.h"

namespace sof::model {

enum class NormKind { LayerNorm, RmsNorm }; // LayerNorm: weight + bias, eps 1e-5 (GPT-2)
enum class PosKind { Learned, Rope };       // Learned: wpe added to the token embedding
enum class MlpKind { Gelu, SwiGlu };        // Gelu: fc (I) -> GELU -> proj; SwiGlu: [gate|up]

constexpr size_t kNoTensor = std::numeric_limits<size_t>::max();

struct BlockSpec {
    NormKind norm = NormKind::LayerNorm;
    PosKind pos = PosKind::Learned;
    MlpKind mlp = MlpKind::Gelu;
    bool qkv_bias = false;  // q|k|v projection bias
    bool proj_bias = false; // attention output projection bias (GPT-2)
    bool mlp_bias = false;  // fc and proj biases (GPT-2)
    bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE (qwen3)
    bool tied_head = true;  // LM head = token embedding
    float norm_eps = 1e-5f;
    int L = 0, C = 0, NH = 0, NKV = 0, hd = 0; // layers, channels, heads, kv heads, head dim
    int Q = 0, KV = 0, W = 0;                  // NH*hd, NKV*hd, Q + 2*KV (the fused q|k|v row)
    int I = 0;                                 // MLP hidden size
    int V = 0, Vp = 0, max_T = 0;              // vocabulary, padded vocabulary, longest sequence

    int fc_rows() const { return mlp == MlpKind::Gelu ? I : 2 * I; } // up projection outputs
};

// Offsets of a unit's tensors relative to the unit's start (the same for every block);
// kNoTensor where the model has none.
struct UnitOffsets {
    size_t wte = kNoTensor, wpe = kNoTensor;                     // unit 0
    size_t ln1w = kNoTensor, ln1b = kNoTensor;                   // block
    size_t wqkv = kNoTensor, bqkv = kNoTensor;                   // (W, C), (W)
    size_t qnorm = kNoTensor, knorm = kNoTensor;                 // (hd) each
    size_t wo = kNoTensor, bo = kNoTensor;                       // (C, Q), (C)
    size_t ln2w = kNoTensor, ln2b = kNoTensor;                   // (C)
    size_t wfc = kNoTensor, bfc = kNoTensor;                     // (fc_rows, C), (fc_rows)
    size_t wproj = kNoTensor, bproj = kNoTensor;                 // (C, I), (C)
    size_t lnfw = kNoTensor, lnfb = kNoTensor, head = kNoTensor; // unit L+1 (head: untied)
};

BlockSpec block_spec(const ArchConfig& cfg);
UnitOffsets unit_offsets(const ParamLayout& layout);

// RoPE inverse frequencies (hd/2) with Llama-3 scaling when configured, as Hugging Face computes
// them (double, then fp32).
std::vector<float> rope_inv_freq(const ArchConfig& cfg);

} // namespace sof::model
