// The attention op's two twins run on one test problem (the CPU twin, the CUDA twin on the op
// driver's GPU), the CUDA thresholds, and the comparisons every CUDA attention case makes.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "attention_ref.h"
#include "core/dtype.h"
#include "harness.h"
#include "kernels/attention.h"

namespace sof::test {

// Thresholds (normalized max error against the CPU twin; not yet confirmed on a GPU: derived from
// the rounding). CUDA-core kernel, fp32: both twins are within ~3e-7 of the double reference on
// the CPU side and differ only in summation order and expf (<= 2 ulp): 1e-5. bf16: inputs are
// the same bf16 values on both sides; out and the grads are rounded to bf16 on store (relative
// 2^-9 = 2e-3 per element): 5e-3 for out; the grads get the CUDA out (bf16) on both sides, so
// delta agrees, and 1e-2 leaves room for dS = P (dP - delta) cancelling. lse stays fp32 in both
// types: 1e-5. dsinks = -sum over B*T rows of exp(z - lse) delta: lse within 1e-5 on both twins,
// delta from the out the backward is given: the grads' thresholds.
constexpr double kAttnTolF32 = 1e-5, kAttnTolBf16Out = 5e-3, kAttnTolBf16Grad = 1e-2,
                 kAttnTolLse = 1e-5;
// Tensor-core kernel (bf16 only): besides the bf16 stores it rounds P to bf16 before P V
// (2^-9 relative per weight) and P^T, dS^T, dS to bf16 before the dV, dK, dQ products: out
// within 2 * 2^-9 = 4e-3 of max|out|, the grads within 3 * 2^-9 = 6e-3 of theirs (one rounding
// per operand of their products plus the store). Its tile code on the host warp emulator
// (test_flash_emu.cpp, the same code, mma in double) measures <= 3.0e-3 (out) and <= 2.9e-3
// (grads) against the CPU twin; the GPU's fp32 tensor-core accumulation differs from that by
// fp32 ulps. Thresholds: 8e-3 (out), 1.5e-2 (grads); lse is fp32 from fp32 scores: 1e-5. The same
// thresholds hold between the two CUDA kernels (both within theirs of the CPU twin's values).
constexpr double kAttnTolTcOut = 8e-3, kAttnTolTcGrad = 1.5e-2;
// dsinks accumulate (the backward adds to them): both twins start them here
constexpr float kAttnDsinkInit = 0.25f;

struct AttnRun {
    std::vector<float> out, lse, dqkv, dsinks; // dsinks empty without sinks
};

// p with its inputs rounded to E's values (the CPU twin then gets what the CUDA twin reads).
template <class E> AttnProblem attn_problem_as(const AttnShape& s) {
    AttnProblem p(s);
    if constexpr (!std::is_same_v<E, float>) {
        for (float& x : p.qkv)
            x = core::round_bf16(x);
        for (float& x : p.dout)
            x = core::round_bf16(x);
    }
    return p;
}

inline std::string attn_name(const AttnShape& s) {
    std::string n = "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) +
                    " NH=" + std::to_string(s.NH) + " NKV=" + std::to_string(s.NKV) +
                    " hd=" + std::to_string(s.hd) + (s.segments ? " segments" : "");
    if (s.window) n += " window=" + std::to_string(s.window);
    if (s.sinks) n += " sinks";
    if (s.dropout > 0.0f) n += " dropout=" + std::to_string(s.dropout);
    if (s.aligned) n += " 16-byte rows";
    return n;
}

// The CUDA twin on p (inputs converted to E) with kernel k, forward then backward, the outputs
// back as floats. dqkv and out start as NaN so an element not written shows up.
template <class E>
AttnRun attn_run_cuda(ktest::Gpu& g, const AttnProblem& p, kernels::AttnKernel k) {
    const float nan = NAN;
    auto dqkv_in = g.upload<E>(p.qkv), ddout = g.upload<E>(p.dout);
    auto dout_buf = g.upload<E>(std::vector<float>(p.out_size(), nan));
    auto dgrad = g.upload<E>(std::vector<float>(p.qkv.size(), nan));
    auto dlse = g.upload<float>(std::vector<float>(p.stat_size(), nan));
    auto ddelta = g.upload<float>(std::vector<float>(p.stat_size(), 0.0f));
    auto dseg = g.upload_ids(p.seg.empty() ? std::vector<int>(1, 0) : p.seg);
    auto dsinks = g.upload<float>(p.sinks.empty() ? std::vector<float>(1, 0.0f) : p.sinks);
    auto ddsinks = g.upload<float>(std::vector<float>(p.sinks.size() + 1, kAttnDsinkInit));
    kernels::AttnArgs<E> a = p.args(dqkv_in.get());
    a.segments = p.seg.empty() ? nullptr : dseg.get();
    a.sinks = p.sinks.empty() ? nullptr : dsinks.get();
    a.kernel = k;
    auto d = p.grads(dgrad.get());
    d.dsinks = p.sinks.empty() ? nullptr : ddsinks.get();
    const kernels::Exec ex = g.exec();
    kernels::attention_forward(ex, dout_buf.get(), dlse.get(), a);
    kernels::attention_backward(ex, d, ddout.get(), dout_buf.get(), dlse.get(), ddelta.get(), a);
    AttnRun r;
    r.out = g.download(dout_buf);
    r.lse = g.download(dlse);
    r.dqkv = g.download(dgrad);
    if (!p.sinks.empty()) {
        r.dsinks = g.download(ddsinks);
        r.dsinks.resize(p.sinks.size());
    }
    return r;
}

// The CPU twin through the op seam (kernels::cpu_exec), forward then backward; out, lse and dqkv
// start as NaN so a row or column the op fails to write shows up. out_for_backward replaces the
// forward's out in the backward when given.
inline AttnRun attn_run_cpu(const AttnProblem& p,
                            const std::vector<float>* out_for_backward = nullptr) {
    AttnRun r;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    r.out.assign(p.out_size(), nan);
    r.lse.assign(p.stat_size(), nan);
    r.dqkv.assign(p.qkv.size(), nan);
    r.dsinks.assign(p.sinks.size(), kAttnDsinkInit);
    std::vector<float> delta(p.stat_size());
    const auto a = p.args(p.qkv.data());
    auto d = p.grads(r.dqkv.data());
    d.dsinks = p.sinks.empty() ? nullptr : r.dsinks.data();
    const kernels::Exec ex = kernels::cpu_exec();
    kernels::attention_forward(ex, r.out.data(), r.lse.data(), a);
    const float* o = out_for_backward ? out_for_backward->data() : r.out.data();
    kernels::attention_backward(ex, d, p.dout.data(), o, r.lse.data(), delta.data(), a);
    return r;
}

// The CUDA twin (kernel k, inputs as E) against the CPU twin on shape s: out, lse, the grads and
// the sinks' grads within the thresholds given, and no owned element left unwritten (NaN). In
// bf16 the CPU backward gets the CUDA out (so both compute delta from the same values).
template <class E>
void attn_compare_with_cpu(ktest::Gpu& gpu, const AttnShape& s, double tol_out, double tol_grad,
                           kernels::AttnKernel k = kernels::AttnKernel::CudaCores) {
    const AttnProblem p = attn_problem_as<E>(s);
    const AttnRun g = attn_run_cuda<E>(gpu, p, k);
    const AttnRun c = std::is_same_v<E, float> ? attn_run_cpu(p) : attn_run_cpu(p, &g.out);
    const double eo = attn_norm_err(g.out, attn_widen(c.out), attn_out_mask(p));
    const double el = attn_norm_err(g.lse, attn_widen(c.lse));
    const double eg = attn_norm_err(g.dqkv, attn_widen(c.dqkv), attn_qkv_mask(p));
    const double es = p.sinks.empty() ? 0.0 : attn_norm_err(g.dsinks, attn_widen(c.dsinks));
    MESSAGE(attn_name(s) << ": out " << eo << " lse " << el << " grads " << eg << " dsinks " << es);
    CHECK(eo < tol_out);
    CHECK(el < kAttnTolLse);
    CHECK(eg < tol_grad);
    CHECK(es < tol_grad);
    const auto om = attn_out_mask(p), qm = attn_qkv_mask(p);
    size_t nan_owned = 0;
    for (size_t i = 0; i < g.dqkv.size(); i++)
        nan_owned += qm[i] && std::isnan(g.dqkv[i]);
    for (size_t i = 0; i < g.out.size(); i++)
        nan_owned += om[i] && std::isnan(g.out[i]);
    CHECK(nan_owned == 0);
}

// The tensor-core and CUDA-core kernels on shape s (bf16): within the tensor-core thresholds of
// each other; Auto picks the tensor-core kernel (the same bits), and a second run of each kernel
// gives the same bits.
inline void attn_check_kernels_agree(ktest::Gpu& g, const AttnShape& s) {
    CAPTURE(attn_name(s));
    const AttnProblem p = attn_problem_as<core::bf16>(s);
    const AttnRun tc = attn_run_cuda<core::bf16>(g, p, kernels::AttnKernel::TensorCores);
    const AttnRun cc = attn_run_cuda<core::bf16>(g, p, kernels::AttnKernel::CudaCores);
    const double eo = attn_norm_err(tc.out, attn_widen(cc.out), attn_out_mask(p));
    const double el = attn_norm_err(tc.lse, attn_widen(cc.lse));
    const double eg = attn_norm_err(tc.dqkv, attn_widen(cc.dqkv), attn_qkv_mask(p));
    MESSAGE(attn_name(s) << ": tensor-core vs CUDA-core out " << eo << " lse " << el << " grads "
                         << eg);
    CHECK(eo < kAttnTolTcOut);
    CHECK(el < kAttnTolLse);
    CHECK(eg < kAttnTolTcGrad);
    const AttnRun au = attn_run_cuda<core::bf16>(g, p, kernels::AttnKernel::Auto);
    ktest::check_bitwise("Auto = tensor-core out", au.out, tc.out);
    ktest::check_bitwise("tensor-core lse run to run", au.lse, tc.lse);
    ktest::check_bitwise("tensor-core dqkv run to run", au.dqkv, tc.dqkv);
    ktest::check_bitwise("tensor-core dsinks run to run", au.dsinks, tc.dsinks);
    const AttnRun cc2 = attn_run_cuda<core::bf16>(g, p, kernels::AttnKernel::CudaCores);
    ktest::check_bitwise("CUDA-core out run to run", cc2.out, cc.out);
    ktest::check_bitwise("CUDA-core dqkv run to run", cc2.dqkv, cc.dqkv);
    ktest::check_bitwise("CUDA-core dsinks run to run", cc2.dsinks, cc.dsinks);
}

// KV-cache decoding (q_begin, forward only, bf16, the kernel Auto picks): for q_begin = T - 1 and
// 70, rows q_begin.. equal the full forward's within bf16 rounding (the key tiles end elsewhere)
// and the rows before are left alone.
inline void attn_check_q_begin(ktest::Gpu& g, const AttnShape& s) {
    CAPTURE(attn_name(s));
    const AttnProblem p = attn_problem_as<core::bf16>(s);
    auto q = g.upload<core::bf16>(p.qkv);
    auto seg = g.upload_ids(p.seg.empty() ? std::vector<int>(1, 0) : p.seg);
    auto sinks = g.upload<float>(p.sinks.empty() ? std::vector<float>(1, 0.0f) : p.sinks);
    auto full = g.upload<core::bf16>(std::vector<float>(p.out_size(), 0.0f));
    auto lse = g.upload<float>(std::vector<float>(p.stat_size(), 0.0f));
    kernels::AttnArgs<core::bf16> a = p.args(q.get());
    a.segments = p.seg.empty() ? nullptr : seg.get();
    a.sinks = p.sinks.empty() ? nullptr : sinks.get();
    kernels::attention_forward(g.exec(), full.get(), lse.get(), a);
    const std::vector<float> f = g.download(full);
    for (int q0 : {s.T - 1, 70}) {
        CAPTURE(q0);
        auto part = g.upload<core::bf16>(std::vector<float>(p.out_size(), 12345.0f));
        a.q_begin = q0;
        kernels::attention_forward(g.exec(), part.get(), lse.get(), a);
        const std::vector<float> r = g.download(part);
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

} // namespace sof::test
