// Deck model section <-> ArchConfig, and deck-level validation with the key's location.
#include "model/model_config.h"

#include <algorithm>
#include <string>
#include <vector>

#include "config/deck.h"
#include "core/error.h"

namespace sof::model {

namespace {

RopeScalingType rope_type_of(const std::string& t) {
    return t == "llama3" ? RopeScalingType::Llama3
           : t == "yarn" ? RopeScalingType::Yarn
                         : RopeScalingType::None;
}

const char* rope_type_name(RopeScalingType t) {
    return t == RopeScalingType::Llama3 ? "llama3" : t == RopeScalingType::Yarn ? "yarn" : "none";
}

} // namespace

ArchConfig config_for(const config::ModelConfig& m) {
    ArchConfig g;
    g.arch = m.type;
    g.max_seq_len = m.max_seq_len;
    g.vocab_size = m.vocab_size;
    // in 64 bits: a vocabulary near INT_MAX must not wrap (validate refuses it)
    const long long padded = (static_cast<long long>(m.vocab_size) + 127) / 128 * 128;
    g.padded_vocab_size = m.padded_vocab_size > 0 ? m.padded_vocab_size
                          : padded > 2147483647LL ? 2147483647
                                                  : static_cast<int>(padded);
    g.num_layers = m.num_layers;
    g.num_heads = m.num_heads;
    g.channels = m.channels;
    g.qkv_bias = m.attention_bias;
    g.tie_embeddings = m.tie_embeddings;
    if (g.llama_family()) {
        g.o_bias = m.attention_out_bias;
        g.mlp_bias = m.mlp_bias;
    }
    apply_arch_defaults(&g);
    if (g.llama_family()) {
        g.num_kv_heads = m.num_kv_heads;
        g.head_dim = m.head_dim;
        g.intermediate_size = m.intermediate_size;
        g.norm_eps = m.norm_eps;
        g.rope_theta = m.rope_theta;
        RopeScaling& r = g.rope_scaling;
        r.type = rope_type_of(m.rope_scaling_type);
        r.factor = m.rope_scaling_factor;
        r.low_freq_factor = m.rope_scaling_low_freq_factor;
        r.high_freq_factor = m.rope_scaling_high_freq_factor;
        r.original_max_position = m.rope_scaling_original_max_position;
        r.beta_fast = m.rope_scaling_beta_fast;
        r.beta_slow = m.rope_scaling_beta_slow;
        r.attention_factor = m.rope_scaling_attention_factor;
        r.truncate = m.rope_scaling_truncate;
        g.attn_sinks = m.attention_sinks || arch_info(g.arch).sinks; // gpt_oss: always
        g.sliding_window = m.sliding_window;
        g.layer_types = m.layer_types;
        // the deck's rates are the model's when it has no other source (auto: 0)
        g.attn_dropout = std::max(0.0f, m.attention_dropout);
        g.resid_dropout = std::max(0.0f, m.residual_dropout);
    }
    if (g.llama_family() && m.num_experts > 0) { // dense models keep the MoE defaults
        g.num_experts = m.num_experts;
        g.experts_per_tok = m.num_experts_per_tok;
        g.moe_intermediate_size = m.moe_intermediate_size;
        g.norm_topk_prob = m.norm_topk_prob;
        const MoeNames* mn = arch_info(g.arch).moe;
        if (mn && moe_width_is_ffn(*mn) && g.moe_intermediate_size == 0)
            g.moe_intermediate_size = g.intermediate_size;  // mixtral: one MLP width
        if (mn && !mn->renorm_key) g.norm_topk_prob = true; // mixtral: always renormalized
        g.decoder_sparse_step = m.decoder_sparse_step;
        if (!parse_layer_list(m.mlp_only_layers, &g.mlp_only_layers))
            SOF_FAIL(Config,
                     "model.mlp_only_layers = \"%s\": expected a comma list of layer indices, "
                     "e.g. \"0,3\"",
                     m.mlp_only_layers.c_str());
        g.router_aux_loss_coef = m.router_aux_loss_coef;
        g.output_router_logits = m.output_router_logits;
    }
    return g;
}

void set_deck_model(const ArchConfig& a, config::ModelConfig* m) {
    m->type = a.arch;
    m->max_seq_len = a.max_seq_len;
    m->vocab_size = a.vocab_size;
    m->padded_vocab_size = a.padded_vocab_size;
    m->num_layers = a.num_layers;
    m->num_heads = a.num_heads;
    m->channels = a.channels;
    m->tie_embeddings = a.tie_embeddings;
    m->attention_bias = a.qkv_bias;
    if (!a.llama_family()) return; // GPT-2 reads none of the LLaMA-family keys
    m->attention_out_bias = a.o_bias;
    m->mlp_bias = a.mlp_bias;
    m->num_kv_heads = a.num_kv_heads;
    m->head_dim = a.head_dim;
    m->intermediate_size = a.intermediate_size;
    m->norm_eps = a.norm_eps;
    m->rope_theta = a.rope_theta;
    const RopeScaling& r = a.rope_scaling;
    m->rope_scaling_type = rope_type_name(r.type);
    m->rope_scaling_factor = r.factor;
    m->rope_scaling_low_freq_factor = r.low_freq_factor;
    m->rope_scaling_high_freq_factor = r.high_freq_factor;
    m->rope_scaling_original_max_position = r.original_max_position;
    m->rope_scaling_beta_fast = r.beta_fast;
    m->rope_scaling_beta_slow = r.beta_slow;
    m->rope_scaling_attention_factor = r.attention_factor;
    m->rope_scaling_truncate = r.truncate;
    m->attention_sinks = a.attn_sinks;
    m->sliding_window = a.sliding_window;
    m->layer_types = a.layer_types;
    m->num_experts = a.num_experts;
    m->num_experts_per_tok = a.experts_per_tok;
    m->moe_intermediate_size = a.moe_intermediate_size;
    m->norm_topk_prob = a.norm_topk_prob;
    m->decoder_sparse_step = a.decoder_sparse_step;
    m->mlp_only_layers = format_layer_list(a.mlp_only_layers);
    m->router_aux_loss_coef = a.router_aux_loss_coef;
    m->output_router_logits = a.output_router_logits;
    // model.attention_dropout / residual_dropout are the run's choice (auto: the model's rates),
    // not the model's description: left as they are
}

namespace {

bool key_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

// Where the first deck key named in `msg` (as a whole word) was set explicitly; "" when none was.
std::string locate(const config::Config& cfg, const std::string& msg) {
    size_t best = std::string::npos;
    std::string where;
    for (const std::string& key : config::all_keys()) {
        auto o = cfg.origins.find(key);
        if (o == cfg.origins.end()) continue;
        for (size_t at = msg.find(key); at != std::string::npos; at = msg.find(key, at + 1)) {
            const size_t end = at + key.size();
            const bool whole =
                (at == 0 || !key_char(msg[at - 1])) &&
                (end == msg.size() || !key_char(msg[end]) ||
                 (msg[end] == '.' && (end + 1 == msg.size() || !key_char(msg[end + 1]))));
            if (!whole) continue;
            if (at < best) {
                best = at;
                where = o->second;
            }
            break;
        }
    }
    return where;
}

} // namespace

void validate_deck(const config::Config& cfg) {
    try {
        if (cfg.model.init_from.empty())
            validate(config_for(cfg.model), cfg.parallel.sp, cfg.train.seq_len);
        else // the file decides the model (the trainer validates it): the sequence split only
            check_sequence_split(cfg.train.seq_len, cfg.parallel.sp);
    } catch (const core::Error& e) {
        if (e.kind() != core::ErrorKind::Config) throw;
        std::string where = locate(cfg, e.what());
        if (where.empty()) where = cfg.deck_path.empty() ? "deck" : cfg.deck_path;
        core::throw_error(core::ErrorKind::Config, where + ": " + e.what());
    }
}

} // namespace sof::model
