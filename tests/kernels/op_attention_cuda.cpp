// Op driver cases of attention.h, CUDA twin: against the CPU twin (fp32 and bf16), run-to-run
// determinism, and a sequence whose T x T scores would not fit in device memory (label gpu).
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "attention_twins.h"
#include "harness.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"

using namespace sof;
using ktest::Gpu;
using test::AttnProblem;
using test::AttnShape;

namespace {

const AttnShape kShapes[] = {
    {2, 1, 2, 2, 32, false, 1},     {1, 1, 4, 1, 128, true, 2},     {2, 7, 4, 1, 64, true, 3},
    {1, 7, 8, 2, 128, false, 4},    {2, 64, 4, 4, 64, false, 5},    {1, 64, 8, 2, 96, true, 6},
    {1, 129, 4, 1, 128, true, 7},   {2, 129, 8, 2, 32, false, 8},   {1, 129, 4, 4, 64, true, 9},
    {1, 1000, 4, 1, 64, false, 11}, {2, 1000, 8, 2, 128, true, 12},
};

} // namespace

// The CUDA-core kernel (fp32, and bf16 forced to it): the shape classes, then every head dim the
// models use (any up to 256; 12 is Qwen3's tiny test head dim, not a multiple of 8).
const AttnShape kHeadDimShapes[] = {
    {1, 70, 4, 2, 12, true, 71},    {2, 33, 2, 2, 16, false, 72}, {1, 70, 4, 1, 48, true, 73},
    {1, 70, 2, 2, 80, false, 74},   {2, 45, 4, 2, 160, true, 75}, {1, 70, 2, 1, 256, true, 76},
    {1, 129, 2, 2, 256, false, 77},
};

SOF_OP_GPU("attention", "equals the CPU twin (fp32)") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : kShapes) {
        CAPTURE(test::attn_name(s));
        test::attn_compare_with_cpu<float>(*g, s, test::kAttnTolF32, test::kAttnTolF32);
    }
    for (const AttnShape& s : kHeadDimShapes) {
        CAPTURE(test::attn_name(s));
        test::attn_compare_with_cpu<float>(*g, s, test::kAttnTolF32, test::kAttnTolF32);
    }
}

SOF_OP_GPU("attention", "equals the CPU twin (bf16 in and out, CUDA-core kernel)") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : kShapes) {
        CAPTURE(test::attn_name(s));
        test::attn_compare_with_cpu<core::bf16>(*g, s, test::kAttnTolBf16Out,
                                                test::kAttnTolBf16Grad);
    }
    for (const AttnShape& s : kHeadDimShapes) {
        CAPTURE(test::attn_name(s));
        test::attn_compare_with_cpu<core::bf16>(*g, s, test::kAttnTolBf16Out,
                                                test::kAttnTolBf16Grad);
    }
}

// The tensor-core kernel: T = 1, 17, 128, 1000, 4096 (one row, tile tails, one tile, many, long),
// head dims 64 and 128, MHA and GQA 4:1 / 8:2, causal always, with and without segments.
const AttnShape kTcShapes[] = {
    {1, 1, 4, 4, 64, false, 81},    {2, 1, 4, 1, 128, true, 82},     {2, 17, 4, 2, 64, true, 83},
    {1, 17, 8, 8, 128, false, 84},  {1, 128, 8, 8, 64, true, 85},    {2, 128, 8, 2, 128, false, 86},
    {1, 1000, 8, 2, 64, true, 87},  {1, 1000, 4, 4, 128, false, 88}, {1, 1000, 4, 1, 128, true, 89},
    {1, 4096, 4, 1, 64, false, 90}, {1, 4096, 4, 2, 128, true, 91},
};

// kTcShapes, every other one (both head dims, documents, ragged and 4096-long sequences) with rows
// padded to 16 bytes: the cp.async path the model's fused qkv takes, the others element by element
std::vector<AttnShape> tc_shapes() {
    std::vector<AttnShape> v(std::begin(kTcShapes), std::end(kTcShapes));
    for (size_t i = 0; i < v.size(); i += 2)
        v[i].aligned = true;
    return v;
}

SOF_OP_GPU("attention", "tensor-core kernel equals the CPU twin (bf16)") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : tc_shapes()) {
        CAPTURE(test::attn_name(s));
        test::attn_compare_with_cpu<core::bf16>(*g, s, test::kAttnTolTcOut, test::kAttnTolTcGrad,
                                                kernels::AttnKernel::TensorCores);
    }
}

SOF_OP_GPU("attention", "tensor-core and CUDA-core kernels agree, the same bits every run (bf16)") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    for (const AttnShape& s : tc_shapes())
        test::attn_check_kernels_agree(*g, s);
}

SOF_OP_GPU("attention", "the same bits on every run") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    const AttnProblem p({2, 300, 8, 2, 64, true, 31});
    const test::AttnRun a = test::attn_run_cuda<float>(*g, p, kernels::AttnKernel::CudaCores),
                        b = test::attn_run_cuda<float>(*g, p, kernels::AttnKernel::CudaCores);
    CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(a.dqkv.data(), b.dqkv.data(), a.dqkv.size() * sizeof(float)) == 0);
    for (int hd : {64, 128}) { // the tensor-core kernel too
        const AttnProblem pb = test::attn_problem_as<core::bf16>({2, 300, 8, 2, hd, true, 32});
        const test::AttnRun x =
            test::attn_run_cuda<core::bf16>(*g, pb, kernels::AttnKernel::TensorCores);
        const test::AttnRun y =
            test::attn_run_cuda<core::bf16>(*g, pb, kernels::AttnKernel::TensorCores);
        CHECK(std::memcmp(x.out.data(), y.out.data(), x.out.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(x.lse.data(), y.lse.data(), x.lse.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(x.dqkv.data(), y.dqkv.data(), x.dqkv.size() * sizeof(float)) == 0);
    }
}

// KV-cache decoding (q_begin, forward only) runs the CUDA-core kernel at every head dim: rows
// q_begin.. equal the full forward's, the rows before are left alone.
SOF_OP_GPU("attention", "q_begin computes the last rows only (every head dim)") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    for (int hd : {12, 16, 64, 80, 128, 256})
        test::attn_check_q_begin(*g, {2, 140, 4, 2, hd, hd % 32 == 0, 63});
}

SOF_OP_GPU("attention", "shapes a kernel cannot run are refused by name") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    auto refused = [&](auto tag, int hd, kernels::AttnKernel k, int q_begin, const char* what,
                       bool short_ldq = false) {
        using E = decltype(tag);
        const AttnProblem p({1, 8, 2, 2, hd, false, 51});
        auto q = g->upload<E>(p.qkv);
        auto o = g->upload<E>(std::vector<float>(p.out_size()));
        auto l = g->upload<float>(std::vector<float>(p.stat_size()));
        kernels::AttnArgs<E> a = p.args(q.get());
        a.kernel = k;
        a.q_begin = q_begin;
        if (short_ldq) a.ldq = static_cast<size_t>(p.s.NH) * hd - 1;
        try {
            kernels::attention_forward(g->exec(), o.get(), l.get(), a);
            FAIL("no error for " << what);
        } catch (const core::Error& e) {
            CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
        }
    };
    refused(float{}, 264, kernels::AttnKernel::Auto, 0, "head_dim=264");
    refused(core::bf16{}, 80, kernels::AttnKernel::TensorCores, 0, "head_dim=80");
    refused(float{}, 64, kernels::AttnKernel::TensorCores, 0, "fp32");
    refused(core::bf16{}, 64, kernels::AttnKernel::TensorCores, 3, "q_begin");
    // the layout check both twins share (a GPU would read overlapping rows without it)
    refused(float{}, 64, kernels::AttnKernel::Auto, 0, "row stride", true);
    refused(core::bf16{}, 64, kernels::AttnKernel::Auto, 9, "q_begin = 9 outside 0..T = 8");
}

// T = 2^18, one head of 64: its T x T fp32 scores would be 256 GiB, more than any GPU has. Rows
// and keys at both ends are checked against double sums over what they see (O(T) each): the
// CUDA-core kernel in fp32 (sums over 2^18 keys in fp32: 1e-4), the tensor-core kernel in bf16
// (its thresholds above).
template <class E>
void long_sequence(Gpu* gpu, kernels::AttnKernel kernel, double tol_out, double tol_grad) {
    const int T = 1 << 18, hd = 64;
    const AttnProblem p = test::attn_problem_as<E>({1, T, 1, 1, hd, false, 61});
    const test::AttnRun g = test::attn_run_cuda<E>(*gpu, p, kernel);
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
        CHECK(test::attn_norm_err(g_out, out) < tol_out);
        CHECK(std::fabs(g.lse[t] - (mx + std::log(sum))) < 1e-4);
        CHECK(test::attn_norm_err(g_dq, dq) < tol_grad);
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
        CHECK(test::attn_norm_err(g_dk, dk) < tol_grad);
        CHECK(test::attn_norm_err(g_dv, dv) < tol_grad);
    }
}

SOF_OP_GPU("attention", "a sequence whose T x T scores would not fit in device memory") {
    Gpu* gpu = ktest::gpu_or_skip();
    if (!gpu) return;
    long_sequence<float>(gpu, kernels::AttnKernel::CudaCores, 1e-4, 1e-4);
    long_sequence<core::bf16>(gpu, kernels::AttnKernel::TensorCores, test::kAttnTolTcOut,
                              test::kAttnTolTcGrad);
}
