// Conformance of every host optimizer plugin (each cpu_adam variant) against the scalar
// reference optim/adam_ref.h: sizes hitting SIMD tails, dtypes, modes, in place and separate.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "optim_test_util.h"

using namespace sof;
using namespace sof::test;

namespace {

// Tolerance for plugins that are not bitwise by design (documented in docs/optimizer-plugins.md):
// a value passes within 2 ulp of the reference, or within 1e-6 of the buffer's largest |value|
// (for results of cancellation near zero).
struct Cmp {
    bool bitwise;
    int64_t worst_ulp = 0;
    int64_t bad = 0;
    void check(const float* got, const float* ref, int64_t n) {
        float big = 0.0f;
        for (int64_t i = 0; i < n; i++)
            if (std::isfinite(ref[i])) big = std::max(big, std::fabs(ref[i]));
        for (int64_t i = 0; i < n; i++) {
            int64_t u = ulp_distance(got[i], ref[i]);
            worst_ulp = std::max(worst_ulp, u);
            bool ok = bitwise ? std::memcmp(&got[i], &ref[i], 4) == 0
                              : (u <= 2 || std::fabs(got[i] - ref[i]) <= 1e-6f * big);
            if (!ok) bad++;
        }
    }
};

// Grad sum of squares vs the index-order fp64 sum: cpu_adam's vector variants sum 16 squares
// per fp32 lane before widening to fp64 (<= 16 * 2^-24 relative,
// plugins/cpu_adam/cpu_adam_kernels.h).
constexpr double kSumsqRel = 1e-6;

struct Mode {
    const char* name;
    sof_adam_mode mode;
    bool bias_correction;
};
const Mode kModes[] = {{"adamw", SOF_ADAM_ADAMW, true},
                       {"adam_l2", SOF_ADAM_L2, true},
                       {"adamw_nobc", SOF_ADAM_ADAMW, false}};

// Runs one configuration in place and with separate outputs and compares both with the reference.
void run_config(optim::Optimizer& opt, int64_t n, sof_dtype gd, float wd, int64_t step, float scale,
                const Mode& mode, sof_dtype lowp_in_place, int64_t out_pad, uint64_t seed) {
    CAPTURE(n);
    CAPTURE(static_cast<int>(gd));
    CAPTURE(wd);
    CAPTURE(step);
    CAPTURE(scale);
    CAPTURE(mode.name);
    CAPTURE(out_pad);
    AdamData d(n, seed, step > 1);
    sof_optim_hparams hp = optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, wd, step, mode.mode,
                                               mode.bias_correction, scale);
    sof_dtype lowp_sep = lowp_in_place == SOF_DTYPE_BF16 ? SOF_DTYPE_F16 : SOF_DTYPE_BF16;

    // reference, in place
    ABuf<float> rp(n), rm(n), rv(n);
    rp.copy_from(d.p);
    rm.copy_from(d.m);
    rv.copy_from(d.v);
    sof_optim_slice rs = optim::make_slice(n, rp.data(), d.grad(gd), gd, rm.data(), rv.data());
    sof_optim_result rr = optim::adam_ref_step(rs, hp);

    // plugin, in place
    ABuf<float> p(n), m(n), v(n);
    ABuf<uint16_t> l(n);
    p.copy_from(d.p);
    m.copy_from(d.m);
    v.copy_from(d.v);
    sof_optim_slice s = optim::make_slice(n, p.data(), d.grad(gd), gd, m.data(), v.data());
    s.lowp_out = l.data();
    s.lowp_dtype = lowp_in_place;
    sof_optim_result r = opt.step(s, hp);
    Cmp c{false};
    c.check(p.data(), rp.data(), n);
    c.check(m.data(), rm.data(), n);
    c.check(v.data(), rv.data(), n);
    CHECK_MESSAGE(c.bad == 0,
                  "in place: " << c.bad << " values off, worst " << c.worst_ulp << " ulp");
    // the low-precision copies: conversions of the plugin's own new params, bit for bit
    ABuf<uint16_t> rl_in(n), rl_sep(n);
    for (int64_t i = 0; i < n; i++) {
        rl_in[i] = optim::adam_ref_lowp(p[i], lowp_in_place);
        rl_sep[i] = optim::adam_ref_lowp(p[i], lowp_sep);
    }
    CHECK(std::memcmp(l.data(), rl_in.data(), 2 * n) == 0);
    CHECK(r.nonfinite == 0);
    CHECK(r.grad_sumsq == doctest::Approx(rr.grad_sumsq).epsilon(kSumsqRel));

    // plugin, separate outputs: inputs untouched, outputs equal the in-place ones bitwise
    ABuf<float> po(n, out_pad), mo(n, out_pad), vo(n, out_pad);
    ABuf<uint16_t> lo(n, out_pad);
    for (int64_t i = 0; i < n; i++)
        po[i] = mo[i] = vo[i] = -12345.0f; // must be overwritten
    sof_optim_slice s2 = optim::make_slice(n, d.p.data(), d.grad(gd), gd, d.m.data(), d.v.data());
    s2.param_out = po.data();
    s2.slot[0].data_out = mo.data();
    s2.slot[1].data_out = vo.data();
    s2.lowp_out = lo.data();
    s2.lowp_dtype = lowp_sep;
    AdamData orig(n, seed, step > 1);
    sof_optim_result r2 = opt.step(s2, hp);
    CHECK(std::memcmp(d.p.data(), orig.p.data(), 4 * n) == 0);
    CHECK(std::memcmp(d.m.data(), orig.m.data(), 4 * n) == 0);
    CHECK(std::memcmp(d.v.data(), orig.v.data(), 4 * n) == 0);
    CHECK(std::memcmp(d.g32.data(), orig.g32.data(), 4 * n) == 0);
    CHECK(std::memcmp(po.data(), p.data(), 4 * n) == 0);
    CHECK(std::memcmp(mo.data(), m.data(), 4 * n) == 0);
    CHECK(std::memcmp(vo.data(), v.data(), 4 * n) == 0);
    CHECK(std::memcmp(lo.data(), rl_sep.data(), 2 * n) == 0);
    CHECK(r2.grad_sumsq == r.grad_sumsq);
    CHECK(r2.nonfinite == 0);
}

} // namespace

TEST_CASE("every host plugin matches the scalar reference (sizes, dtypes, modes, outputs)") {
    auto cases = host_plugin_cases();
    REQUIRE_FALSE(cases.empty());
    const int64_t sizes[] = {1, 7, 15, 16, 17, 1023, 4099};
    for (const auto& pc : cases) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        uint64_t seed = 1;
        for (int64_t n : sizes)
            for (sof_dtype gd : {SOF_DTYPE_F32, SOF_DTYPE_BF16})
                for (float wd : {0.0f, 0.1f})
                    for (int64_t step : {int64_t{1}, int64_t{1000}})
                        for (float scale : {1.0f, 0.37f})
                            for (const Mode& mode : kModes) {
                                sof_dtype lowp = (seed & 1) ? SOF_DTYPE_BF16 : SOF_DTYPE_F16;
                                run_config(*opt, n, gd, wd, step, scale, mode, lowp,
                                           (seed % 3 == 0) ? 1 : 0, seed);
                                seed++;
                            }
    }
}

TEST_CASE("large slices (~3M, several tiles, both threads): aligned and misaligned outputs") {
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        const int64_t n = 3000017;
        run_config(*opt, n, SOF_DTYPE_F32, 0.1f, 1000, 0.37f, kModes[0], SOF_DTYPE_BF16, 0, 7);
        run_config(*opt, n, SOF_DTYPE_BF16, 0.0f, 1, 1.0f, kModes[0], SOF_DTYPE_F16, 1, 8);
        run_config(*opt, n, SOF_DTYPE_F32, 0.01f, 3, 2.0f, kModes[1], SOF_DTYPE_BF16, 0, 9);
    }
}

TEST_CASE("statistics: non-finite flag, grad_stats equals the step's, thread-count independent") {
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt1 = load_case(pc, 1);
        auto opt2 = load_case(pc, 2);
        const int64_t n = 50001;
        for (sof_dtype gd : {SOF_DTYPE_F32, SOF_DTYPE_BF16}) {
            AdamData d(n, 42, true);
            sof_optim_hparams hp = optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 5,
                                                       SOF_ADAM_ADAMW, true, 0.5f);
            sof_optim_result st1 = opt1->grad_stats(d.grad(gd), gd, n, 0.5f);
            sof_optim_result st2 = opt2->grad_stats(d.grad(gd), gd, n, 0.5f);
            sof_optim_result ref = optim::adam_ref_stats(d.grad(gd), gd, n, 0.5f);
            CHECK(st1.grad_sumsq == st2.grad_sumsq);
            CHECK(st1.grad_sumsq == doctest::Approx(ref.grad_sumsq).epsilon(kSumsqRel));
            CHECK(st1.nonfinite == 0);
            AdamData e(n, 42, true);
            sof_optim_slice s =
                optim::make_slice(n, e.p.data(), e.grad(gd), gd, e.m.data(), e.v.data());
            sof_optim_result sr = opt2->step(s, hp);
            CHECK(sr.grad_sumsq == st1.grad_sumsq);

            // one Inf, one NaN, one finite grad that overflows once scaled: each sets the flag
            for (int kind = 0; kind < 3; kind++) {
                CAPTURE(kind);
                AdamData f(n, 43, true);
                int64_t at = 1000 + 7919 * kind;
                float bad = kind == 0 ? INFINITY : (kind == 1 ? NAN : 3e38f);
                f.g32[at] = bad;
                f.g16[at] = core::f32_to_bf16(bad);
                float scale = kind == 2 ? 4.0f : 1.0f;
                sof_optim_result a = opt2->grad_stats(f.grad(gd), gd, n, scale);
                CHECK(a.nonfinite == 1);
                sof_optim_slice fs =
                    optim::make_slice(n, f.p.data(), f.grad(gd), gd, f.m.data(), f.v.data());
                hp.grad_scale = scale;
                CHECK(opt2->step(fs, hp).nonfinite == 1);
                hp.grad_scale = 0.5f;
            }
        }
    }
}

TEST_CASE("low-precision copy: RNE ties, NaN payloads, Inf, subnormals, fp16 overflow") {
    // lr = 0 and wd = 0 leave p unchanged (p - 0/denom), so the copy is the conversion of crafted
    // inputs; every plugin copy must equal core::f32_to_bf16 / f32_to_f16 of its own output.
    std::vector<uint32_t> bits = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f80ffffu, 0x7fc00001u,
                                  0xffc12345u, 0x7f800001u, 0x7f800000u, 0xff800000u, 0x00000001u,
                                  0x80400000u, 0x477ff000u, 0x477fefffu, 0x47800000u, 0x33000000u,
                                  0x33000001u, 0x33c00000u, 0x38800000u, 0x387fe000u, 0x80000000u,
                                  0x7f7fffffu, 0x0080ffffu, 0x387ff000u};
    std::mt19937 rng(5);
    while (bits.size() < 4099)
        bits.push_back(rng());
    const int64_t n = static_cast<int64_t>(bits.size());
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        for (sof_dtype ld : {SOF_DTYPE_BF16, SOF_DTYPE_F16}) {
            for (int sep = 0; sep < 2; sep++) {
                CAPTURE(static_cast<int>(ld));
                CAPTURE(sep);
                ABuf<float> p(n), m(n), v(n), g(n), po(n), mo(n), vo(n);
                ABuf<uint16_t> l(n);
                for (int64_t i = 0; i < n; i++)
                    p[i] = core::bits_f32(bits[static_cast<size_t>(i)]);
                sof_optim_slice s =
                    optim::make_slice(n, p.data(), g.data(), SOF_DTYPE_F32, m.data(), v.data());
                if (sep) {
                    s.param_out = po.data();
                    s.slot[0].data_out = mo.data();
                    s.slot[1].data_out = vo.data();
                }
                s.lowp_out = l.data();
                s.lowp_dtype = ld;
                sof_optim_hparams hp = optim::make_hparams(0.0f, 0.9f, 0.999f, 1e-8f, 0.0f, 1,
                                                           SOF_ADAM_ADAMW, true, 1.0f);
                opt->step(s, hp);
                int64_t bad = 0, nan_in = 0;
                for (int64_t i = 0; i < n; i++) {
                    float out = static_cast<const float*>(s.param_out)[i];
                    uint16_t want =
                        ld == SOF_DTYPE_BF16 ? core::f32_to_bf16(out) : core::f32_to_f16(out);
                    if (l[i] != want) bad++;
                    if (std::isnan(p[i])) {
                        nan_in++;
                        bool is_nan = ld == SOF_DTYPE_BF16 ? std::isnan(core::bf16_to_f32(l[i]))
                                                           : std::isnan(core::f16_to_f32(l[i]));
                        if (!is_nan) bad++;
                    } else if (std::memcmp(&out, &p[i], 4) != 0) {
                        bad++; // lr = 0 keeps every non-NaN param bitwise
                    }
                }
                CHECK(nan_in > 0);
                CHECK_MESSAGE(bad == 0, bad << " low-precision values differ");
            }
        }
    }
}

TEST_CASE("step_multi equals one step per slice, results aggregated") {
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        const int64_t ns[3] = {1023, 17, 20000};
        std::vector<std::unique_ptr<AdamData>> a, b;
        std::vector<sof_optim_slice> sl;
        std::vector<sof_optim_hparams> hp;
        double sum = 0.0;
        for (int k = 0; k < 3; k++) {
            a.push_back(std::make_unique<AdamData>(ns[k], 100 + k, true));
            b.push_back(std::make_unique<AdamData>(ns[k], 100 + k, true));
            hp.push_back(optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, k == 1 ? 0.0f : 0.1f,
                                             3 + k, k == 2 ? SOF_ADAM_L2 : SOF_ADAM_ADAMW, true,
                                             0.5f));
            sl.push_back(optim::make_slice(ns[k], a[k]->p.data(), a[k]->grad(SOF_DTYPE_F32),
                                           SOF_DTYPE_F32, a[k]->m.data(), a[k]->v.data()));
            sof_optim_slice one =
                optim::make_slice(ns[k], b[k]->p.data(), b[k]->grad(SOF_DTYPE_F32), SOF_DTYPE_F32,
                                  b[k]->m.data(), b[k]->v.data());
            sum += opt->step(one, hp[k]).grad_sumsq;
        }
        sof_optim_result r = opt->step_multi(sl.data(), hp.data(), 3);
        CHECK(r.grad_sumsq == doctest::Approx(sum).epsilon(1e-14));
        CHECK(r.nonfinite == 0);
        for (int k = 0; k < 3; k++) {
            CHECK(std::memcmp(a[k]->p.data(), b[k]->p.data(), 4 * ns[k]) == 0);
            CHECK(std::memcmp(a[k]->m.data(), b[k]->m.data(), 4 * ns[k]) == 0);
            CHECK(std::memcmp(a[k]->v.data(), b[k]->v.data(), 4 * ns[k]) == 0);
        }
    }
}

TEST_CASE("invalid arguments are status codes turned into clear errors") {
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 1);
        AdamData d(16, 1, false);
        sof_optim_slice s =
            optim::make_slice(16, d.p.data(), d.g32.data(), SOF_DTYPE_F32, d.m.data(), d.v.data());
        s.grad_dtype = 7;
        sof_optim_hparams hp =
            optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1, SOF_ADAM_ADAMW, true, 1.0f);
        try {
            opt->step(s, hp);
            FAIL("a bad grad dtype was accepted");
        } catch (const core::Error& e) {
            CHECK(e.kind() == core::ErrorKind::Runtime);
            CHECK(std::string(e.what()).find(pc.name) != std::string::npos);
            if (pc.name == "cpu_adam") // cpu_adam's own message names the field
                CHECK(std::string(e.what()).find("grad_dtype") != std::string::npos);
        }
    }
}

namespace {

// A host plugin opened through the bare ABI (dlopen, its entry, create): the status codes and
// last_error as a harness sees them, without the Optimizer wrapper's exceptions.
struct RawPlugin {
    void* so = nullptr;
    const sof_optim_plugin* api = nullptr;
    sof_optim_ctx* ctx = nullptr;
    explicit RawPlugin(const std::string& path) {
        so = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        REQUIRE_MESSAGE(so, "dlopen " << path << ": " << dlerror());
        sof_optim_entry_fn entry = nullptr;
        void* sym = dlsym(so, SOF_OPTIM_ENTRY);
        REQUIRE(sym);
        std::memcpy(&entry, &sym, sizeof entry);
        api = entry();
        sof_optim_init init{sizeof(sof_optim_init), 1, 0};
        REQUIRE(api->create(&init, &ctx) == SOF_OK);
    }
    ~RawPlugin() {
        if (ctx) api->destroy(ctx);
        if (so) dlclose(so);
    }
    RawPlugin(const RawPlugin&) = delete;
    RawPlugin& operator=(const RawPlugin&) = delete;
    std::string error() const { return api->last_error(ctx); }
};

} // namespace

TEST_CASE("every host plugin refuses overlapping buffers and betas outside [0, 1) with "
          "SOF_ERR_INVALID_ARGUMENT (sof_optim_check.h), before touching a buffer") {
    int tested = 0;
    for (const auto& pi : optim::list_plugins(SOF_PLUGIN_DIR)) {
        if (pi.target != SOF_TARGET_HOST || pi.score <= 0) continue; // gpu_adam: tests/cuda
        INFO("plugin " << pi.name);
        RawPlugin pl(pi.path);
        tested++;
        const int64_t n = 64;
        AdamData d(n, 3, true), orig(n, 3, true);
        const sof_optim_hparams ok =
            optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 2, SOF_ADAM_ADAMW, true, 1.0f);
        const sof_optim_slice good =
            optim::make_slice(n, d.p.data(), d.g32.data(), SOF_DTYPE_F32, d.m.data(), d.v.data());
        ABuf<float> out(n + 8);
        auto refused = [&](const sof_optim_slice& s, const sof_optim_hparams& hp,
                           const std::string& why) {
            sof_optim_result r{};
            CHECK(pl.api->step(pl.ctx, &s, &hp, &r, nullptr) == SOF_ERR_INVALID_ARGUMENT);
            CHECK_MESSAGE(pl.error().find(why) != std::string::npos, pl.error());
            // the same slice second of two in one call: refused, the slice named
            const sof_optim_slice two[2] = {good, s};
            const sof_optim_hparams hps[2] = {ok, hp};
            CHECK(pl.api->step_multi(pl.ctx, two, hps, 2, &r, nullptr) == SOF_ERR_INVALID_ARGUMENT);
            CHECK_MESSAGE(pl.error().find("slice 1: " + why) != std::string::npos, pl.error());
            // nothing was stepped: every check comes before the first write
            CHECK(std::memcmp(d.p.data(), orig.p.data(), 4 * n) == 0);
            CHECK(std::memcmp(d.m.data(), orig.m.data(), 4 * n) == 0);
            CHECK(std::memcmp(d.v.data(), orig.v.data(), 4 * n) == 0);
        };
        // outputs that partially overlap their inputs (one element off), each pair in turn
        sof_optim_slice s = good;
        s.param_out = d.p.data() + 1;
        refused(s, ok, "outputs partially overlap inputs");
        s = good;
        s.slot[0].data_out = d.m.data() + 3;
        refused(s, ok, "outputs partially overlap inputs");
        s = good;
        s.slot[1].data_out = d.v.data() + n - 1;
        refused(s, ok, "outputs partially overlap inputs");
        // betas outside [0, 1), NaN included
        for (float b : {1.0f, -0.1f, 1.5f, std::nanf("")}) {
            CAPTURE(b);
            sof_optim_hparams hp = ok;
            hp.beta1 = b;
            refused(good, hp, "betas must lie in [0, 1)");
            hp = ok;
            hp.beta2 = b;
            refused(good, hp, "betas must lie in [0, 1)");
        }
        // the rollback takes the same checks
        sof_optim_hparams hp = ok;
        hp.beta2 = 1.0f;
        CHECK(pl.api->rollback(pl.ctx, &good, &hp, nullptr) == SOF_ERR_INVALID_ARGUMENT);
        CHECK_MESSAGE(pl.error().find("betas must lie in [0, 1)") != std::string::npos, pl.error());
        // disjoint separate outputs and in place are fine
        s = good;
        s.param_out = out.data();
        sof_optim_result r{};
        CHECK(pl.api->step(pl.ctx, &s, &ok, &r, nullptr) == SOF_OK);
        CHECK(pl.api->step(pl.ctx, &good, &ok, &r, nullptr) == SOF_OK);
    }
    CHECK(tested >= 1); // cpu_adam runs on every x86 and Arm host
}

TEST_CASE("disjoint slices stepped concurrently from many threads equal one whole step") {
    // One context shared by 4 caller threads (num_threads = 1: the caller parallelizes), each
    // stepping its slices in reverse order with its own separate outputs; bias correction comes
    // from each call's step, so order and threads cannot matter.
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto whole = load_case(pc, 1);
        auto shared = load_case(pc, 1);
        const int64_t n = 200003;
        AdamData ref(n, 77, true), d(n, 77, true);
        ABuf<float> po(n), mo(n), vo(n);
        ABuf<uint16_t> lw(n), lref(n);
        sof_optim_hparams hp =
            optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 42, SOF_ADAM_ADAMW, true, 0.5f);
        sof_optim_slice all = optim::make_slice(n, ref.p.data(), ref.g32.data(), SOF_DTYPE_F32,
                                                ref.m.data(), ref.v.data());
        all.lowp_out = lref.data();
        all.lowp_dtype = SOF_DTYPE_BF16;
        whole->step(all, hp);
        const int kThreads = 4, kSlices = 13; // uneven slice lengths, not multiples of 16
        std::vector<int64_t> cut(kSlices + 1);
        for (int k = 0; k <= kSlices; k++)
            cut[k] = n * k / kSlices + (k > 0 && k < kSlices ? 5 : 0);
        std::vector<std::thread> workers;
        std::vector<int> failures(kThreads, 0);
        for (int t = 0; t < kThreads; t++)
            workers.emplace_back([&, t] {
                for (int k = kSlices - 1 - t; k >= 0; k -= kThreads) {
                    int64_t a = cut[k], len = cut[k + 1] - cut[k];
                    sof_optim_slice s =
                        optim::make_slice(len, d.p.data() + a, d.g32.data() + a, SOF_DTYPE_F32,
                                          d.m.data() + a, d.v.data() + a);
                    s.param_out = po.data() + a;
                    s.slot[0].data_out = mo.data() + a;
                    s.slot[1].data_out = vo.data() + a;
                    s.lowp_out = lw.data() + a;
                    s.lowp_dtype = SOF_DTYPE_BF16;
                    try {
                        shared->step(s, hp);
                    } catch (...) {
                        failures[t]++;
                    }
                }
            });
        for (auto& w : workers)
            w.join();
        for (int t = 0; t < kThreads; t++)
            CHECK(failures[t] == 0);
        Cmp c{variant_and_slice_bitwise(pc.name)}; // both sides are this plugin's steps
        c.check(po.data(), ref.p.data(), n);
        c.check(mo.data(), ref.m.data(), n);
        c.check(vo.data(), ref.v.data(), n);
        CHECK_MESSAGE(c.bad == 0, c.bad << " values off, worst " << c.worst_ulp << " ulp");
        if (variant_and_slice_bitwise(pc.name))
            CHECK(std::memcmp(lw.data(), lref.data(), 2 * n) == 0);
    }
}

TEST_CASE("cpu_adam: every variant equals the scalar variant bit for bit (lanes, tails, copies)") {
    // cpu_adam runs step_elem's arithmetic in every vector lane and scalar tail, so variants and
    // slicings cannot change a result (what the engine's bitwise STV-vs-sync guarantee needs).
    std::vector<PluginCase> cases;
    for (const auto& pc : host_plugin_cases())
        if (pc.name == "cpu_adam") cases.push_back(pc);
    if (cases.size() < 2) {
        MESSAGE("only one cpu_adam variant runs here: nothing to compare");
        return;
    }
    REQUIRE(cases[0].force == "scalar");
    auto scalar = load_case(cases[0], 1);
    for (size_t k = 1; k < cases.size(); k++) {
        INFO("variant " << cases[k].label());
        auto opt = load_case(cases[k], 2);
        uint64_t seed = 500;
        for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{17}, int64_t{4099}, int64_t{70001}})
            for (sof_dtype gd : {SOF_DTYPE_F32, SOF_DTYPE_BF16, SOF_DTYPE_F16})
                for (const Mode& mode : kModes)
                    for (int sep = 0; sep < 2; sep++) {
                        CAPTURE(n);
                        CAPTURE(static_cast<int>(gd));
                        CAPTURE(mode.name);
                        CAPTURE(sep);
                        seed++;
                        AdamData a(n, seed, true), b(n, seed, true);
                        ABuf<float> po(n), mo(n), vo(n);
                        ABuf<uint16_t> la(n), lb(n);
                        sof_optim_hparams hp =
                            optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, seed % 2 ? 0.1f : 0.0f,
                                                7, mode.mode, mode.bias_correction, 0.37f);
                        sof_dtype ld = seed % 3 ? SOF_DTYPE_BF16 : SOF_DTYPE_F16;
                        sof_optim_slice sa = optim::make_slice(n, a.p.data(), a.grad(gd), gd,
                                                               a.m.data(), a.v.data());
                        sa.lowp_out = la.data();
                        sa.lowp_dtype = ld;
                        sof_optim_slice sb = optim::make_slice(n, b.p.data(), b.grad(gd), gd,
                                                               b.m.data(), b.v.data());
                        sb.lowp_out = lb.data();
                        sb.lowp_dtype = ld;
                        if (sep) {
                            sb.param_out = po.data();
                            sb.slot[0].data_out = mo.data();
                            sb.slot[1].data_out = vo.data();
                        }
                        sof_optim_result ra = scalar->step(sa, hp);
                        sof_optim_result rb = opt->step(sb, hp);
                        CHECK(std::memcmp(a.p.data(), sb.param_out, 4 * n) == 0);
                        CHECK(std::memcmp(a.m.data(), sb.slot[0].data_out, 4 * n) == 0);
                        CHECK(std::memcmp(a.v.data(), sb.slot[1].data_out, 4 * n) == 0);
                        CHECK(std::memcmp(la.data(), lb.data(), 2 * n) == 0);
                        CHECK(rb.grad_sumsq == doctest::Approx(ra.grad_sumsq).epsilon(kSumsqRel));
                    }
    }
}

TEST_CASE("grad sum of squares: squares beyond the fp32 range are still summed in fp64") {
    // cpu_adam's vector variants sum squares in fp32 lanes per block; a block whose lane sums
    // overflow or approach the fp32 underflow is summed again in fp64. 1e25^2 = 1e50 and
    // 1e-25^2 = 1e-50 are far outside fp32 but exact enough in fp64: finite, not flagged.
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        const int64_t n = 20011;
        for (float mag : {1e25f, 1e-25f}) {
            CAPTURE(mag);
            AdamData d(n, 9, true);
            for (int64_t i = 0; i < n; i++)
                d.g32[i] = (i % 3 ? mag : -mag) * (1.0f + static_cast<float>(i % 7) / 8.0f);
            d.g32[5000] = 0.0f; // a lone zero among them
            sof_optim_result ref = optim::adam_ref_stats(d.g32.data(), SOF_DTYPE_F32, n, 0.5f);
            REQUIRE(std::isfinite(ref.grad_sumsq));
            REQUIRE(ref.grad_sumsq > 0.0);
            sof_optim_result st = opt->grad_stats(d.g32.data(), SOF_DTYPE_F32, n, 0.5f);
            CHECK(st.nonfinite == 0);
            CHECK(st.grad_sumsq == doctest::Approx(ref.grad_sumsq).epsilon(kSumsqRel));
            sof_optim_slice s = optim::make_slice(n, d.p.data(), d.g32.data(), SOF_DTYPE_F32,
                                                  d.m.data(), d.v.data());
            sof_optim_result r = opt->step(s, optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f,
                                                                  3, SOF_ADAM_ADAMW, true, 0.5f));
            CHECK(r.nonfinite == 0);
            CHECK(r.grad_sumsq == st.grad_sumsq);
        }
    }
}

TEST_CASE("bf16 moments: the fp32 step of the widened state, moments rounded to nearest even") {
    // optimizer.state_dtype: bf16. A plugin with bf16 moments must compute exactly what it
    // computes with fp32 moments holding the same (widened) values, and store the new moments
    // rounded to nearest even: p bitwise equal, m16 == bf16(m32), v16 == bf16(v32); in place and
    // separate outputs alike; and the reference (adam_ref.h) within the fp32 tolerance on p and
    // one bf16 step on the moments.
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        uint64_t seed = 900;
        for (int64_t n :
             {int64_t{1}, int64_t{15}, int64_t{17}, int64_t{1023}, int64_t{4099}, int64_t{70001}})
            for (sof_dtype gd : {SOF_DTYPE_F32, SOF_DTYPE_BF16})
                for (const Mode& mode : kModes)
                    for (int sep = 0; sep < 2; sep++) {
                        CAPTURE(n);
                        CAPTURE(static_cast<int>(gd));
                        CAPTURE(mode.name);
                        CAPTURE(sep);
                        seed++;
                        AdamData d(n, seed, true);
                        ABuf<uint16_t> m16(n), v16(n), mo16(n), vo16(n), l16(n), l32(n);
                        for (int64_t i = 0; i < n; i++) { // the bf16 state and its fp32 twin
                            m16[i] = core::f32_to_bf16(d.m[i]);
                            v16[i] = core::f32_to_bf16(d.v[i]);
                            d.m[i] = core::bf16_to_f32(m16[i]);
                            d.v[i] = core::bf16_to_f32(v16[i]);
                        }
                        sof_optim_hparams hp =
                            optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, seed % 2 ? 0.1f : 0.0f,
                                                7, mode.mode, mode.bias_correction, 0.37f);
                        ABuf<float> p32(n), m32(n), v32(n), p16(n), po(n);
                        p32.copy_from(d.p);
                        m32.copy_from(d.m);
                        v32.copy_from(d.v);
                        p16.copy_from(d.p);
                        sof_optim_slice s32 = optim::make_slice(n, p32.data(), d.grad(gd), gd,
                                                                m32.data(), v32.data());
                        s32.lowp_out = l32.data();
                        sof_optim_slice s16 = optim::make_slice(
                            n, p16.data(), d.grad(gd), gd, m16.data(), v16.data(), SOF_STATE_BF16);
                        s16.lowp_out = l16.data();
                        if (sep) {
                            s16.param_out = po.data();
                            s16.slot[0].data_out = mo16.data();
                            s16.slot[1].data_out = vo16.data();
                        }
                        sof_optim_result r32 = opt->step(s32, hp);
                        sof_optim_result r16 = opt->step(s16, hp);
                        const uint16_t* om = static_cast<const uint16_t*>(s16.slot[0].data_out);
                        const uint16_t* ov = static_cast<const uint16_t*>(s16.slot[1].data_out);
                        int64_t bad = 0, far = 0;
                        for (int64_t i = 0; i < n; i++) {
                            if (std::memcmp(static_cast<const float*>(s16.param_out) + i, &p32[i],
                                            4) != 0)
                                bad++;
                            if (om[i] != core::f32_to_bf16(m32[i])) bad++;
                            if (ov[i] != core::f32_to_bf16(v32[i])) bad++;
                        }
                        CHECK_MESSAGE(bad == 0, bad << " values differ from the fp32-state step");
                        CHECK(std::memcmp(l16.data(), l32.data(), 2 * n) == 0);
                        CHECK(r16.grad_sumsq == r32.grad_sumsq);
                        if (sep) { // inputs untouched
                            for (int64_t i = 0; i < n; i++)
                                if (m16[i] != core::f32_to_bf16(d.m[i]) ||
                                    std::memcmp(&p16[i], &d.p[i], 4) != 0)
                                    bad++;
                            CHECK(bad == 0);
                        }
                        // the reference with bf16 state: p as for fp32 state, moments within one
                        // bf16 step (the fp32 values before rounding may differ by 2 ulp)
                        ABuf<float> rp(n);
                        ABuf<uint16_t> rm(n), rv(n);
                        rp.copy_from(d.p);
                        for (int64_t i = 0; i < n; i++) {
                            rm[i] = core::f32_to_bf16(d.m[i]);
                            rv[i] = core::f32_to_bf16(d.v[i]);
                        }
                        sof_optim_slice rs = optim::make_slice(
                            n, rp.data(), d.grad(gd), gd, rm.data(), rv.data(), SOF_STATE_BF16);
                        optim::adam_ref_step(rs, hp);
                        Cmp c{false};
                        c.check(static_cast<const float*>(s16.param_out), rp.data(), n);
                        auto near = [&](const uint16_t* got, const uint16_t* want) {
                            float big = 0.0f;
                            for (int64_t i = 0; i < n; i++)
                                big = std::max(big, std::fabs(core::bf16_to_f32(want[i])));
                            for (int64_t i = 0; i < n; i++) {
                                float a = core::bf16_to_f32(got[i]), b = core::bf16_to_f32(want[i]);
                                bool same_sign = (got[i] >> 15) == (want[i] >> 15);
                                int steps = std::abs(static_cast<int>(got[i] & 0x7fff) -
                                                     static_cast<int>(want[i] & 0x7fff));
                                if (!(same_sign && steps <= 1) &&
                                    !(std::fabs(a - b) <= 1e-6f * big))
                                    far++;
                            }
                        };
                        near(om, rm.data());
                        near(ov, rv.data());
                        CHECK_MESSAGE(c.bad == 0, "p vs reference: " << c.bad << " values off");
                        CHECK_MESSAGE(far == 0, far << " moments more than one bf16 step off");
                    }
    }
}

TEST_CASE("bf16 moments: rollback inverts in bf16, and the state format is checked") {
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 1);
        const int64_t n = 4099;
        AdamData d(n, 31, true);
        ABuf<uint16_t> m16(n), v16(n);
        for (int64_t i = 0; i < n; i++) {
            m16[i] = core::f32_to_bf16(d.m[i]);
            v16[i] = core::f32_to_bf16(d.v[i]);
        }
        ABuf<float> p0(n);
        p0.copy_from(d.p);
        sof_optim_hparams hp =
            optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 5, SOF_ADAM_ADAMW, true, 1.0f);
        sof_optim_slice s = optim::make_slice(n, d.p.data(), d.g32.data(), SOF_DTYPE_F32,
                                              m16.data(), v16.data(), SOF_STATE_BF16);
        opt->step(s, hp);
        opt->rollback(s, hp);
        // the inverse of a rounded step: p moved with the fp32 moments, the inverse sees them
        // rounded (2^-9 relative), so p comes back within a small fraction of one step (lr)
        double worst_p = 0.0;
        for (int64_t i = 0; i < n; i++)
            worst_p = std::max(worst_p, static_cast<double>(std::fabs(d.p[i] - p0[i])));
        MESSAGE("bf16 moments: worst |p - p0| after step + rollback " << worst_p << " (lr 1e-3)");
        CHECK(worst_p < 1e-4);
        s.slot[0].format = s.slot[1].format = 2; // not a state format (fp16 is none)
        try {
            opt->step(s, hp);
            FAIL("state format 2 was accepted");
        } catch (const core::Error& e) {
            CHECK(std::string(e.what()).find("state format 2") != std::string::npos);
        }
    }
}
