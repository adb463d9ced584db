// Op driver cases of moe_router.h: the selection (exact), the weights against double, the
// logits' gradient against central differences in double; ties, threads, the CUDA twin.
#include <omp.h>

#include <cmath>
#include <string>

#include "harness.h"
#include "kernels/moe_router.h"
#include "moe_ref.h"

using namespace sof;
using namespace sof::ktest;
using kernels::RouterArgs;
using kernels::RouterKind;

namespace {

struct Case {
    const char* name;
    int N, E, K;
    RouterKind kind;
    bool renorm;
};
// tiny; Mixtral (8 experts, top-2, renormalized); Qwen3-MoE-like (128 experts, top-8, with and
// without norm_topk_prob); GPT-OSS (32 experts, top-4 of the logits); odd sizes (tails of the
// CUDA twin's 32-lane rows); the largest E the twin takes
const Case kCases[] = {
    {"tiny", 1, 1, 1, RouterKind::SoftmaxTopk, true},
    {"mixtral", 19, 8, 2, RouterKind::SoftmaxTopk, true},
    {"qwen3moe", 40, 128, 8, RouterKind::SoftmaxTopk, false},
    {"qwen3moe-norm", 17, 128, 8, RouterKind::SoftmaxTopk, true},
    {"gpt-oss", 33, 32, 4, RouterKind::TopkSoftmax, false},
    {"odd", 7, 37, 5, RouterKind::TopkSoftmax, false},
    {"odd-softmax", 5, 33, 3, RouterKind::SoftmaxTopk, false},
    {"max-experts", 3, kernels::kMaxExperts, kernels::kMaxTopK, RouterKind::SoftmaxTopk, true},
};

RouterArgs args_of(const Case& c) {
    RouterArgs a;
    a.N = c.N;
    a.E = c.E;
    a.K = c.K;
    a.kind = c.kind;
    a.renorm = c.renorm;
    return a;
}

// d(sum dw * w)/dlogits by central differences of moe::router_weights in double, row by row (the
// selection held fixed, as autograd sees it).
std::vector<double> fd_grad(const std::vector<float>& logits, const std::vector<int>& idx,
                            const std::vector<float>& dw, const RouterArgs& a) {
    std::vector<double> g(logits.size());
    RouterArgs one = a;
    one.N = 1;
    for (int n = 0; n < a.N; n++) {
        std::vector<double> row(logits.begin() + static_cast<long>(n) * a.E,
                                logits.begin() + static_cast<long>(n + 1) * a.E);
        const std::vector<int> ix(idx.begin() + static_cast<long>(n) * a.K,
                                  idx.begin() + static_cast<long>(n + 1) * a.K);
        auto loss = [&](const std::vector<double>& v) {
            const std::vector<double> w = moe::router_weights(v, ix, one);
            double l = 0.0;
            for (int k = 0; k < a.K; k++)
                l += dw[static_cast<size_t>(n) * a.K + k] * w[static_cast<size_t>(k)];
            return l;
        };
        const std::vector<double> gr = numeric_grad(loss, row, 1e-5);
        std::copy(gr.begin(), gr.end(), g.begin() + static_cast<long>(n) * a.E);
    }
    return g;
}

struct Out {
    std::vector<int> idx;
    std::vector<float> w, dlogits;
};

Out run_cpu(const std::vector<float>& logits, const std::vector<float>& dw, const RouterArgs& a) {
    Out o;
    o.idx.assign(static_cast<size_t>(a.N) * a.K, -1);
    o.w.assign(o.idx.size(), NAN);
    o.dlogits.assign(logits.size(), NAN);
    kernels::moe_router_forward(kernels::cpu_exec(), o.idx.data(), o.w.data(), logits.data(), a);
    kernels::moe_router_backward(kernels::cpu_exec(), o.dlogits.data(), dw.data(), logits.data(),
                                 o.idx.data(), a);
    return o;
}

} // namespace

SOF_OP_CPU("moe_router", "selection exact, weights and logits' gradient against double") {
    for (const Case& c : kCases) {
        INFO("case " << c.name);
        const RouterArgs a = args_of(c);
        const auto logits = randn(static_cast<size_t>(c.N) * c.E, 11, 2.0f);
        const auto dw = randn(static_cast<size_t>(c.N) * c.K, 12);
        const Out o = run_cpu(logits, dw, a);
        std::vector<int> ref_idx;
        for (int n = 0; n < c.N; n++) {
            const auto t = moe::topk(logits.data() + static_cast<size_t>(n) * c.E, c.E, c.K);
            ref_idx.insert(ref_idx.end(), t.begin(), t.end());
        }
        CHECK(o.idx == ref_idx);
        const std::vector<double> w = moe::router_weights(to_double(logits), ref_idx, a);
        // fp32 exp, a sum of E exps and one division per weight: a few ulps of the largest
        // weight (measured <= 4.8e-7 with 128 experts)
        check_ref(std::string("moe_router ") + c.name + " weights", o.w, w, 2e-6);
        // fp32 softmax, products and the sums over k: 1e-6 of the largest; the reference's own
        // error (h = 1e-5, double) is below 1e-9
        check_ref(std::string("moe_router ") + c.name + " dlogits", o.dlogits,
                  fd_grad(logits, ref_idx, dw, a), 2e-6);
        // the wrong variant must fail: renormalized vs not, or the other kind
        RouterArgs wrong = a;
        if (c.kind == RouterKind::SoftmaxTopk && c.K > 1)
            wrong.renorm = !a.renorm;
        else if (c.K > 1)
            wrong.kind = RouterKind::SoftmaxTopk;
        if (c.K > 1) {
            const std::vector<double> ww = moe::router_weights(to_double(logits), ref_idx, wrong);
            CHECK(normalized_error(o.w, ww) > 1e-3);
        }
    }
}

SOF_OP_CPU("moe_router", "ties go to the lower expert index; equal weights; NaN ranks first") {
    RouterArgs a;
    a.N = 4;
    a.E = 6;
    a.K = 3;
    a.renorm = true;
    // row 0: all equal -> 0, 1, 2 with equal weights; row 1: the maximum at 1 and 4, the next
    // value at 2 and 3 -> 1, 4, 2; row 2: -0 and +0 are equal -> 3, 0, then 1 (-0) before 2 and 4
    // (+0); row 3: NaN ranks above every number (torch.topk), ties by index -> 1, 3, 2
    const std::vector<float> logits = {
        0.0f, 0.0f,  0.0f, 0.0f, 0.0f, 0.0f,  // row 0
        0.5f, 2.0f,  1.0f, 1.0f, 2.0f, 0.5f,  // row 1
        1.0f, -0.0f, 0.0f, 3.0f, 0.0f, -1.0f, // row 2
        1.0f, NAN,   5.0f, NAN,  0.0f, 2.0f,  // row 3
    };
    std::vector<int> idx(12, -1);
    std::vector<float> w(12, NAN);
    kernels::moe_router_forward(kernels::cpu_exec(), idx.data(), w.data(), logits.data(), a);
    const std::vector<int> want = {0, 1, 2, 1, 4, 2, 3, 0, 1, 1, 3, 2};
    CHECK(idx == want);
    // a token whose k experts carry the same weight: exactly 1/3 each after renormalization
    for (int k = 0; k < 3; k++)
        CHECK(w[static_cast<size_t>(k)] == doctest::Approx(1.0 / 3.0).epsilon(1e-7));
    CHECK(w[0] == w[1]);
    CHECK(w[1] == w[2]);
    // an order that prefers the higher index on ties fails this case
    CHECK_FALSE(kernels::router_prefers(0.0f, 4, 0.0f, 1));
    CHECK(kernels::router_prefers(0.0f, 1, 0.0f, 4));
    CHECK(kernels::router_prefers(NAN, 5, 1e30f, 0));
    CHECK(kernels::router_prefers(-0.0f, 1, 0.0f, 2));
}

SOF_OP_CPU("moe_router", "bitwise the same for 1 and 2 OpenMP threads") {
    const RouterArgs a = args_of(kCases[2]);
    const auto logits = randn(static_cast<size_t>(a.N) * a.E, 21, 2.0f);
    const auto dw = randn(static_cast<size_t>(a.N) * a.K, 22);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const Out o1 = run_cpu(logits, dw, a);
    omp_set_num_threads(2);
    const Out o2 = run_cpu(logits, dw, a);
    omp_set_num_threads(saved);
    CHECK(o1.idx == o2.idx);
    check_bitwise("moe_router w, 1 vs 2 threads", o1.w, o2.w);
    check_bitwise("moe_router dlogits, 1 vs 2 threads", o1.dlogits, o2.dlogits);
}

SOF_OP_CPU("moe_router", "bad shapes are refused with the field named") {
    RouterArgs a;
    a.N = 1;
    a.E = 4;
    a.K = 5;
    std::vector<int> idx(8);
    std::vector<float> w(8), logits(8);
    CHECK_THROWS_WITH_AS(
        kernels::moe_router_forward(kernels::cpu_exec(), idx.data(), w.data(), logits.data(), a),
        doctest::Contains("top-k 5 with 4 experts"), core::Error);
    a.K = 1;
    a.E = kernels::kMaxExperts + 1;
    CHECK_THROWS_WITH_AS(
        kernels::moe_router_forward(kernels::cpu_exec(), idx.data(), w.data(), logits.data(), a),
        doctest::Contains("experts; the router supports"), core::Error);
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol_w, double tol_d) {
    for (const Case& c : kCases) {
        INFO("case " << c.name << " " << dtype_name<T>());
        const RouterArgs a = args_of(c);
        const auto logits = representable<T>(randn(static_cast<size_t>(c.N) * c.E, 31, 2.0f));
        const auto dw = randn(static_cast<size_t>(c.N) * c.K, 32);
        const Out cpu = run_cpu(logits, dw, a);
        auto dl = g.upload<T>(logits);
        auto ddw = g.upload<float>(dw);
        DevBuf<int> didx(&g.dev(), cpu.idx.size());
        auto dwout = g.upload<float>(std::vector<float>(cpu.w.size(), NAN));
        auto dd = g.upload<T>(std::vector<float>(logits.size(), NAN));
        kernels::moe_router_forward<T>(g.exec(), didx.get(), dwout.get(), dl.get(), a);
        kernels::moe_router_backward<T>(g.exec(), dd.get(), ddw.get(), dl.get(), didx.get(), a);
        const std::string tag = std::string("moe_router ") + c.name + " " + dtype_name<T>();
        CHECK(g.download_raw(didx.get(), cpu.idx.size()) == cpu.idx); // the same choices
        check_twin(tag + " weights", g.download(dwout), cpu.w, tol_w);
        check_twin(tag + " dlogits", g.download(dd), cpu.dlogits, tol_d);
        // twice: the same bits
        auto dd2 = g.upload<T>(std::vector<float>(logits.size(), NAN));
        kernels::moe_router_backward<T>(g.exec(), dd2.get(), ddw.get(), dl.get(), didx.get(), a);
        check_bitwise(tag + " dlogits repeat", g.download(dd2), g.download(dd));
    }
}

} // namespace

SOF_OP_GPU("moe_router", "fp32 and bf16 logits against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: expf ulps and warp-order sums over E against the CPU's index-order sums
    gpu_cases<float>(*g, 2e-6, 5e-6);
    // bf16 logits (the same representable values on both): weights stay fp32; dlogits rounded
    // once to bf16 (2^-9 relative)
    gpu_cases<core::bf16>(*g, 2e-6, 1e-2);
}
