// Parameter layouts of GPT-2 and the LLaMA family: the tensor table over one flat fp32 buffer, unit
// boundaries, validation. Unit-major order: unit 0 = embeddings, unit 1+l = block l, unit L+1 =
// final norm (+ the untied LM head).
#include "model/layout.h"

#include "core/error.h"
#include "core/strfmt.h"

namespace sof::model {

const char* arch_name(Arch a) {
    switch (a) {
    case Arch::Gpt2:
        return "gpt2";
    case Arch::Llama:
        return "llama";
    case Arch::Qwen2:
        return "qwen2";
    case Arch::Qwen3:
        return "qwen3";
    }
    return "?";
}

bool parse_arch(const std::string& name, Arch* out) {
    for (Arch a : {Arch::Gpt2, Arch::Llama, Arch::Qwen2, Arch::Qwen3}) {
        if (name == arch_name(a)) {
            *out = a;
            return true;
        }
    }
    return false;
}

void apply_arch_defaults(ArchConfig* cfg) {
    switch (cfg->arch) {
    case Arch::Gpt2:
        cfg->tie_embeddings = true;
        cfg->qkv_bias = true;
        cfg->qk_norm = false;
        break;
    case Arch::Llama:
        cfg->qk_norm = false;
        break;
    case Arch::Qwen2:
        cfg->qkv_bias = true;
        cfg->qk_norm = false;
        break;
    case Arch::Qwen3:
        cfg->qk_norm = true;
        break;
    }
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
    }
    return "?";
}

namespace {

struct TensorSpec {
    TensorKind kind;
    std::vector<int> shape;
    const char* hf; // Hugging Face name (LLaMA family; "%d" = layer), null for GPT-2
};

std::vector<TensorSpec> gpt2_block_specs(const ArchConfig& cfg) {
    const int C = cfg.channels;
    return {
        {TensorKind::Ln1w, {C}, nullptr},           {TensorKind::Ln1b, {C}, nullptr},
        {TensorKind::Qkvw, {3 * C, C}, nullptr},    {TensorKind::Qkvb, {3 * C}, nullptr},
        {TensorKind::Attprojw, {C, C}, nullptr},    {TensorKind::Attprojb, {C}, nullptr},
        {TensorKind::Ln2w, {C}, nullptr},           {TensorKind::Ln2b, {C}, nullptr},
        {TensorKind::Fcw, {4 * C, C}, nullptr},     {TensorKind::Fcb, {4 * C}, nullptr},
        {TensorKind::Fcprojw, {C, 4 * C}, nullptr}, {TensorKind::Fcprojb, {C}, nullptr},
    };
}

// q, k, v weights adjacent (one fused matrix), then their biases adjacent, gate and up adjacent.
std::vector<TensorSpec> llama_block_specs(const ArchConfig& cfg) {
    const int C = cfg.channels, Q = cfg.q_dim(), KV = cfg.kv_dim(), I = cfg.ffn_dim();
    std::vector<TensorSpec> v = {
        {TensorKind::Ln1w, {C}, "model.layers.%d.input_layernorm.weight"},
        {TensorKind::Wq, {Q, C}, "model.layers.%d.self_attn.q_proj.weight"},
        {TensorKind::Wk, {KV, C}, "model.layers.%d.self_attn.k_proj.weight"},
        {TensorKind::Wv, {KV, C}, "model.layers.%d.self_attn.v_proj.weight"},
    };
    if (cfg.qkv_bias) {
        v.push_back({TensorKind::Bq, {Q}, "model.layers.%d.self_attn.q_proj.bias"});
        v.push_back({TensorKind::Bk, {KV}, "model.layers.%d.self_attn.k_proj.bias"});
        v.push_back({TensorKind::Bv, {KV}, "model.layers.%d.self_attn.v_proj.bias"});
    }
    if (cfg.qk_norm) {
        v.push_back({TensorKind::QNorm, {cfg.hdim()}, "model.layers.%d.self_attn.q_norm.weight"});
        v.push_back({TensorKind::KNorm, {cfg.hdim()}, "model.layers.%d.self_attn.k_norm.weight"});
    }
    v.push_back({TensorKind::Attprojw, {C, Q}, "model.layers.%d.self_attn.o_proj.weight"});
    v.push_back({TensorKind::Ln2w, {C}, "model.layers.%d.post_attention_layernorm.weight"});
    v.push_back({TensorKind::Wgate, {I, C}, "model.layers.%d.mlp.gate_proj.weight"});
    v.push_back({TensorKind::Wup, {I, C}, "model.layers.%d.mlp.up_proj.weight"});
    v.push_back({TensorKind::Wdown, {C, I}, "model.layers.%d.mlp.down_proj.weight"});
    return v;
}

// Unit 0 (embeddings) and the last unit (final norm, the untied LM head).
std::vector<TensorSpec> first_unit_specs(const ArchConfig& cfg) {
    const int C = cfg.channels;
    if (cfg.llama_family())
        return {{TensorKind::Wte, {cfg.padded_vocab_size, C}, "model.embed_tokens.weight"}};
    return {{TensorKind::Wte, {cfg.padded_vocab_size, C}, nullptr},
            {TensorKind::Wpe, {cfg.max_seq_len, C}, nullptr}};
}

std::vector<TensorSpec> last_unit_specs(const ArchConfig& cfg) {
    const int C = cfg.channels;
    if (!cfg.llama_family())
        return {{TensorKind::Lnfw, {C}, nullptr}, {TensorKind::Lnfb, {C}, nullptr}};
    std::vector<TensorSpec> v = {{TensorKind::Lnfw, {C}, "model.norm.weight"}};
    if (!cfg.tie_embeddings)
        v.push_back({TensorKind::LmHead, {cfg.padded_vocab_size, C}, "lm_head.weight"});
    return v;
}

double spec_numel(const std::vector<TensorSpec>& specs) {
    double n = 0;
    for (const TensorSpec& s : specs) {
        double k = 1;
        for (int d : s.shape)
            k *= d;
        n += k;
    }
    return n;
}

} // namespace

double param_count(const ArchConfig& cfg) {
    const std::vector<TensorSpec> blk =
        cfg.llama_family() ? llama_block_specs(cfg) : gpt2_block_specs(cfg);
    return spec_numel(first_unit_specs(cfg)) + cfg.num_layers * spec_numel(blk) +
           spec_numel(last_unit_specs(cfg));
}

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
    ParamLayout lay;
    lay.cfg = cfg;
    const int L = cfg.num_layers;
    const std::vector<TensorSpec> blk =
        cfg.llama_family() ? llama_block_specs(cfg) : gpt2_block_specs(cfg);
    lay.tensors.reserve(blk.size() * static_cast<size_t>(L) + 4);
    lay.unit_begin.reserve(static_cast<size_t>(L) + 3);
    lay.unit_first_tensor.reserve(static_cast<size_t>(L) + 3);
    size_t off = 0;
    auto add = [&](const TensorSpec& s, int layer, int unit) {
        TensorInfo t;
        t.kind = s.kind;
        t.layer = layer;
        t.unit = unit;
        t.offset = off;
        t.numel = 1;
        for (int d : s.shape)
            t.numel *= static_cast<size_t>(d);
        t.shape = s.shape;
        t.decay = s.shape.size() == 2; // matrices and embeddings
        if (s.hf)
            t.name = layer >= 0 ? core::strfmt(s.hf, layer) : std::string(s.hf);
        else
            t.name = layer >= 0 ? core::strfmt("h%d.%s", layer, tensor_kind_name(s.kind))
                                : std::string(tensor_kind_name(s.kind));
        off += t.numel;
        lay.tensors.push_back(std::move(t));
    };
    auto begin_unit = [&]() {
        lay.unit_begin.push_back(off);
        lay.unit_first_tensor.push_back(lay.tensors.size());
    };
    begin_unit();
    for (const TensorSpec& s : first_unit_specs(cfg))
        add(s, -1, 0);
    for (int l = 0; l < L; l++) {
        begin_unit();
        for (const TensorSpec& s : blk)
            add(s, l, 1 + l);
    }
    begin_unit();
    for (const TensorSpec& s : last_unit_specs(cfg))
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
