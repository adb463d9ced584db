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
#include "attention_twins.h"
#include "harness.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"

using namespace sof;
using ktest::Gpu;
using test::AttnProblem;
using test::AttnShape;

namespace {

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
    {2, 200, 4, 1, 64, true, 312, 37, true}, // sinks with B > 1 (dsinks over both sequences)
    {1, 300, 8, 2, 128, false, 313, 64, true, 0.1f},
    {1, 1000, 4, 2, 64, true, 314, 100, true, 0.1f},
    {1, 1000, 4, 4, 128, false, 315, 0, false, 0.3f},
    {1, 4096, 4, 1, 128, true, 316, 1000, true},
    {1, 300, 4, 2, 64, false, 317, 2147483647}, // a window of INT_MAX keys: full causal (no
                                                // overflow)
    {1, 150, 4, 2, 128, false, 318, 1},         // a window of one key: each row sees only itself
};

// kTcShapes, every other one with rows padded to 16 bytes (the cp.async path training takes)
std::vector<AttnShape> tc_shapes() {
    std::vector<AttnShape> v(std::begin(kTcShapes), std::end(kTcShapes));
    for (size_t i = 0; i < v.size(); i += 2)
        v[i].aligned = true;
    return v;
}

} // namespace

SOF_OP_GPU("attention", "window, sinks, dropout: CUDA-core kernel equals the CPU twin") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : kShapes) {
        CAPTURE(test::attn_name(s));
        test::attn_compare_with_cpu<float>(*g, s, test::kAttnTolF32, test::kAttnTolF32,
                                           kernels::AttnKernel::CudaCores);
        test::attn_compare_with_cpu<core::bf16>(
            *g, s, test::kAttnTolBf16Out, test::kAttnTolBf16Grad, kernels::AttnKernel::CudaCores);
    }
}

SOF_OP_GPU("attention", "window, sinks, dropout: tensor-core kernel equals the CPU twin") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    kernels::cpu::use_single_threaded_blas();
    for (const AttnShape& s : tc_shapes()) {
        CAPTURE(test::attn_name(s));
        test::attn_compare_with_cpu<core::bf16>(*g, s, test::kAttnTolTcOut, test::kAttnTolTcGrad,
                                                kernels::AttnKernel::TensorCores);
    }
}

SOF_OP_GPU("attention", "window, sinks, dropout: the kernels agree, the same bits every run") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    for (const AttnShape& s : tc_shapes())
        test::attn_check_kernels_agree(*g, s);
}

// KV-cache decoding under a window (Mistral's generate; the CUDA-core kernel): rows q_begin..
// equal the full forward's within bf16 rounding, the rows before are left alone.
SOF_OP_GPU("attention", "q_begin with a window and sinks equals the full forward's rows") {
    Gpu* g = ktest::gpu_or_skip();
    if (!g) return;
    for (int hd : {16, 64, 128})
        test::attn_check_q_begin(*g, {2, 140, 4, 2, hd, true, 321, 40, true});
}

namespace {

template <class E>
void long_window(Gpu* gpu, kernels::AttnKernel kernel, double tol_out, double tol_grad) {
    const int T = 1 << 17, W = 4096, hd = 64;
    const AttnProblem p = test::attn_problem_as<E>({1, T, 1, 1, hd, false, 331, W, true});
    const test::AttnRun g = test::attn_run_cuda<E>(*gpu, p, kernel);
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
    long_window<core::bf16>(gpu, kernels::AttnKernel::TensorCores, test::kAttnTolTcOut,
                            test::kAttnTolTcGrad);
}
