// Op driver cases of attention.h's sliding window, sinks and dropout, CPU twin: against the naive
// T x T reference in double (mask regenerated from Philox), with segments, GQA and q_begin;
// thread-count and work-split independence; mutations that must fail; refusals.
#include "attention_twins.h"
#include "harness.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"

using namespace sof;
using test::AttnMutation;
using test::AttnProblem;
using test::AttnShape;

namespace {

// Thresholds as op_attention.cpp's (fp32 against double, normalized max error); dsinks is a sum
// over B*T rows of products of O(1) terms: the same 5e-6 as the grads. Measured worst over the
// shapes below: see the MESSAGE lines (test_kernels -s).
constexpr double kTolOut = 2e-6, kTolLse = 2e-6, kTolGrad = 5e-6;

using Run = test::AttnRun;
using test::attn_name;
using test::attn_run_cpu;

std::vector<double> dsinks_ref(const test::AttnRef& ref) {
    std::vector<double> d = ref.dsinks;
    for (double& x : d)
        x += test::kAttnDsinkInit;
    return d;
}

struct Errors {
    double out, lse, grad, dsinks;
};
Errors errors(const AttnProblem& p, const Run& r, const test::AttnRef& ref) {
    Errors e{test::attn_norm_err(r.out, ref.out, test::attn_out_mask(p)),
             test::attn_norm_err(r.lse, ref.lse),
             test::attn_norm_err(r.dqkv, ref.dqkv, test::attn_qkv_mask(p)), 0.0};
    if (!p.sinks.empty()) e.dsinks = test::attn_norm_err(r.dsinks, dsinks_ref(ref));
    return e;
}

// Windows of 1 (self only), 37 (inside a tile), 128 (a CPU query tile), 500 > T (full causal);
// sinks; dropout 0.1 .. 0.5; and all together with segments and GQA at T = 1000.
const AttnShape kShapes[] = {
    {1, 1, 2, 2, 32, false, 201, 1},
    {2, 70, 4, 2, 64, false, 202, 1},
    {1, 300, 4, 1, 64, true, 203, 37},
    {1, 300, 2, 2, 80, false, 204, 128},
    {1, 129, 4, 4, 32, false, 205, 500},
    {2, 129, 4, 2, 64, true, 206, 0, true},
    {1, 7, 8, 2, 128, false, 207, 0, true},
    {2, 200, 4, 2, 32, false, 208, 0, false, 0.1f},
    {1, 130, 4, 4, 64, true, 209, 0, false, 0.5f},
    {2, 300, 8, 2, 48, false, 211, 260, true, 0.2f},
    {1, 1000, 4, 2, 64, true, 210, 100, true, 0.1f},
};

} // namespace

SOF_OP_CPU("attention", "window, sinks, dropout: equal the naive T x T reference") {
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : kShapes) {
        CAPTURE(attn_name(s));
        const AttnProblem p(s);
        const test::AttnRef ref = test::attn_reference(p);
        const Run r = attn_run_cpu(p);
        const Errors e = errors(p, r, ref);
        MESSAGE(attn_name(s) << ": out " << e.out << " lse " << e.lse << " grads " << e.grad
                             << " dsinks " << e.dsinks);
        CHECK(e.out < kTolOut);
        CHECK(e.lse < kTolLse);
        CHECK(e.grad < kTolGrad);
        CHECK(e.dsinks < kTolGrad);
        size_t nan_owned = 0;
        const auto qm = test::attn_qkv_mask(p);
        for (size_t i = 0; i < r.dqkv.size(); i++)
            nan_owned += qm[i] && std::isnan(r.dqkv[i]);
        CHECK(nan_owned == 0);
    }
}

SOF_OP_CPU("attention", "window, sinks, dropout: a mutated reference fails the thresholds") {
    kernels::cpu::use_single_threaded_blas();
    const AttnProblem p({1, 200, 4, 2, 32, true, 221, 40, true, 0.2f});
    const Run r = attn_run_cpu(p);
    const Errors ok = errors(p, r, test::attn_reference(p));
    CHECK(ok.out < kTolOut);
    CHECK(ok.grad < kTolGrad);
    // an off-by-one band (W + 1 keys): out and grads move
    const Errors w = errors(p, r, test::attn_reference(p, AttnMutation::WindowPlusOne));
    CHECK(w.out > 100 * kTolOut);
    CHECK(w.grad > 100 * kTolGrad);
    // the sink left out of lse: lse, the grads and dsinks move
    const Errors z = errors(p, r, test::attn_reference(p, AttnMutation::SinkNotInLse));
    CHECK(z.lse > 100 * kTolLse);
    CHECK(z.grad > 100 * kTolGrad);
    CHECK(z.dsinks > 100 * kTolGrad);
    // each probability with its neighbour's keep bit: out and grads move
    const Errors d = errors(p, r, test::attn_reference(p, AttnMutation::DropoutShifted));
    CHECK(d.out > 100 * kTolOut);
    CHECK(d.grad > 100 * kTolGrad);
}

SOF_OP_CPU("attention", "window, sinks, dropout: bitwise the same for 1 and 2 OpenMP threads") {
    kernels::cpu::use_single_threaded_blas();
    const int saved = omp_get_max_threads();
    for (const AttnShape& s : {AttnShape{2, 300, 8, 2, 64, true, 231, 70, true, 0.1f},
                               AttnShape{1, 600, 4, 4, 32, false, 232, 300, false, 0.3f}}) {
        CAPTURE(attn_name(s));
        const AttnProblem p(s);
        omp_set_num_threads(1);
        const Run one = attn_run_cpu(p);
        omp_set_num_threads(2);
        const Run two = attn_run_cpu(p);
        ktest::check_bitwise("out", two.out, one.out);
        ktest::check_bitwise("lse", two.lse, one.lse);
        ktest::check_bitwise("dqkv", two.dqkv, one.dqkv);
        if (s.sinks) ktest::check_bitwise("dsinks", two.dsinks, one.dsinks);
    }
    omp_set_num_threads(saved);
}

namespace {

// Copies columns [c0, c0 + n) of every row of a (rows, ld) buffer into a (rows, n) one or back.
void cols(std::vector<float>& dst, size_t ldd, size_t d0, const std::vector<float>& src, size_t lds,
          size_t s0, size_t n, size_t rows) {
    for (size_t r = 0; r < rows; r++)
        std::memcpy(dst.data() + r * ldd + d0, src.data() + r * lds + s0, n * sizeof(float));
}

} // namespace

// Ulysses hands attention whole sequences of a subset of heads, data parallelism a subset of the
// batch rows: the same global problem computed as two calls (heads 0..NH/2-1 and the rest, with
// DropoutKey::head0 and sinks + head0; or batch rows split with batch0) gives the same bits.
SOF_OP_CPU("attention", "dropout mask and results do not depend on the head or batch split") {
    kernels::cpu::use_single_threaded_blas();
    const AttnShape s{2, 150, 4, 2, 32, true, 241, 50, true, 0.25f};
    const AttnProblem whole(s);
    const Run w = attn_run_cpu(whole);
    const size_t rows = static_cast<size_t>(s.B) * s.T, hd = static_cast<size_t>(s.hd);
    // heads: two problems of NH/2 query heads and NKV/2 kv heads each
    for (int part = 0; part < 2; part++) {
        CAPTURE(part);
        AttnShape hs = s;
        hs.NH = s.NH / 2;
        hs.NKV = s.NKV / 2;
        AttnProblem p(hs);
        p.seg = whole.seg;
        p.key = whole.key;
        p.key.head0 = whole.key.head0 + part * hs.NH;
        p.sinks.assign(whole.sinks.begin() + part * hs.NH,
                       whole.sinks.begin() + (part + 1) * hs.NH);
        const size_t nq = hs.NH * hd, nkv = hs.NKV * hd;
        cols(p.qkv, p.W, 0, whole.qkv, whole.W, part * nq, nq, rows);
        cols(p.qkv, p.W, p.koff(), whole.qkv, whole.W, whole.koff() + part * nkv, nkv, rows);
        cols(p.qkv, p.W, p.voff(), whole.qkv, whole.W, whole.voff() + part * nkv, nkv, rows);
        cols(p.dout, p.ldo, 0, whole.dout, whole.ldo, part * nq, nq, rows);
        const Run r = attn_run_cpu(p);
        std::vector<float> want_out(rows * p.ldo, 0.0f), got_out(rows * p.ldo, 0.0f);
        cols(want_out, p.ldo, 0, w.out, whole.ldo, part * nq, nq, rows);
        cols(got_out, p.ldo, 0, r.out, p.ldo, 0, nq, rows);
        ktest::check_bitwise("out of the heads", got_out, want_out);
        std::vector<float> want_g(rows * p.W, 0.0f), got_g(rows * p.W, 0.0f);
        cols(want_g, p.W, 0, w.dqkv, whole.W, part * nq, nq, rows);
        cols(want_g, p.W, p.koff(), w.dqkv, whole.W, whole.koff() + part * nkv, nkv, rows);
        cols(want_g, p.W, p.voff(), w.dqkv, whole.W, whole.voff() + part * nkv, nkv, rows);
        for (size_t r0 = 0; r0 < rows; r0++)
            std::memcpy(got_g.data() + r0 * p.W, r.dqkv.data() + r0 * p.W,
                        (nq + 2 * nkv) * sizeof(float));
        ktest::check_bitwise("grads of the heads", got_g, want_g);
        const std::vector<float> want_ds(w.dsinks.begin() + part * hs.NH,
                                         w.dsinks.begin() + (part + 1) * hs.NH);
        // dsinks sums over (b, t) in order per head: the same additions
        ktest::check_bitwise("dsinks of the heads", r.dsinks, want_ds);
    }
    // batch rows: B = 2 as two calls of one row, batch0 = 5 and 6
    for (int b = 0; b < s.B; b++) {
        CAPTURE(b);
        AttnShape bs = s;
        bs.B = 1;
        AttnProblem p(bs);
        p.key = whole.key;
        p.key.batch0 = whole.key.batch0 + b;
        p.sinks = whole.sinks;
        const size_t T = static_cast<size_t>(s.T);
        p.seg.assign(whole.seg.begin() + b * T, whole.seg.begin() + (b + 1) * T);
        std::copy(whole.qkv.begin() + b * T * whole.W, whole.qkv.begin() + (b + 1) * T * whole.W,
                  p.qkv.begin());
        std::copy(whole.dout.begin() + b * T * whole.ldo,
                  whole.dout.begin() + (b + 1) * T * whole.ldo, p.dout.begin());
        const Run r = attn_run_cpu(p);
        const std::vector<float> want(w.out.begin() + b * T * whole.ldo,
                                      w.out.begin() + (b + 1) * T * whole.ldo);
        std::vector<float> got = r.out;
        const auto om = test::attn_out_mask(p);
        for (size_t i = 0; i < got.size(); i++)
            if (!om[i]) got[i] = want[i]; // the spare columns: NaN on both sides
        ktest::check_bitwise("out of the batch row", got, want);
    }
}

// KV-cache decoding under a window (Mistral's generate): rows q_begin.. equal the full forward's.
SOF_OP_CPU("attention", "q_begin with a window and sinks equals the full forward's rows") {
    kernels::cpu::use_single_threaded_blas();
    const AttnShape s{2, 300, 4, 2, 32, true, 251, 45, true};
    const AttnProblem p(s);
    std::vector<float> full(p.out_size()), lse(p.stat_size());
    kernels::attention_forward(kernels::cpu_exec(), full.data(), lse.data(), p.args(p.qkv.data()));
    for (int q0 : {s.T - 1, 170}) {
        CAPTURE(q0);
        std::vector<float> part(p.out_size(), 12345.0f), lse2(p.stat_size(), 0.0f);
        kernels::AttnArgs<float> a = p.args(p.qkv.data());
        a.q_begin = q0;
        kernels::attention_forward(kernels::cpu_exec(), part.data(), lse2.data(), a);
        size_t bad = 0;
        for (int b = 0; b < s.B; b++)
            for (int t = 0; t < s.T; t++) {
                const size_t r = (static_cast<size_t>(b) * s.T + t) * p.ldo;
                for (size_t i = 0; i < static_cast<size_t>(s.NH) * s.hd; i++)
                    bad += t >= q0 ? std::fabs(part[r + i] - full[r + i]) > 1e-6f
                                   : part[r + i] != 12345.0f;
                for (int h = 0; h < s.NH; h++) {
                    const size_t j = (static_cast<size_t>(b) * s.NH + h) * s.T + t;
                    if (t >= q0) bad += std::fabs(lse2[j] - lse[j]) > 1e-5f;
                }
            }
        CHECK(bad == 0);
    }
}

SOF_OP_CPU("attention", "a negative window, a dropout rate of 1 and a bad key are refused") {
    const AttnProblem p({1, 8, 4, 2, 32, false, 261});
    std::vector<float> out(p.out_size()), lse(p.stat_size());
    auto refused = [&](kernels::AttnArgs<float> a, const char* what) {
        try {
            kernels::attention_forward(kernels::cpu_exec(), out.data(), lse.data(), a);
            FAIL("no error for " << what);
        } catch (const core::Error& e) {
            CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
        }
    };
    kernels::AttnArgs<float> a = p.args(p.qkv.data());
    a.window = -1;
    refused(a, "sliding window = -1");
    a = p.args(p.qkv.data());
    a.dropout = 1.0f;
    refused(a, "dropout rate p = 1");
    a = p.args(p.qkv.data());
    a.dropout = 0.1f;
    a.dropout_key.heads = 5; // head0 = 2 plus 4 heads do not fit in 5
    refused(a, "outside the 5 global heads");
    a = p.args(p.qkv.data());
    a.dropout = 0.1f;
    a.dropout_key.layer = 4096;
    refused(a, "layer 4096");
}

// T = 2^18 under a window of 64: O(T W) work, a second; a kernel that ignored the window outside
// its mask (visiting the T x T tiles) would take the test past its timeout. Rows at both ends and
// in the middle against double sums over their band; dk, dv of the last key (seen by the last row
// only).
SOF_OP_CPU("attention", "a window of 64 over T = 2^18 (rows against double over the band)") {
    kernels::cpu::use_single_threaded_blas();
    const int T = 1 << 18, W = 64;
    const AttnProblem p({1, T, 1, 1, 32, false, 271, W, true});
    const Run r = attn_run_cpu(p);
    for (int t : {0, 1, W - 1, W, T / 2 + 7, T - 1}) {
        CAPTURE(t);
        const test::AttnRowRef ref = test::attn_row_reference(p, t, W, p.sinks[0]);
        const size_t o = static_cast<size_t>(t) * p.ldo, q = static_cast<size_t>(t) * p.W;
        const std::vector<float> out(r.out.begin() + o, r.out.begin() + o + 32);
        const std::vector<float> dq(r.dqkv.begin() + q, r.dqkv.begin() + q + 32);
        CHECK(test::attn_norm_err(out, ref.out) < kTolOut);
        CHECK(std::fabs(r.lse[t] - ref.lse) < 1e-5);
        CHECK(test::attn_norm_err(dq, ref.dq) < kTolGrad);
    }
    // key T-1: dv = P dout, dk = dS q scale, from row T-1 alone
    const int t = T - 1;
    const size_t row = static_cast<size_t>(t) * p.W;
    const float* q = p.qkv.data() + row;
    const float* dd = p.dout.data() + static_cast<size_t>(t) * p.ldo;
    const test::AttnRowRef ref = test::attn_row_reference(p, t, W, p.sinks[0]);
    double x = 0, dp = 0, delta = 0;
    for (int i = 0; i < 32; i++) {
        x += static_cast<double>(q[i]) * q[p.koff() + i];
        dp += static_cast<double>(dd[i]) * q[p.voff() + i];
        delta += ref.out[i] * dd[i];
    }
    const double scale = 1.0 / std::sqrt(32.0), P = std::exp(x * scale - ref.lse);
    std::vector<double> dk(32), dv(32);
    for (int i = 0; i < 32; i++) {
        dk[i] = P * (dp - delta) * scale * q[i];
        dv[i] = P * dd[i];
    }
    const std::vector<float> gk(r.dqkv.begin() + row + p.koff(),
                                r.dqkv.begin() + row + p.koff() + 32);
    const std::vector<float> gv(r.dqkv.begin() + row + p.voff(),
                                r.dqkv.begin() + row + p.voff() + 32);
    CHECK(test::attn_norm_err(gk, dk) < kTolGrad);
    CHECK(test::attn_norm_err(gv, dv) < kTolGrad);
}
