// Op driver cases of moe_dispatch.h: the plan against a stable sort (experts without tokens, all
// tokens on one expert), gather/combine and their backward against double; threads; errors; the
// CUDA twin (the plan and the gathers exactly).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "harness.h"
#include "kernels/moe_dispatch.h"

using namespace sof;
using namespace sof::ktest;

namespace {

struct Case {
    const char* name;
    int N, K, E, C;
    int used; // experts drawn from 0..used-1 (used < E: experts with no token)
};
const Case kCases[] = {
    {"tiny", 1, 1, 1, 1, 1},         {"odd", 37, 3, 11, 45, 7},
    {"one-expert", 20, 1, 4, 16, 1}, {"qwen3moe", 96, 8, 128, 64, 128},
    {"gpt-oss", 64, 4, 32, 72, 32},
};

// distinct experts per token drawn from 0..used-1
std::vector<int> draw_idx(const Case& c, uint32_t seed) {
    std::vector<int> idx;
    const auto r = randint(static_cast<size_t>(c.N) * 64, seed, 0, 1 << 20);
    size_t j = 0;
    for (int n = 0; n < c.N; n++) {
        std::vector<int> mine;
        while (static_cast<int>(mine.size()) < std::min(c.K, c.used)) {
            const int e = r[j++ % r.size()] % c.used;
            if (std::find(mine.begin(), mine.end(), e) == mine.end()) mine.push_back(e);
        }
        while (static_cast<int>(mine.size()) < c.K) // K > used: repeat the first (still valid)
            mine.push_back(mine[0]);
        idx.insert(idx.end(), mine.begin(), mine.end());
    }
    return idx;
}

struct Plan {
    std::vector<int> order, slot, offsets, host;
};

Plan cpu_plan(const std::vector<int>& idx, int N, int K, int E) {
    Plan p;
    p.order.assign(idx.size(), -1);
    p.slot.assign(idx.size(), -1);
    p.offsets.assign(static_cast<size_t>(E) + 1, -1);
    p.host.assign(static_cast<size_t>(E) + 1, -1);
    kernels::moe_plan(kernels::cpu_exec(), p.order.data(), p.slot.data(), p.offsets.data(),
                      p.host.data(), idx.data(), N, K, E);
    return p;
}

struct Outs {
    std::vector<float> xs, dx, y, dys, dw;
};

Outs cpu_ops(const Case& c, const Plan& p, const std::vector<float>& x,
             const std::vector<float>& ys, const std::vector<float>& w,
             const std::vector<float>& dy) {
    const size_t P = static_cast<size_t>(c.N) * c.K;
    Outs o;
    o.xs.assign(P * c.C, NAN);
    o.dx.assign(static_cast<size_t>(c.N) * c.C, NAN);
    o.y.assign(o.dx.size(), NAN);
    o.dys.assign(P * c.C, NAN);
    o.dw.assign(P, NAN);
    const auto ex = kernels::cpu_exec();
    kernels::moe_gather(ex, o.xs.data(), x.data(), p.order.data(), c.N, c.K, c.C);
    kernels::moe_gather_backward(ex, o.dx.data(), ys.data(), p.slot.data(), c.N, c.K, c.C);
    kernels::moe_combine(ex, o.y.data(), ys.data(), w.data(), p.slot.data(), c.N, c.K, c.C);
    kernels::moe_combine_backward(ex, o.dys.data(), o.dw.data(), dy.data(), ys.data(), w.data(),
                                  p.slot.data(), c.N, c.K, c.C);
    return o;
}

} // namespace

SOF_OP_CPU("moe_dispatch", "plan against a stable sort; gather and combine against double") {
    for (const Case& c : kCases) {
        INFO("case " << c.name);
        const std::vector<int> idx = draw_idx(c, 3);
        const size_t P = idx.size();
        const Plan p = cpu_plan(idx, c.N, c.K, c.E);
        // the reference: pairs stably sorted by expert
        std::vector<int> order(P);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
            return idx[static_cast<size_t>(a)] < idx[static_cast<size_t>(b)];
        });
        CHECK(p.order == order);
        for (size_t r = 0; r < P; r++)
            CHECK(p.slot[static_cast<size_t>(order[r])] == static_cast<int>(r));
        std::vector<int> off(static_cast<size_t>(c.E) + 1, 0);
        for (int e : idx)
            off[static_cast<size_t>(e) + 1]++;
        std::partial_sum(off.begin(), off.end(), off.begin());
        CHECK(p.offsets == off);
        CHECK(p.host == off);
        if (c.used < c.E) // an expert that got no token owns an empty range
            CHECK(off[static_cast<size_t>(c.E)] == off[static_cast<size_t>(c.used)]);

        const auto x = randn(static_cast<size_t>(c.N) * c.C, 4);
        const auto ys = randn(P * c.C, 5);
        const auto w = randn(P, 6);
        const auto dy = randn(static_cast<size_t>(c.N) * c.C, 7);
        const Outs o = cpu_ops(c, p, x, ys, w, dy);
        std::vector<double> xs(P * c.C), dx(static_cast<size_t>(c.N) * c.C, 0.0), y(dx.size(), 0.0);
        std::vector<double> dys(P * c.C), dw(P, 0.0);
        for (size_t r = 0; r < P; r++)
            for (int j = 0; j < c.C; j++)
                xs[r * c.C + j] = x[static_cast<size_t>(order[r] / c.K) * c.C + j];
        for (int n = 0; n < c.N; n++)
            for (int k = 0; k < c.K; k++) {
                const size_t q = static_cast<size_t>(n) * c.K + k;
                const size_t r = static_cast<size_t>(p.slot[q]);
                for (int j = 0; j < c.C; j++) {
                    const size_t nj = static_cast<size_t>(n) * c.C + j;
                    dx[nj] += ys[r * c.C + j];
                    y[nj] += static_cast<double>(w[q]) * ys[r * c.C + j];
                    dys[r * c.C + j] = static_cast<double>(w[q]) * dy[nj];
                    dw[q] += static_cast<double>(dy[nj]) * ys[r * c.C + j];
                }
            }
        const std::string t = std::string("moe_dispatch ") + c.name;
        check_ref(t + " gather", o.xs, xs, 1e-7);
        check_ref(t + " gather backward", o.dx, dx, 1e-6);
        check_ref(t + " combine", o.y, y, 1e-6);
        check_ref(t + " combine backward dys", o.dys, dys, 1e-7);
        check_ref(t + " combine backward dw", o.dw, dw, 1e-6);
    }
}

SOF_OP_CPU("moe_dispatch", "the combine adds the k terms in order (fp32, bitwise)") {
    // w * ys terms of very different magnitudes: another order rounds differently
    const int N = 1, K = 3, C = 1, E = 3;
    const std::vector<int> idx = {2, 0, 1};
    const Plan p = cpu_plan(idx, N, K, E);
    const std::vector<float> ys = {1.0f, 1e-8f, 1e8f}; // rows of experts 0, 1, 2
    const std::vector<float> w = {1.0f, 1.0f, 1.0f};
    std::vector<float> y(1);
    kernels::moe_combine(kernels::cpu_exec(), y.data(), ys.data(), w.data(), p.slot.data(), N, K,
                         C);
    // k order: expert 2 (1e8), expert 0 (1), expert 1 (1e-8)
    const float want = (0.0f + 1e8f) + 1.0f + 1e-8f;
    CHECK(y[0] == want);
}

SOF_OP_CPU("moe_dispatch", "bitwise the same for 1 and 2 OpenMP threads") {
    const Case& c = kCases[3];
    const std::vector<int> idx = draw_idx(c, 13);
    const auto x = randn(static_cast<size_t>(c.N) * c.C, 14);
    const auto ys = randn(idx.size() * c.C, 15);
    const auto w = randn(idx.size(), 16);
    const auto dy = randn(static_cast<size_t>(c.N) * c.C, 17);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const Plan p1 = cpu_plan(idx, c.N, c.K, c.E);
    const Outs o1 = cpu_ops(c, p1, x, ys, w, dy);
    omp_set_num_threads(2);
    const Plan p2 = cpu_plan(idx, c.N, c.K, c.E);
    const Outs o2 = cpu_ops(c, p2, x, ys, w, dy);
    omp_set_num_threads(saved);
    CHECK(p1.order == p2.order);
    check_bitwise("moe_dispatch gather backward, 1 vs 2 threads", o1.dx, o2.dx);
    check_bitwise("moe_dispatch combine, 1 vs 2 threads", o1.y, o2.y);
    check_bitwise("moe_dispatch combine dw, 1 vs 2 threads", o1.dw, o2.dw);
}

SOF_OP_CPU("moe_dispatch", "an expert index out of range is refused with the token named") {
    std::vector<int> idx = {0, 1, 2, 3, 1, 4};
    std::vector<int> order(6), slot(6), off(5), host(5);
    CHECK_THROWS_WITH_AS(kernels::moe_plan(kernels::cpu_exec(), order.data(), slot.data(),
                                           off.data(), host.data(), idx.data(), 3, 2, 4),
                         doctest::Contains("token 2 slot 1 names expert 4"), core::Error);
    idx[5] = -1;
    CHECK_THROWS_WITH_AS(kernels::moe_plan(kernels::cpu_exec(), order.data(), slot.data(),
                                           off.data(), host.data(), idx.data(), 3, 2, 4),
                         doctest::Contains("names expert -1"), core::Error);
}

namespace {

template <class T> void gpu_cases(Gpu& g, double tol) {
    for (const Case& c : kCases) {
        INFO("case " << c.name << " " << dtype_name<T>());
        const std::vector<int> idx = draw_idx(c, 23);
        const size_t P = idx.size();
        const Plan p = cpu_plan(idx, c.N, c.K, c.E);
        const auto x = representable<T>(randn(static_cast<size_t>(c.N) * c.C, 24));
        const auto ys = representable<T>(randn(P * c.C, 25));
        const auto w = randn(P, 26);
        const auto dy = representable<T>(randn(static_cast<size_t>(c.N) * c.C, 27));
        const Outs cpu = cpu_ops(c, p, x, ys, w, dy);

        auto didx = g.upload_ids(idx);
        DevBuf<int> dorder(&g.dev(), P), dslot(&g.dev(), P), doff(&g.dev(), c.E + 1);
        std::vector<int> host(static_cast<size_t>(c.E) + 1, -1);
        kernels::moe_plan(g.exec(), dorder.get(), dslot.get(), doff.get(), host.data(), didx.get(),
                          c.N, c.K, c.E);
        CHECK(g.download_raw(dorder.get(), P) == p.order);
        CHECK(g.download_raw(dslot.get(), P) == p.slot);
        CHECK(g.download_raw(doff.get(), host.size()) == p.offsets);
        CHECK(host == p.offsets);

        auto dx_in = g.upload<T>(x), dys_in = g.upload<T>(ys), ddy = g.upload<T>(dy);
        auto dw_in = g.upload<float>(w);
        auto dxs = g.upload<T>(std::vector<float>(P * c.C, NAN));
        auto ddx = g.upload<T>(std::vector<float>(x.size(), NAN));
        auto dyo = g.upload<T>(std::vector<float>(x.size(), NAN));
        auto ddys = g.upload<T>(std::vector<float>(P * c.C, NAN));
        auto ddw = g.upload<float>(std::vector<float>(P, NAN));
        const auto ex = g.exec();
        kernels::moe_gather<T>(ex, dxs.get(), dx_in.get(), dorder.get(), c.N, c.K, c.C);
        kernels::moe_gather_backward<T>(ex, ddx.get(), dys_in.get(), dslot.get(), c.N, c.K, c.C);
        kernels::moe_combine<T>(ex, dyo.get(), dys_in.get(), dw_in.get(), dslot.get(), c.N, c.K,
                                c.C);
        kernels::moe_combine_backward<T>(ex, ddys.get(), ddw.get(), ddy.get(), dys_in.get(),
                                         dw_in.get(), dslot.get(), c.N, c.K, c.C);
        const std::string t = std::string("moe_dispatch ") + c.name + " " + dtype_name<T>();
        check_bitwise(t + " gather", g.download(dxs), cpu.xs); // copies
        check_twin(t + " gather backward", g.download(ddx), cpu.dx, tol);
        check_twin(t + " combine", g.download(dyo), cpu.y, tol);
        check_twin(t + " combine dys", g.download(ddys), cpu.dys, tol);
        // dw is fp32 in both: a warp-order dot product against the CPU's in-order one
        check_twin(t + " combine dw", g.download(ddw), cpu.dw, 1e-5);
    }
}

} // namespace

SOF_OP_GPU("moe_dispatch", "plan exact, gathers and combine fp32 and bf16 against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // fp32: the same additions (FMA contraction in the combine): 1e-6
    gpu_cases<float>(*g, 1e-6);
    // bf16: each output rounded once
    gpu_cases<core::bf16>(*g, 1e-2);
    // a bad index is refused after the plan's copy
    const std::vector<int> idx = {0, 7, 1, 2};
    auto didx = g->upload_ids(idx);
    DevBuf<int> o(&g->dev(), 4), s(&g->dev(), 4), off(&g->dev(), 5);
    std::vector<int> host(5);
    CHECK_THROWS_WITH_AS(
        kernels::moe_plan(g->exec(), o.get(), s.get(), off.get(), host.data(), didx.get(), 2, 2, 4),
        doctest::Contains("expert index out of range"), core::Error);
}
