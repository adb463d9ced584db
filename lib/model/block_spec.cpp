// The block description (block_spec.h) from an ArchConfig and the architecture table: the only
// place that turns features into tensors. Also its Hugging Face tensor map, RoPE frequencies
// (Hugging Face's formulas) and the attention work of a window.
#include "model/block_spec.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/strfmt.h"

namespace sof::model {

namespace {

// The tensor table of every unit, feature by feature, in flat-buffer order. The order of the
// features that GPT-2, Llama, Qwen2 and Qwen3 have is theirs since the first layouts
// (checkpoints and ZeRO-3 shard layouts depend on it); a new feature goes where it reads.
void add_slots(const ArchInfo& a, BlockSpec* s) {
    const bool gpt2 = a.gpt2;
    const int C = s->C, Q = s->Q, KV = s->KV, I = s->I, hd = s->hd;
    auto slot = [gpt2](std::vector<TensorSlot>& unit, TensorKind k, std::vector<int> shape,
                       Init init, bool decay, const char* hf, const char* fused = nullptr) {
        unit.push_back({k, std::move(shape), init, decay, gpt2 ? std::string() : std::string(hf),
                        gpt2 || !fused ? std::string() : std::string(fused)});
    };
    auto& e = s->embed;
    auto& b = s->block;
    auto& h = s->head;
    const Init Norm = Init::Normal, One = Init::One, Zero = Init::Zero;
    slot(e, TensorKind::Wte, {s->Vp, C}, Init::Embedding, true, "model.embed_tokens.weight");
    if (s->pos == PosKind::Learned) slot(e, TensorKind::Wpe, {s->max_T, C}, Norm, true, "");

    const std::string L = "model.layers.%d.";
    auto n = [&L](const char* rest) { return L + rest; }; // a block tensor's HF name
    const std::string qkv_w = n("self_attn.qkv_proj.weight"), qkv_b = n("self_attn.qkv_proj.bias");
    const char* fqw = a.fused_qkv ? qkv_w.c_str() : nullptr;
    const char* fqb = a.fused_qkv ? qkv_b.c_str() : nullptr;
    const std::string gu_w = n("mlp.gate_up_proj.weight"), gu_b = n("mlp.gate_up_proj.bias");
    const char* fgw = a.fused_gate_up ? gu_w.c_str() : nullptr;
    const char* fgb = a.fused_gate_up ? gu_b.c_str() : nullptr;
    const bool ln = s->norm == NormKind::LayerNorm;

    slot(b, TensorKind::Ln1w, {C}, One, false, n("input_layernorm.weight").c_str());
    if (ln) slot(b, TensorKind::Ln1b, {C}, Zero, false, "");
    if (gpt2) {
        slot(b, TensorKind::Qkvw, {s->W, C}, Norm, true, "");
        if (s->qkv_bias) slot(b, TensorKind::Qkvb, {s->W}, Zero, false, "");
    } else {
        slot(b, TensorKind::Wq, {Q, C}, Norm, true, n("self_attn.q_proj.weight").c_str(), fqw);
        slot(b, TensorKind::Wk, {KV, C}, Norm, true, n("self_attn.k_proj.weight").c_str(), fqw);
        slot(b, TensorKind::Wv, {KV, C}, Norm, true, n("self_attn.v_proj.weight").c_str(), fqw);
        if (s->qkv_bias) {
            slot(b, TensorKind::Bq, {Q}, Zero, false, n("self_attn.q_proj.bias").c_str(), fqb);
            slot(b, TensorKind::Bk, {KV}, Zero, false, n("self_attn.k_proj.bias").c_str(), fqb);
            slot(b, TensorKind::Bv, {KV}, Zero, false, n("self_attn.v_proj.bias").c_str(), fqb);
        }
    }
    if (s->qk_norm) {
        slot(b, TensorKind::QNorm, {hd}, One, false, n("self_attn.q_norm.weight").c_str());
        slot(b, TensorKind::KNorm, {hd}, One, false, n("self_attn.k_norm.weight").c_str());
    }
    // transformers' Trainer decays the sinks (its rule spares only biases and norm weights)
    if (s->sinks) slot(b, TensorKind::Sinks, {s->NH}, Norm, true, n("self_attn.sinks").c_str());
    slot(b, TensorKind::Attprojw, {C, Q}, Init::Residual, true,
         n("self_attn.o_proj.weight").c_str());
    if (s->o_bias)
        slot(b, TensorKind::Attprojb, {C}, Zero, false, n("self_attn.o_proj.bias").c_str());
    slot(b, TensorKind::Ln2w, {C}, One, false, n("post_attention_layernorm.weight").c_str());
    if (ln) slot(b, TensorKind::Ln2b, {C}, Zero, false, "");
    if (s->mlp == MlpKind::Gelu) {
        slot(b, TensorKind::Fcw, {I, C}, Norm, true, "");
        if (s->mlp_bias) slot(b, TensorKind::Fcb, {I}, Zero, false, "");
        slot(b, TensorKind::Fcprojw, {C, I}, Init::Residual, true, "");
        if (s->mlp_bias) slot(b, TensorKind::Fcprojb, {C}, Zero, false, "");
    } else {
        slot(b, TensorKind::Wgate, {I, C}, Norm, true, n("mlp.gate_proj.weight").c_str(), fgw);
        slot(b, TensorKind::Wup, {I, C}, Norm, true, n("mlp.up_proj.weight").c_str(), fgw);
        if (s->mlp_bias) {
            slot(b, TensorKind::Bgate, {I}, Zero, false, n("mlp.gate_proj.bias").c_str(), fgb);
            slot(b, TensorKind::Bup, {I}, Zero, false, n("mlp.up_proj.bias").c_str(), fgb);
        }
        slot(b, TensorKind::Wdown, {C, I}, Init::Residual, true, n("mlp.down_proj.weight").c_str());
        if (s->mlp_bias)
            slot(b, TensorKind::Bdown, {C}, Zero, false, n("mlp.down_proj.bias").c_str());
    }

    if (s->E > 0) { // a sparse block: the attention part of the dense block, router, experts
        size_t mlp0 = 0;
        while (mlp0 < b.size() && b[mlp0].kind != TensorKind::Wgate)
            mlp0++;
        s->block_moe.assign(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(mlp0));
        auto& m = s->block_moe;
        const std::string blk = std::string(a.moe->block) + ".";
        const int E = s->E, IE = s->IE;
        slot(m, TensorKind::Router, {E, C}, Norm, true,
             n((blk + a.moe->router + ".weight").c_str()).c_str());
        if (s->moe_bias)
            slot(m, TensorKind::RouterBias, {E}, Zero, false,
                 n((blk + a.moe->router + ".bias").c_str()).c_str());
        // transformers 5's fused names; hf_tensors splits them into the hub's per-expert ones
        slot(m, TensorKind::ExpGateUp, {E, 2 * IE, C}, Norm, true,
             n("mlp.experts.gate_up_proj").c_str());
        if (s->moe_bias)
            slot(m, TensorKind::ExpGateUpBias, {E, 2 * IE}, Zero, false,
                 n("mlp.experts.gate_up_proj_bias").c_str());
        slot(m, TensorKind::ExpDown, {E, C, IE}, Init::Residual, true,
             n("mlp.experts.down_proj").c_str());
        if (s->moe_bias)
            slot(m, TensorKind::ExpDownBias, {E, C}, Zero, false,
                 n("mlp.experts.down_proj_bias").c_str());
    }

    slot(h, TensorKind::Lnfw, {C}, One, false, "model.norm.weight");
    if (ln) slot(h, TensorKind::Lnfb, {C}, Zero, false, "");
    if (!s->tied_head)
        slot(h, TensorKind::LmHead, {s->Vp, C}, Init::Embedding, true, "lm_head.weight");
}

// Where a kind's offset goes in UnitOffsets (the first of adjacent fused kinds: q of q|k|v).
size_t* offset_field(UnitOffsets& o, TensorKind k) {
    switch (k) {
    case TensorKind::Wte:
        return &o.wte;
    case TensorKind::Wpe:
        return &o.wpe;
    case TensorKind::Ln1w:
        return &o.ln1w;
    case TensorKind::Ln1b:
        return &o.ln1b;
    case TensorKind::Qkvw:
    case TensorKind::Wq:
        return &o.wqkv;
    case TensorKind::Qkvb:
    case TensorKind::Bq:
        return &o.bqkv;
    case TensorKind::QNorm:
        return &o.qnorm;
    case TensorKind::KNorm:
        return &o.knorm;
    case TensorKind::Sinks:
        return &o.sinks;
    case TensorKind::Attprojw:
        return &o.wo;
    case TensorKind::Attprojb:
        return &o.bo;
    case TensorKind::Ln2w:
        return &o.ln2w;
    case TensorKind::Ln2b:
        return &o.ln2b;
    case TensorKind::Fcw:
    case TensorKind::Wgate:
        return &o.wfc;
    case TensorKind::Fcb:
    case TensorKind::Bgate:
        return &o.bfc;
    case TensorKind::Fcprojw:
    case TensorKind::Wdown:
        return &o.wproj;
    case TensorKind::Fcprojb:
    case TensorKind::Bdown:
        return &o.bproj;
    case TensorKind::Lnfw:
        return &o.lnfw;
    case TensorKind::Lnfb:
        return &o.lnfb;
    case TensorKind::LmHead:
        return &o.head;
    case TensorKind::Router:
        return &o.router;
    case TensorKind::ExpGateUp:
        return &o.exp_gate_up;
    case TensorKind::ExpDown:
        return &o.exp_down;
    case TensorKind::RouterBias:
        return &o.router_bias;
    case TensorKind::ExpGateUpBias:
        return &o.exp_gate_up_bias;
    case TensorKind::ExpDownBias:
        return &o.exp_down_bias;
    default: // the rest follow the first of their fused group (k, v; up)
        return nullptr;
    }
}

} // namespace

BlockSpec block_spec(const ArchConfig& cfg) {
    const ArchInfo& a = arch_info(cfg.arch);
    BlockSpec s;
    const bool gpt2 = a.gpt2;
    s.norm = gpt2 ? NormKind::LayerNorm : NormKind::RmsNorm;
    s.pos = gpt2 ? PosKind::Learned : PosKind::Rope;
    s.mlp = gpt2 ? MlpKind::Gelu : MlpKind::SwiGlu;
    s.qkv_bias = gpt2 || cfg.qkv_bias;
    s.o_bias = gpt2 || cfg.o_bias;
    s.mlp_bias = gpt2 || cfg.mlp_bias;
    s.qk_norm = !gpt2 && cfg.qk_norm;
    s.sinks = !gpt2 && cfg.attn_sinks;
    s.tied_head = gpt2 || cfg.tie_embeddings;
    s.norm_eps = gpt2 ? 1e-5f : cfg.norm_eps;
    s.attn_dropout = cfg.attn_dropout;
    s.resid_dropout = cfg.resid_dropout;
    s.L = cfg.num_layers;
    s.C = cfg.channels;
    s.NH = cfg.num_heads;
    s.NKV = cfg.kv_heads();
    s.hd = cfg.hdim();
    s.Q = cfg.q_dim();
    s.KV = cfg.kv_dim();
    s.W = s.Q + 2 * s.KV;
    s.I = cfg.ffn_dim();
    s.V = cfg.vocab_size;
    s.Vp = cfg.padded_vocab_size;
    s.max_T = cfg.max_seq_len;
    if (!gpt2 && cfg.moe()) {
        s.E = cfg.num_experts;
        s.K = cfg.experts_per_tok;
        s.IE = cfg.moe_intermediate_size;
        s.renorm = cfg.norm_topk_prob;
        const MoeNames& mn = *a.moe;
        s.moe_bias = mn.biases;
        s.topk_softmax = mn.topk_softmax;
        s.moe_clamp = mn.clamped;
        s.sparse.resize(static_cast<size_t>(std::max(0, s.L)));
        for (int l = 0; l < s.L; l++)
            s.sparse[static_cast<size_t>(l)] = cfg.sparse_layer(l) ? 1 : 0;
    }
    s.window.resize(static_cast<size_t>(std::max(0, s.L)));
    for (int l = 0; l < s.L; l++)
        s.window[static_cast<size_t>(l)] = gpt2 ? 0 : cfg.window(l);
    add_slots(a, &s);
    return s;
}

UnitOffsets unit_offsets(const BlockSpec& s) {
    UnitOffsets o;
    for (const std::vector<TensorSlot>* unit : {&s.embed, &s.block, &s.block_moe, &s.head}) {
        size_t off = 0;
        for (const TensorSlot& t : *unit) {
            if (size_t* f = offset_field(o, t.kind)) *f = off;
            size_t n = 1;
            for (int d : t.shape)
                n *= static_cast<size_t>(d);
            off += n;
        }
    }
    return o;
}

namespace {

// The hub's per-expert tensors of a sparse block's gate_up (kind ExpGateUp: each expert's gate
// and up rows) or down (ExpDown), flat ranges of the (E, ...) tensor i.
void add_expert_tensors(const ParamLayout& layout, size_t i, std::vector<HfTensor>* out) {
    const TensorInfo& t = layout.tensors[i];
    const MoeNames& nm = *arch_info(layout.cfg.arch).moe;
    const int E = t.shape[0], R = t.shape[1], X = t.shape[2]; // (E, R, X)
    const bool gu = t.kind == TensorKind::ExpGateUp;
    const std::string pre = core::strfmt("model.layers.%d.%s.experts.", t.layer, nm.block);
    for (int e = 0; e < E; e++) {
        const int parts = gu ? 2 : 1, rows = R / parts;
        for (int p = 0; p < parts; p++) {
            HfTensor h;
            const char* w = gu ? (p == 0 ? nm.gate : nm.up) : nm.down;
            h.name = pre + std::to_string(e) + "." + w + ".weight";
            h.shape = {rows, X};
            h.numel = h.flat_numel = static_cast<size_t>(rows) * static_cast<size_t>(X);
            h.offset = t.offset + (static_cast<size_t>(e) * parts + p) * h.numel;
            h.unit = t.unit;
            h.first = i;
            h.count = 1;
            out->push_back(std::move(h));
        }
    }
}

} // namespace

std::vector<HfTensor> hf_tensors(const ParamLayout& layout, bool fused_experts) {
    std::vector<HfTensor> out;
    const ArchConfig& c = layout.cfg;
    for (size_t i = 0; i < layout.tensors.size(); i++) {
        const TensorInfo& t = layout.tensors[i];
        const bool experts = t.kind == TensorKind::ExpGateUp || t.kind == TensorKind::ExpDown;
        const bool transposed = experts && arch_info(c.arch).moe->transposed;
        if (!fused_experts && experts && !transposed) {
            add_expert_tensors(layout, i, &out);
            continue;
        }
        if (t.hf_name.empty())
            SOF_FAIL(Internal, "hf_tensors: %s has no Hugging Face name (%s)", t.name.c_str(),
                     arch_name(c.arch));
        // transformers 5's fused layout names the MoE block "mlp" (mixtral's block_sparse_moe)
        const std::string name = fused_experts && t.kind == TensorKind::Router
                                     ? core::strfmt("model.layers.%d.mlp.%s.weight", t.layer,
                                                    arch_info(c.arch).moe->router)
                                     : t.hf_name;
        if (!out.empty() && out.back().name == name && out.back().unit == t.unit) {
            HfTensor& f = out.back(); // the next rows of a fused tensor
            f.shape[0] += t.shape[0];
            f.numel += t.numel;
            f.flat_numel += t.numel;
            f.count++;
            continue;
        }
        HfTensor h;
        h.name = name;
        h.shape.assign(t.shape.begin(), t.shape.end());
        h.offset = t.offset;
        h.flat_numel = t.numel;
        h.numel = t.numel;
        h.unit = t.unit;
        h.first = i;
        h.count = 1;
        if (transposed) { // (E, R, X) stored as (E, X, R)
            std::swap(h.shape[1], h.shape[2]);
            h.transposed = true;
        }
        if (t.kind == TensorKind::Wte || t.kind == TensorKind::LmHead) { // rows V..Vp-1: padding
            h.shape[0] = c.vocab_size;
            h.numel = static_cast<size_t>(c.vocab_size) * static_cast<size_t>(t.shape[1]);
        }
        out.push_back(std::move(h));
    }
    return out;
}

std::vector<float> rope_inv_freq(const ArchConfig& cfg) {
    const int hd = cfg.hdim(), half = hd / 2;
    std::vector<float> f(static_cast<size_t>(half));
    const RopeScaling& r = cfg.rope_scaling;
    const double pi = 3.14159265358979323846, base = cfg.rope_theta;
    // YaRN's ramp over the frequency index: extrapolated (plain) frequencies below `low`,
    // interpolated (divided by factor) above `high`, blended linearly between
    double low = 0.0, high = 0.0;
    if (r.type == RopeScalingType::Yarn) {
        auto dim_of = [&](double rotations) { // the index that turns `rotations` times
            return hd * std::log(r.original_max_position / (rotations * 2.0 * pi)) /
                   (2.0 * std::log(base));
        };
        low = dim_of(r.beta_fast);
        high = dim_of(r.beta_slow);
        if (r.truncate) {
            low = std::floor(low);
            high = std::ceil(high);
        }
        low = std::max(low, 0.0);
        high = std::min(high, static_cast<double>(hd - 1));
        if (low == high) high += 0.001; // as transformers: no division by zero
    }
    for (int i = 0; i < half; i++) {
        double v = 1.0 / std::pow(base, (2.0 * i) / hd);
        if (r.type == RopeScalingType::Llama3) {
            const double wavelen = 2.0 * pi / v;
            const double low_wavelen = r.original_max_position / r.low_freq_factor;
            const double high_wavelen = r.original_max_position / r.high_freq_factor;
            if (wavelen > low_wavelen) {
                v = v / r.factor;
            } else if (wavelen >= high_wavelen) {
                const double smooth = (r.original_max_position / wavelen - r.low_freq_factor) /
                                      (r.high_freq_factor - r.low_freq_factor);
                v = (1.0 - smooth) * v / r.factor + smooth * v;
            }
        } else if (r.type == RopeScalingType::Yarn) {
            const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
            const double extrapolation = 1.0 - ramp; // weight of the plain frequency
            v = (v / r.factor) * (1.0 - extrapolation) + v * extrapolation;
        }
        f[static_cast<size_t>(i)] = static_cast<float>(v);
    }
    return f;
}

float rope_attention_scale(const ArchConfig& cfg) {
    const RopeScaling& r = cfg.rope_scaling;
    if (r.type != RopeScalingType::Yarn) return 1.0f;
    if (r.attention_factor > 0.0) return static_cast<float>(r.attention_factor);
    return r.factor <= 1.0 ? 1.0f : static_cast<float>(0.1 * std::log(r.factor) + 1.0);
}

double attention_pairs(double T, int w) {
    if (w <= 0 || w >= T) return T * (T + 1) / 2;
    const double W = w;
    return W * (W + 1) / 2 + (T - W) * W; // the first W queries see all before them
}

double attention_keys(double T, int w) {
    return w <= 0 ? T : std::min(T, static_cast<double>(w));
}

} // namespace sof::model
