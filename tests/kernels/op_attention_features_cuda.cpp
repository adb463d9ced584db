// Op driver cases of attention.h's sliding window, sinks and dropout, CUDA twins: the CUDA-core
// kernel (fp32, bf16) and the tensor-core kernel (bf16) against the CPU twin, the two kernels
// against each other, run-to-run bits, KV-cache decoding under a window, and a long
// sliding-window sequence (label gpu; skipped without a GPU).
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "harness.h"
#include "kernels/attention.h"
#include "kernels/attention_ref.h"
#include "kernels/matmul.h"

using namespace sof;
using ktest::Gpu;
using test::AttnProblem;
using test::AttnShape;

namespace {

// Thresholds as op_attention_cuda.cpp's (their reasons there; not yet confirmed on a GPU).
// dsinks = -sum over B*T rows of exp(z - lse) delta: lse within 1e-5 on both twins, delta from
// the out the backward is given (the CUDA out on both sides in bf16): fp32 1e-5 (fp32 block sum
// against the CPU twin's double sum), bf16 the grads' thresholds.
constexpr double kTolF32 = 1e-5, kTolBf16Out = 5e-3, kTolBf16Grad = 1e-2, kTolLse = 1e-5;
constexpr double kTolTcOut = 8e-3, kTolTcGrad = 1.5e-2;
constexpr float kDsinkInit = 0.25f; // dsinks accumulate: they start here

struct Run {
    std::vector<float> out, lse, dqkv, dsinks;
};

template <class E> Run run_cuda(Gpu& g, const AttnProblem& p, kernels::AttnKernel k) {
    const float nan = NAN;
    const size_t nh = static_cast<size_t>(p.s.NH);
    auto dqkv_in = g.upload<E>(p.qkv), ddout = g.upload<E>(p.dout);
    auto dout_buf = g.upload<E>(std::vector<float>(p.out_size(), nan));
    auto dgrad = g.upload<E>(std::vector<float>(p.qkv.size(), nan));
    auto dlse = g.upload<float>(std::vector<float>(p.stat_size(), nan));
    auto ddelta = g.upload<float>(std::vector<float>(p.stat_size(), 0.0f));
    auto dseg = g.upload_ids(p.seg.empty() ? std::vector<int>(1, 0) : p.seg);
    auto dsinks = g.upload<float>(p.sinks.empty() ? std::vector<float>(1, 0.0f) : p.sinks);
    auto ddsinks = g.upload<float>(std::vector<float>(nh, kDsinkInit));
    kernels::AttnArgs<E> a = p.args(dqkv_in.get());
    a.segments = p.seg.empty() ? nullptr : dseg.get();
    a.sinks = p.sinks.empty() ? nullptr : dsinks.get();
    a.kernel = k;
    auto d = p.grads(dgrad.get());
    d.dsinks = p.sinks.empty() ? nullptr : ddsinks.get();
    const kernels::Exec ex = g.exec();
    kernels::attention_forward(ex, dout_buf.get(), dlse.get(), a);
    kernels::attention_backward(ex, d, ddout.get(), dout_buf.get(), dlse.get(), ddelta.get(), a);
    Run r;
    r.out = g.download(dout_buf);
    r.lse = g.download(dlse);
    r.dqkv = g.download(dgrad);
    if (!p.sinks.empty()) r.dsinks = g.download(ddsinks);
    return r;
}

// The CPU twin; out_for_backward replaces the forward's out in the backward when given.
Run run_cpu(const AttnProblem& p, const std::vector<float>* out_for_backward = nullptr) {
    Run r;
    r.out.assign(p.out_size(), 0.0f);
    r.lse.assign(p.stat_size(), 0.0f);
    r.dqkv.assign(p.qkv.size(), 0.0f);
    r.dsinks.assign(p.sinks.size(), kDsinkInit);
    std::vector<float> delta(p.stat_size());
    const auto a = p.args(p.qkv.data());
    auto d = p.grads(r.dqkv.data());
    d.dsinks = p.sinks.empty() ? nullptr : r.dsinks.data();
    kernels::cpu::attention_forward(r.out.data(), r.lse.data(), a);
    const float* o = out_for_backward ? out_for_backward->data() : r.out.data();
    kernels::cpu::attention_backward(d, p.dout.data(), o, r.lse.data(), delta.data(), a);
    return r;
}

std::string name(const AttnShape& s) {
    return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
           " NH=" + std::to_string(s.NH) + " NKV=" + std::to_string(s.NKV) +
           " hd=" + std::to_string(s.hd) + (s.segments ? " segments" : "") +
           " window=" + std::to_string(s.window) + (s.sinks ? " sinks" : "") +
           " dropout=" + std::to_string(s.dropout);
}

template <class E> AttnProblem problem(const AttnShape& s) {
    AttnProblem p(s);
    if constexpr (!std::is_same_v<E, float>) {
        for (float& x : p.qkv)
            x = core::round_bf16(x);
        for (float& x : p.dout)
            x = core::round_bf16(x);
    }
    return p;
}

template <class E>
void compare_with_cpu(Gpu& gpu, const AttnShape& s, double tol_out, double tol_grad,
                      kernels::AttnKernel k) {
    const AttnProblem p = problem<E>(s);
    const Run g = run_cuda<E>(gpu, p, k);
    const Run c = std::is_same_v<E, float> ? run_cpu(p) : run_cpu(p, &g.out);
    const double eo = test::attn_norm_err(g.out, test::attn_widen(c.out), test::attn_out_mask(p));
    const double el = test::attn_norm_err(g.lse, test::attn_widen(c.lse));
    const double eg = test::attn_norm_err(g.dqkv, test::attn_widen(c.dqkv), test::attn_qkv_mask(p));
    const double es =
        p.sinks.empty() ? 0.0 : test::attn_norm_err(g.dsinks, test::attn_widen(c.dsinks));
    MESSAGE(name(s) << ": out " << eo << " lse " << el << " grads " << eg << " dsinks " << es);
    CHECK(eo < tol_out);
    CHECK(el < kTolLse);
    CHECK(eg < tol_grad);
    CHECK(es < tol_grad);
}

// Windows of 1, 37, 64 (a tensor-core tile), 100, 300 (> T for some); sinks; dropout; all with
// segments and GQA; head dims of the CUDA-core kernel's register sizes.
const AttnShape kShapes[] = {
    {2, 70, 4, 2, 32, false, 301, 1},
    {1, 300, 4, 1, 64, true, 302, 37},
    {1, 129, 2, 2, 80, false, 303, 300, true},
    {2, 129, 4, 2, 128, true, 304, 0, true},
    {2, 200, 4, 2, 48, false, 305, 0, false, 0.1f},
    {1, 1000, 4, 2, 64, true, 306, 100, true, 0.1f},
    {1, 300, 8, 2, 128, false, 307, 64, true, 0.5f},
};

// The tensor-core kernel's classes: head dims 64 and 128, windows not a multiple of its tiles and
// a tile wide, T with tails.
const AttnShape kTcShapes[] = {
    {1, 17, 4, 2, 64, false, 311, 5, true},
    {2, 200, 4, 1, 64, true, 312, 37},
    {1, 300, 8, 2, 128, false, 313, 64, true, 0.1f},
    {1, 1000, 4, 2, 64, true, 314, 100, true, 0.1f},
    {1, 1000, 4, 4, 128, false, 315, 0, false, 0.3f},
    {1, 4096, 4, 1, 128, true, 316, 1000, true},
};

} // namespace

SOF_OP_GPU("attention", "window, sinks, dropout: CUDA-core kernel equals the CPU twin") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : kShapes) {
        CAPTURE(name(s));
        compare_with_cpu<float>(*g, s, kTolF32, kTolF32, kernels::AttnKernel::CudaCores);
        compare_with_cpu<core::bf16>(*g, s, kTolBf16Out, kTolBf16Grad,
                                     kernels::AttnKernel::CudaCores);
    }
}

SOF_OP_GPU("attention", "window, sinks, dropout: tensor-core kernel equals the CPU twin") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : kTcShapes) {
        CAPTURE(name(s));
        compare_with_cpu<core::bf16>(*g, s, kTolTcOut, kTolTcGrad,
                                     kernels::AttnKernel::TensorCores);
    }
}

SOF_OP_GPU("attention", "window, sinks, dropout: the kernels agree, the same bits every run") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    for (const AttnShape& s : kTcShapes) {
        CAPTURE(name(s));
        const AttnProblem p = problem<core::bf16>(s);
        const Run tc = run_cuda<core::bf16>(*g, p, kernels::AttnKernel::TensorCores);
        const Run cc = run_cuda<core::bf16>(*g, p, kernels::AttnKernel::CudaCores);
        CHECK(test::attn_norm_err(tc.out, test::attn_widen(cc.out), test::attn_out_mask(p)) <
              kTolTcOut);
        CHECK(test::attn_norm_err(tc.lse, test::attn_widen(cc.lse)) < kTolLse);
        CHECK(test::attn_norm_err(tc.dqkv, test::attn_widen(cc.dqkv), test::attn_qkv_mask(p)) <
              kTolTcGrad);
        // Auto picks the tensor-core kernel; a second run gives the same bits
        const Run au = run_cuda<core::bf16>(*g, p, kernels::AttnKernel::Auto);
        ktest::check_bitwise("Auto = tensor-core out", au.out, tc.out);
        ktest::check_bitwise("tensor-core dqkv run to run", au.dqkv, tc.dqkv);
        ktest::check_bitwise("tensor-core dsinks run to run", au.dsinks, tc.dsinks);
        const Run cc2 = run_cuda<core::bf16>(*g, p, kernels::AttnKernel::CudaCores);
        ktest::check_bitwise("CUDA-core dqkv run to run", cc2.dqkv, cc.dqkv);
        ktest::check_bitwise("CUDA-core dsinks run to run", cc2.dsinks, cc.dsinks);
    }
}

// KV-cache decoding under a window (Mistral's generate; the CUDA-core kernel): rows q_begin..
// equal the full forward's within bf16 rounding, the rows before are left alone.
SOF_OP_GPU("attention", "q_begin with a window and sinks equals the full forward's rows") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    for (int hd : {16, 64, 128}) {
        const AttnShape s{2, 140, 4, 2, hd, true, 321, 40, true};
        CAPTURE(name(s));
        const AttnProblem p = problem<core::bf16>(s);
        auto q = g->upload<core::bf16>(p.qkv);
        auto seg = g->upload_ids(p.seg);
        auto sinks = g->upload<float>(p.sinks);
        auto full = g->upload<core::bf16>(std::vector<float>(p.out_size(), 0.0f));
        auto lse = g->upload<float>(std::vector<float>(p.stat_size(), 0.0f));
        kernels::AttnArgs<core::bf16> a = p.args(q.get());
        a.segments = seg.get();
        a.sinks = sinks.get();
        kernels::attention_forward(g->exec(), full.get(), lse.get(), a);
        const std::vector<float> f = g->download(full);
        for (int q0 : {s.T - 1, 70}) {
            CAPTURE(q0);
            auto part = g->upload<core::bf16>(std::vector<float>(p.out_size(), 12345.0f));
            a.q_begin = q0;
            kernels::attention_forward(g->exec(), part.get(), lse.get(), a);
            const std::vector<float> r = g->download(part);
            size_t bad = 0;
            for (int b = 0; b < s.B; b++)
                for (int t = 0; t < s.T; t++)
                    for (size_t i = 0; i < static_cast<size_t>(s.NH) * s.hd; i++) {
                        const size_t j = (static_cast<size_t>(b) * s.T + t) * p.ldo + i;
                        bad += t >= q0 ? std::fabs(r[j] - f[j]) > 1e-2f * (1 + std::fabs(f[j]))
                                       : r[j] != core::round_bf16(12345.0f);
                    }
            CHECK(bad == 0);
        }
    }
}

namespace {

template <class E>
void long_window(Gpu* gpu, kernels::AttnKernel kernel, double tol_out, double tol_grad) {
    const int T = 1 << 17, W = 4096, hd = 64;
    const AttnProblem p = problem<E>({1, T, 1, 1, hd, false, 331, W, true});
    const Run g = run_cuda<E>(*gpu, p, kernel);
    size_t bad = 0;
    for (float x : g.out)
        bad += !std::isfinite(x);
    for (float x : g.dqkv)
        bad += !std::isfinite(x);
    CHECK(bad == 0);
    for (int t : {0, 1, W - 1, W, T / 2, T - 1}) {
        CAPTURE(t);
        const test::AttnRowRef r = test::attn_row_reference(p, t, W, p.sinks[0]);
        const size_t o = static_cast<size_t>(t) * p.ldo, q = static_cast<size_t>(t) * p.W;
        const std::vector<float> out(g.out.begin() + o, g.out.begin() + o + hd);
        const std::vector<float> dq(g.dqkv.begin() + q, g.dqkv.begin() + q + hd);
        CHECK(test::attn_norm_err(out, r.out) < tol_out);
        CHECK(std::fabs(g.lse[t] - r.lse) < 1e-4);
        CHECK(test::attn_norm_err(dq, r.dq) < tol_grad);
    }
}

} // namespace

// T = 2^17 under a window of 4096 (Mistral's): rows at both ends and in the middle against double
// sums over their band (the kernels skip every tile outside it: O(T W), not O(T^2)).
SOF_OP_GPU("attention", "a window of 4096 over T = 2^17 (rows against double over the band)") {
    Gpu* gpu = ktest::gpu_or_skip();
    if (!gpu) return;
    long_window<float>(gpu, kernels::AttnKernel::CudaCores, 1e-4, 1e-4);
    long_window<core::bf16>(gpu, kernels::AttnKernel::TensorCores, kTolTcOut, kTolTcGrad);
}
