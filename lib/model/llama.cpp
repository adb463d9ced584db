// LLaMA-family forward/backward on the CPU: activation buffers, the per-unit weight/grad flow,
// recompute and the Ulysses exchange. Kernels: kernels_cpu.cpp (matmul, attention), kernels_llama.
#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/kernels_cpu.h"
#include "model/kernels_llama.h"
#include "model/unit_loop.h"

namespace sof::model {

namespace {

// Activations of one block (sized for max_B*max_T positions, used compactly for B*T). W = NH*hd +
// 2*NKV*hd is the fused q|k|v row, Q = NH*hd, KV = NKV*hd, P the sequence-parallel degree.
struct BlockActs {
    std::vector<float> ln1;      // (B,T,C)
    std::vector<float> ln1_rstd; // (B,T)
    std::vector<float> qkv_raw;  // (B,T,W) projections before qk-norm (qk_norm only)
    std::vector<float> q_rstd;   // (B,T,NH) qk_norm only
    std::vector<float> k_rstd;   // (B,T,NKV) qk_norm only
    std::vector<float> qkv;      // (B,T,W) after qk-norm and RoPE: what attention reads
    std::vector<float> att;      // (B,NH/P,P*T,P*T)
    std::vector<float> qh;       // (B,P*T,Q/P) Ulysses: every token of this rank's query heads
    std::vector<float> kvh;      // (B,P*T,2,KV/P) Ulysses: every token of this rank's kv heads
    std::vector<float> attyh;    // (B,P*T,Q/P) Ulysses: attention output of this rank's heads
    std::vector<float> atty;     // (B,T,Q)
    std::vector<float> res2;     // (B,T,C) residual after attention
    std::vector<float> ln2;      // (B,T,C)
    std::vector<float> ln2_rstd; // (B,T)
    std::vector<float> gu;       // (B,T,2I) [gate | up]
    std::vector<float> h;        // (B,T,I) silu(gate) * up
};

// Offsets of a block's tensors relative to the start of its unit (the same for every block).
struct BlockOffsets {
    size_t ln1w, wqkv, bqkv, qnorm, knorm, wo, ln2w, wgu, wdown;
};

} // namespace

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

struct Llama::Impl {
    ArchConfig cfg;
    ModelOptions opts;
    int max_B = 0, max_T = 0;
    int B = 0, T = 0;
    int P = 1, sp_index = 0;
    SeqExchange* seq = nullptr;
    bool have_targets = false;
    int scratch_layer = -1; // recompute: block whose activations are in acts[0] now (-1: none)
    int C = 0, NH = 0, NKV = 0, hd = 0, Q = 0, KV = 0, W = 0, I = 0;

    BlockOffsets bo{};
    size_t off_wte = 0;          // relative to unit 0
    size_t off_norm = 0;         // relative to unit L+1
    size_t off_head = 0;         // relative to unit L+1 (untied only)
    std::vector<float> rope_cos; // (P*max_T, hd/2)
    std::vector<float> rope_sin; // (P*max_T, hd/2)

    std::vector<int> inputs;     // (B,T)
    std::vector<int> targets;    // (B,T)
    std::vector<float> res;      // (L+1, B, T, C)
    std::vector<BlockActs> acts; // L sets, or 1 with recompute
    std::vector<float> lnf;      // (B,T,C)
    std::vector<float> lnf_rstd; // (B,T)
    std::vector<float> logits;   // (B,T,Vp); holds dlogits after backward
    std::vector<float> probs;    // (B,T,Vp)
    std::vector<float> losses;   // (B,T)
    // backward scratch
    std::vector<float> dres;   // (B,T,C)
    std::vector<float> dln;    // (B,T,C)
    std::vector<float> datty;  // (B,T,Q)
    std::vector<float> dqkv;   // (B,T,W)
    std::vector<float> dgu;    // (B,T,2I)
    std::vector<float> dh;     // (B,T,I)
    std::vector<float> qloc;   // (B,T,Q) Ulysses staging (forward q; backward dq)
    std::vector<float> kvloc;  // (B,T,2KV) Ulysses staging
    std::vector<float> dattyh; // (B,P*T,Q/P) Ulysses only
    std::vector<float> dqh;    // (B,P*T,Q/P) Ulysses only
    std::vector<float> dkvh;   // (B,P*T,2,KV/P) Ulysses only

    void allocate(BlockActs& a, size_t BT) const;
    float* res_at(int l) { return res.data() + static_cast<size_t>(l) * max_B * max_T * C; }
    BlockActs& acts_of(int l) { return acts[opts.recompute ? 0 : static_cast<size_t>(l)]; }
    cpu::AttnView token_view(const float* qkv) const;
    cpu::AttnView head_view(const float* q, const float* kv) const;
    void attention_fwd(BlockActs& a);
    void attention_bwd(BlockActs& a);
    void block_forward(const float* p, BlockActs& a, const float* in, float* out, bool output);
    void block_backward(const float* p, float* g, BlockActs& a, const float* in);
};

void Llama::Impl::allocate(BlockActs& a, size_t BT) const {
    const size_t Pz = static_cast<size_t>(P);
    a.ln1.resize(BT * C);
    a.ln1_rstd.resize(BT);
    if (cfg.qk_norm) {
        a.qkv_raw.resize(BT * W);
        a.q_rstd.resize(BT * NH);
        a.k_rstd.resize(BT * NKV);
    }
    a.qkv.resize(BT * W);
    a.att.resize(BT * Pz * (NH / Pz) * max_T * Pz); // B * NH/P * (P*T)^2
    if (P > 1) {
        a.qh.resize(BT * Q);
        a.kvh.resize(BT * 2 * KV);
        a.attyh.resize(BT * Q);
    }
    a.atty.resize(BT * Q);
    a.res2.resize(BT * C);
    a.ln2.resize(BT * C);
    a.ln2_rstd.resize(BT);
    a.gu.resize(BT * 2 * I);
    a.h.resize(BT * I);
}

Llama::Llama(const ArchConfig& cfg, const ModelOptions& opts, int max_B, int max_T)
    : cfg_(cfg), layout_(make_layout(cfg)), impl_(nullptr) {
    if (!cfg.llama_family())
        SOF_FAIL(Internal, "Llama model built for model.type %s", arch_name(cfg.arch));
    if (max_B <= 0 || max_T <= 0)
        SOF_FAIL(Config, "%s: batch size %d and sequence length %d must be positive",
                 arch_name(cfg.arch), max_B, max_T);
    if (max_T > cfg.max_seq_len)
        SOF_FAIL(Config, "sequence length %d exceeds model.max_seq_len = %d", max_T,
                 cfg.max_seq_len);
    cpu::use_single_threaded_blas();
    impl_ = new Impl;
    Impl& m = *impl_;
    m.cfg = cfg;
    m.opts = opts;
    m.max_B = max_B;
    m.max_T = max_T;
    m.C = cfg.channels;
    m.NH = cfg.num_heads;
    m.NKV = cfg.kv_heads();
    m.hd = cfg.hdim();
    m.Q = cfg.q_dim();
    m.KV = cfg.kv_dim();
    m.W = m.Q + 2 * m.KV;
    m.I = cfg.ffn_dim();
    if (opts.seq && opts.seq->degree() > 1) {
        m.seq = opts.seq;
        m.P = opts.seq->degree();
        m.sp_index = opts.seq->index();
        if (m.NKV % m.P != 0) {
            delete impl_;
            impl_ = nullptr;
            SOF_FAIL(Config,
                     "model.num_kv_heads = %d is not divisible by parallel.sp = %d (Ulysses "
                     "splits the query and the key/value heads over the sequence-parallel ranks)",
                     cfg.kv_heads(), opts.seq->degree());
        }
        if (static_cast<long>(max_T) * m.P > cfg.max_seq_len) {
            delete impl_;
            impl_ = nullptr;
            SOF_FAIL(Config, "sequence length %d x %d > model.max_seq_len = %d", max_T,
                     opts.seq->degree(), cfg.max_seq_len);
        }
    }
    const int L = cfg.num_layers;
    const size_t u1 = layout_.unit_begin[1];
    m.bo.ln1w = layout_.offset_of(TensorKind::Ln1w, 0) - u1;
    m.bo.wqkv = layout_.offset_of(TensorKind::Wq, 0) - u1;
    if (cfg.qkv_bias) m.bo.bqkv = layout_.offset_of(TensorKind::Bq, 0) - u1;
    if (cfg.qk_norm) {
        m.bo.qnorm = layout_.offset_of(TensorKind::QNorm, 0) - u1;
        m.bo.knorm = layout_.offset_of(TensorKind::KNorm, 0) - u1;
    }
    m.bo.wo = layout_.offset_of(TensorKind::Attprojw, 0) - u1;
    m.bo.ln2w = layout_.offset_of(TensorKind::Ln2w, 0) - u1;
    m.bo.wgu = layout_.offset_of(TensorKind::Wgate, 0) - u1;
    m.bo.wdown = layout_.offset_of(TensorKind::Wdown, 0) - u1;
    m.off_wte = layout_.offset_of(TensorKind::Wte, -1);
    const size_t uf = layout_.unit_begin[static_cast<size_t>(L) + 1];
    m.off_norm = layout_.offset_of(TensorKind::Lnfw, -1) - uf;
    if (!cfg.tie_embeddings) m.off_head = layout_.offset_of(TensorKind::LmHead, -1) - uf;

    const size_t C = m.C, BT = static_cast<size_t>(max_B) * max_T;
    const size_t Vp = cfg.padded_vocab_size, half = static_cast<size_t>(m.hd / 2);
    try {
        const std::vector<float> inv = rope_inv_freq(cfg);
        const size_t npos = static_cast<size_t>(max_T) * m.P;
        m.rope_cos.resize(npos * half);
        m.rope_sin.resize(npos * half);
        for (size_t pos = 0; pos < npos; pos++) {
            for (size_t i = 0; i < half; i++) {
                const float angle = static_cast<float>(pos) * inv[i]; // fp32, as HF computes it
                m.rope_cos[pos * half + i] =
                    static_cast<float>(std::cos(static_cast<double>(angle)));
                m.rope_sin[pos * half + i] =
                    static_cast<float>(std::sin(static_cast<double>(angle)));
            }
        }
        m.inputs.resize(BT);
        m.targets.resize(BT);
        m.res.resize(static_cast<size_t>(L + 1) * BT * C);
        m.acts.resize(opts.recompute ? 1 : static_cast<size_t>(L));
        for (BlockActs& a : m.acts)
            m.allocate(a, BT);
        m.lnf.resize(BT * C);
        m.lnf_rstd.resize(BT);
        m.logits.resize(BT * Vp);
        m.probs.resize(BT * Vp);
        m.losses.resize(BT);
        m.dres.resize(BT * C);
        m.dln.resize(BT * C);
        m.datty.resize(BT * m.Q);
        m.dqkv.resize(BT * m.W);
        m.dgu.resize(BT * 2 * m.I);
        m.dh.resize(BT * m.I);
        if (m.P > 1) {
            m.qloc.resize(BT * m.Q);
            m.kvloc.resize(BT * 2 * m.KV);
            m.dattyh.resize(BT * m.Q);
            m.dqh.resize(BT * m.Q);
            m.dkvh.resize(BT * 2 * m.KV);
        }
    } catch (const std::bad_alloc&) {
        delete impl_;
        impl_ = nullptr;
        SOF_FAIL(Runtime,
                 "%s: out of host memory for activations (B=%d, T=%d, L=%d, C=%zu); lower "
                 "train.batch_size / train.seq_len or set model.recompute: true",
                 arch_name(cfg.arch), max_B, max_T, L, C);
    }
}

Llama::~Llama() {
    delete impl_;
}

const float* Llama::logits() const {
    return impl_->logits.data();
}
const float* Llama::probs() const {
    return impl_->probs.data();
}

namespace {

// rows (N, W) <-> [rows (N, Q) | rows (N, 2KV)]: the fused q|k|v row split for the exchange.
void split_rows(const float* qkv, float* q, float* kv, int N, int Q, int KV2) {
    const size_t W = static_cast<size_t>(Q) + KV2;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        std::memcpy(q + static_cast<size_t>(n) * Q, qkv + n * W, sizeof(float) * Q);
        std::memcpy(kv + static_cast<size_t>(n) * KV2, qkv + n * W + Q, sizeof(float) * KV2);
    }
}

void join_rows(float* qkv, const float* q, const float* kv, int N, int Q, int KV2) {
    const size_t W = static_cast<size_t>(Q) + KV2;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        std::memcpy(qkv + n * W, q + static_cast<size_t>(n) * Q, sizeof(float) * Q);
        std::memcpy(qkv + n * W + Q, kv + static_cast<size_t>(n) * KV2, sizeof(float) * KV2);
    }
}

} // namespace

// q, k, v of this rank's tokens inside the fused (N, W) qkv rows: all heads (P == 1).
cpu::AttnView Llama::Impl::token_view(const float* qkv) const {
    const size_t w = static_cast<size_t>(W);
    return {qkv, qkv + Q, qkv + Q + KV, w, w, w, static_cast<size_t>(Q), NH, NKV, hd};
}

// q (B, P*T, Q/P) and k|v (B, P*T, 2*KV/P) after the Ulysses exchange: this rank's heads.
cpu::AttnView Llama::Impl::head_view(const float* q, const float* kv) const {
    const size_t xq = static_cast<size_t>(Q / P), xkv2 = static_cast<size_t>(2 * KV / P);
    return {q, kv, kv + KV / P, xq, xkv2, xkv2, xq, NH / P, NKV / P, hd};
}

void Llama::Impl::attention_fwd(BlockActs& a) {
    if (P == 1) {
        cpu::attention_forward(a.atty.data(), a.att.data(), token_view(a.qkv.data()), B, T);
        return;
    }
    const int Xq = Q / P, Xkv = KV / P;
    split_rows(a.qkv.data(), qloc.data(), kvloc.data(), B * T, Q, 2 * KV);
    seq->to_heads(qloc.data(), a.qh.data(), B, T, 1, Xq);
    seq->to_heads(kvloc.data(), a.kvh.data(), B, T, 2, Xkv);
    cpu::attention_forward(a.attyh.data(), a.att.data(), head_view(a.qh.data(), a.kvh.data()), B,
                           P * T);
    seq->to_tokens(a.attyh.data(), a.atty.data(), B, T, 1, Xq);
}

// datty -> dqkv (grads of the post-RoPE q, k and of v).
void Llama::Impl::attention_bwd(BlockActs& a) {
    if (P == 1) {
        const size_t w = static_cast<size_t>(W);
        const cpu::AttnGrad d{dqkv.data(), dqkv.data() + Q, dqkv.data() + Q + KV, w, w, w};
        cpu::attention_backward(d, datty.data(), token_view(a.qkv.data()), a.att.data(), B, T);
        return;
    }
    const int Xq = Q / P, Xkv = KV / P;
    seq->to_heads(datty.data(), dattyh.data(), B, T, 1, Xq);
    const cpu::AttnView v = head_view(a.qh.data(), a.kvh.data());
    const cpu::AttnGrad d{dqh.data(), dkvh.data(), dkvh.data() + Xkv, v.ldq, v.ldk, v.ldv};
    cpu::attention_backward(d, dattyh.data(), v, a.att.data(), B, P * T);
    seq->to_tokens(dqh.data(), qloc.data(), B, T, 1, Xq);
    seq->to_tokens(dkvh.data(), kvloc.data(), B, T, 2, Xkv);
    join_rows(dqkv.data(), qloc.data(), kvloc.data(), B * T, Q, 2 * KV);
}

void Llama::Impl::block_forward(const float* p, BlockActs& a, const float* in, float* out,
                                bool output) {
    const int N = B * T;
    const float eps = cfg.norm_eps;
    const size_t w = static_cast<size_t>(W);
    cpu::rmsnorm_forward(a.ln1.data(), a.ln1_rstd.data(), in, p + bo.ln1w, N, 1, C,
                         static_cast<size_t>(C), eps);
    const float* bias = cfg.qkv_bias ? p + bo.bqkv : nullptr;
    if (cfg.qk_norm) {
        float* raw = a.qkv_raw.data();
        cpu::matmul_forward(raw, a.ln1.data(), p + bo.wqkv, bias, N, C, W);
        cpu::rmsnorm_forward(a.qkv.data(), a.q_rstd.data(), raw, p + bo.qnorm, N, NH, hd, w, eps);
        cpu::rmsnorm_forward(a.qkv.data() + Q, a.k_rstd.data(), raw + Q, p + bo.knorm, N, NKV, hd,
                             w, eps);
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) // v passes through unnormalized
            std::memcpy(a.qkv.data() + n * w + Q + KV, raw + n * w + Q + KV, sizeof(float) * KV);
    } else {
        cpu::matmul_forward(a.qkv.data(), a.ln1.data(), p + bo.wqkv, bias, N, C, W);
    }
    const int pos0 = sp_index * T;
    cpu::rope_forward(a.qkv.data(), rope_cos.data(), rope_sin.data(), B, T, NH, hd, w, pos0);
    cpu::rope_forward(a.qkv.data() + Q, rope_cos.data(), rope_sin.data(), B, T, NKV, hd, w, pos0);
    attention_fwd(a);
    cpu::matmul_forward(a.res2.data(), a.atty.data(), p + bo.wo, nullptr, N, Q, C);
    cpu::residual_forward(a.res2.data(), in, a.res2.data(), static_cast<long>(N) * C);
    cpu::rmsnorm_forward(a.ln2.data(), a.ln2_rstd.data(), a.res2.data(), p + bo.ln2w, N, 1, C,
                         static_cast<size_t>(C), eps);
    cpu::matmul_forward(a.gu.data(), a.ln2.data(), p + bo.wgu, nullptr, N, C, 2 * I);
    cpu::swiglu_forward(a.h.data(), a.gu.data(), N, I);
    if (!output) return; // recompute: the block output is already in res
    cpu::matmul_forward(out, a.h.data(), p + bo.wdown, nullptr, N, I, C);
    cpu::residual_forward(out, a.res2.data(), out, static_cast<long>(N) * C);
}

// dres holds d(block output) on entry and d(block input) on exit. Grads are added into g.
void Llama::Impl::block_backward(const float* p, float* g, BlockActs& a, const float* in) {
    const int N = B * T;
    const size_t w = static_cast<size_t>(W), c = static_cast<size_t>(C);
    float* d = dres.data();
    cpu::matmul_backward(dh.data(), g + bo.wdown, nullptr, d, a.h.data(), p + bo.wdown, N, I, C);
    cpu::swiglu_backward(dgu.data(), dh.data(), a.gu.data(), N, I);
    cpu::matmul_backward(dln.data(), g + bo.wgu, nullptr, dgu.data(), a.ln2.data(), p + bo.wgu, N,
                         C, 2 * I);
    cpu::rmsnorm_backward(d, true, g + bo.ln2w, dln.data(), a.res2.data(), p + bo.ln2w,
                          a.ln2_rstd.data(), N, 1, C, c);
    cpu::matmul_backward(datty.data(), g + bo.wo, nullptr, d, a.atty.data(), p + bo.wo, N, Q, C);
    attention_bwd(a);
    const int pos0 = sp_index * T;
    cpu::rope_backward(dqkv.data(), rope_cos.data(), rope_sin.data(), B, T, NH, hd, w, pos0);
    cpu::rope_backward(dqkv.data() + Q, rope_cos.data(), rope_sin.data(), B, T, NKV, hd, w, pos0);
    if (cfg.qk_norm) { // in place: grads of the normed q, k -> grads of the raw projections
        cpu::rmsnorm_backward(dqkv.data(), false, g + bo.qnorm, dqkv.data(), a.qkv_raw.data(),
                              p + bo.qnorm, a.q_rstd.data(), N, NH, hd, w);
        cpu::rmsnorm_backward(dqkv.data() + Q, false, g + bo.knorm, dqkv.data() + Q,
                              a.qkv_raw.data() + Q, p + bo.knorm, a.k_rstd.data(), N, NKV, hd, w);
    }
    cpu::matmul_backward(dln.data(), g + bo.wqkv, cfg.qkv_bias ? g + bo.bqkv : nullptr, dqkv.data(),
                         a.ln1.data(), p + bo.wqkv, N, C, W);
    cpu::rmsnorm_backward(d, true, g + bo.ln1w, dln.data(), in, p + bo.ln1w, a.ln1_rstd.data(), N,
                          1, C, c);
}

float Llama::forward(WeightSource& w, const int* inputs, const int* targets, int B, int T) {
    Impl& m = *impl_;
    if (B <= 0 || T <= 0 || B > m.max_B || T > m.max_T)
        SOF_FAIL(Runtime, "%s forward: batch (B=%d, T=%d) outside the allocated (1..%d, 1..%d)",
                 arch_name(cfg_.arch), B, T, m.max_B, m.max_T);
    const int L = cfg_.num_layers, C = m.C, V = cfg_.vocab_size;
    const int Vp = cfg_.padded_vocab_size, N = B * T;
    detail::check_tokens(arch_name(cfg_.arch), inputs, targets, N, V);
    m.B = B;
    m.T = T;
    m.have_targets = targets != nullptr;
    std::copy(inputs, inputs + N, m.inputs.begin());
    if (targets) std::copy(targets, targets + N, m.targets.begin());

    const bool tied = cfg_.tie_embeddings;
    const float* p0 = w.acquire(0, Pass::Forward); // tied: held until the LM head is done
    cpu::embedding_forward(m.res_at(0), m.inputs.data(), p0 + m.off_wte, N, C);
    if (!tied) w.release(0, Pass::Forward);
    detail::forward_blocks(w, L, [&m](int l, const float* p) {
        m.block_forward(p, m.acts_of(l), m.res_at(l), m.res_at(l + 1), true);
    });
    m.scratch_layer = m.opts.recompute ? L - 1 : -1;
    const float* pf = w.acquire(L + 1, Pass::Forward);
    cpu::rmsnorm_forward(m.lnf.data(), m.lnf_rstd.data(), m.res_at(L), pf + m.off_norm, N, 1, C,
                         static_cast<size_t>(C), cfg_.norm_eps);
    const float* head = tied ? p0 + m.off_wte : pf + m.off_head;
    cpu::matmul_forward(m.logits.data(), m.lnf.data(), head, nullptr, N, C, Vp);
    w.release(L + 1, Pass::Forward);
    if (tied) w.release(0, Pass::Forward);
    cpu::softmax_crossentropy_forward(m.probs.data(), m.losses.data(), m.logits.data(),
                                      targets ? m.targets.data() : nullptr, N, V, Vp);
    if (!targets) return 0.0f;
    return detail::mean_loss(m.losses.data(), m.targets.data(), N);
}

void Llama::backward(WeightSource& w, GradSink& sink, float dloss) {
    Impl& m = *impl_;
    if (!m.have_targets)
        SOF_FAIL(Internal, "Llama::backward called without a forward with targets before it");
    const int L = cfg_.num_layers, C = m.C, V = cfg_.vocab_size;
    const int Vp = cfg_.padded_vocab_size, N = m.B * m.T;
    const bool tied = cfg_.tie_embeddings;

    // LM head: dlogits overwrite the logits buffer
    const float* p0 = tied ? w.acquire(0, Pass::Backward) : nullptr; // tied: held to the end
    const float* pf = w.acquire(L + 1, Pass::Backward);
    float* gf = sink.grads(L + 1);
    float* dlogits = m.logits.data();
    cpu::softmax_crossentropy_backward(dlogits, m.probs.data(), m.targets.data(), dloss, N, V, Vp);
    const float* head = tied ? p0 + m.off_wte : pf + m.off_head;
    float* ghead = tied ? sink.grads(0) + m.off_wte : gf + m.off_head;
    cpu::matmul_backward(m.dln.data(), ghead, nullptr, dlogits, m.lnf.data(), head, N, C, Vp);

    // final RMSNorm
    std::fill(m.dres.begin(), m.dres.begin() + static_cast<long>(N) * C, 0.0f);
    cpu::rmsnorm_backward(m.dres.data(), true, gf + m.off_norm, m.dln.data(), m.res_at(L),
                          pf + m.off_norm, m.lnf_rstd.data(), N, 1, C, static_cast<size_t>(C));
    w.release(L + 1, Pass::Backward);
    sink.unit_done(L + 1);

    detail::backward_blocks(
        w, sink, L, [&m](int l) { return m.opts.recompute && m.scratch_layer != l; },
        [&m](int l, const float* p) {
            m.block_forward(p, m.acts_of(l), m.res_at(l), nullptr, false);
            m.scratch_layer = l;
        },
        [&m](int l, const float* p, float* g) {
            m.block_backward(p, g, m.acts_of(l), m.res_at(l));
        });

    // the embedding backward reads only token ids: untied, unit 0's weights are not needed
    cpu::embedding_backward(sink.grads(0) + m.off_wte, m.dres.data(), m.inputs.data(), N, C);
    if (tied) w.release(0, Pass::Backward);
    sink.unit_done(0);
    m.have_targets = false;
}

} // namespace sof::model
