// Op driver cases of grad_stats.h: per-piece fp64 sums of squares (+ bf16 copy, non-finite flag)
// and the rank-order chunk sum; CPU twin vs piece_stats (bitwise) and a long double reference,
// CUDA twin bitwise vs the CPU twin (the engine's STV relies on it).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "harness.h"
#include "kernels/grad_stats.h"

using namespace sof;
using namespace sof::ktest;

namespace {

// pieces: a full kStatPiece, an empty one, a short odd one, one piece of 1, the rest
std::vector<int64_t> bounds_for(size_t n) {
    std::vector<int64_t> b = {0};
    const int64_t cuts[] = {kernels::kStatPiece, 0, 1237, 1};
    int64_t at = 0;
    for (int64_t c : cuts) {
        if (at + c > int64_t(n)) break;
        at += c;
        b.push_back(at);
    }
    if (b.back() != int64_t(n)) b.push_back(int64_t(n));
    return b;
}

struct Prep {
    std::vector<kernels::GradStats> stats;
    std::vector<uint16_t> bf16;
};

Prep run_cpu(const std::vector<float>& grad, const std::vector<int64_t>& bounds, float scale,
             bool with_bf16) {
    Prep p;
    p.stats.resize(bounds.size() - 1);
    p.bf16.assign(with_bf16 ? grad.size() : 0, 0);
    kernels::grad_prep(kernels::cpu_exec(), grad.data(), grad.size(), bounds, scale, p.stats.data(),
                       with_bf16 ? p.bf16.data() : nullptr);
    return p;
}

std::vector<float> sumsq_of(const std::vector<kernels::GradStats>& s) {
    std::vector<float> r; // the fp64 sums as pairs of fp32 words (for check_bitwise)
    for (const auto& x : s) {
        uint64_t u;
        std::memcpy(&u, &x.sumsq, 8);
        r.push_back(core::bits_f32(uint32_t(u)));
        r.push_back(core::bits_f32(uint32_t(u >> 32)));
        r.push_back(core::bits_f32(uint32_t(x.nonfinite)));
    }
    return r;
}

} // namespace

SOF_OP_CPU("grad_stats", "piece statistics and chunk sums against references") {
    const size_t n = size_t(kernels::kStatPiece) + 1237 + 1 + 5000;
    const auto grad = randn(n, 1, 1e-2f);
    const auto bounds = bounds_for(n);
    REQUIRE(bounds.size() == 6);
    for (bool with_bf16 : {false, true}) {
        INFO("bf16 output " << with_bf16);
        const Prep p = run_cpu(grad, bounds, 0.5f, with_bf16);
        std::vector<kernels::GradStats> canon;
        std::vector<double> ref, got;
        for (size_t i = 0; i + 1 < bounds.size(); i++) {
            const size_t a = size_t(bounds[i]), b = size_t(bounds[i + 1]);
            std::vector<uint16_t> h(b - a);
            canon.push_back(
                kernels::piece_stats(grad.data() + a, b - a, 0.5f, with_bf16 ? h.data() : nullptr));
            long double s = 0.0L;
            for (size_t j = a; j < b; j++) {
                const float x = with_bf16 ? core::round_bf16(grad[j] * 0.5f) : grad[j] * 0.5f;
                s += (long double)x * x;
                if (with_bf16) CHECK(p.bf16[j] == core::f32_to_bf16(grad[j] * 0.5f));
            }
            ref.push_back(double(s));
            got.push_back(p.stats[i].sumsq);
            CHECK(p.stats[i].nonfinite == 0);
        }
        // the canonical 4-lane order, bitwise; against long double: fp64 sums of <= 65536 terms
        check_bitwise("grad_prep vs piece_stats", sumsq_of(p.stats), sumsq_of(canon));
        check_close("grad_prep sumsq vs long double", got, ref, 1e-12);
    }
    {
        // non-finite g' flags its piece only: a NaN, and a finite g that overflows when scaled
        auto bad = grad;
        bad[10] = NAN;
        bad[size_t(bounds[3]) + 100] = 3e38f;
        const Prep p = run_cpu(bad, bounds, 2.0f, false);
        std::vector<int> flags;
        for (const auto& s : p.stats)
            flags.push_back(s.nonfinite);
        CHECK(flags == std::vector<int>{1, 0, 0, 0, 1});
    }
    {
        // grad_prep_pieces: a slice of absolute bounds (the engine's fragment of the whole
        // model's list) over the fragment's own grads, the same bits as grad_prep on the slice
        const int64_t base = bounds[1]; // pieces 1.. of the list, the grads from there on
        const std::vector<int64_t> rel = {0, bounds[2] - base, bounds[3] - base, bounds[4] - base};
        std::vector<kernels::GradStats> a(3), b(3);
        std::vector<uint16_t> ha(size_t(rel.back())), hb(size_t(rel.back()));
        kernels::grad_prep_pieces(kernels::cpu_exec(), grad.data() + base, bounds.data() + 1, 3,
                                  base, 0.5f, a.data(), ha.data());
        kernels::grad_prep(kernels::cpu_exec(), grad.data() + base, size_t(rel.back()), rel, 0.5f,
                           b.data(), hb.data());
        check_bitwise("grad_prep_pieces vs grad_prep", sumsq_of(a), sumsq_of(b));
        CHECK(ha == hb);
        // the mutation: base 0 (absolute bounds read as relative) differs
        kernels::grad_prep_pieces(kernels::cpu_exec(), grad.data(), bounds.data() + 1, 3, 0, 0.5f,
                                  a.data(), nullptr);
        CHECK(sumsq_of(a) != sumsq_of(b));
    }
    {
        // bad bounds throw before anything runs
        std::vector<kernels::GradStats> st(1);
        CHECK_THROWS(kernels::grad_prep(kernels::cpu_exec(), grad.data(), 10, {0, 5}, 1.0f,
                                        st.data(), nullptr));
        CHECK_THROWS(kernels::grad_prep(kernels::cpu_exec(), grad.data(), 10, {0, 6, 5, 10}, 1.0f,
                                        st.data(), nullptr));
    }
    for (int nchunks : {1, 2, 5}) {
        INFO("chunks " << nchunks);
        const size_t m = 3001;
        const auto chunks = randn(m * nchunks, 7);
        std::vector<float> out(m), seq(m);
        std::vector<double> ref(m);
        for (size_t i = 0; i < m; i++) {
            float a = chunks[i];
            double d = chunks[i];
            for (int q = 1; q < nchunks; q++) {
                a += chunks[size_t(q) * m + i];
                d += chunks[size_t(q) * m + i];
            }
            seq[i] = a;
            ref[i] = d;
        }
        kernels::sum_chunks(kernels::cpu_exec(), chunks.data(), nchunks, m, out.data());
        check_ref("sum_chunks " + std::to_string(nchunks), out, ref, 1e-6);
        check_bitwise("sum_chunks in rank order " + std::to_string(nchunks), out, seq);
        std::vector<float> alias = chunks; // out aliases the first chunk
        kernels::sum_chunks(kernels::cpu_exec(), alias.data(), nchunks, m, alias.data());
        check_bitwise("sum_chunks aliased " + std::to_string(nchunks),
                      std::vector<float>(alias.begin(), alias.begin() + m), seq);
    }
}

SOF_OP_GPU("grad_stats", "bitwise against the CPU twin") {
    Gpu* g = gpu_or_skip();
    if (!g) return;
    // the statistics feed STV's global norm: the twins must agree bitwise, not within a bound
    for (size_t n : {size_t(1), size_t(kernels::kStatPiece) + 1237 + 1 + 5000, size_t(1) << 22}) {
        auto grad = randn(n, 2, 1e-2f);
        if (n > 100) grad[77] = INFINITY;
        std::vector<int64_t> bounds = bounds_for(n);
        if (n == (size_t(1) << 22)) { // the engine's cut: kStatPiece pieces
            bounds = {0};
            for (size_t a = 0; a < n; a += size_t(kernels::kStatPiece))
                bounds.push_back(int64_t(std::min(n, a + size_t(kernels::kStatPiece))));
        }
        for (bool with_bf16 : {false, true}) {
            INFO("n=" << n << " bf16 " << with_bf16);
            const Prep c = run_cpu(grad, bounds, 0.25f, with_bf16);
            auto dg = g->upload<float>(grad);
            auto ds = g->upload_raw(std::vector<kernels::GradStats>(bounds.size() - 1));
            auto dh = g->upload_raw(std::vector<uint16_t>(with_bf16 ? n : 1, 0));
            kernels::grad_prep(g->exec(), dg.get(), n, bounds, 0.25f, ds.get(),
                               with_bf16 ? dh.get() : nullptr);
            const auto st = g->download_raw(ds.get(), bounds.size() - 1);
            check_bitwise("grad_prep stats n=" + std::to_string(n), sumsq_of(st),
                          sumsq_of(c.stats));
            if (with_bf16) {
                const auto h = g->download_raw(dh.get(), n);
                size_t diff = 0;
                for (size_t i = 0; i < n; i++)
                    diff += h[i] != c.bf16[i];
                CHECK(diff == 0);
            }
        }
    }
    {
        // grad_prep_pieces with device bounds: a slice of absolute bounds (the engine's fragment)
        const size_t n = size_t(kernels::kStatPiece) * 3 + 999;
        const auto grad = randn(n, 3, 1e-2f);
        const std::vector<int64_t> abs = {0, kernels::kStatPiece, 2 * kernels::kStatPiece,
                                          2 * kernels::kStatPiece + 500, int64_t(n)};
        const int64_t base = abs[1];
        const size_t fn = n - size_t(base);
        std::vector<kernels::GradStats> want(3);
        std::vector<uint16_t> hw(fn);
        kernels::grad_prep_pieces(kernels::cpu_exec(), grad.data() + base, abs.data() + 1, 3, base,
                                  0.25f, want.data(), hw.data());
        auto dg = g->upload<float>(std::vector<float>(grad.begin() + base, grad.end()));
        auto db = g->upload_raw(abs);
        auto ds = g->upload_raw(std::vector<kernels::GradStats>(3));
        auto dh = g->upload_raw(std::vector<uint16_t>(fn, 0));
        kernels::grad_prep_pieces(g->exec(), dg.get(), db.get() + 1, 3, base, 0.25f, ds.get(),
                                  dh.get());
        check_bitwise("grad_prep_pieces stats", sumsq_of(g->download_raw(ds.get(), 3)),
                      sumsq_of(want));
        CHECK(g->download_raw(dh.get(), fn) == hw);
    }
    for (int nchunks : {1, 2, 7}) {
        const size_t m = (size_t(1) << 20) + 3;
        const auto chunks = randn(m * nchunks, 8);
        std::vector<float> out(m);
        kernels::sum_chunks(kernels::cpu_exec(), chunks.data(), nchunks, m, out.data());
        auto dc = g->upload<float>(chunks);
        kernels::sum_chunks(g->exec(), dc.get(), nchunks, m, dc.get()); // aliased
        check_bitwise("sum_chunks " + std::to_string(nchunks), g->download(dc.get(), m), out);
    }
}
