// Op driver cases of moe_aux.h: the pooled statistics and losses against double over two layers
// (with and without a mask), their gradient through moe_router_backward against central
// differences of the pooled loss; threads; the CUDA twin.
#include <omp.h>

#include <cmath>
#include <string>

#include "harness.h"
#include "kernels/moe_aux.h"
#include "kernels/moe_router.h"
#include "moe_ref.h"

using namespace sof;
using namespace sof::ktest;
using kernels::RouterArgs;
using kernels::RouterKind;

namespace {

constexpr int kLayers = 2;

struct Setup {
    RouterArgs a;
    std::vector<std::vector<float>> logits; // per layer (N,E)
    std::vector<std::vector<int>> idx;      // per layer (N,K)
    std::vector<float> mask;                // (N) or empty
};

Setup make(int N, int E, int K, RouterKind kind, bool masked, uint32_t seed) {
    Setup s;
    s.a.N = N;
    s.a.E = E;
    s.a.K = K;
    s.a.kind = kind;
    s.a.renorm = true;
    for (int l = 0; l < kLayers; l++) {
        s.logits.push_back(randn(static_cast<size_t>(N) * E, seed + l, 1.5f));
        std::vector<int> ix;
        for (int n = 0; n < N; n++) {
            const auto t = moe::topk(s.logits.back().data() + static_cast<size_t>(n) * E, E, K);
            ix.insert(ix.end(), t.begin(), t.end());
        }
        s.idx.push_back(ix);
    }
    if (masked) {
        s.mask.assign(static_cast<size_t>(N), 1.0f);
        for (int n = 0; n < N; n += 3)
            s.mask[static_cast<size_t>(n)] = 0.0f; // padding
    }
    return s;
}

const float* mask_of(const Setup& s) {
    return s.mask.empty() ? nullptr : s.mask.data();
}

moe::AuxStats ref_stats(const Setup& s, const std::vector<std::vector<double>>& logits) {
    moe::AuxStats st;
    for (size_t l = 0; l < logits.size(); l++)
        moe::aux_accumulate(st, logits[l], s.idx[l], mask_of(s), s.a.N, s.a.E, s.a.K);
    return st;
}

std::vector<std::vector<double>> as_double(const Setup& s) {
    std::vector<std::vector<double>> d;
    for (const auto& l : s.logits)
        d.push_back(to_double(l));
    return d;
}

std::vector<float> cpu_stats(const Setup& s) {
    std::vector<float> st(static_cast<size_t>(kernels::moe_aux_stats_size(s.a.E)), 0.0f);
    for (int l = 0; l < kLayers; l++)
        kernels::moe_aux_stats(
            kernels::cpu_exec(), st.data(), s.logits[static_cast<size_t>(l)].data(),
            s.idx[static_cast<size_t>(l)].data(), mask_of(s), s.a.N, s.a.E, s.a.K);
    return st;
}

// d(d_aux * balance + d_z * z)/d(layer l's logits), the selections held fixed.
std::vector<double> fd_grad(const Setup& s, int l, double d_aux, double d_z) {
    auto lg = as_double(s);
    auto loss = [&](const std::vector<double>& x) {
        auto v = lg;
        v[static_cast<size_t>(l)] = x;
        const moe::AuxStats st = ref_stats(s, v);
        return d_aux * moe::aux_balance(st, s.a.E) + d_z * moe::aux_z(st);
    };
    return numeric_grad(loss, lg[static_cast<size_t>(l)], 1e-5);
}

} // namespace

SOF_OP_CPU("moe_aux", "pooled statistics and losses against double, with and without a mask") {
    for (const bool masked : {false, true}) {
        INFO("masked " << masked);
        const Setup s = make(300, 7, 2, RouterKind::SoftmaxTopk, masked, 41); // 2 token chunks
        const std::vector<float> st = cpu_stats(s);
        const moe::AuxStats r = ref_stats(s, as_double(s));
        std::vector<double> want(r.prob);
        want.insert(want.end(), r.count.begin(), r.count.end());
        want.push_back(r.tokens);
        want.push_back(r.lse2);
        // fp32 sums of 600 terms each: 1e-6 of the largest (the token count)
        check_ref(std::string("moe_aux stats masked=") + (masked ? "1" : "0"), st, want, 1e-6);
        const kernels::MoeAuxLosses L = kernels::moe_aux_losses(st.data(), s.a.E);
        CHECK(L.balance == doctest::Approx(moe::aux_balance(r, s.a.E)).epsilon(1e-6));
        CHECK(L.z == doctest::Approx(moe::aux_z(r)).epsilon(1e-6));
        // a perfectly balanced router gives balance = K (each count N*K/E, each prob N/E)
        // against which an unbalanced one is larger
        CHECK(L.balance > 1.0);
    }
    // all tokens masked: the losses are undefined and refused
    std::vector<float> zero(static_cast<size_t>(kernels::moe_aux_stats_size(3)), 0.0f);
    CHECK_THROWS_WITH_AS(kernels::moe_aux_losses(zero.data(), 3), doctest::Contains("count 0"),
                         core::Error);
}

SOF_OP_CPU("moe_aux", "gradient into each layer's logits against central differences") {
    for (const RouterKind kind : {RouterKind::SoftmaxTopk, RouterKind::TopkSoftmax}) {
        for (const bool masked : {false, true}) {
            INFO("kind " << static_cast<int>(kind) << " masked " << masked);
            const Setup s = make(13, 6, 2, kind, masked, 51);
            const std::vector<float> st = cpu_stats(s);
            const double d_aux = 0.7, d_z = 0.3;
            for (int l = 0; l < kLayers; l++) {
                kernels::RouterAuxGrad aux;
                aux.stats = st.data();
                aux.mask = mask_of(s);
                aux.d_aux = static_cast<float>(d_aux);
                aux.d_z = static_cast<float>(d_z);
                std::vector<float> d(s.logits[0].size(), NAN);
                kernels::moe_router_backward(kernels::cpu_exec(), d.data(),
                                             static_cast<const float*>(nullptr),
                                             s.logits[static_cast<size_t>(l)].data(),
                                             s.idx[static_cast<size_t>(l)].data(), s.a, &aux);
                const std::vector<double> want = fd_grad(s, l, d_aux, d_z);
                check_ref("moe_aux grad layer " + std::to_string(l), d, want, 2e-6);
                // the wrong pooling must fail: the loss of this layer alone (not pooled)
                Setup alone = s;
                alone.logits = {s.logits[static_cast<size_t>(l)]};
                alone.idx = {s.idx[static_cast<size_t>(l)]};
                CHECK(normalized_error(d, fd_grad(alone, 0, d_aux, d_z)) > 1e-3);
                // the routing term and the aux terms add up in one pass
                const auto dw = randn(static_cast<size_t>(s.a.N) * s.a.K, 52);
                std::vector<float> both(d.size()), route(d.size());
                kernels::moe_router_backward(kernels::cpu_exec(), both.data(), dw.data(),
                                             s.logits[static_cast<size_t>(l)].data(),
                                             s.idx[static_cast<size_t>(l)].data(), s.a, &aux);
                kernels::moe_router_backward(kernels::cpu_exec(), route.data(), dw.data(),
                                             s.logits[static_cast<size_t>(l)].data(),
                                             s.idx[static_cast<size_t>(l)].data(), s.a);
                std::vector<double> sum(d.size());
                for (size_t i = 0; i < d.size(); i++)
                    sum[i] = static_cast<double>(route[i]) + d[i];
                check_ref("moe_aux routing + aux terms", both, sum, 1e-6);
            }
        }
    }
}

SOF_OP_CPU("moe_aux", "bitwise the same for 1 and 2 OpenMP threads") {
    const Setup s = make(700, 16, 4, RouterKind::SoftmaxTopk, true, 61);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const std::vector<float> a = cpu_stats(s);
    omp_set_num_threads(2);
    const std::vector<float> b = cpu_stats(s);
    omp_set_num_threads(saved);
    check_bitwise("moe_aux stats, 1 vs 2 threads", a, b);
}

SOF_OP_CPU("moe_aux", "an expert index out of range is refused with the token named") {
    const Setup s = make(4, 5, 2, RouterKind::SoftmaxTopk, false, 71);
    std::vector<int> bad = s.idx[0];
    bad[5] = 5;
    std::vector<float> st(static_cast<size_t>(kernels::moe_aux_stats_size(5)), 0.0f);
    CHECK_THROWS_WITH_AS(kernels::moe_aux_stats(kernels::cpu_exec(), st.data(), s.logits[0].data(),
                                                bad.data(), nullptr, 4, 5, 2),
                         doctest::Contains("token 2 slot 1 names expert 5"), core::Error);
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol_stats, double tol_grad) {
    for (const bool masked : {false, true}) {
        INFO(dtype_name<T>() << " masked " << masked);
        Setup s = make(333, 40, 4, RouterKind::TopkSoftmax, masked, 81);
        for (auto& l : s.logits)
            l = representable<T>(l);
        for (int l = 0; l < kLayers; l++) { // the selection of the rounded logits
            s.idx[static_cast<size_t>(l)].clear();
            for (int n = 0; n < s.a.N; n++) {
                const auto t = moe::topk(
                    s.logits[static_cast<size_t>(l)].data() + static_cast<size_t>(n) * 40, 40, 4);
                s.idx[static_cast<size_t>(l)].insert(s.idx[static_cast<size_t>(l)].end(), t.begin(),
                                                     t.end());
            }
        }
        const std::vector<float> cpu = cpu_stats(s);
        const size_t S = cpu.size();
        auto dst = g.upload<float>(std::vector<float>(S, 0.0f));
        DevBuf<float> dmask = masked ? g.upload<float>(s.mask) : DevBuf<float>();
        std::vector<DevBuf<T>> dl;
        std::vector<DevBuf<int>> di;
        for (int l = 0; l < kLayers; l++) {
            dl.push_back(g.upload<T>(s.logits[static_cast<size_t>(l)]));
            di.push_back(g.upload_ids(s.idx[static_cast<size_t>(l)]));
            kernels::moe_aux_stats<T>(g.exec(), dst.get(), dl.back().get(), di.back().get(),
                                      masked ? dmask.get() : nullptr, s.a.N, s.a.E, s.a.K);
        }
        const std::string tag = std::string("moe_aux ") + dtype_name<T>();
        const std::vector<float> gst = g.download(dst);
        check_twin(tag + " stats", gst, cpu, tol_stats);
        // the gradient from the GPU's stats on the GPU against the CPU's from its own
        kernels::RouterAuxGrad aux;
        aux.stats = cpu.data();
        aux.mask = mask_of(s);
        aux.d_aux = 0.5f;
        aux.d_z = 0.25f;
        std::vector<float> want(s.logits[0].size());
        kernels::moe_router_backward(kernels::cpu_exec(), want.data(),
                                     static_cast<const float*>(nullptr), s.logits[1].data(),
                                     s.idx[1].data(), s.a, &aux);
        kernels::RouterAuxGrad gaux = aux;
        gaux.stats = dst.get();
        gaux.mask = masked ? dmask.get() : nullptr;
        auto dd = g.upload<T>(std::vector<float>(want.size(), NAN));
        kernels::moe_router_backward<T>(g.exec(), dd.get(), static_cast<const float*>(nullptr),
                                        dl[1].get(), di[1].get(), s.a, &gaux);
        check_twin(tag + " aux grad", g.download(dd), want, tol_grad);
    }
}

} // namespace

SOF_OP_GPU("moe_aux", "stats and aux gradient, fp32 and bf16 logits, against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // stats: fp32 column sums over fixed row chunks vs the CPU's token chunks (order differs)
    gpu_cases<float>(*g, 1e-6, 5e-6);
    // bf16 logits (the same values on both twins): stats stay fp32; the gradient rounded once
    gpu_cases<core::bf16>(*g, 1e-6, 1e-2);
}
