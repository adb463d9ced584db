// CPU twin of attention.h: FlashAttention-2 on tiles of query rows and key columns (OpenBLAS sgemm
// per tile, online softmax), O(tile) memory per thread; the backward recomputes from the lse.
#include "kernels/attention.h"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace sof::kernels {

namespace detail {
void check_attention_args(int B, int T, int NH, int NKV, int hd, const char* op) {
    if (B < 0 || T < 0 || NH <= 0 || NKV <= 0 || hd <= 0)
        SOF_FAIL(Config, "%s: bad shape B=%d T=%d num_heads=%d num_kv_heads=%d head_dim=%d", op, B,
                 T, NH, NKV, hd);
    if (NH % NKV != 0)
        SOF_FAIL(Config,
                 "%s: num_heads=%d is not a multiple of num_kv_heads=%d (grouped-query attention "
                 "needs whole groups)",
                 op, NH, NKV);
}

void check_attention_layout(size_t ldq, size_t ldk, size_t ldv, size_t ldo, int NH, int NKV, int hd,
                            int q_begin, int T, const char* op) {
    const size_t C = static_cast<size_t>(hd);
    if (ldq < NH * C || ldo < NH * C || ldk < NKV * C || ldv < NKV * C)
        SOF_FAIL(Internal,
                 "%s: a row stride is shorter than its heads (ldq=%zu ldk=%zu ldv=%zu "
                 "ldo=%zu for num_heads=%d num_kv_heads=%d head_dim=%d)",
                 op, ldq, ldk, ldv, ldo, NH, NKV, hd);
    if (q_begin < 0 || q_begin > T)
        SOF_FAIL(Internal, "%s: q_begin = %d outside 0..T = %d", op, q_begin, T);
}

AttnDropout check_attention_features(int window, float dropout, const DropoutKey& key, int B, int T,
                                     int NH, const char* op) {
    if (window < 0)
        SOF_FAIL(Config, "%s: sliding window = %d is negative (0: full causal attention)", op,
                 window);
    AttnDropout d;
    d.mask = dropout_mask(dropout, key, op);
    if (!d.mask.active()) return d;
    const int heads = key.heads > 0 ? key.heads : NH;
    if (key.head0 < 0 || static_cast<long>(key.head0) + NH > heads)
        SOF_FAIL(Config,
                 "%s: the dropout key's heads %d..%d (head0 = %d, num_heads = %d) are outside the "
                 "%d global heads (DropoutKey::heads)",
                 op, key.head0, key.head0 + NH - 1, key.head0, NH, heads);
    const uint64_t tt = static_cast<uint64_t>(T) * static_cast<uint64_t>(T);
    if (!detail::global_index_fits(0, static_cast<uint64_t>(heads), tt) ||
        !detail::global_index_fits(key.batch0, static_cast<uint64_t>(B), tt * heads))
        SOF_FAIL(Config,
                 "%s: attention dropout indices (batch0 = %llu, B = %d, heads = %d, T = %d) "
                 "overflow 64 bits",
                 op, static_cast<unsigned long long>(key.batch0), B, heads, T);
    d.batch0 = key.batch0;
    d.head0 = static_cast<uint32_t>(key.head0);
    d.heads = static_cast<uint32_t>(heads);
    d.T = static_cast<uint32_t>(T);
    return d;
}
} // namespace detail

namespace cpu {

namespace {

// Tile sizes (fixed: the results must not depend on the thread count). kBr query rows by kBc
// keys: the per-thread buffers are kBr*kBc scores plus kBr*hd (and kBc*hd) accumulators.
constexpr int kBr = 128;
constexpr int kBc = 256;

// What every pass needs of the arguments, with the strides widened to size_t arithmetic.
struct Geo {
    const AttnArgs<float>& a;
    int group;                // query heads per kv head
    float scale;              // 1/sqrt(hd)
    detail::AttnDropout drop; // the probability dropout (inactive when p = 0)
    size_t row(int b, int t) const { return static_cast<size_t>(b) * a.T + t; }
    const float* q(int b, int t, int h) const {
        return a.q + row(b, t) * a.ldq + static_cast<size_t>(h) * a.head_dim;
    }
    const float* k(int b, int t, int kh) const {
        return a.k + row(b, t) * a.ldk + static_cast<size_t>(kh) * a.head_dim;
    }
    const float* v(int b, int t, int kh) const {
        return a.v + row(b, t) * a.ldv + static_cast<size_t>(kh) * a.head_dim;
    }
    size_t stat(int b, int h, int t) const { // index into lse / delta (B,NH,T)
        return (static_cast<size_t>(b) * a.num_heads + h) * a.T + t;
    }
    const int* seg(int b) const { return a.segments + static_cast<size_t>(b) * a.T; }
};

Geo make_geo(const AttnArgs<float>& a, const char* op) {
    return Geo{a, a.num_heads / a.num_kv_heads, 1.0f / std::sqrt(static_cast<float>(a.head_dim)),
               detail::check_attention_features(a.window, a.dropout, a.dropout_key, a.B, a.T,
                                                a.num_heads, op)};
}

// start[i] = max(floor, first key row t0+i sees) for the rows t0 .. t0+n-1: the first key is its
// document's first position (0 without segments), with a window W not below t0+i-W+1; query t
// sees key t2 iff start(t) <= t2 <= t. The scan back from t0 stops at floor (and at the window's
// edge) and costs no more steps than the keys the caller then visits, so it never dominates.
void row_starts(const Geo& g, int b, int t0, int n, int floor, int* start) {
    const int W = g.a.window;
    if (W > 0) floor = std::max(floor, t0 - W + 1);
    int s = floor;
    const int* seg = g.a.segments ? g.seg(b) : nullptr;
    if (seg) {
        s = t0;
        while (s > floor && seg[s - 1] == seg[t0])
            s--;
    }
    for (int i = 0; i < n; i++) {
        const int t = t0 + i;
        if (seg && i > 0 && seg[t] != seg[t - 1]) s = t;
        start[i] = W > 0 ? std::max(s, t - W + 1) : s;
    }
}

// Masks S (nr x nc, leading dim kBc) of query rows t0.. against keys c0..: -inf where not seen.
// Returns false when the whole tile is visible (nothing written).
bool mask_tile(float* S, int nr, int nc, int t0, int c0, const int* start) {
    if (c0 + nc - 1 <= t0 && c0 >= start[nr - 1]) return false; // start ascends: row nr-1's is max
    for (int i = 0; i < nr; i++) {
        const int lo = std::max(start[i] - c0, 0), hi = std::min(t0 + i - c0 + 1, nc);
        float* s = S + static_cast<size_t>(i) * kBc;
        for (int j = 0; j < std::min(lo, nc); j++)
            s[j] = -INFINITY;
        for (int j = std::max(hi, 0); j < nc; j++)
            s[j] = -INFINITY;
    }
    return true;
}

// S (nr x nc) = scale * Q K^T for q rows (ldq) and k rows (ldk).
void scores(float* S, int nr, int nc, int hd, float scale, const float* q, size_t ldq,
            const float* k, size_t ldk) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hd, scale, q,
                static_cast<int>(ldq), k, static_cast<int>(ldk), 0.0f, S, kBc);
}

// x[j] = exp(x[j] - sub) for j < n; 0 where x[j] - sub < -87 (masked scores are -inf). The
// Cephes expf: 2^k times a degree-6 polynomial of the reduced argument, within 2 ulp of
// std::exp; written without a libm call so the compiler vectorizes it (the scalar expf was a
// fifth of the op's time; the file is built with -fno-trapping-math so that the selects below
// vectorize: no result changes). Cloned for AVX-512F / AVX2 / baseline x86-64, picked at load
// time: the same operations in each (no FMA contraction: sof_flags' -ffp-contract=off; before it
// GCC fused 72 of them in the AVX-512F clone), so the same bits.
// Arguments are <= 0 up to rounding (x - max, s - lse).
// Not under TSan: the clones' resolver runs at load time, before the TSan runtime is up (a crash
// in the dynamic loader); the TSan build runs the baseline version. x86-64 only (the clones name
// x86 ISAs); other hosts (aarch64) compile the one baseline version.
#if defined(__SANITIZE_THREAD__) || !defined(__x86_64__)
#define SOF_EXP_ROW_CLONES
#else
#define SOF_EXP_ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
SOF_EXP_ROW_CLONES void exp_row(float* x, int n, float sub) {
    constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f,
                    kRound = 12582912.0f;      // 1.5 * 2^23
    constexpr int32_t kRoundBits = 0x4B400000; // bits of kRound
    for (int j = 0; j < n; j++) {
        const float u = x[j] - sub;
        const float v = std::min(std::max(u, -87.0f), 88.0f); // -inf -> -87, zeroed below
        const float t = v * kLog2e + kRound; // round(v / ln2) in the low mantissa bits
        const float k = t - kRound;
        const int32_t ki = std::bit_cast<int32_t>(t) - kRoundBits;
        float r = v - k * kLn2Hi;
        r = r - k * kLn2Lo;
        float p = 1.9875691500e-4f;
        p = p * r + 1.3981999507e-3f;
        p = p * r + 8.3334519073e-3f;
        p = p * r + 4.1665795894e-2f;
        p = p * r + 1.6666665459e-1f;
        p = p * r + 5.0000001201e-1f;
        const float y = p * r * r + r + 1.0f;
        const float two_k = std::bit_cast<float>((ki + 127) << 23);
        x[j] = u > -87.0f ? y * two_k : 0.0f;
    }
}

// P = exp(S - lse_row) in place (0 where masked); the backward's recomputed probabilities.
void probs_from_lse(float* S, int nr, int nc, const float* lse) {
    for (int i = 0; i < nr; i++)
        exp_row(S + static_cast<size_t>(i) * kBc, nc, lse[i]);
}

// s[j] *= the dropout factor of element e0 + j (m.scale kept, 0 dropped), j < n: one Philox draw
// per four consecutive global indices.
void apply_dropout(float* s, int n, const DropoutMask& m, uint64_t e0) {
    core::Philox4 w{};
    uint64_t group = ~uint64_t{0};
    for (int j = 0; j < n; j++) {
        const uint64_t e = e0 + static_cast<uint64_t>(j);
        if ((e >> 2) != group) {
            group = e >> 2;
            w = m.draw(e);
        }
        s[j] = m.keep_word(w.v[e & 3u]) ? s[j] * m.scale : 0.0f;
    }
}

// dS = P * (dP - delta_row) * scale, in place in dP. With dropout (row i's probabilities are the
// elements e0 + c0 + j, e0 = g.drop.row(b, h, t0 + i)): dS = P * (dP Z - delta_row) * scale with
// Z the dropout factor, and P becomes P Z (the weights of dV), in place.
void dscores(float* dP, float* P, int nr, int nc, const float* delta, float scale, const Geo& g,
             int b, int h, int t0, int c0) {
    for (int i = 0; i < nr; i++) {
        float* dp = dP + static_cast<size_t>(i) * kBc;
        float* p = P + static_cast<size_t>(i) * kBc;
        const float D = delta[i];
        if (g.drop.mask.active()) {
            const uint64_t e0 = g.drop.row(b, h, t0 + i) + static_cast<uint64_t>(c0);
            apply_dropout(dp, nc, g.drop.mask, e0); // dP Z
            for (int j = 0; j < nc; j++) {
                dp[j] = p[j] * (dp[j] - D) * scale;
            }
            apply_dropout(p, nc, g.drop.mask, e0); // P Z
            continue;
        }
        for (int j = 0; j < nc; j++)
            dp[j] = p[j] * (dp[j] - D) * scale;
    }
}

// sinks: d sink_h = -sum over rows of exp(sink_h - lse) * delta (the sink's probability times
// the row's sum of P D dP), added into d.dsinks[h]; a task per head, rows in order (double sums).
void sink_grads(const AttnGrads<float>& d, const float* lse, const float* delta,
                const AttnArgs<float>& a) {
    if (!a.sinks || !d.dsinks) return;
    const size_t T = static_cast<size_t>(a.T);
#pragma omp parallel for schedule(static)
    for (int h = 0; h < a.num_heads; h++) {
        double acc = 0.0;
        for (int b = 0; b < a.B; b++) {
            const size_t r0 = (static_cast<size_t>(b) * a.num_heads + h) * T;
            for (size_t t = 0; t < T; t++)
                acc += static_cast<double>(std::exp(a.sinks[h] - lse[r0 + t])) * delta[r0 + t];
        }
        d.dsinks[h] += static_cast<float>(-acc);
    }
}

void check_args(const AttnArgs<float>& a, const char* op) {
    detail::check_attention_args(a.B, a.T, a.num_heads, a.num_kv_heads, a.head_dim, op);
    detail::check_attention_layout(a.ldq, a.ldk, a.ldv, a.ldo, a.num_heads, a.num_kv_heads,
                                   a.head_dim, a.q_begin, a.T, op);
}

} // namespace

// One task per (b, h, query tile): keys from the tile's first document start to its last row, in
// kBc tiles; running max m, sum l and the unnormalized output acc per row (online softmax).
void attention_forward(float* out, float* lse, const AttnArgs<float>& a) {
    check_args(a, "attention_forward");
    const Geo g = make_geo(a, "attention_forward");
    const int T = a.T, hd = a.head_dim, q0 = a.q_begin, nqt = (T - q0 + kBr - 1) / kBr;
    const long tasks = static_cast<long>(a.B) * a.num_heads * nqt;
#pragma omp parallel
    {
        std::vector<float> S(static_cast<size_t>(kBr) * kBc), acc(static_cast<size_t>(kBr) * hd);
        float m[kBr], l[kBr];
        int start[kBr];
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < tasks; task++) {
            // Largest tiles first: the last query tile of a causal row sees the most keys.
            const int qt = nqt - 1 - static_cast<int>(task % nqt);
            const int h = static_cast<int>((task / nqt) % a.num_heads);
            const int b = static_cast<int>(task / nqt / a.num_heads);
            const int kh = h / g.group, t0 = q0 + qt * kBr, nr = std::min(kBr, T - t0);
            row_starts(g, b, t0, nr, 0, start);
            std::fill(acc.begin(), acc.end(), 0.0f);
            std::fill(m, m + nr, -INFINITY);
            std::fill(l, l + nr, 0.0f);
            const int last = t0 + nr - 1;
            for (int c0 = start[0]; c0 <= last; c0 += kBc) {
                const int nc = std::min(kBc, last + 1 - c0);
                scores(S.data(), nr, nc, hd, g.scale, g.q(b, t0, h), a.ldq, g.k(b, c0, kh), a.ldk);
                mask_tile(S.data(), nr, nc, t0, c0, start);
                for (int i = 0; i < nr; i++) {
                    float* s = S.data() + static_cast<size_t>(i) * kBc;
                    float mx = m[i];
                    for (int j = 0; j < nc; j++)
                        mx = std::max(mx, s[j]);
                    if (mx == -INFINITY) { // nothing seen yet in this row: P row stays 0
                        std::fill(s, s + nc, 0.0f);
                        continue;
                    }
                    const float alpha = std::exp(m[i] - mx); // 0 on the first seen tile
                    exp_row(s, nc, mx);
                    float sum = 0.0f;
                    for (int j = 0; j < nc; j++)
                        sum += s[j];
                    l[i] = l[i] * alpha + sum;
                    m[i] = mx;
                    if (alpha != 1.0f) {
                        float* o = acc.data() + static_cast<size_t>(i) * hd;
                        for (int d = 0; d < hd; d++)
                            o[d] *= alpha;
                    }
                    // dropout: l sums the kept and the dropped, P V the kept (scaled) only
                    if (g.drop.mask.active())
                        apply_dropout(s, nc, g.drop.mask,
                                      g.drop.row(b, h, t0 + i) + static_cast<uint64_t>(c0));
                }
                // acc (nr x hd) += P (nr x nc) @ V (nc x hd)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hd, nc, 1.0f, S.data(),
                            kBc, g.v(b, c0, kh), static_cast<int>(a.ldv), 1.0f, acc.data(), hd);
            }
            for (int i = 0; i < nr; i++) {
                // every row sees at least itself, so l >= 1; a sink joins the denominator
                float mf = m[i], lf = l[i], f = 1.0f;
                if (a.sinks) {
                    const float z = a.sinks[h], m2 = std::max(mf, z);
                    f = std::exp(mf - m2);
                    lf = lf * f + std::exp(z - m2);
                    mf = m2;
                }
                const float inv = f / lf;
                const float* o = acc.data() + static_cast<size_t>(i) * hd;
                float* dst = out + g.row(b, t0 + i) * a.ldo + static_cast<size_t>(h) * hd;
                for (int d = 0; d < hd; d++)
                    dst[d] = o[d] * inv;
                lse[g.stat(b, h, t0 + i)] = mf + std::log(lf);
            }
        }
    }
}

// Three passes, each output element written by one task in a fixed order (bitwise the same for
// any thread count, no atomics): delta per row; dk/dv per (b, kv head, key tile) over the query
// heads of its group and the query rows that see the tile; dq per (b, head, query tile) over its
// key tiles, as the forward.
void attention_backward(const AttnGrads<float>& d, const float* dout, const float* out,
                        const float* lse, float* delta, const AttnArgs<float>& a) {
    check_args(a, "attention_backward");
    if (a.q_begin != 0)
        SOF_FAIL(Internal, "attention_backward: q_begin = %d (the backward runs every row)",
                 a.q_begin);
    const Geo g = make_geo(a, "attention_backward");
    const int B = a.B, T = a.T, NH = a.num_heads, NKV = a.num_kv_heads, hd = a.head_dim;
    auto dout_row = [&](int b, int t, int h) {
        return dout + g.row(b, t) * a.ldo + static_cast<size_t>(h) * hd;
    };

    // delta = rowsum(dout * out)
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* dd = dout_row(b, t, h);
                const float* o = out + g.row(b, t) * a.ldo + static_cast<size_t>(h) * hd;
                float s = 0.0f;
                for (int i = 0; i < hd; i++)
                    s += dd[i] * o[i];
                delta[g.stat(b, h, t)] = s;
            }
        }
    }

    sink_grads(d, lse, delta, a);

    // dk, dv: keys c0 .. c0+nc-1 of kv head kh; query rows from c0 on, in kBr tiles, while they
    // still see the tile's last key (start(t) <= c0+nc-1; past a document end or the window's
    // reach no row does).
    const int nkt = (T + kBc - 1) / kBc;
    const long kv_tasks = static_cast<long>(B) * NKV * nkt;
#pragma omp parallel
    {
        std::vector<float> S(static_cast<size_t>(kBr) * kBc), dP(S.size());
        std::vector<float> dk(static_cast<size_t>(kBc) * hd), dv(dk.size());
        int start[kBr];
        float L[kBr], D[kBr];
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < kv_tasks; task++) {
            const int kt = static_cast<int>(task % nkt); // first tiles see the most query rows
            const int kh = static_cast<int>((task / nkt) % NKV);
            const int b = static_cast<int>(task / nkt / NKV);
            const int c0 = kt * kBc, nc = std::min(kBc, T - c0), clast = c0 + nc - 1;
            std::fill(dk.begin(), dk.end(), 0.0f);
            std::fill(dv.begin(), dv.end(), 0.0f);
            for (int h = kh * g.group; h < (kh + 1) * g.group; h++) {
                for (int t0 = c0; t0 < T; t0 += kBr) {
                    const int nr = std::min(kBr, T - t0);
                    // keys below c0 do not matter here: starts clamped to c0
                    row_starts(g, b, t0, nr, c0, start);
                    if (start[0] > clast) break; // later rows are in later documents
                    for (int i = 0; i < nr; i++) {
                        L[i] = lse[g.stat(b, h, t0 + i)];
                        D[i] = delta[g.stat(b, h, t0 + i)];
                    }
                    scores(S.data(), nr, nc, hd, g.scale, g.q(b, t0, h), a.ldq, g.k(b, c0, kh),
                           a.ldk);
                    mask_tile(S.data(), nr, nc, t0, c0, start);
                    probs_from_lse(S.data(), nr, nc, L);
                    // dP (nr x nc) = dout @ V^T
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hd, 1.0f,
                                dout_row(b, t0, h), static_cast<int>(a.ldo), g.v(b, c0, kh),
                                static_cast<int>(a.ldv), 0.0f, dP.data(), kBc);
                    dscores(dP.data(), S.data(), nr, nc, D, g.scale, g, b, h, t0, c0);
                    // dv (nc x hd) += (P Z)^T (nc x nr) @ dout (nr x hd)
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hd, nr, 1.0f, S.data(),
                                kBc, dout_row(b, t0, h), static_cast<int>(a.ldo), 1.0f, dv.data(),
                                hd);
                    // dk (nc x hd) += dS^T @ Q
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hd, nr, 1.0f,
                                dP.data(), kBc, g.q(b, t0, h), static_cast<int>(a.ldq), 1.0f,
                                dk.data(), hd);
                }
            }
            for (int j = 0; j < nc; j++) {
                const size_t r = g.row(b, c0 + j);
                std::memcpy(d.k + r * d.ldk + static_cast<size_t>(kh) * hd,
                            dk.data() + static_cast<size_t>(j) * hd, sizeof(float) * hd);
                std::memcpy(d.v + r * d.ldv + static_cast<size_t>(kh) * hd,
                            dv.data() + static_cast<size_t>(j) * hd, sizeof(float) * hd);
            }
        }
    }

    // dq: per query tile, over the key tiles it sees
    const int nqt = (T + kBr - 1) / kBr;
    const long q_tasks = static_cast<long>(B) * NH * nqt;
#pragma omp parallel
    {
        std::vector<float> S(static_cast<size_t>(kBr) * kBc), dP(S.size());
        std::vector<float> dq(static_cast<size_t>(kBr) * hd);
        int start[kBr];
        float L[kBr], D[kBr];
#pragma omp for schedule(dynamic, 1)
        for (long task = 0; task < q_tasks; task++) {
            const int qt = nqt - 1 - static_cast<int>(task % nqt);
            const int h = static_cast<int>((task / nqt) % NH);
            const int b = static_cast<int>(task / nqt / NH);
            const int kh = h / g.group, t0 = qt * kBr, nr = std::min(kBr, T - t0);
            const int last = t0 + nr - 1;
            row_starts(g, b, t0, nr, 0, start);
            for (int i = 0; i < nr; i++) {
                L[i] = lse[g.stat(b, h, t0 + i)];
                D[i] = delta[g.stat(b, h, t0 + i)];
            }
            std::fill(dq.begin(), dq.end(), 0.0f);
            for (int c0 = start[0]; c0 <= last; c0 += kBc) {
                const int nc = std::min(kBc, last + 1 - c0);
                scores(S.data(), nr, nc, hd, g.scale, g.q(b, t0, h), a.ldq, g.k(b, c0, kh), a.ldk);
                mask_tile(S.data(), nr, nc, t0, c0, start);
                probs_from_lse(S.data(), nr, nc, L);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hd, 1.0f,
                            dout_row(b, t0, h), static_cast<int>(a.ldo), g.v(b, c0, kh),
                            static_cast<int>(a.ldv), 0.0f, dP.data(), kBc);
                dscores(dP.data(), S.data(), nr, nc, D, g.scale, g, b, h, t0, c0);
                // dq (nr x hd) += dS (nr x nc) @ K (nc x hd)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hd, nc, 1.0f, dP.data(),
                            kBc, g.k(b, c0, kh), static_cast<int>(a.ldk), 1.0f, dq.data(), hd);
            }
            for (int i = 0; i < nr; i++)
                std::memcpy(d.q + g.row(b, t0 + i) * d.ldq + static_cast<size_t>(h) * hd,
                            dq.data() + static_cast<size_t>(i) * hd, sizeof(float) * hd);
        }
    }
}

} // namespace cpu
} // namespace sof::kernels
