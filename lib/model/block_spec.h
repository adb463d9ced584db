// The transformer block described once: its features, sizes, per-layer attention window and the
// table of its tensors (shape, init, weight decay, Hugging Face name). The parameter layout
// (make_layout), initialization (init_params), the Hugging Face map (hf_tensors), the activation
// list (activations.h), the FLOPs (below; the planner's) and the driver's op sequence
// (transformer_block.cpp) read this and nothing per architecture (docs/models.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "model/layout.h"

namespace sof::model {

enum class NormKind { LayerNorm, RmsNorm }; // LayerNorm: weight + bias, eps 1e-5 (GPT-2)
enum class PosKind { Learned, Rope };       // Learned: wpe added to the token embedding
// Gelu: fc (I) -> GELU -> proj; SwiGlu: [gate|up] -> silu(gate)*up -> down. A sparse layer of a
// mixture-of-experts model (BlockSpec::sparse) replaces the SwiGLU by its router and experts
// (block_moe's slots; docs/moe.md): each token's K of E experts, each a SwiGLU of width IE.
enum class MlpKind { Gelu, SwiGlu };

constexpr size_t kNoTensor = std::numeric_limits<size_t>::max();

// One tensor of a unit, in flat-buffer order.
struct TensorSlot {
    TensorKind kind;
    std::vector<int> shape; // row-major
    Init init;
    bool decay;           // weight decay (transformers' Trainer: not biases, not norm weights)
    std::string hf;       // its Hugging Face name ("%d" = the layer); "" for GPT-2 (llm.c names)
    std::string hf_fused; // the fused Hugging Face tensor holding its rows, or "" (its own)
};

struct BlockSpec {
    NormKind norm = NormKind::LayerNorm;
    PosKind pos = PosKind::Learned;
    MlpKind mlp = MlpKind::Gelu;
    bool qkv_bias = false; // q|k|v projection bias
    bool o_bias = false;   // attention output projection bias
    bool mlp_bias = false; // up (fc or gate|up) and down projection biases
    bool qk_norm = false;  // per-head RMSNorm of q and k before RoPE (qwen3)
    bool sinks = false;    // per-head attention sink logits (GPT-OSS)
    bool tied_head = true; // LM head = token embedding
    float norm_eps = 1e-5f;
    float attn_dropout = 0.0f, resid_dropout = 0.0f; // the model's rates (config.json)
    int L = 0, C = 0, NH = 0, NKV = 0, hd = 0;       // layers, channels, heads, kv heads, head dim
    int Q = 0, KV = 0, W = 0;     // NH*hd, NKV*hd, Q + 2*KV (the fused q|k|v row)
    int I = 0;                    // MLP hidden size
    int V = 0, Vp = 0, max_T = 0; // vocabulary, padded vocabulary, longest sequence
    int E = 0, K = 0, IE = 0;     // experts, experts per token, expert width (MoE; 0: dense)
    bool renorm = false;          // the K routing weights renormalized (norm_topk_prob)
    bool moe_bias = false;        // router and expert biases (gpt_oss)
    bool topk_softmax = false;    // top k of the logits, softmax over those k (gpt_oss)
    bool moe_clamp = false;       // interleaved gate/up, clamped SwiGLU (gpt_oss)
    std::vector<char> sparse;     // (L) 1 where block l's MLP is the mixture of experts
    std::vector<int> window; // (L) keys a query of block l sees: 0 = all before it, else the last W
    // the tensors of unit 0 (embeddings), of every block (units 1..L) and of unit L+1 (final norm,
    // untied LM head), in flat-buffer order
    std::vector<TensorSlot> embed, block, head;
    // the tensors of a sparse block (MoE): block's attention part, then router and experts
    std::vector<TensorSlot> block_moe;

    bool is_sparse(int l) const { return !sparse.empty() && sparse[static_cast<size_t>(l)]; }
    const std::vector<TensorSlot>& slots(int l) const { return is_sparse(l) ? block_moe : block; }

    int fc_rows() const { return mlp == MlpKind::Gelu ? I : 2 * I; } // up projection outputs
};

// Offsets of a unit's tensors relative to the unit's start (the same for every block; a sparse
// block's attention tensors lie where a dense block's do, its MoE tensors at the MoE fields);
// kNoTensor where the model has none.
struct UnitOffsets {
    size_t wte = kNoTensor, wpe = kNoTensor;     // unit 0
    size_t ln1w = kNoTensor, ln1b = kNoTensor;   // block
    size_t wqkv = kNoTensor, bqkv = kNoTensor;   // (W, C), (W)
    size_t qnorm = kNoTensor, knorm = kNoTensor; // (hd) each
    size_t sinks = kNoTensor;                    // (NH)
    size_t wo = kNoTensor, bo = kNoTensor;       // (C, Q), (C)
    size_t ln2w = kNoTensor, ln2b = kNoTensor;   // (C)
    size_t wfc = kNoTensor, bfc = kNoTensor;     // (fc_rows, C), (fc_rows)
    size_t wproj = kNoTensor, bproj = kNoTensor; // (C, I), (C)
    // a sparse block's (its attention tensors are at the offsets above, as in a dense block)
    size_t router = kNoTensor, router_bias = kNoTensor;             // (E, C), (E)
    size_t exp_gate_up = kNoTensor, exp_down = kNoTensor;           // (E, 2*IE, C), (E, C, IE)
    size_t exp_gate_up_bias = kNoTensor, exp_down_bias = kNoTensor; // (E, 2*IE), (E, C)
    size_t lnfw = kNoTensor, lnfb = kNoTensor, head = kNoTensor;    // unit L+1 (head: untied)
};

BlockSpec block_spec(const ArchConfig& cfg);
UnitOffsets unit_offsets(const BlockSpec& s);

// A tensor of the model's Hugging Face files: one of ours, or several adjacent ones whose rows
// it concatenates (phi3's qkv_proj = q|k|v). Its elements are flat[offset, offset + numel) in
// order; the embedding's and LM head's padding rows V..Vp-1 (up to flat_numel) are not in it.
struct HfTensor {
    std::string name;
    std::vector<int64_t> shape;
    size_t offset = 0, numel = 0, flat_numel = 0;
    int unit = 0;
    size_t first = 0, count = 0; // layout.tensors[first .. first+count)
    bool transposed = false;     // the file's (E, X, R) is our (E, R, X) (gpt_oss's experts)
};
// A MoE model's experts: per expert (the hub's names, what export writes: expert e's gate and up
// are rows [2*IE*e, 2*IE*e + IE) and [.. + IE, 2*IE*(e+1)) of gate_up, its down slice e of down),
// or, with fused_experts, transformers 5's fused (E, 2*IE, C) and (E, C, IE) tensors (and the
// router as mlp.<router>). gpt_oss: always its fused experts, transposed ((E, C, 2*IE),
// (E, IE, C)), and the biases.
std::vector<HfTensor> hf_tensors(const ParamLayout& layout, bool fused_experts = false);

// RoPE inverse frequencies (hd/2) with Llama-3 or YaRN scaling when configured, as Hugging Face
// computes them (double, then fp32), and the factor YaRN scales cos and sin by (1 otherwise).
std::vector<float> rope_inv_freq(const ArchConfig& cfg);
float rope_attention_scale(const ArchConfig& cfg);

// Causal query-key pairs of one T-token sequence in a layer whose window is w (0: all before).
double attention_pairs(double T, int w);
// Keys one query attends to, counted over the full square as PaLM's MFU does: T, or min(T, w).
double attention_keys(double T, int w);

} // namespace sof::model
