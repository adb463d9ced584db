// The architectures as one table: per model.type, the block features it fixes, how Hugging Face
// names its tensors and which config.json keys switch its features. Everything else follows from
// the block description (block_spec.h); adding a recombination of existing features is a row.
#pragma once

#include <string>

#include "config/config.h"

namespace sof::model {

// The architectures: the deck's model.type enum (config/config.h), one definition.
using Arch = config::ModelType;

// How a config.json says which layers attend in a sliding window.
enum class WindowKeys {
    None,       // no sliding window in the model (a stray sliding_window key is ignored, as
                // transformers ignores it: llama, seed_oss)
    AllLayers,  // `sliding_window` (null = none) applies to every layer (mistral, phi3)
    LayerTypes, // `sliding_window` applies to the layers `layer_types` lists as
                // "sliding_attention" (absent: sliding, full alternating; gpt_oss)
    UseSliding, // `use_sliding_window` gates `sliding_window` (qwen2, qwen3: refused when on)
};

// How a mixture-of-experts block names its tensors in the hub's files: model.layers.{l}.<block>.
// <router>.weight (E, C) and <block>.experts.{e}.<gate|up|down>.weight; transformers 5's fused
// names are model.layers.{l}.mlp.experts.gate_up_proj (E, 2I, C) / down_proj (E, C, I) and
// model.layers.{l}.mlp.<router>.weight whatever the hub's block name (its conversion_mapping.py
// renames mixtral's block_sparse_moe to mlp).
struct MoeNames {
    const char* block;  // "mlp" (qwen3_moe), "block_sparse_moe" (mixtral)
    const char* router; // "gate"
    const char* gate;   // "gate_proj", "w1" (rows 0..I-1 of an expert's gate_up)
    const char* up;     // "up_proj", "w3"
    const char* down;   // "down_proj", "w2"
    // config.json: the keys and transformers' defaults of absent keys
    const char* experts_key; // "num_experts", "num_local_experts" (E)
    int experts_default;
    int topk_default;      // num_experts_per_tok (K)
    const char* width_key; // "moe_intermediate_size", or "intermediate_size" (mixtral: the
                           // experts' width is the model's one MLP width; no dense layers)
    int width_default;
    const char* renorm_key; // "norm_topk_prob", or null: always renormalized (mixtral)
    bool dense_layers;      // decoder_sparse_step / mlp_only_layers (dense MLPs in between)
    const char* jitter_key; // "router_jitter_noise" (mixtral; a nonzero value is refused), or
                            // null
    // GPT-OSS's block: a router bias and expert biases (gate_up (E, 2I), down (E, C)); the top k
    // of the logits, softmax over those k (else softmax over all, top k); gate/up interleaved in
    // gate_up's rows and the clamped SwiGLU (swiglu_alpha, swiglu_limit); the files hold only
    // the fused experts, each (E, in, out): our (E, out, in) with the last two axes swapped
    bool biases;
    bool topk_softmax;
    bool clamped;
    bool transposed;
};

// Whether the experts' width is the config's intermediate_size (no dense MLP width of its own).
bool moe_width_is_ffn(const MoeNames& m);

struct ArchInfo {
    Arch arch;            // its name (model.type, manifest, HF model_type): arch_name
    const char* hf_class; // config.json "architectures"[0]; null: GPT-2 (llm.c files)
    // the block features it fixes (apply_arch_defaults)
    bool gpt2;            // LayerNorm, learned positions, GELU MLP, every bias, tied head
    bool qkv_bias_always; // q/k/v biases whatever the config says (qwen2)
    bool qk_norm;         // per-head RMSNorm of q and k (qwen3)
    bool sinks;           // per-head attention sinks (gpt_oss)
    // Hugging Face tensor names (block_spec.cpp hf_name)
    bool fused_qkv;     // q|k|v rows in one self_attn.qkv_proj (phi3)
    bool fused_gate_up; // gate|up rows in one mlp.gate_up_proj, gate first (phi3)
    // config.json: defaults of absent keys (transformers' config classes) and feature keys
    int kv_heads_default;          // num_key_value_heads absent: 0 = num_attention_heads
    int head_dim_default;          // head_dim absent: 0 = hidden_size / num_attention_heads
    double rms_eps_default;        // rms_norm_eps absent
    double rope_theta_default;     // rope_theta absent (transformers' default_theta)
    const char* qkv_bias_key;      // switches the q/k/v biases, or null (fixed)
    const char* o_bias_key;        // switches the o_proj bias, or null (none)
    const char* mlp_bias_key;      // switches the MLP biases, or null (none)
    bool bias_default;             // those keys absent (gpt_oss: attention_bias true)
    float attn_dropout_default;    // attention_dropout absent
    const char* resid_dropout_key; // the residual dropout rate, or null (none)
    float resid_dropout_default;   // that key absent
    WindowKeys window;
    int window_default;       // sliding_window absent (0 = none)
    bool rope_scaling;        // rope_scaling llama3 / yarn honored (phi3: only its longrope)
    const char* rope_default; // rope parameters (JSON) when config.json has none, or null
    const char* hidden_act;   // the MLP activation it needs ("silu"), null for GPT-2
    const MoeNames* moe;      // mixture-of-experts MLPs (num_experts > 0), or null: none
};

const ArchInfo& arch_info(Arch a);
const char* arch_name(Arch a); // "gpt2", "llama", "qwen2", "qwen3", "phi3", "mistral", "seed_oss",
                               // "qwen3_moe", "mixtral", "gpt_oss"
// false when `name` is not one of arch_name's strings
bool parse_arch(const std::string& name, Arch* out);
// The row whose hf_class or name (model_type) is `name`; null when none is.
const ArchInfo* arch_by_hf(const std::string& name);
// "LlamaForCausalLM (llama), ..." and "gpt2, llama, ..." for messages
std::string supported_hf_archs();
std::string arch_names();

} // namespace sof::model
