// Parameter layouts of GPT-2 and the LLaMA family: the tensor table over one flat fp32 buffer, unit
// boundaries, validation. Unit-major order: unit 0 = embeddings, unit 1+l = block l, unit L+1 =
// final norm (+ the untied LM head).
#include "model/layout.h"

#include "core/error.h"
#include "model/block_spec.h"
#include "core/strfmt.h"

namespace sof::model {

void apply_arch_defaults(ArchConfig* cfg) {
    const ArchInfo& a = arch_info(cfg->arch);
    if (a.gpt2) { // every bias, tied: llm.c's GPT-2
        cfg->tie_embeddings = true;
        cfg->qkv_bias = cfg->o_bias = cfg->mlp_bias = true;
    }
    if (a.qkv_bias_always) cfg->qkv_bias = true;
    cfg->qk_norm = a.qk_norm;
    if (a.sinks) cfg->attn_sinks = true;
}

namespace {

// "sliding,full" -> per entry true when windowed; false when an entry is neither word
bool parse_layer_types(const std::string& text, std::vector<bool>* out) {
    out->clear();
    size_t at = 0;
    while (at <= text.size()) {
        size_t end = text.find(',', at);
        if (end == std::string::npos) end = text.size();
        size_t b = at, e = end;
        while (b < e && text[b] == ' ')
            b++;
        while (e > b && text[e - 1] == ' ')
            e--;
        const std::string w = text.substr(b, e - b);
        if (w == "sliding" || w == "sliding_attention")
            out->push_back(true);
        else if (w == "full" || w == "full_attention")
            out->push_back(false);
        else
            return false;
        at = end + 1;
    }
    return !out->empty();
}

} // namespace

int ArchConfig::window(int layer) const {
    if (sliding_window <= 0) return 0;
    if (layer_types.empty()) return sliding_window;
    std::vector<bool> t;
    if (!parse_layer_types(layer_types, &t)) return sliding_window; // validate refuses it
    return t[static_cast<size_t>(layer) % t.size()] ? sliding_window : 0;
}

bool ArchConfig::sparse_layer(int layer) const {
    if (num_experts <= 0 || decoder_sparse_step <= 0) return false;
    for (int l : mlp_only_layers)
        if (l == layer) return false;
    return (layer + 1) % decoder_sparse_step == 0;
}

const char* tensor_kind_name(TensorKind k) {
    switch (k) {
    case TensorKind::Wte:
        return "wte";
    case TensorKind::Wpe:
        return "wpe";
    case TensorKind::Ln1w:
        return "ln1w";
    case TensorKind::Ln1b:
        return "ln1b";
    case TensorKind::Qkvw:
        return "qkvw";
    case TensorKind::Qkvb:
        return "qkvb";
    case TensorKind::Attprojw:
        return "attprojw";
    case TensorKind::Attprojb:
        return "attprojb";
    case TensorKind::Ln2w:
        return "ln2w";
    case TensorKind::Ln2b:
        return "ln2b";
    case TensorKind::Fcw:
        return "fcw";
    case TensorKind::Fcb:
        return "fcb";
    case TensorKind::Fcprojw:
        return "fcprojw";
    case TensorKind::Fcprojb:
        return "fcprojb";
    case TensorKind::Lnfw:
        return "lnfw";
    case TensorKind::Lnfb:
        return "lnfb";
    case TensorKind::Wq:
        return "wq";
    case TensorKind::Wk:
        return "wk";
    case TensorKind::Wv:
        return "wv";
    case TensorKind::Bq:
        return "bq";
    case TensorKind::Bk:
        return "bk";
    case TensorKind::Bv:
        return "bv";
    case TensorKind::QNorm:
        return "q_norm";
    case TensorKind::KNorm:
        return "k_norm";
    case TensorKind::Wgate:
        return "w_gate";
    case TensorKind::Wup:
        return "w_up";
    case TensorKind::Wdown:
        return "w_down";
    case TensorKind::LmHead:
        return "lm_head";
    case TensorKind::Pad:
        return "pad";
    case TensorKind::Sinks:
        return "sinks";
    case TensorKind::Bgate:
        return "b_gate";
    case TensorKind::Bup:
        return "b_up";
    case TensorKind::Bdown:
        return "b_down";
    case TensorKind::Router:
        return "router";
    case TensorKind::ExpGateUp:
        return "experts_gate_up";
    case TensorKind::ExpDown:
        return "experts_down";
    case TensorKind::RouterBias:
        return "router_bias";
    case TensorKind::ExpGateUpBias:
        return "experts_gate_up_bias";
    case TensorKind::ExpDownBias:
        return "experts_down_bias";
    }
    return "?";
}

namespace {

double slots_numel(const std::vector<TensorSlot>& slots) {
    double n = 0;
    for (const TensorSlot& s : slots) {
        double k = 1;
        for (int d : s.shape)
            k *= d;
        n += k;
    }
    return n;
}

} // namespace

double param_count(const ArchConfig& cfg) {
    const BlockSpec s = block_spec(cfg);
    double n = slots_numel(s.embed) + slots_numel(s.head);
    for (int l = 0; l < cfg.num_layers; l++)
        n += slots_numel(s.slots(l));
    return n;
}

bool parse_layer_list(const std::string& text, std::vector<int>* out) {
    out->clear();
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find(',', at);
        if (end == std::string::npos) end = text.size();
        size_t b = at, e = end;
        while (b < e && text[b] == ' ')
            b++;
        while (e > b && text[e - 1] == ' ')
            e--;
        if (b == e) return false;
        long v = 0;
        for (size_t i = b; i < e; i++) {
            if (text[i] < '0' || text[i] > '9' || v > (1L << 30)) return false;
            v = v * 10 + (text[i] - '0');
        }
        out->push_back(static_cast<int>(v));
        at = end + 1;
    }
    return true;
}

std::string format_layer_list(const std::vector<int>& layers) {
    std::string s;
    for (size_t i = 0; i < layers.size(); i++) {
        if (i) s.push_back(',');
        s.append(std::to_string(layers[i]));
    }
    return s;
}

namespace {

// The mixture-of-experts sizes: an architecture with MoE blocks (arch.h), 1 <= K <= E, the
// expert width, the sparse-layer keys, each expert matrix below 2^31 elements.
void check_moe(const ArchConfig& cfg) {
    const int E = cfg.num_experts, K = cfg.experts_per_tok;
    if (E == 0) return;
    if (!arch_info(cfg.arch).moe)
        SOF_FAIL(Config, "model.num_experts = %d: model.type %s has no mixture-of-experts blocks",
                 E, arch_name(cfg.arch));
    if (E < 0 || E > config::kMaxExperts)
        SOF_FAIL(Config, "model.num_experts = %d must be in [0, %d]", E, config::kMaxExperts);
    if (K < 1 || K > E || K > config::kMaxTopK)
        SOF_FAIL(Config,
                 "model.num_experts_per_tok = %d must be in [1, min(model.num_experts = %d, %d)]",
                 K, E, config::kMaxTopK);
    if (cfg.moe_intermediate_size <= 0 || cfg.moe_intermediate_size > config::kMaxIntermediate)
        SOF_FAIL(Config, "model.moe_intermediate_size = %d must be in [1, %d] with experts",
                 cfg.moe_intermediate_size, config::kMaxIntermediate);
    const MoeNames& mn = *arch_info(cfg.arch).moe;
    if (moe_width_is_ffn(mn) && cfg.moe_intermediate_size != cfg.intermediate_size)
        SOF_FAIL(Config,
                 "model.moe_intermediate_size = %d differs from model.intermediate_size = %d: "
                 "%s's experts are as wide as its config.json intermediate_size (set it to %d, "
                 "or 0)",
                 cfg.moe_intermediate_size, cfg.intermediate_size, arch_name(cfg.arch),
                 cfg.intermediate_size);
    if (!mn.renorm_key && !cfg.norm_topk_prob)
        SOF_FAIL(Config,
                 "model.norm_topk_prob = false: %s always renormalizes the top-k routing weights",
                 arch_name(cfg.arch));
    if (!mn.dense_layers && (cfg.decoder_sparse_step != 1 || !cfg.mlp_only_layers.empty()))
        SOF_FAIL(Config,
                 "model.decoder_sparse_step / model.mlp_only_layers: every layer of %s is a "
                 "mixture of experts (leave them at 1 and \"\")",
                 arch_name(cfg.arch));
    if (cfg.decoder_sparse_step < 1)
        SOF_FAIL(Config, "model.decoder_sparse_step = %d must be >= 1", cfg.decoder_sparse_step);
    for (int l : cfg.mlp_only_layers)
        if (l < 0 || l >= cfg.num_layers)
            SOF_FAIL(Config, "model.mlp_only_layers: layer %d is not in [0, model.num_layers = %d)",
                     l, cfg.num_layers);
    if (!(cfg.router_aux_loss_coef >= 0.0f))
        SOF_FAIL(Config, "model.router_aux_loss_coef = %g must be >= 0", cfg.router_aux_loss_coef);
    if (2.0 * cfg.moe_intermediate_size * static_cast<double>(cfg.channels) * E > 2147483647.0)
        SOF_FAIL(Config,
                 "model.num_experts = %d x 2 x model.moe_intermediate_size = %d x model.channels "
                 "= %d: the experts' gate_up tensor must have fewer than 2^31 elements",
                 E, cfg.moe_intermediate_size, cfg.channels);
}

} // namespace

void check_sequence_split(int seq_len, int sp) {
    if (sp > 1 && seq_len % sp != 0)
        SOF_FAIL(Config,
                 "train.seq_len = %d is not divisible by parallel.sp = %d (Ulysses splits the "
                 "sequence across the sequence-parallel group: each rank holds seq_len/sp "
                 "positions)",
                 seq_len, sp);
}

void validate(const ArchConfig& cfg, int sp, int seq_len) {
    // sizes: positive, then within the bounds (config/config.h), before any product of them
    auto bounded = [](int v, const char* key, int lo, int hi) {
        if (v < lo)
            SOF_FAIL(Config, "model.%s = %d must be %s", key, v,
                     lo == 0 ? ">= 0 (0 = the default)" : "positive (> 0)");
        if (v > hi)
            SOF_FAIL(Config,
                     "model.%s = %d exceeds the limit of %d (a model size beyond any real model; "
                     "is it a typo?)",
                     key, v, hi);
    };
    bounded(cfg.num_layers, "num_layers", 1, config::kMaxLayers);
    bounded(cfg.channels, "channels", 1, config::kMaxChannels);
    bounded(cfg.num_heads, "num_heads", 1, config::kMaxHeads);
    bounded(cfg.max_seq_len, "max_seq_len", 1, config::kMaxSeqLen);
    bounded(cfg.vocab_size, "vocab_size", 1, config::kMaxVocab);
    bounded(cfg.padded_vocab_size, "padded_vocab_size", 1, config::kMaxVocab);
    bounded(cfg.num_kv_heads, "num_kv_heads", 0, config::kMaxHeads);
    bounded(cfg.head_dim, "head_dim", 0, config::kMaxChannels);
    bounded(cfg.intermediate_size, "intermediate_size", 0, config::kMaxIntermediate);
    if (cfg.padded_vocab_size < cfg.vocab_size)
        SOF_FAIL(Config,
                 "model.padded_vocab_size = %d is smaller than model.vocab_size = %d (use 0 to "
                 "round the vocabulary up to a multiple of 128)",
                 cfg.padded_vocab_size, cfg.vocab_size);
    const bool llama = cfg.llama_family();
    if (cfg.head_dim == 0 && cfg.channels % cfg.num_heads != 0)
        SOF_FAIL(Config,
                 "model.channels = %d is not divisible by model.num_heads = %d (the head size is "
                 "channels / num_heads%s)",
                 cfg.channels, cfg.num_heads, llama ? "; or set model.head_dim" : "");
    if (!llama) {
        if (cfg.num_kv_heads != 0 && cfg.num_kv_heads != cfg.num_heads)
            SOF_FAIL(Config, "model.num_kv_heads = %d: GPT-2 has no grouped-query attention",
                     cfg.num_kv_heads);
        if (cfg.head_dim != 0 && static_cast<double>(cfg.head_dim) * cfg.num_heads != cfg.channels)
            SOF_FAIL(Config, "model.head_dim = %d: GPT-2 heads are channels / num_heads = %d",
                     cfg.head_dim, cfg.channels / cfg.num_heads);
    } else {
        if (cfg.intermediate_size <= 0)
            SOF_FAIL(Config,
                     "model.intermediate_size must be set for model.type %s (the SwiGLU hidden "
                     "size, e.g. 14336 for Llama-3-8B)",
                     arch_name(cfg.arch));
        if (cfg.num_heads % cfg.kv_heads() != 0)
            SOF_FAIL(Config,
                     "model.num_heads = %d is not divisible by model.num_kv_heads = %d (each "
                     "key/value head serves num_heads / num_kv_heads query heads)",
                     cfg.num_heads, cfg.kv_heads());
        if (cfg.hdim() % 2 != 0)
            SOF_FAIL(Config,
                     "the head size %d must be even (rotary embeddings rotate pairs): check "
                     "model.head_dim, model.channels and model.num_heads",
                     cfg.hdim());
        if (!(cfg.norm_eps > 0.0f))
            SOF_FAIL(Config, "model.norm_eps = %g must be positive", cfg.norm_eps);
        if (!(cfg.rope_theta > 0.0))
            SOF_FAIL(Config, "model.rope_theta = %g must be positive", cfg.rope_theta);
        const RopeScaling& r = cfg.rope_scaling;
        if (r.type == RopeScalingType::Llama3 &&
            (!(r.factor > 0.0) || !(r.high_freq_factor > r.low_freq_factor) ||
             !(r.low_freq_factor > 0.0) || r.original_max_position <= 0))
            SOF_FAIL(Config,
                     "model.rope_scaling: factor = %g, low_freq_factor = %g, high_freq_factor = "
                     "%g, original_max_position_embeddings = %d; need factor > 0, "
                     "0 < low_freq_factor < high_freq_factor and a positive original length",
                     r.factor, r.low_freq_factor, r.high_freq_factor, r.original_max_position);
        if (r.type == RopeScalingType::Yarn &&
            (!(r.factor > 0.0) || !(r.beta_fast > 0.0) || !(r.beta_slow > 0.0) ||
             r.original_max_position <= 0 || !(r.attention_factor >= 0.0)))
            SOF_FAIL(Config,
                     "model.rope_scaling (yarn): factor = %g, beta_fast = %g, beta_slow = %g, "
                     "original_max_position_embeddings = %d, attention_factor = %g; need "
                     "positive factor, betas and original length, attention_factor >= 0",
                     r.factor, r.beta_fast, r.beta_slow, r.original_max_position,
                     r.attention_factor);
        if (cfg.sliding_window < 0)
            SOF_FAIL(Config, "model.sliding_window = %d must be >= 0 (0 = no window)",
                     cfg.sliding_window);
        std::vector<bool> types;
        if (!cfg.layer_types.empty() && !parse_layer_types(cfg.layer_types, &types))
            SOF_FAIL(Config,
                     "model.layer_types = \"%s\": expected a comma list of sliding and full (one "
                     "per layer, repeated over the layers), e.g. \"sliding,full\"",
                     cfg.layer_types.c_str());
        check_moe(cfg);
        for (const float* p : {&cfg.attn_dropout, &cfg.resid_dropout})
            if (!(*p >= 0.0f && *p < 1.0f))
                SOF_FAIL(Config, "model.%s = %g must be in [0, 1)",
                         p == &cfg.attn_dropout ? "attention_dropout" : "residual_dropout", *p);
    }
    if (sp > 1) { // Ulysses: every sequence-parallel rank gets whole heads
        if (cfg.num_heads % sp != 0)
            SOF_FAIL(Config,
                     "model.num_heads = %d is not divisible by parallel.sp = %d (Ulysses splits "
                     "the heads across the sequence-parallel group)",
                     cfg.num_heads, sp);
        if (llama && cfg.kv_heads() % sp != 0)
            SOF_FAIL(Config,
                     "model.num_kv_heads = %d is not divisible by parallel.sp = %d (Ulysses "
                     "splits the key/value heads over the sequence-parallel ranks)",
                     cfg.kv_heads(), sp);
        if (seq_len > 0) check_sequence_split(seq_len, sp);
    }
    // shapes are int and every tensor's numel a size_t: each matrix below 2^31 elements (in
    // double: ffn_dim() and q_dim() would overflow int for absurd sizes)
    const double big = 2147483647.0, C = cfg.channels;
    const double ffn = cfg.intermediate_size > 0 ? cfg.intermediate_size : 4.0 * C;
    const double hd = cfg.head_dim > 0 ? cfg.head_dim : C / cfg.num_heads;
    const double q = hd * cfg.num_heads;
    if (4.0 * C * C > big || ffn * C > big || q * C > big || q + 2.0 * q > big)
        SOF_FAIL(Config,
                 "model.channels = %d (intermediate %.0f, heads x head_dim %.0f) is too large: "
                 "every weight matrix must have fewer than 2^31 elements",
                 cfg.channels, ffn, q);
    const double Vp = cfg.padded_vocab_size, T = cfg.max_seq_len;
    if (Vp * C > big)
        SOF_FAIL(Config,
                 "model.padded_vocab_size = %d x model.channels = %d is too large: the embedding "
                 "must have fewer than 2^31 elements",
                 cfg.padded_vocab_size, cfg.channels);
    if (!llama && T * C > big)
        SOF_FAIL(Config,
                 "model.max_seq_len = %d x model.channels = %d is too large: the position "
                 "embedding must have fewer than 2^31 elements",
                 cfg.max_seq_len, cfg.channels);
    const double n = param_count(cfg);
    if (n > config::kMaxParams)
        SOF_FAIL(Config,
                 "the model has %.4g parameters (model.num_layers = %d, model.channels = %d), "
                 "more than the limit of %.4g (2^42): make it smaller",
                 n, cfg.num_layers, cfg.channels, config::kMaxParams);
}

ParamLayout make_layout(const ArchConfig& cfg) {
    validate(cfg);
    const BlockSpec spec = block_spec(cfg);
    ParamLayout lay;
    lay.cfg = cfg;
    const int L = cfg.num_layers;
    lay.tensors.reserve((spec.block.size() + 2) * static_cast<size_t>(L) + 4);
    lay.unit_begin.reserve(static_cast<size_t>(L) + 3);
    lay.unit_first_tensor.reserve(static_cast<size_t>(L) + 3);
    size_t off = 0;
    auto add = [&](const TensorSlot& s, int layer, int unit) {
        TensorInfo t;
        t.kind = s.kind;
        t.layer = layer;
        t.unit = unit;
        t.offset = off;
        t.numel = 1;
        for (int d : s.shape)
            t.numel *= static_cast<size_t>(d);
        t.shape = s.shape;
        t.decay = s.decay;
        t.init = s.init;
        auto named = [layer](const std::string& pattern) {
            return layer >= 0 ? core::strfmt(pattern.c_str(), layer) : pattern;
        };
        if (!s.hf.empty()) {
            t.name = named(s.hf);
            t.hf_name = s.hf_fused.empty() ? t.name : named(s.hf_fused);
        } else {
            t.name = layer >= 0 ? core::strfmt("h%d.%s", layer, tensor_kind_name(s.kind))
                                : std::string(tensor_kind_name(s.kind));
        }
        off += t.numel;
        lay.tensors.push_back(std::move(t));
    };
    auto begin_unit = [&]() {
        lay.unit_begin.push_back(off);
        lay.unit_first_tensor.push_back(lay.tensors.size());
    };
    begin_unit();
    for (const TensorSlot& s : spec.embed)
        add(s, -1, 0);
    for (int l = 0; l < L; l++) {
        begin_unit();
        for (const TensorSlot& s : spec.slots(l))
            add(s, l, 1 + l);
    }
    begin_unit();
    for (const TensorSlot& s : spec.head)
        add(s, -1, L + 1);
    begin_unit();
    lay.num_params = off;
    return lay;
}

size_t ParamLayout::offset_of(TensorKind kind, int layer) const {
    const int L = cfg.num_layers;
    int unit = 1 + layer;
    if (kind == TensorKind::Wte || kind == TensorKind::Wpe)
        unit = 0;
    else if (kind == TensorKind::Lnfw || kind == TensorKind::Lnfb || kind == TensorKind::LmHead)
        unit = L + 1;
    else if (layer < 0 || layer >= L)
        SOF_FAIL(Internal, "offset_of(%s, layer %d): layer out of range [0, %d)",
                 tensor_kind_name(kind), layer, L);
    const size_t u = static_cast<size_t>(unit);
    for (size_t i = unit_first_tensor[u]; i < unit_first_tensor[u + 1]; i++)
        if (tensors[i].kind == kind) return tensors[i].offset;
    SOF_FAIL(Internal, "offset_of(%s): model %s has no such tensor", tensor_kind_name(kind),
             arch_name(cfg.arch));
}

bool ParamLayout::has(TensorKind kind) const {
    for (const TensorInfo& t : tensors)
        if (t.kind == kind) return true;
    return false;
}

} // namespace sof::model
