// BlockSpec and UnitOffsets from an ArchConfig and its layout: the only place that maps an
// architecture's name to its block's parts. RoPE frequencies (Hugging Face's formulas) live here.
#include "model/block_spec.h"

#include <cmath>

namespace sof::model {

BlockSpec block_spec(const ArchConfig& cfg) {
    BlockSpec s;
    const bool gpt2 = cfg.arch == Arch::Gpt2;
    s.norm = gpt2 ? NormKind::LayerNorm : NormKind::RmsNorm;
    s.pos = gpt2 ? PosKind::Learned : PosKind::Rope;
    s.mlp = gpt2 ? MlpKind::Gelu : MlpKind::SwiGlu;
    s.qkv_bias = gpt2 || cfg.qkv_bias;
    s.proj_bias = gpt2;
    s.mlp_bias = gpt2;
    s.qk_norm = !gpt2 && cfg.qk_norm;
    s.tied_head = gpt2 || cfg.tie_embeddings;
    s.norm_eps = gpt2 ? 1e-5f : cfg.norm_eps;
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
    return s;
}

UnitOffsets unit_offsets(const ParamLayout& layout) {
    const ArchConfig& cfg = layout.cfg;
    const int L = cfg.num_layers;
    UnitOffsets o;
    o.wte = layout.offset_of(TensorKind::Wte, -1);
    const size_t u1 = layout.unit_begin[1];
    const size_t uf = layout.unit_begin[static_cast<size_t>(L) + 1];
    auto blk = [&](TensorKind k) { return layout.offset_of(k, 0) - u1; };
    o.lnfw = layout.offset_of(TensorKind::Lnfw, -1) - uf;
    o.ln1w = blk(TensorKind::Ln1w);
    o.wo = blk(TensorKind::Attprojw);
    o.ln2w = blk(TensorKind::Ln2w);
    if (cfg.arch == Arch::Gpt2) {
        o.wpe = layout.offset_of(TensorKind::Wpe, -1);
        o.ln1b = blk(TensorKind::Ln1b);
        o.wqkv = blk(TensorKind::Qkvw);
        o.bqkv = blk(TensorKind::Qkvb);
        o.bo = blk(TensorKind::Attprojb);
        o.ln2b = blk(TensorKind::Ln2b);
        o.wfc = blk(TensorKind::Fcw);
        o.bfc = blk(TensorKind::Fcb);
        o.wproj = blk(TensorKind::Fcprojw);
        o.bproj = blk(TensorKind::Fcprojb);
        o.lnfb = layout.offset_of(TensorKind::Lnfb, -1) - uf;
        return o;
    }
    o.wqkv = blk(TensorKind::Wq); // q, k, v adjacent: one (W, C) matrix
    if (cfg.qkv_bias) o.bqkv = blk(TensorKind::Bq);
    if (cfg.qk_norm) {
        o.qnorm = blk(TensorKind::QNorm);
        o.knorm = blk(TensorKind::KNorm);
    }
    o.wfc = blk(TensorKind::Wgate); // gate, up adjacent: one (2I, C) matrix
    o.wproj = blk(TensorKind::Wdown);
    if (!cfg.tie_embeddings) o.head = layout.offset_of(TensorKind::LmHead, -1) - uf;
    return o;
}

std::vector<float> rope_inv_freq(const ArchConfig& cfg) {
    const int hd = cfg.hdim(), half = hd / 2;
    std::vector<float> f(static_cast<size_t>(half));
    const RopeScaling& r = cfg.rope_scaling;
    for (int i = 0; i < half; i++) {
        double v = 1.0 / std::pow(cfg.rope_theta, (2.0 * i) / hd);
        if (r.type == RopeScalingType::Llama3) {
            const double pi = 3.14159265358979323846;
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
        }
        f[static_cast<size_t>(i)] = static_cast<float>(v);
    }
    return f;
}

} // namespace sof::model
