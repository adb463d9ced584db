// Model architectures (GPT-2 and the LLaMA family) as one config, and their parameter layout: the
// tensor table over one flat fp32 buffer (made from the block description, block_spec.h),
// unit-major so backward order = reverse offsets. The engine sees only units and offsets.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/arch.h"

namespace sof::model {

enum class RopeScalingType {
    None,   // plain RoPE: inv_freq[i] = theta^(-2i/hd)
    Llama3, // Llama-3.1 frequency-dependent scaling of inv_freq (HF rope_type "llama3")
    Yarn,   // YaRN (HF rope_type "yarn"): interpolated/extrapolated frequencies blended over a
            // ramp, cos and sin scaled by an attention factor (GPT-OSS)
};

struct RopeScaling {
    RopeScalingType type = RopeScalingType::None;
    double factor = 8.0;
    double low_freq_factor = 1.0;     // llama3
    double high_freq_factor = 4.0;    // llama3
    int original_max_position = 8192; // original_max_position_embeddings (llama3, yarn)
    double beta_fast = 32.0;          // yarn: the ramp's bounds in rotations
    double beta_slow = 1.0;           // yarn
    double attention_factor = 0.0;    // yarn: cos/sin scale; 0 = 0.1 ln(factor) + 1 (factor > 1)
    bool truncate = true;             // yarn: the correction range rounded outward to integers
};

// Everything that fixes the parameter layout and the math. GPT-2 uses the first six fields; the
// LLaMA family uses all (0 in the optional sizes = the derived default below). The block's
// features here are what BlockSpec (block_spec.h, the one description of a block) is made from.
struct ArchConfig {
    Arch arch = Arch::Gpt2;
    int max_seq_len = 1024;        // maxT (GPT-2: rows of wpe; LLaMA: longest sequence)
    int vocab_size = 50257;        // V
    int padded_vocab_size = 50304; // Vp >= V (rows V..Vp-1 of the embedding/LM head are padding)
    int num_layers = 12;           // L
    int num_heads = 12;            // NH (query heads)
    int channels = 768;            // C (hidden_size)
    int num_kv_heads = 0;          // NKV, divides NH (grouped-query attention); 0 = NH
    int head_dim = 0;              // hd; 0 = C / NH (qwen3 may set another value)
    int intermediate_size = 0;     // I (SwiGLU hidden size); 0 = 4C for GPT-2, required for LLaMA
    float norm_eps = 1e-5f;        // RMSNorm eps (LLaMA family); GPT-2's LayerNorm uses 1e-5
    double rope_theta = 10000.0;   // RoPE base
    RopeScaling rope_scaling;      // Llama-3 / YaRN scaling of the rotary frequencies
    bool tie_embeddings = true;    // LM head = embedding (GPT-2: always)
    bool qkv_bias = false;         // q/k/v projection biases (qwen2: always; llama: attention_bias)
    bool o_bias = false;           // attention output projection bias (GPT-2: always)
    bool mlp_bias = false;         // MLP biases (GPT-2: always; SwiGLU: gate, up, down)
    bool qk_norm = false;          // per-head RMSNorm of q and k before RoPE (qwen3: always)
    bool attn_sinks = false;       // one learned logit per query head joins each softmax row
    int sliding_window = 0;        // W: query t sees keys t-W+1..t in windowed layers; 0 = none
    std::string layer_types;       // which layers are windowed: "" = all (when W > 0), else a
                                   // comma list of "sliding"/"full" repeated over the layers
    float attn_dropout = 0.0f;     // the model's attention-probability dropout (config.json)
    float resid_dropout = 0.0f;    // the model's dropout of each branch before its residual add
    // mixture of experts (qwen3_moe, mixtral, gpt_oss): E experts per sparse layer (0 = none), K
    // per token, each expert's SwiGLU width; layer l is sparse iff l is not in mlp_only_layers and
    // (l + 1) % decoder_sparse_step == 0 (the others keep the dense SwiGLU of intermediate_size)
    int num_experts = 0;           // E
    int experts_per_tok = 0;       // K
    int moe_intermediate_size = 0; // IE
    bool norm_topk_prob = false;   // renormalize the k routing weights
    int decoder_sparse_step = 1;
    std::vector<int> mlp_only_layers;  // dense layers among the sparse ones
    float router_aux_loss_coef = 0.0f; // load-balancing loss weight (when output_router_logits)
    bool output_router_logits = false; // the load-balancing loss joins the training loss

    bool llama_family() const { return arch != Arch::Gpt2; }
    int kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
    int hdim() const { return head_dim > 0 ? head_dim : channels / num_heads; }
    int q_dim() const { return num_heads * hdim(); }   // NH*hd
    int kv_dim() const { return kv_heads() * hdim(); } // NKV*hd
    int ffn_dim() const { return intermediate_size > 0 ? intermediate_size : 4 * channels; }
    // keys a query of `layer` sees: W when the layer is windowed, 0 (all before it) otherwise
    int window(int layer) const;
    bool moe() const { return num_experts > 0; }
    bool sparse_layer(int layer) const; // its MLP is the mixture of experts
};

// The architecture's defaults for the flags it fixes (arch.h's table: qwen2 -> qkv_bias, qwen3
// -> qk_norm, GPT-2 -> tied, biases). Call after setting `arch` and before applying user
// overrides of the free flags.
void apply_arch_defaults(ArchConfig* cfg);

enum class TensorKind {
    // GPT-2 (llm.c order and names)
    Wte,      // (Vp, C) token embedding (all archs)
    Wpe,      // (maxT, C)
    Ln1w,     // (C) GPT-2 ln_1 weight; LLaMA input_layernorm
    Ln1b,     // (C)
    Qkvw,     // (3C, C)
    Qkvb,     // (3C)
    Attprojw, // (C, C) GPT-2; LLaMA o_proj (C, NH*hd)
    Attprojb, // (C) GPT-2; LLaMA o_proj bias (o_bias only)
    Ln2w,     // (C) GPT-2 ln_2 weight; LLaMA post_attention_layernorm
    Ln2b,     // (C)
    Fcw,      // (4C, C)
    Fcb,      // (4C)
    Fcprojw,  // (C, 4C)
    Fcprojb,  // (C)
    Lnfw,     // (C) final norm (all archs)
    Lnfb,     // (C)
    // LLaMA family (q, k, v adjacent: one fused (NH*hd + 2*NKV*hd, C) matrix; gate, up adjacent)
    Wq,     // (NH*hd, C)
    Wk,     // (NKV*hd, C)
    Wv,     // (NKV*hd, C)
    Bq,     // (NH*hd)  qkv_bias only
    Bk,     // (NKV*hd) qkv_bias only
    Bv,     // (NKV*hd) qkv_bias only
    QNorm,  // (hd) qk_norm only
    KNorm,  // (hd) qk_norm only
    Wgate,  // (I, C)
    Wup,    // (I, C)
    Wdown,  // (C, I)
    LmHead, // (Vp, C) untied only
    Pad,    // (n) ZeRO-3 shard padding (shard layouts only; not a model tensor)
    Sinks,  // (NH) attention sink logits (attn_sinks only)
    Bgate,  // (I) mlp_bias only (gate, up adjacent: one (2I) bias)
    Bup,    // (I) mlp_bias only
    Bdown,  // (C) mlp_bias only
    // mixture of experts (sparse layers only; E experts, expert width IE)
    Router,        // (E, C) router (mlp.gate.weight)
    RouterBias,    // (E) gpt_oss
    ExpGateUp,     // (E, 2*IE, C) each expert's [gate rows | up rows] (gpt_oss: interleaved)
    ExpGateUpBias, // (E, 2*IE) gpt_oss
    ExpDown,       // (E, C, IE) each expert's down projection
    ExpDownBias,   // (E, C) gpt_oss
};
constexpr int kNumGpt2TensorKinds = 16;     // Wte..Lnfb: the kinds of an llm.c GPT-2 file
const char* tensor_kind_name(TensorKind k); // llm.c names for GPT-2 kinds ("wte", "qkvw", ...)

// How init_params fills a tensor (model.h): ones (norm weights), zeros (biases), N(0, std)
// (matrices, positions, sinks), N(0, std / sqrt(2L)) (the residual projections: attention out,
// MLP down), N(0, std) with the padding rows V..Vp-1 zero (embedding, LM head).
enum class Init { One, Zero, Normal, Residual, Embedding };

struct TensorInfo {
    std::string name;    // GPT-2: "wte", "h3.qkvw", "lnfw"; LLaMA: the Hugging Face name of the
                         // tensor alone ("model.layers.3.self_attn.q_proj.weight")
    std::string hf_name; // the Hugging Face tensor holding it: name, or the fused tensor whose
                         // rows it is ("...self_attn.qkv_proj.weight" for phi3); "" for GPT-2
    TensorKind kind;
    int layer;     // block index, -1 for embeddings / final norm / LM head
    int unit;      // 0 = embeddings, 1+layer = block, L+1 = final norm (+ untied LM head)
    size_t offset; // into the flat buffer, in elements
    size_t numel;
    std::vector<int> shape; // row-major
    bool decay;             // weight decay applies (transformers' Trainer groups: not biases,
                            // not norm weights)
    Init init;
};

struct ParamLayout {
    ArchConfig cfg;
    std::vector<TensorInfo> tensors;       // in flat-buffer order
    std::vector<size_t> unit_begin;        // (L+3): unit u spans [unit_begin[u], unit_begin[u+1])
    std::vector<size_t> unit_first_tensor; // (L+3): tensors of unit u: [first[u], first[u+1])
    size_t num_params = 0;
    int num_units() const { return static_cast<int>(unit_begin.size()) - 1; }
    // offset of tensor `kind` in block `layer` (layer ignored for unit-0 and last-unit kinds).
    // Throws Internal when the model has no such tensor.
    size_t offset_of(TensorKind kind, int layer) const;
    bool has(TensorKind kind) const; // the model has tensors of this kind
};

ParamLayout make_layout(const ArchConfig& cfg);

// The one check of a model's sizes, whatever they came from (deck, config.json, llm.c header):
// throws a Config error naming the key(s) and the bound for the first problem. Sizes against the
// bounds of config/config.h (kMaxLayers, ...; every weight matrix < 2^31 elements, at most
// kMaxParams parameters: checked from the sizes, before anything is allocated); divisibility
// (C % NH, NH % NKV, head_dim even for RoPE) and, with sp > 1, the heads, the kv heads and (when
// seq_len > 0) train.seq_len over the Ulysses degree parallel.sp, each message naming both
// numbers; Vp >= V; the LLaMA family's required and positive keys. The one check of these: the
// deck check (validate_deck), the planner, the trainer and Ulysses (sp::check_degrees) call it.
void validate(const ArchConfig& cfg, int sp = 1, int seq_len = 0);

// The sequence part of validate (train.seq_len over parallel.sp), for a deck whose model is not
// known yet (model.init_from: validate_deck).
void check_sequence_split(int seq_len, int sp);

// "1, 3" -> {1, 3} (model.mlp_only_layers); false on anything but non-negative integers and
// commas ("" -> {}). format_layer_list writes "1,3".
bool parse_layer_list(const std::string& text, std::vector<int>* out);
std::string format_layer_list(const std::vector<int>& layers);

// Parameters of the model (as make_layout would count them), from the sizes alone; in double so
// absurd sizes do not overflow. Call after the sizes are known positive.
double param_count(const ArchConfig& cfg);

} // namespace sof::model
