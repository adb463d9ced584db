// The architecture table (arch.h): one row per model.type. The rows' values are transformers'
// own (its configuration_<model>.py defaults and the modules' bias switches).
#include "model/arch.h"

#include "core/error.h"

namespace sof::model {

namespace {

using W = WindowKeys;

// Qwen3MoeConfig: 128 experts, top 8, moe_intermediate_size 768, norm_topk_prob
const MoeNames kQwen3MoeNames = {"mlp",
                                 "gate",
                                 "gate_proj",
                                 "up_proj",
                                 "down_proj",
                                 "num_experts",
                                 128,
                                 8,
                                 "moe_intermediate_size",
                                 768,
                                 "norm_topk_prob",
                                 true,
                                 nullptr,
                                 false,
                                 false,
                                 false,
                                 false};

// MixtralConfig: num_local_experts 8, top 2, the experts' width = intermediate_size (14336)
const MoeNames kMixtralNames = {"block_sparse_moe",
                                "gate",
                                "w1",
                                "w3",
                                "w2",
                                "num_local_experts",
                                8,
                                2,
                                "intermediate_size",
                                14336,
                                nullptr,
                                false,
                                "router_jitter_noise",
                                false,
                                false,
                                false,
                                false};

// GptOssConfig: 128 experts, top 4, width = intermediate_size (2880); its files name the router
// mlp.router and hold only the fused experts (gate_up_proj (E, C, 2I), down_proj (E, I, C))
const MoeNames kGptOssNames = {"mlp",
                               "router",
                               "gate_up_proj",
                               "gate_up_proj",
                               "down_proj",
                               "num_local_experts",
                               128,
                               4,
                               "intermediate_size",
                               2880,
                               nullptr,
                               false,
                               nullptr,
                               true,
                               true,
                               true,
                               true};

// GptOssConfig's rope_parameters when absent
const char* const kGptOssRope =
    R"({"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
        "truncate": false, "original_max_position_embeddings": 4096})";

// clang-format off
const ArchInfo kArchs[] = {
    // arch, hf_class,
    //   gpt2, qkv_bias_always, qk_norm, sinks, fused_qkv, fused_gate_up,
    //   kv_heads_default, head_dim_default, rms_eps_default, rope_theta_default, qkv_bias_key,
    //   o_bias_key, mlp_bias_key, bias_default,
    //   attn_dropout_default, resid_dropout_key, resid_dropout_default,
    //   window, window_default, rope_scaling, rope_default, hidden_act, moe
    {Arch::Gpt2, nullptr,
        true, true, false, false, false, false,
        0, 0, 1e-5, 1e4, nullptr, nullptr, nullptr, false,
        0.0f, nullptr, 0.0f,
        W::None, 0, false, nullptr, nullptr, nullptr},
    {Arch::Llama, "LlamaForCausalLM",
        false, false, false, false, false, false,
        0, 0, 1e-6, 1e4, "attention_bias", "attention_bias", "mlp_bias", false,
        0.0f, nullptr, 0.0f,
        W::None, 0, true, nullptr, "silu", nullptr},
    {Arch::Qwen2, "Qwen2ForCausalLM",
        false, true, false, false, false, false,
        32, 0, 1e-6, 1e4, nullptr, nullptr, nullptr, false,
        0.0f, nullptr, 0.0f,
        W::UseSliding, 0, true, nullptr, "silu", nullptr},
    {Arch::Qwen3, "Qwen3ForCausalLM",
        false, false, true, false, false, false,
        32, 128, 1e-6, 1e4, "attention_bias", "attention_bias", nullptr, false,
        0.0f, nullptr, 0.0f,
        W::UseSliding, 0, true, nullptr, "silu", nullptr},
    {Arch::Phi3, "Phi3ForCausalLM",
        false, false, false, false, true, true,
        0, 0, 1e-5, 1e4, nullptr, nullptr, nullptr, false,
        0.0f, "resid_pdrop", 0.0f,
        W::AllLayers, 0, false, nullptr, "silu", nullptr},
    {Arch::Mistral, "MistralForCausalLM",
        false, false, false, false, false, false,
        8, 0, 1e-6, 1e4, nullptr, nullptr, nullptr, false,
        0.0f, nullptr, 0.0f,
        W::AllLayers, 4096, true, nullptr, "silu", nullptr},
    {Arch::SeedOss, "SeedOssForCausalLM",
        false, false, false, false, false, false,
        8, 128, 1e-6, 1e4, "attention_bias", "attention_out_bias", "mlp_bias", false,
        0.1f, "residual_dropout", 0.1f,
        W::None, 0, true, nullptr, "silu", nullptr},
    {Arch::Qwen3Moe, "Qwen3MoeForCausalLM",
        false, false, true, false, false, false,
        4, 0, 1e-6, 1e4, "attention_bias", "attention_bias", nullptr, false,
        0.0f, nullptr, 0.0f,
        W::UseSliding, 0, true, nullptr, "silu", &kQwen3MoeNames},
    {Arch::Mixtral, "MixtralForCausalLM",
        false, false, false, false, false, false,
        8, 0, 1e-5, 1e6, nullptr, nullptr, nullptr, false,
        0.0f, nullptr, 0.0f,
        W::AllLayers, 0, true, nullptr, "silu", &kMixtralNames},
    {Arch::GptOss, "GptOssForCausalLM",
        false, false, false, true, false, false,
        8, 64, 1e-5, 150000.0, "attention_bias", "attention_bias", nullptr, true,
        0.0f, nullptr, 0.0f,
        W::LayerTypes, 128, true, kGptOssRope, "silu", &kGptOssNames},
};
// clang-format on

constexpr int kCount = static_cast<int>(sizeof(kArchs) / sizeof(kArchs[0]));
static_assert(kCount == config::kNumModelTypes, "one row per config::ModelType");

} // namespace

const ArchInfo& arch_info(Arch a) {
    const int i = static_cast<int>(a);
    if (i < 0 || i >= kCount || kArchs[i].arch != a)
        SOF_FAIL(Internal, "arch_info: architecture %d has no row in the table", i);
    return kArchs[i];
}

bool moe_width_is_ffn(const MoeNames& m) {
    return std::string(m.width_key) == "intermediate_size";
}

const char* arch_name(Arch a) {
    const int i = static_cast<int>(a);
    return i >= 0 && i < kCount ? config::kModelTypeNames[i] : "?";
}

bool parse_arch(const std::string& name, Arch* out) {
    for (int i = 0; i < kCount; i++) {
        if (name == config::kModelTypeNames[i]) {
            *out = kArchs[i].arch;
            return true;
        }
    }
    return false;
}

const ArchInfo* arch_by_hf(const std::string& name) {
    for (const ArchInfo& a : kArchs)
        if (a.hf_class && (name == a.hf_class || name == arch_name(a.arch))) return &a;
    return nullptr;
}

std::string supported_hf_archs() {
    std::string s;
    for (const ArchInfo& a : kArchs) {
        if (!a.hf_class) continue;
        if (!s.empty()) s += ", ";
        s += std::string(a.hf_class) + " (" + arch_name(a.arch) + ")";
    }
    return s;
}

std::string arch_names() {
    std::string s;
    for (int i = 0; i < kCount; i++)
        s += std::string(i ? ", " : "") + config::kModelTypeNames[i];
    return s;
}

} // namespace sof::model
