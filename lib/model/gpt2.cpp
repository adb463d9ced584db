// GPT-2 forward/backward on the CPU: activation buffers, the per-unit weight/grad flow, recompute.
// Kernels are in kernels_cpu.cpp; the acquire/release and unit_done order is documented in gpt2.h.
#include "model/gpt2.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "model/unit_loop.h"
#include "model/kernels_cpu.h"

namespace sof::model {

namespace {

// Activations of one transformer block (sized for max_B*max_T positions, used compactly for B*T).
struct BlockActs {
    std::vector<float> ln1;      // (B,T,C)
    std::vector<float> ln1_mean; // (B,T)
    std::vector<float> ln1_rstd; // (B,T)
    std::vector<float> qkv;      // (B,T,3C)
    std::vector<float> att;      // (B,NH/P,P*T,P*T) (P = sequence-parallel degree, usually 1)
    std::vector<float> atty;     // (B,T,C)
    std::vector<float> qkvh;     // (B,P*T,3C/P) Ulysses: every token of this rank's heads
    std::vector<float> attyh;    // (B,P*T,C/P) Ulysses: attention output of this rank's heads
    std::vector<float> res2;     // (B,T,C) residual after attention
    std::vector<float> ln2;      // (B,T,C)
    std::vector<float> ln2_mean; // (B,T)
    std::vector<float> ln2_rstd; // (B,T)
    std::vector<float> fch;      // (B,T,4C)
    std::vector<float> fch_gelu; // (B,T,4C)

    void allocate(size_t BT, size_t C, size_t NH, size_t T, size_t P) {
        ln1.resize(BT * C);
        ln1_mean.resize(BT);
        ln1_rstd.resize(BT);
        qkv.resize(BT * 3 * C);
        att.resize(BT * P * (NH / P) * T * P); // B * NH/P * (P*T)^2
        if (P > 1) {
            qkvh.resize(BT * 3 * C);
            attyh.resize(BT * C);
        }
        atty.resize(BT * C);
        res2.resize(BT * C);
        ln2.resize(BT * C);
        ln2_mean.resize(BT);
        ln2_rstd.resize(BT);
        fch.resize(BT * 4 * C);
        fch_gelu.resize(BT * 4 * C);
    }
};

// Offsets of a block's tensors relative to the start of its unit (the same for every block).
struct BlockOffsets {
    size_t ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

} // namespace

struct GPT2::Impl {
    ArchConfig cfg;
    ModelOptions opts;
    const ParamLayout* layout = nullptr;
    int max_B = 0, max_T = 0;
    int B = 0, T = 0;
    int P = 1, sp_index = 0;    // Ulysses degree and this rank's token slice
    SeqExchange* seq = nullptr; // non-null when P > 1
    bool have_targets = false;
    int scratch_layer = -1; // recompute: block whose activations are in acts[0] now (-1: none)

    BlockOffsets bo{};
    size_t off_wte = 0, off_wpe = 0;   // relative to unit 0
    size_t off_lnfw = 0, off_lnfb = 0; // relative to unit L+1

    std::vector<int> inputs;     // (B,T)
    std::vector<int> targets;    // (B,T)
    std::vector<float> res;      // (L+1, B, T, C): res[0] = embeddings, res[l+1] = block l output
    std::vector<BlockActs> acts; // L sets, or 1 set with recompute
    std::vector<float> lnf;      // (B,T,C)
    std::vector<float> lnf_mean; // (B,T)
    std::vector<float> lnf_rstd; // (B,T)
    std::vector<float> logits;   // (B,T,Vp); holds dlogits after backward
    std::vector<float> probs;    // (B,T,Vp)
    std::vector<float> losses;   // (B,T)
    // backward scratch
    std::vector<float> dres;   // (B,T,C) grad of the residual stream
    std::vector<float> dln;    // (B,T,C) grad of a LayerNorm output
    std::vector<float> datty;  // (B,T,C)
    std::vector<float> dqkv;   // (B,T,3C)
    std::vector<float> dfch;   // (B,T,4C)
    std::vector<float> dattyh; // (B,P*T,C/P) Ulysses only
    std::vector<float> dqkvh;  // (B,P*T,3C/P) Ulysses only

    // Causal attention of one block: on the local tokens (P = 1) or, with Ulysses, all-to-all to
    // [P*T tokens, NH/P heads], attention there, and back to [T tokens, all heads].
    void attention_fwd(BlockActs& a);
    void attention_bwd(BlockActs& a);

    float* res_at(int l) {
        return res.data() + static_cast<size_t>(l) * max_B * max_T * cfg.channels;
    }
    BlockActs& acts_of(int l) { return acts[opts.recompute ? 0 : static_cast<size_t>(l)]; }

    void block_forward(const float* p, BlockActs& a, const float* in, float* out, bool output);
    void block_backward(const float* p, float* g, BlockActs& a, const float* in);
};

GPT2::GPT2(const ArchConfig& cfg, const ModelOptions& opts, int max_B, int max_T)
    : cfg_(cfg), layout_(make_layout(cfg)), impl_(nullptr) {
    if (max_B <= 0 || max_T <= 0)
        SOF_FAIL(Config, "GPT2: batch size %d and sequence length %d must be positive", max_B,
                 max_T);
    if (max_T > cfg.max_seq_len)
        SOF_FAIL(Config, "sequence length %d exceeds model.max_seq_len = %d", max_T,
                 cfg.max_seq_len);
    cpu::use_single_threaded_blas(); // the matmuls parallelize with OpenMP (kernels_cpu.h)
    impl_ = new Impl;
    Impl& m = *impl_;
    m.cfg = cfg;
    m.opts = opts;
    m.layout = &layout_;
    m.max_B = max_B;
    m.max_T = max_T;
    if (opts.seq && opts.seq->degree() > 1) {
        m.seq = opts.seq;
        m.P = opts.seq->degree();
        m.sp_index = opts.seq->index();
        if (cfg.num_heads % m.P != 0)
            SOF_FAIL(Config,
                     "model.num_heads = %d is not divisible by parallel.sp = %d (Ulysses splits "
                     "the heads over the sequence-parallel ranks)",
                     cfg.num_heads, m.P);
        if (static_cast<long>(max_T) * m.P > cfg.max_seq_len)
            SOF_FAIL(Config, "sequence length %d x %d > model.max_seq_len = %d", max_T, m.P,
                     cfg.max_seq_len);
    }
    const int L = cfg.num_layers;
    const size_t C = cfg.channels, BT = static_cast<size_t>(max_B) * max_T;
    const size_t Vp = cfg.padded_vocab_size;

    const size_t u1 = layout_.unit_begin[1];
    m.bo.ln1w = layout_.offset_of(TensorKind::Ln1w, 0) - u1;
    m.bo.ln1b = layout_.offset_of(TensorKind::Ln1b, 0) - u1;
    m.bo.qkvw = layout_.offset_of(TensorKind::Qkvw, 0) - u1;
    m.bo.qkvb = layout_.offset_of(TensorKind::Qkvb, 0) - u1;
    m.bo.attprojw = layout_.offset_of(TensorKind::Attprojw, 0) - u1;
    m.bo.attprojb = layout_.offset_of(TensorKind::Attprojb, 0) - u1;
    m.bo.ln2w = layout_.offset_of(TensorKind::Ln2w, 0) - u1;
    m.bo.ln2b = layout_.offset_of(TensorKind::Ln2b, 0) - u1;
    m.bo.fcw = layout_.offset_of(TensorKind::Fcw, 0) - u1;
    m.bo.fcb = layout_.offset_of(TensorKind::Fcb, 0) - u1;
    m.bo.fcprojw = layout_.offset_of(TensorKind::Fcprojw, 0) - u1;
    m.bo.fcprojb = layout_.offset_of(TensorKind::Fcprojb, 0) - u1;
    m.off_wte = layout_.offset_of(TensorKind::Wte, -1);
    m.off_wpe = layout_.offset_of(TensorKind::Wpe, -1);
    const size_t uf = layout_.unit_begin[static_cast<size_t>(L) + 1];
    m.off_lnfw = layout_.offset_of(TensorKind::Lnfw, -1) - uf;
    m.off_lnfb = layout_.offset_of(TensorKind::Lnfb, -1) - uf;

    try {
        m.inputs.resize(BT);
        m.targets.resize(BT);
        m.res.resize(static_cast<size_t>(L + 1) * BT * C);
        m.acts.resize(opts.recompute ? 1 : static_cast<size_t>(L));
        for (BlockActs& a : m.acts)
            a.allocate(BT, C, cfg.num_heads, max_T, static_cast<size_t>(m.P));
        m.lnf.resize(BT * C);
        m.lnf_mean.resize(BT);
        m.lnf_rstd.resize(BT);
        m.logits.resize(BT * Vp);
        m.probs.resize(BT * Vp);
        m.losses.resize(BT);
        m.dres.resize(BT * C);
        m.dln.resize(BT * C);
        m.datty.resize(BT * C);
        m.dqkv.resize(BT * 3 * C);
        m.dfch.resize(BT * 4 * C);
        if (m.P > 1) {
            m.dattyh.resize(BT * C);
            m.dqkvh.resize(BT * 3 * C);
        }
    } catch (const std::bad_alloc&) {
        delete impl_;
        impl_ = nullptr;
        SOF_FAIL(Runtime,
                 "GPT2: out of host memory for activations (B=%d, T=%d, L=%d, C=%zu); lower "
                 "train.batch_size / train.seq_len or set model.recompute: true",
                 max_B, max_T, L, C);
    }
}

GPT2::~GPT2() {
    delete impl_;
}

const float* GPT2::logits() const {
    return impl_->logits.data();
}
const float* GPT2::probs() const {
    return impl_->probs.data();
}

void GPT2::Impl::attention_fwd(BlockActs& a) {
    const int C = cfg.channels, NH = cfg.num_heads;
    if (P == 1) {
        cpu::attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B, T, C, NH);
        return;
    }
    const int X = C / P;
    seq->to_heads(a.qkv.data(), a.qkvh.data(), B, T, 3, X);
    cpu::attention_forward(a.attyh.data(), a.att.data(), a.qkvh.data(), B, P * T, X, NH / P);
    seq->to_tokens(a.attyh.data(), a.atty.data(), B, T, 1, X);
}

void GPT2::Impl::attention_bwd(BlockActs& a) {
    const int C = cfg.channels, NH = cfg.num_heads;
    if (P == 1) {
        cpu::attention_backward(dqkv.data(), datty.data(), a.qkv.data(), a.att.data(), B, T, C, NH);
        return;
    }
    const int X = C / P;
    seq->to_heads(datty.data(), dattyh.data(), B, T, 1, X);
    cpu::attention_backward(dqkvh.data(), dattyh.data(), a.qkvh.data(), a.att.data(), B, P * T, X,
                            NH / P);
    seq->to_tokens(dqkvh.data(), dqkv.data(), B, T, 3, X);
}

void GPT2::Impl::block_forward(const float* p, BlockActs& a, const float* in, float* out,
                               bool output) {
    const int C = cfg.channels, N = B * T;
    cpu::layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), in, p + bo.ln1w,
                           p + bo.ln1b, N, C);
    cpu::matmul_forward(a.qkv.data(), a.ln1.data(), p + bo.qkvw, p + bo.qkvb, N, C, 3 * C);
    attention_fwd(a);
    cpu::matmul_forward(a.res2.data(), a.atty.data(), p + bo.attprojw, p + bo.attprojb, N, C, C);
    cpu::residual_forward(a.res2.data(), in, a.res2.data(), static_cast<long>(N) * C);
    cpu::layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(),
                           p + bo.ln2w, p + bo.ln2b, N, C);
    cpu::matmul_forward(a.fch.data(), a.ln2.data(), p + bo.fcw, p + bo.fcb, N, C, 4 * C);
    cpu::gelu_forward(a.fch_gelu.data(), a.fch.data(), static_cast<long>(N) * 4 * C);
    if (!output) // recompute: backward does not need the block output (it is in res already)
        return;
    cpu::matmul_forward(out, a.fch_gelu.data(), p + bo.fcprojw, p + bo.fcprojb, N, 4 * C, C);
    cpu::residual_forward(out, a.res2.data(), out, static_cast<long>(N) * C);
}

// dres holds d(block output) on entry and d(block input) on exit. Grads are added into g.
void GPT2::Impl::block_backward(const float* p, float* g, BlockActs& a, const float* in) {
    const int C = cfg.channels, N = B * T;
    float* d = dres.data();
    cpu::matmul_backward(dfch.data(), g + bo.fcprojw, g + bo.fcprojb, d, a.fch_gelu.data(),
                         p + bo.fcprojw, N, 4 * C, C);
    cpu::gelu_backward(dfch.data(), a.fch.data(), dfch.data(), static_cast<long>(N) * 4 * C);
    cpu::matmul_backward(dln.data(), g + bo.fcw, g + bo.fcb, dfch.data(), a.ln2.data(), p + bo.fcw,
                         N, C, 4 * C);
    cpu::layernorm_backward(d, g + bo.ln2w, g + bo.ln2b, dln.data(), a.res2.data(), p + bo.ln2w,
                            a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
    cpu::matmul_backward(datty.data(), g + bo.attprojw, g + bo.attprojb, d, a.atty.data(),
                         p + bo.attprojw, N, C, C);
    attention_bwd(a);
    cpu::matmul_backward(dln.data(), g + bo.qkvw, g + bo.qkvb, dqkv.data(), a.ln1.data(),
                         p + bo.qkvw, N, C, 3 * C);
    cpu::layernorm_backward(d, g + bo.ln1w, g + bo.ln1b, dln.data(), in, p + bo.ln1w,
                            a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
}

float GPT2::forward(WeightSource& w, const int* inputs, const int* targets, int B, int T) {
    Impl& m = *impl_;
    if (B <= 0 || T <= 0 || B > m.max_B || T > m.max_T)
        SOF_FAIL(Runtime, "GPT2::forward: batch (B=%d, T=%d) outside the allocated (1..%d, 1..%d)",
                 B, T, m.max_B, m.max_T);
    const int L = cfg_.num_layers, C = cfg_.channels, V = cfg_.vocab_size;
    const int Vp = cfg_.padded_vocab_size, N = B * T;
    detail::check_tokens("GPT2", inputs, targets, N, V);
    m.B = B;
    m.T = T;
    m.have_targets = targets != nullptr;
    std::copy(inputs, inputs + N, m.inputs.begin());
    if (targets) std::copy(targets, targets + N, m.targets.begin());

    const float* p0 = w.acquire(0, Pass::Forward);               // held until the LM head is done
    const size_t pos0 = static_cast<size_t>(m.sp_index) * T * C; // first position of this slice
    cpu::encoder_forward(m.res_at(0), m.inputs.data(), p0 + m.off_wte, p0 + m.off_wpe + pos0, B, T,
                         C);
    detail::forward_blocks(w, L, [&m](int l, const float* p) {
        m.block_forward(p, m.acts_of(l), m.res_at(l), m.res_at(l + 1), true);
    });
    m.scratch_layer = m.opts.recompute ? L - 1 : -1;
    const float* pf = w.acquire(L + 1, Pass::Forward);
    cpu::layernorm_forward(m.lnf.data(), m.lnf_mean.data(), m.lnf_rstd.data(), m.res_at(L),
                           pf + m.off_lnfw, pf + m.off_lnfb, N, C);
    w.release(L + 1, Pass::Forward);
    cpu::matmul_forward(m.logits.data(), m.lnf.data(), p0 + m.off_wte, nullptr, N, C, Vp);
    w.release(0, Pass::Forward);
    cpu::softmax_crossentropy_forward(m.probs.data(), m.losses.data(), m.logits.data(),
                                      targets ? m.targets.data() : nullptr, N, V, Vp);
    if (!targets) return 0.0f;
    return detail::mean_loss(m.losses.data(), m.targets.data(), N);
}

void GPT2::backward(WeightSource& w, GradSink& sink, float dloss) {
    Impl& m = *impl_;
    if (!m.have_targets)
        SOF_FAIL(Internal, "GPT2::backward called without a forward with targets before it");
    const int L = cfg_.num_layers, C = cfg_.channels, V = cfg_.vocab_size;
    const int Vp = cfg_.padded_vocab_size, N = m.B * m.T;

    // LM head (tied wte): dlogits overwrite the logits buffer
    const float* p0 = w.acquire(0, Pass::Backward); // held until the embedding backward
    float* dlogits = m.logits.data();
    cpu::softmax_crossentropy_backward(dlogits, m.probs.data(), m.targets.data(), dloss, N, V, Vp);
    cpu::matmul_backward(m.dln.data(), sink.grads(0) + m.off_wte, nullptr, dlogits, m.lnf.data(),
                         p0 + m.off_wte, N, C, Vp);

    // final LayerNorm
    const float* pf = w.acquire(L + 1, Pass::Backward);
    float* gf = sink.grads(L + 1);
    std::fill(m.dres.begin(), m.dres.begin() + static_cast<long>(N) * C, 0.0f);
    cpu::layernorm_backward(m.dres.data(), gf + m.off_lnfw, gf + m.off_lnfb, m.dln.data(),
                            m.res_at(L), pf + m.off_lnfw, m.lnf_mean.data(), m.lnf_rstd.data(), N,
                            C);
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

    float* g0 = sink.grads(0);
    const size_t pos0 = static_cast<size_t>(m.sp_index) * m.T * C;
    cpu::encoder_backward(g0 + m.off_wte, g0 + m.off_wpe + pos0, m.dres.data(), m.inputs.data(),
                          m.B, m.T, C);
    w.release(0, Pass::Backward);
    sink.unit_done(0);
    m.have_targets = false; // dlogits replaced the logits: a second backward needs a new forward
}

} // namespace sof::model
