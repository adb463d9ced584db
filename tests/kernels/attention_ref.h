// Attention test problems (a fused qkv row as the models lay it out, packed-document segments,
// sliding window, sinks, dropout) and the naive reference: the old T x T algorithm (scores and
// probabilities of a whole head) in double, its dropout mask regenerated from Philox.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/philox.h"
#include "kernels/attention.h"

namespace sof::test {

struct AttnShape {
    int B, T, NH, NKV, hd;
    bool segments;
    unsigned seed;
    int window = 0;       // sliding window W (0: full causal)
    bool sinks = false;   // per-head sink logits
    float dropout = 0.0f; // attention-probability dropout rate
    bool aligned = false; // rows padded to multiples of 8 elements (the 16-byte cp.async path of
                          // the tensor-core kernel, which training takes), else 5 and 3 spare
};

// Deliberate reference bugs: a test whose reference has one must fail (the checks can fail).
// WindowPlusOne: the band t - W <= t2 (W + 1 keys); SinkNotInLse: the sink left out of lse (and
// so out of the backward's probabilities); DropoutShifted: each probability gets its right
// neighbour's keep bit.
enum class AttnMutation {
    None,
    CausalPlusOne,
    SegmentStartMinusOne,
    WindowPlusOne,
    SinkNotInLse,
    DropoutShifted
};

// The dropout key of the test problems: every field non-zero, the call at global batch row 5 and
// global head 2 of NH + 3 heads (so a kernel that numbers elements locally fails).
inline kernels::DropoutKey attn_test_key(const AttnShape& s) {
    kernels::DropoutKey k;
    k.seed = 0x9e3779b97f4a7c15ull ^ s.seed;
    k.step = 1000 + s.seed;
    k.micro = 3;
    k.layer = 11;
    k.tag = kernels::DropoutTag::AttnProbs;
    k.batch0 = 5;
    k.head0 = 2;
    k.heads = s.NH + 3;
    return k;
}

// The keep bit of attention probability (b, h, t, t2) as dropout.h documents it, written out
// here on its own (not through DropoutMask): element e = (((batch0 + b) * heads + head0 + h) * T
// + t) * T + t2, word e % 4 of philox_draw(seed, e / 4, step, micro << 16 | layer << 4 | tag),
// kept iff the word >= round(p * 2^32).
inline bool attn_ref_keep(const kernels::DropoutKey& k, float p, int T, int b, int h, int t,
                          int t2) {
    const uint64_t e = (((k.batch0 + b) * static_cast<uint64_t>(k.heads) + k.head0 + h) * T + t) *
                           static_cast<uint64_t>(T) +
                       t2;
    const uint32_t stream = k.micro << 16 | k.layer << 4 | static_cast<uint32_t>(k.tag);
    const uint32_t word = core::philox_draw(k.seed, e / 4, k.step, stream).v[e % 4];
    const double thr = std::nearbyint(static_cast<double>(p) * 4294967296.0);
    return static_cast<double>(word) >= thr;
}

// q, k, v inside one fused row (B,T,W), W = (NH + 2*NKV)*hd + 5 (5 spare columns, as a view
// into a wider buffer; + 8 when aligned); out and dout (B,T,ldo) with ldo = NH*hd + 3 (+ 8). Values
// uniform in [-1,1] (scores q.k/sqrt(hd) of order 1, as after the models' norms).
struct AttnProblem {
    AttnShape s;
    size_t W, ldo;
    std::vector<float> qkv;   // (B,T,W)
    std::vector<float> dout;  // (B,T,ldo)
    std::vector<int> seg;     // (B,T) run ids (empty without segments)
    std::vector<float> sinks; // (NH) sink logits (empty without sinks)
    kernels::DropoutKey key;  // the dropout key (attn_test_key)

    explicit AttnProblem(const AttnShape& shape) : s(shape), key(attn_test_key(shape)) {
        W = static_cast<size_t>(s.NH + 2 * s.NKV) * s.hd + (s.aligned ? 8 : 5);
        ldo = static_cast<size_t>(s.NH) * s.hd + (s.aligned ? 8 : 3);
        const size_t rows = static_cast<size_t>(s.B) * s.T;
        std::mt19937 gen(s.seed);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        qkv.resize(rows * W);
        for (float& x : qkv)
            x = u(gen);
        dout.resize(rows * ldo);
        for (float& x : dout)
            x = u(gen);
        if (s.segments) {
            // documents of 1 .. T/3+1 tokens; ids cycle over 3 values, so an id comes back after
            // other documents (a run of equal ids is one document, attention.h)
            seg.resize(rows);
            std::uniform_int_distribution<int> len(1, std::max(1, s.T / 3) + 1);
            for (int b = 0; b < s.B; b++) {
                int t = 0, doc = 0;
                while (t < s.T) {
                    const int n = std::min(len(gen), s.T - t);
                    for (int i = 0; i < n; i++)
                        seg[static_cast<size_t>(b) * s.T + t + i] = doc % 3;
                    t += n;
                    doc++;
                }
            }
        }
        if (s.sinks) {
            // of the order of the scores' log-sum-exp over a few keys: the sink takes a visible
            // share of every row (GPT-OSS's learned sinks are of this order)
            std::uniform_real_distribution<float> z(-1.0f, 3.0f);
            sinks.resize(static_cast<size_t>(s.NH));
            for (float& x : sinks)
                x = z(gen);
        }
    }
    size_t koff() const { return static_cast<size_t>(s.NH) * s.hd; }
    size_t voff() const { return static_cast<size_t>(s.NH + s.NKV) * s.hd; }
    // The op's arguments (host pointers for segments and sinks: a GPU caller replaces them).
    template <class E> kernels::AttnArgs<E> args(const E* fused) const {
        kernels::AttnArgs<E> a{fused,
                               fused + koff(),
                               fused + voff(),
                               W,
                               W,
                               W,
                               ldo,
                               s.B,
                               s.T,
                               s.NH,
                               s.NKV,
                               s.hd,
                               seg.empty() ? nullptr : seg.data(),
                               0};
        a.window = s.window;
        a.sinks = sinks.empty() ? nullptr : sinks.data();
        a.dropout = s.dropout;
        a.dropout_key = key;
        return a;
    }
    template <class E> kernels::AttnGrads<E> grads(E* dfused) const {
        return kernels::AttnGrads<E>{dfused, dfused + koff(), dfused + voff(), W, W, W};
    }
    size_t out_size() const { return static_cast<size_t>(s.B) * s.T * ldo; }
    size_t stat_size() const { return static_cast<size_t>(s.B) * s.NH * s.T; }
};

// Reference results in double, laid out as the op's: out (B,T,ldo), lse (B,NH,T), dqkv (B,T,W)
// (spare columns 0), dsinks (NH) (empty without sinks).
struct AttnRef {
    std::vector<double> out, lse, dqkv, dsinks;
};

// First key each query t of batch row b sees (segments: the start of the run of equal ids that
// holds t; window W: not below t - W + 1); query t sees key t2 iff start[t] <= t2 <= t.
inline std::vector<int> attn_starts(const AttnProblem& p, int b, AttnMutation mut) {
    std::vector<int> start(static_cast<size_t>(p.s.T), 0);
    if (!p.seg.empty()) {
        const int* seg = p.seg.data() + static_cast<size_t>(b) * p.s.T;
        for (int t = 1; t < p.s.T; t++)
            start[t] = seg[t] == seg[t - 1] ? start[t - 1] : t;
        if (mut == AttnMutation::SegmentStartMinusOne)
            for (int& x : start)
                x = std::max(x - 1, 0);
    }
    if (p.s.window > 0) {
        const int W = p.s.window + (mut == AttnMutation::WindowPlusOne ? 1 : 0);
        for (int t = 0; t < p.s.T; t++)
            start[t] = std::max(start[t], t - W + 1);
    }
    return start;
}

// The old algorithm: per (b, h) the whole T x T probability matrix, then out = P Z V and the
// softmax backward through it; double throughout. Sinks as transformers' gpt_oss
// eager_attention_forward: the sink logit joins each row's softmax (max included) and its
// probability is dropped; dropout Z = keep / (1 - p) on the probabilities (attn_ref_keep).
inline AttnRef attn_reference(const AttnProblem& p, AttnMutation mut = AttnMutation::None) {
    const int B = p.s.B, T = p.s.T, NH = p.s.NH, hd = p.s.hd, group = p.s.NH / p.s.NKV;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    const double zscale = 1.0 / (1.0 - static_cast<double>(p.s.dropout));
    const bool sinks = !p.sinks.empty(), drop = p.s.dropout > 0.0f;
    AttnRef r;
    r.out.assign(p.out_size(), 0.0);
    r.lse.assign(p.stat_size(), 0.0);
    r.dqkv.assign(p.qkv.size(), 0.0);
    r.dsinks.assign(sinks ? static_cast<size_t>(NH) : 0, 0.0);
    std::vector<double> P(static_cast<size_t>(T) * T), dP(P.size()), Z(P.size(), 1.0);
    std::vector<double> psink(static_cast<size_t>(T), 0.0);
    std::vector<char> vis(P.size());
    for (int b = 0; b < B; b++) {
        const std::vector<int> start = attn_starts(p, b, mut);
        for (int t = 0; t < T; t++) {
            const int lim = mut == AttnMutation::CausalPlusOne ? std::min(t + 1, T - 1) : t;
            for (int t2 = 0; t2 < T; t2++)
                vis[static_cast<size_t>(t) * T + t2] = t2 >= start[t] && t2 <= lim ? 1 : 0;
        }
        for (int h = 0; h < NH; h++) {
            const int kh = h / group;
            auto row = [&](int t) { return (static_cast<size_t>(b) * T + t) * p.W; };
            auto q = [&](int t) { return p.qkv.data() + row(t) + static_cast<size_t>(h) * hd; };
            auto k = [&](int t) {
                return p.qkv.data() + row(t) + p.koff() + static_cast<size_t>(kh) * hd;
            };
            auto v = [&](int t) {
                return p.qkv.data() + row(t) + p.voff() + static_cast<size_t>(kh) * hd;
            };
            auto orow = [&](int t) {
                return (static_cast<size_t>(b) * T + t) * p.ldo + static_cast<size_t>(h) * hd;
            };
            const double zsink = sinks ? static_cast<double>(p.sinks[h]) : 0.0;
            for (int t = 0; t < T; t++) {
                double* pr = P.data() + static_cast<size_t>(t) * T;
                double* zr = Z.data() + static_cast<size_t>(t) * T;
                double mx = sinks ? zsink : -INFINITY;
                for (int t2 = 0; t2 < T; t2++) {
                    if (!vis[static_cast<size_t>(t) * T + t2]) continue;
                    double s = 0;
                    for (int i = 0; i < hd; i++)
                        s += static_cast<double>(q(t)[i]) * k(t2)[i];
                    pr[t2] = s * scale;
                    mx = std::max(mx, pr[t2]);
                }
                double sum = 0;
                for (int t2 = 0; t2 < T; t2++) {
                    pr[t2] = vis[static_cast<size_t>(t) * T + t2] ? std::exp(pr[t2] - mx) : 0.0;
                    sum += pr[t2];
                }
                const double esink = sinks ? std::exp(zsink - mx) : 0.0;
                // the mutation keeps the sink in out but leaves it out of lse and the backward
                const double den = mut == AttnMutation::SinkNotInLse ? sum : sum + esink;
                for (int t2 = 0; t2 < T; t2++)
                    pr[t2] /= sum + esink;
                psink[t] = esink / (sum + esink);
                r.lse[(static_cast<size_t>(b) * NH + h) * T + t] = mx + std::log(den);
                for (int t2 = 0; t2 < T; t2++) {
                    zr[t2] = 1.0;
                    if (!drop || pr[t2] == 0.0) continue;
                    const int e = mut == AttnMutation::DropoutShifted ? t2 + 1 : t2;
                    zr[t2] = attn_ref_keep(p.key, p.s.dropout, T, b, h, t, e) ? zscale : 0.0;
                }
                for (int t2 = 0; t2 < T; t2++)
                    if (pr[t2] != 0.0)
                        for (int i = 0; i < hd; i++)
                            r.out[orow(t) + i] += pr[t2] * zr[t2] * v(t2)[i];
                if (mut == AttnMutation::SinkNotInLse) // the backward's P from that lse
                    for (int t2 = 0; t2 < T; t2++)
                        pr[t2] *= (sum + esink) / sum;
            }
            // backward: dv = (P Z)^T dout; dP = dout V^T; dS = P (Z dP - rowsum(P Z dP));
            // dq = dS K s; dk = dS^T Q s; dsink = -psink rowsum(P Z dP)
            for (int t = 0; t < T; t++) {
                const float* dd = p.dout.data() + orow(t);
                const double* pr = P.data() + static_cast<size_t>(t) * T;
                const double* zr = Z.data() + static_cast<size_t>(t) * T;
                double* dpr = dP.data() + static_cast<size_t>(t) * T;
                double rs = 0;
                for (int t2 = 0; t2 < T; t2++) {
                    if (pr[t2] == 0.0) continue;
                    double s = 0;
                    for (int i = 0; i < hd; i++)
                        s += static_cast<double>(dd[i]) * v(t2)[i];
                    dpr[t2] = s * zr[t2];
                    rs += pr[t2] * dpr[t2];
                }
                if (sinks) r.dsinks[h] -= psink[t] * rs;
                for (int t2 = 0; t2 < T; t2++) {
                    if (pr[t2] == 0.0) continue;
                    const double ds = pr[t2] * (dpr[t2] - rs) * scale;
                    double* dq = r.dqkv.data() + row(t) + static_cast<size_t>(h) * hd;
                    double* dk = r.dqkv.data() + row(t2) + p.koff() + static_cast<size_t>(kh) * hd;
                    double* dv = r.dqkv.data() + row(t2) + p.voff() + static_cast<size_t>(kh) * hd;
                    for (int i = 0; i < hd; i++) {
                        dq[i] += ds * k(t2)[i];
                        dk[i] += ds * q(t)[i];
                        dv[i] += pr[t2] * zr[t2] * dd[i];
                    }
                }
            }
        }
    }
    return r;
}

// Row t of a one-head problem (B = NH = NKV = 1) in double over its band of W keys (W = 0: all
// keys up to t), with sink z: out, lse and dq (from the row's own P and delta). O(W hd): for
// sequences whose naive T x T reference would take hours.
struct AttnRowRef {
    std::vector<double> out, dq;
    double lse;
};
inline AttnRowRef attn_row_reference(const AttnProblem& p, int t, int W, double z) {
    const int hd = p.s.hd, lo = W > 0 ? std::max(0, t - W + 1) : 0;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    auto q = [&](int r) { return p.qkv.data() + static_cast<size_t>(r) * p.W; };
    auto k = [&](int r) { return q(r) + p.koff(); };
    auto v = [&](int r) { return q(r) + p.voff(); };
    const float* dd = p.dout.data() + static_cast<size_t>(t) * p.ldo;
    std::vector<double> s(static_cast<size_t>(t - lo + 1));
    double mx = z;
    for (int j = lo; j <= t; j++) {
        double x = 0;
        for (int i = 0; i < hd; i++)
            x += static_cast<double>(q(t)[i]) * k(j)[i];
        s[j - lo] = x * scale;
        mx = std::max(mx, s[j - lo]);
    }
    double sum = std::exp(z - mx);
    for (double x : s)
        sum += std::exp(x - mx);
    AttnRowRef r{std::vector<double>(hd, 0.0), std::vector<double>(hd, 0.0), mx + std::log(sum)};
    double delta = 0;
    for (int j = lo; j <= t; j++) {
        s[j - lo] = std::exp(s[j - lo] - r.lse);
        for (int i = 0; i < hd; i++)
            r.out[i] += s[j - lo] * v(j)[i];
    }
    for (int i = 0; i < hd; i++)
        delta += r.out[i] * dd[i];
    for (int j = lo; j <= t; j++) {
        double dp = 0;
        for (int i = 0; i < hd; i++)
            dp += static_cast<double>(dd[i]) * v(j)[i];
        const double ds = s[j - lo] * (dp - delta) * scale;
        for (int i = 0; i < hd; i++)
            r.dq[i] += ds * k(j)[i];
    }
    return r;
}

// The positions an op owns in a fused (B,T,W) q|k|v buffer and in an out (B,T,ldo) buffer: the
// heads of each row, not the padding after them (masks for attn_norm_err).
inline std::vector<char> attn_rows_mask(size_t rows, size_t ld, size_t used) {
    std::vector<char> m(rows * ld, 0);
    for (size_t r = 0; r < rows; r++)
        std::fill(m.begin() + r * ld, m.begin() + r * ld + used, 1);
    return m;
}
inline std::vector<char> attn_qkv_mask(const AttnProblem& p) {
    return attn_rows_mask(static_cast<size_t>(p.s.B) * p.s.T, p.W,
                          static_cast<size_t>(p.s.NH + 2 * p.s.NKV) * p.s.hd);
}
inline std::vector<char> attn_out_mask(const AttnProblem& p) {
    return attn_rows_mask(static_cast<size_t>(p.s.B) * p.s.T, p.ldo,
                          static_cast<size_t>(p.s.NH) * p.s.hd);
}
inline std::vector<double> attn_widen(const std::vector<float>& x) {
    return std::vector<double>(x.begin(), x.end());
}

// max |got - want| / max |want| over the positions where mask is true (all when mask is empty):
// the error relative to the tensor's scale.
template <class G>
double attn_norm_err(const std::vector<G>& got, const std::vector<double>& want,
                     const std::vector<char>& mask = {}) {
    double e = 0, m = 0;
    for (size_t i = 0; i < want.size(); i++) {
        if (!mask.empty() && !mask[i]) continue;
        e = std::max(e, std::fabs(static_cast<double>(got[i]) - want[i]));
        m = std::max(m, std::fabs(want[i]));
    }
    return e / std::max(m, 1e-30);
}

} // namespace sof::test
