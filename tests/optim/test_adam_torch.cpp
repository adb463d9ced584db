// Optimizer plugins against torch.optim.AdamW/Adam data (tests/data/adam_ref.bin, written by
// scripts/make_adam_reference.py), 100-step drift vs the scalar reference, and rollback accuracy.
#include <doctest/doctest.h>

#include <cfloat>
#include <cstdio>
#include <fstream>

#include "optim_test_util.h"

using namespace sof;
using namespace sof::test;

namespace {

struct TorchCase {
    uint32_t n = 0, nsteps = 0, mode = 0, grad_bf16 = 0;
    int64_t start_step = 0;
    float lr = 0, b1 = 0, b2 = 0, eps = 0, wd = 0, scale = 0;
    std::vector<float> p0, m0, v0, p, m, v;
    std::vector<std::vector<float>> graw; // (nsteps, n)
};

std::vector<TorchCase> read_torch_cases(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE_MESSAGE(f.good(),
                    "cannot open " << path << " (regenerate: scripts/make_adam_reference.py)");
    char magic[8];
    uint32_t version = 0, ncases = 0;
    f.read(magic, 8);
    f.read(reinterpret_cast<char*>(&version), 4);
    f.read(reinterpret_cast<char*>(&ncases), 4);
    REQUIRE(std::string(magic, 8) == "SOFADAM1");
    REQUIRE(version == 1);
    std::vector<TorchCase> out(ncases);
    auto rd = [&](std::vector<float>& x, uint32_t n) {
        x.resize(n);
        f.read(reinterpret_cast<char*>(x.data()), 4 * n);
    };
    for (auto& c : out) {
        f.read(reinterpret_cast<char*>(&c.n), 4);
        f.read(reinterpret_cast<char*>(&c.nsteps), 4);
        f.read(reinterpret_cast<char*>(&c.mode), 4);
        f.read(reinterpret_cast<char*>(&c.grad_bf16), 4);
        f.read(reinterpret_cast<char*>(&c.start_step), 8);
        float h[6];
        f.read(reinterpret_cast<char*>(h), sizeof h);
        c.lr = h[0], c.b1 = h[1], c.b2 = h[2], c.eps = h[3], c.wd = h[4], c.scale = h[5];
        rd(c.p0, c.n);
        rd(c.m0, c.n);
        rd(c.v0, c.n);
        c.graw.resize(c.nsteps);
        for (auto& g : c.graw)
            rd(g, c.n);
        rd(c.p, c.n);
        rd(c.m, c.n);
        rd(c.v, c.n);
    }
    REQUIRE(f.good());
    return out;
}

} // namespace

// Tolerance vs PyTorch (documented in docs/optimizer-plugins.md): 4 ulp, or 1e-6 of the largest
// |value| of the tensor for values near zero. PyTorch's CPU kernels may fuse multiply-adds
// (Vectorized fmadd in add_ with alpha) where the reference rounds twice.
TEST_CASE("every host plugin reproduces torch.optim.AdamW / Adam(L2) data") {
    auto tcs = read_torch_cases(std::string(SOF_SOURCE_DIR) + "/tests/data/adam_ref.bin");
    REQUIRE(tcs.size() >= 5);
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        int64_t worst = 0;
        for (size_t k = 0; k < tcs.size(); k++) {
            const TorchCase& c = tcs[k];
            CAPTURE(k);
            int64_t n = c.n;
            ABuf<float> p(n), m(n), v(n), g(n);
            ABuf<uint16_t> g16(n);
            std::memcpy(p.data(), c.p0.data(), 4 * n);
            std::memcpy(m.data(), c.m0.data(), 4 * n);
            std::memcpy(v.data(), c.v0.data(), 4 * n);
            sof_dtype gd = c.grad_bf16 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
            for (uint32_t t = 0; t < c.nsteps; t++) {
                for (int64_t i = 0; i < n; i++) {
                    g[i] = c.graw[t][static_cast<size_t>(i)];
                    g16[i] = core::f32_to_bf16(g[i]); // exact: the data is bf16-representable
                }
                sof_optim_slice s = optim::make_slice(
                    n, p.data(),
                    gd == SOF_DTYPE_F32 ? static_cast<const void*>(g.data()) : g16.data(), gd,
                    m.data(), v.data());
                sof_optim_hparams hp =
                    optim::make_hparams(c.lr, c.b1, c.b2, c.eps, c.wd, c.start_step + t + 1,
                                        c.mode ? SOF_ADAM_L2 : SOF_ADAM_ADAMW, true, c.scale);
                opt->step(s, hp);
            }
            const std::pair<const float*, const std::vector<float>*> pairs[3] = {
                {p.data(), &c.p}, {m.data(), &c.m}, {v.data(), &c.v}};
            for (const auto& [got, ref] : pairs) {
                float big = 0.0f;
                for (float x : *ref)
                    big = std::max(big, std::fabs(x));
                int64_t bad = 0;
                for (int64_t i = 0; i < n; i++) {
                    float r = (*ref)[static_cast<size_t>(i)];
                    int64_t u = ulp_distance(got[i], r);
                    worst = std::max(worst, u);
                    if (u > 4 && std::fabs(got[i] - r) > 1e-6f * big) bad++;
                }
                CHECK_MESSAGE(bad == 0, bad << " values beyond tolerance vs torch");
            }
        }
        MESSAGE(pc.label() << ": worst distance to torch " << worst << " ulp");
    }
}

TEST_CASE("100 steps drift: plugin vs scalar reference") {
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        const int64_t n = 40009;
        AdamData a(n, 77, false), r(n, 77, false);
        double worst_rel = 0.0;
        for (int t = 1; t <= 100; t++) {
            a.new_grads(1000 + t);
            r.new_grads(1000 + t);
            sof_dtype gd = (t % 2) ? SOF_DTYPE_F32 : SOF_DTYPE_BF16;
            sof_optim_hparams hp =
                optim::make_hparams(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, SOF_ADAM_ADAMW, true, 0.8f);
            sof_optim_slice sa =
                optim::make_slice(n, a.p.data(), a.grad(gd), gd, a.m.data(), a.v.data());
            sof_optim_slice sr =
                optim::make_slice(n, r.p.data(), r.grad(gd), gd, r.m.data(), r.v.data());
            opt->step(sa, hp);
            optim::adam_ref_step(sr, hp);
        }
        float big = 0.0f;
        for (int64_t i = 0; i < n; i++)
            big = std::max(big, std::fabs(r.p[i]));
        for (int64_t i = 0; i < n; i++)
            worst_rel = std::max(worst_rel, static_cast<double>(std::fabs(a.p[i] - r.p[i])) / big);
        MESSAGE(pc.label() << ": 100-step drift, max |dp| / max|p| = " << worst_rel);
        CHECK(worst_rel <= 1e-5);
    }
}

// Rollback bound (docs/optimizer-plugins.md): with e = FLT_EPSILON, after an in-place step from
// (p0, m0, v0) to (p1, m1, v1) and adam_rollback:
//   |p - p0| <= 2e (|p0| + |p1|)
//   |m - m0| <= 2e (|m0| + |m1| / b1) + 2e (1-b1) |g'| / b1
//   |v - v0| <= 2e (|v0| + |v1| / b2) + 4e (1-b2) g'^2 / b2
// where g' is the (scaled, L2-adjusted) grad; first-step moments (m0 = v0 = 0) come back exactly.
TEST_CASE("adam_rollback inverts an in-place step within the documented bound") {
    const float e = FLT_EPSILON;
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        const int64_t n = 30011;
        for (int variant = 0; variant < 3; variant++) {
            CAPTURE(variant);
            bool warm = variant != 2;
            sof_adam_mode mode = variant == 1 ? SOF_ADAM_L2 : SOF_ADAM_ADAMW;
            sof_dtype gd = variant == 1 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
            AdamData d(n, 300 + variant, warm), o(n, 300 + variant, warm);
            sof_optim_hparams hp = optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f,
                                                       warm ? 1000 : 1, mode, true, 0.5f);
            sof_optim_slice s =
                optim::make_slice(n, d.p.data(), d.grad(gd), gd, d.m.data(), d.v.data());
            opt->step(s, hp);
            ABuf<float> p1(n), m1(n), v1(n);
            p1.copy_from(d.p);
            m1.copy_from(d.m);
            v1.copy_from(d.v);
            opt->rollback(s, hp);
            double rp = 0, rm = 0, rv = 0; // worst error / bound
            for (int64_t i = 0; i < n; i++) {
                float g = optim::adam_ref_grad(d.grad(gd), gd, i) * 0.5f;
                if (mode == SOF_ADAM_L2) g = g + 0.1f * o.p[i];
                float bp = 2 * e * (std::fabs(o.p[i]) + std::fabs(p1[i]));
                float bm = 2 * e * (std::fabs(o.m[i]) + std::fabs(m1[i]) / 0.9f) +
                           2 * e * 0.1f * std::fabs(g) / 0.9f;
                float bv = 2 * e * (std::fabs(o.v[i]) + std::fabs(v1[i]) / 0.999f) +
                           4 * e * 0.001f * g * g / 0.999f;
                rp = std::max(rp, static_cast<double>(std::fabs(d.p[i] - o.p[i]) / bp));
                if (bm > 0) rm = std::max(rm, static_cast<double>(std::fabs(d.m[i] - o.m[i]) / bm));
                if (bv > 0) rv = std::max(rv, static_cast<double>(std::fabs(d.v[i] - o.v[i]) / bv));
                if (!warm) {
                    CHECK(d.m[i] == 0.0f);
                    CHECK(d.v[i] == 0.0f);
                }
            }
            std::string what = std::string(mode == SOF_ADAM_L2 ? "L2" : "AdamW") +
                               (warm ? ", step 1000" : ", step 1");
            MESSAGE(pc.label() << " rollback (" << what << "): error/bound p " << rp << ", m " << rm
                               << ", v " << rv);
            CHECK(rp <= 1.0);
            CHECK(rm <= 1.0);
            CHECK(rv <= 1.0);
        }
    }
}

// What an exact rollback built on the inverse would have to store (docs/engine.md "A cheaper
// exact rollback"): the share of elements whose p, m, v the inverse recovers bitwise, within 7
// and within 127 ulp. The design premise checked: nearly every element is within 127 ulp (an
// int8 correction per component), so a second state set (12 B/param) could shrink to ~3.
TEST_CASE("inverse rollback: the ulp distance to the old state, per component") {
    for (const auto& pc : host_plugin_cases()) {
        if (pc.name != "cpu_adam") continue;
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        const int64_t n = 200003;
        AdamData d(n, 77, true), o(n, 77, true);
        sof_optim_hparams hp =
            optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 100, SOF_ADAM_ADAMW, true, 1.0f);
        sof_optim_slice s =
            optim::make_slice(n, d.p.data(), d.g32.data(), SOF_DTYPE_F32, d.m.data(), d.v.data());
        opt->step(s, hp);
        opt->rollback(s, hp);
        const float* now[3] = {d.p.data(), d.m.data(), d.v.data()};
        const float* old[3] = {o.p.data(), o.m.data(), o.v.data()};
        double within[3][3] = {}; // exact, <= 7, <= 127
        for (int k = 0; k < 3; k++)
            for (int64_t i = 0; i < n; i++) {
                int64_t u = ulp_distance(now[k][i], old[k][i]);
                within[k][0] += u == 0;
                within[k][1] += u <= 7;
                within[k][2] += u <= 127;
            }
        for (int k = 0; k < 3; k++) {
            for (double& w : within[k])
                w /= static_cast<double>(n);
            MESSAGE("inverse rollback, " << std::string(1, "pmv"[k]) << ": bitwise "
                                         << 100 * within[k][0] << "%, <= 7 ulp "
                                         << 100 * within[k][1] << "%, <= 127 ulp "
                                         << 100 * within[k][2] << "%");
            CHECK(within[k][2] > 0.95);
        }
        CHECK(within[0][0] > 0.9); // p mostly comes back bitwise
        CHECK(within[1][0] < 0.9); // m does not: exactness needs stored corrections
    }
}
