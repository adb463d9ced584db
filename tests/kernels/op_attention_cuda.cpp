// Op driver cases of attention.h, CUDA twin: against the CPU twin (fp32 and bf16), run-to-run
// determinism, and a sequence whose T x T scores would not fit in device memory (label gpu).
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "harness.h"
#include "kernels/attention.h"
#include "kernels/attention_ref.h"
#include "kernels/matmul.h"

using namespace sof;
using ktest::Gpu;
using test::AttnProblem;
using test::AttnShape;

namespace {

// Thresholds (normalized max error against the CPU twin; not yet confirmed on a GPU: derived from
// the rounding). fp32: both twins are within ~3e-7 of the double reference on the CPU side and
// differ only in summation order and expf (<= 2 ulp): 1e-5. bf16: inputs are the same bf16
// values on both sides; out and the grads are rounded to bf16 on store (relative 2^-9 = 2e-3 per
// element): 5e-3 for out; the grads get the CUDA out (bf16) on both sides, so delta agrees, and
// 1e-2 leaves room for dS = P (dP - delta) cancelling. lse stays fp32 in both types: 1e-5.
constexpr double kTolF32 = 1e-5, kTolBf16Out = 5e-3, kTolBf16Grad = 1e-2, kTolLse = 1e-5;

struct Run {
    std::vector<float> out, lse, dqkv;
};

// The CUDA twin on p (inputs converted to E), the outputs back as floats. dqkv and out start as
// NaN so an element not written shows up.
template <class E> Run run_cuda(Gpu& g, const AttnProblem& p) {
    const float nan = NAN;
    auto dqkv_in = g.upload<E>(p.qkv), ddout = g.upload<E>(p.dout);
    auto dout_buf = g.upload<E>(std::vector<float>(p.out_size(), nan));
    auto dgrad = g.upload<E>(std::vector<float>(p.qkv.size(), nan));
    auto dlse = g.upload<float>(std::vector<float>(p.stat_size(), nan));
    auto ddelta = g.upload<float>(std::vector<float>(p.stat_size(), 0.0f));
    auto dseg = g.upload_ids(p.seg.empty() ? std::vector<int>(1, 0) : p.seg);
    kernels::AttnArgs<E> a = p.args(dqkv_in.get());
    a.segments = p.seg.empty() ? nullptr : dseg.get();
    const kernels::Exec ex = g.exec();
    kernels::attention_forward(ex, dout_buf.get(), dlse.get(), a);
    kernels::attention_backward(ex, p.grads(dgrad.get()), ddout.get(), dout_buf.get(), dlse.get(),
                                ddelta.get(), a);
    Run r;
    r.out = g.download(dout_buf);
    r.lse = g.download(dlse);
    r.dqkv = g.download(dgrad);
    return r;
}

// The CPU twin; out_for_backward replaces the forward's out in the backward when given.
Run run_cpu(const AttnProblem& p, const std::vector<float>* out_for_backward = nullptr) {
    Run r;
    r.out.assign(p.out_size(), 0.0f);
    r.lse.assign(p.stat_size(), 0.0f);
    r.dqkv.assign(p.qkv.size(), 0.0f);
    std::vector<float> delta(p.stat_size());
    const auto a = p.args(p.qkv.data());
    kernels::cpu::attention_forward(r.out.data(), r.lse.data(), a);
    const float* o = out_for_backward ? out_for_backward->data() : r.out.data();
    kernels::cpu::attention_backward(p.grads(r.dqkv.data()), p.dout.data(), o, r.lse.data(),
                                     delta.data(), a);
    return r;
}

std::vector<double> widen(const std::vector<float>& x) {
    return std::vector<double>(x.begin(), x.end());
}

// Owned positions of the fused (B,T,W) and out (B,T,ldo) buffers.
std::vector<char> mask_rows(size_t rows, size_t ld, size_t used) {
    std::vector<char> m(rows * ld, 0);
    for (size_t r = 0; r < rows; r++)
        std::fill(m.begin() + r * ld, m.begin() + r * ld + used, 1);
    return m;
}

std::string name(const AttnShape& s) {
    return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
           " NH=" + std::to_string(s.NH) + " NKV=" + std::to_string(s.NKV) +
           " hd=" + std::to_string(s.hd) + (s.segments ? " segments" : "");
}

const AttnShape kShapes[] = {
    {2, 1, 2, 2, 32, false, 1},     {1, 1, 4, 1, 128, true, 2},     {2, 7, 4, 1, 64, true, 3},
    {1, 7, 8, 2, 128, false, 4},    {2, 64, 4, 4, 64, false, 5},    {1, 64, 8, 2, 96, true, 6},
    {1, 129, 4, 1, 128, true, 7},   {2, 129, 8, 2, 32, false, 8},   {1, 129, 4, 4, 64, true, 9},
    {1, 1000, 4, 1, 64, false, 11}, {2, 1000, 8, 2, 128, true, 12},
};

template <class E>
void compare_with_cpu(Gpu& gpu, const AttnShape& s, double tol_out, double tol_grad) {
    AttnProblem p(s);
    if constexpr (!std::is_same_v<E, float>) { // the CPU twin gets the same bf16 values
        for (float& x : p.qkv)
            x = core::round_bf16(x);
        for (float& x : p.dout)
            x = core::round_bf16(x);
    }
    const Run g = run_cuda<E>(gpu, p);
    const Run c = std::is_same_v<E, float> ? run_cpu(p) : run_cpu(p, &g.out);
    const size_t rows = static_cast<size_t>(s.B) * s.T;
    const auto om = mask_rows(rows, p.ldo, static_cast<size_t>(s.NH) * s.hd);
    const auto qm = mask_rows(rows, p.W, static_cast<size_t>(s.NH + 2 * s.NKV) * s.hd);
    CHECK(test::attn_norm_err(g.out, widen(c.out), om) < tol_out);
    CHECK(test::attn_norm_err(g.lse, widen(c.lse)) < kTolLse);
    CHECK(test::attn_norm_err(g.dqkv, widen(c.dqkv), qm) < tol_grad);
    size_t nan_owned = 0;
    for (size_t i = 0; i < g.dqkv.size(); i++)
        nan_owned += qm[i] && std::isnan(g.dqkv[i]);
    for (size_t i = 0; i < g.out.size(); i++)
        nan_owned += om[i] && std::isnan(g.out[i]);
    CHECK(nan_owned == 0);
}

} // namespace

SOF_OP_GPU("attention", "equals the CPU twin (fp32)") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : kShapes) {
        CAPTURE(name(s));
        compare_with_cpu<float>(*g, s, kTolF32, kTolF32);
    }
}

SOF_OP_GPU("attention", "equals the CPU twin (bf16 in and out)") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : kShapes) {
        CAPTURE(name(s));
        compare_with_cpu<core::bf16>(*g, s, kTolBf16Out, kTolBf16Grad);
    }
}

SOF_OP_GPU("attention", "the same bits on every run") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    const AttnProblem p({2, 300, 8, 2, 64, true, 31});
    const Run a = run_cuda<float>(*g, p), b = run_cuda<float>(*g, p);
    CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(a.dqkv.data(), b.dqkv.data(), a.dqkv.size() * sizeof(float)) == 0);
}

SOF_OP_GPU("attention", "an unsupported head dim is refused by name") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    const AttnProblem p({1, 8, 2, 2, 80, false, 51});
    auto q = g->upload<float>(p.qkv), o = g->upload<float>(std::vector<float>(p.out_size()));
    auto l = g->upload<float>(std::vector<float>(p.stat_size()));
    try {
        kernels::attention_forward(g->exec(), o.get(), l.get(), p.args(q.get()));
        FAIL("no error for head_dim=80");
    } catch (const core::Error& e) {
        CHECK(std::string(e.what()).find("head_dim=80") != std::string::npos);
    }
}

// T = 2^18, one head of 64: its T x T fp32 scores would be 256 GiB, more than any GPU has. Rows
// and keys at both ends are checked against double sums over what they see (O(T) each).
SOF_OP_GPU("attention", "a sequence whose T x T scores would not fit in device memory") {
    Gpu* gpu = ktest::gpu_or_skip();
    if (!gpu) return;
    const int T = 1 << 18, hd = 64;
    const AttnProblem p({1, T, 1, 1, hd, false, 61});
    const Run g = run_cuda<float>(*gpu, p);
    size_t bad = 0;
    for (float x : g.out)
        bad += !std::isfinite(x);
    for (float x : g.dqkv)
        bad += !std::isfinite(x);
    CHECK(bad == 0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    auto q = [&](int t) { return p.qkv.data() + static_cast<size_t>(t) * p.W; };
    auto k = [&](int t) { return q(t) + p.koff(); };
    auto v = [&](int t) { return q(t) + p.voff(); };
    auto dd = [&](int t) { return p.dout.data() + static_cast<size_t>(t) * p.ldo; };
    // row t: out, lse and dq in double from the keys 0..t
    for (int t : {0, 1, T / 2, T - 2, T - 1}) {
        CAPTURE(t);
        std::vector<double> s(static_cast<size_t>(t) + 1), out(hd, 0.0), dq(hd, 0.0);
        double mx = -INFINITY, sum = 0, delta = 0;
        for (int j = 0; j <= t; j++) {
            double x = 0;
            for (int i = 0; i < hd; i++)
                x += static_cast<double>(q(t)[i]) * k(j)[i];
            s[j] = x * scale;
            mx = std::max(mx, s[j]);
        }
        for (int j = 0; j <= t; j++)
            sum += std::exp(s[j] - mx);
        for (int j = 0; j <= t; j++) {
            s[j] = std::exp(s[j] - mx) / sum; // P
            for (int i = 0; i < hd; i++)
                out[i] += s[j] * v(j)[i];
        }
        for (int i = 0; i < hd; i++)
            delta += out[i] * dd(t)[i];
        for (int j = 0; j <= t; j++) {
            double dp = 0;
            for (int i = 0; i < hd; i++)
                dp += static_cast<double>(dd(t)[i]) * v(j)[i];
            const double ds = s[j] * (dp - delta) * scale;
            for (int i = 0; i < hd; i++)
                dq[i] += ds * k(j)[i];
        }
        const std::vector<float> g_out(g.out.begin() + static_cast<size_t>(t) * p.ldo,
                                       g.out.begin() + static_cast<size_t>(t) * p.ldo + hd);
        const std::vector<float> g_dq(g.dqkv.begin() + static_cast<size_t>(t) * p.W,
                                      g.dqkv.begin() + static_cast<size_t>(t) * p.W + hd);
        CHECK(test::attn_norm_err(g_out, out) < 1e-4); // sums over 2^18 keys in fp32
        CHECK(std::fabs(g.lse[t] - (mx + std::log(sum))) < 1e-4);
        CHECK(test::attn_norm_err(g_dq, dq) < 1e-4);
    }
    // key T-1 is seen by row T-1 only: dk = dS * q s, dv = P * dout
    {
        const int t = T - 1;
        double x = 0, dp = 0, delta = 0;
        for (int i = 0; i < hd; i++) {
            x += static_cast<double>(q(t)[i]) * k(t)[i];
            dp += static_cast<double>(dd(t)[i]) * v(t)[i];
            delta += static_cast<double>(dd(t)[i]) * g.out[static_cast<size_t>(t) * p.ldo + i];
        }
        const double P = std::exp(x * scale - g.lse[t]);
        std::vector<double> dk(hd), dv(hd);
        for (int i = 0; i < hd; i++) {
            dk[i] = P * (dp - delta) * scale * q(t)[i];
            dv[i] = P * dd(t)[i];
        }
        const size_t r = static_cast<size_t>(t) * p.W;
        const std::vector<float> g_dk(g.dqkv.begin() + r + p.koff(),
                                      g.dqkv.begin() + r + p.koff() + hd);
        const std::vector<float> g_dv(g.dqkv.begin() + r + p.voff(),
                                      g.dqkv.begin() + r + p.voff() + hd);
        CHECK(test::attn_norm_err(g_dk, dk) < 1e-4);
        CHECK(test::attn_norm_err(g_dv, dv) < 1e-4);
    }
}
