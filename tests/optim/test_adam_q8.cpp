// Q8 moments and bf16 master params (issue 28) in every host plugin against the scalar reference
// optim/adam_ref.h, and cpu_adam's vector Q8 paths (AVX2, AVX-512) bitwise against its scalar one.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "optim_test_util.h"

using namespace sof;
using namespace sof::test;

namespace {

// A Q8 / bf16-master state of n elements in blocks of qb from fp32 values (optim/qstate.h).
struct QData {
    std::vector<uint8_t> mc, vc;
    std::vector<float> ms, vs;
    std::vector<uint16_t> p16;
    QData(const AdamData& d, int32_t qb) {
        const size_t n = static_cast<size_t>(d.n), nb = (n + qb - 1) / qb;
        mc.resize(n), vc.resize(n), ms.resize(nb), vs.resize(nb), p16.resize(n);
        for (size_t b = 0; b < nb; b++) {
            const size_t i0 = b * qb, len = std::min<size_t>(qb, n - i0);
            optim::q_quantize_block(d.m.data() + i0, static_cast<int64_t>(len), optim::q8_map(true),
                                    mc.data() + i0, &ms[b]);
            optim::q_quantize_block(d.v.data() + i0, static_cast<int64_t>(len),
                                    optim::q8_map(false), vc.data() + i0, &vs[b]);
        }
        for (size_t i = 0; i < n; i++)
            p16[i] = core::f32_to_bf16(d.p[i]);
    }
    bool operator==(const QData& o) const {
        return mc == o.mc && vc == o.vc && p16 == o.p16 &&
               std::memcmp(ms.data(), o.ms.data(), ms.size() * 4) == 0 &&
               std::memcmp(vs.data(), o.vs.data(), vs.size() * 4) == 0;
    }
};

// Points s at q (inputs) and o (outputs): Q8 slots of block qb when q8, a bf16 master when p16.
void use_q(sof_optim_slice& s, QData& q, QData& o, int32_t qb, bool q8, bool p16) {
    if (q8) {
        optim::set_q8(s, 0, qb, q.mc.data(), q.ms.data());
        optim::set_q8(s, 1, qb, q.vc.data(), q.vs.data());
        s.slot[0].data_out = o.mc.data(), s.slot[0].scale_out = o.ms.data();
        s.slot[1].data_out = o.vc.data(), s.slot[1].scale_out = o.vs.data();
    }
    if (p16) {
        s.param_dtype = SOF_DTYPE_BF16;
        s.param = q.p16.data(), s.param_out = o.p16.data();
    }
}

} // namespace

TEST_CASE("q8 moments and bf16 master: every host plugin against the reference; cpu_adam "
          "variants bitwise equal") {
    // Plugins with the reference's arithmetic (grace_adam: tests/grace) match it bitwise;
    // cpu_adam's step (FMA, one divide) differs from it by <= 2 ulp before quantization, so a
    // code may land one step off where a value sits on a rounding boundary: bounded by one code
    // step of its block. Between cpu_adam's variants everything is bitwise.
    auto cases = host_plugin_cases();
    std::unique_ptr<optim::Optimizer> scalar;
    for (const auto& pc : cases)
        if (pc.name == "cpu_adam" && pc.force == "scalar") scalar = load_case(pc, 1);
    for (const auto& pc : cases) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        uint64_t seed = 4000;
        for (int32_t qb : {64, 256, 4096})
            for (int64_t n : {int64_t{1}, int64_t{300}, int64_t{4099}, int64_t{20011}})
                for (int fmt = 0; fmt < 3; fmt++)
                    for (int sep = 0; sep < 2; sep++) {
                        const bool q8 = fmt<2, p16 = fmt> 0;
                        CAPTURE(qb);
                        CAPTURE(n);
                        CAPTURE(fmt);
                        CAPTURE(sep);
                        seed++;
                        AdamData d(n, seed, true);
                        const sof_dtype gd = seed % 2 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
                        QData q(d, qb), q0 = q, out = q, ref = q, sq = q, sout = q;
                        sof_optim_hparams hp = optim::make_hparams(
                            1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 7,
                            seed % 3 ? SOF_ADAM_ADAMW : SOF_ADAM_L2, true, 0.37f, 77 + seed);
                        ABuf<float> po(n), mo(n), vo(n), rp(n), rm(n), rv(n);
                        ABuf<uint16_t> l(n), rl(n);
                        // plugin
                        sof_optim_slice s = optim::make_slice(n, d.p.data(), d.grad(gd), gd,
                                                              d.m.data(), d.v.data());
                        s.index0 = 1000 * static_cast<int64_t>(seed);
                        if (sep)
                            s.param_out = po.data(), s.slot[0].data_out = mo.data(),
                            s.slot[1].data_out = vo.data();
                        use_q(s, q, sep ? out : q, qb, q8, p16);
                        s.lowp_out = l.data();
                        opt->step(s, hp);
                        // reference (separate outputs)
                        AdamData e(n, seed, true);
                        sof_optim_slice rs = optim::make_slice(n, e.p.data(), e.grad(gd), gd,
                                                               e.m.data(), e.v.data());
                        rs.index0 = s.index0;
                        rs.param_out = rp.data(), rs.slot[0].data_out = rm.data();
                        rs.slot[1].data_out = rv.data();
                        use_q(rs, q0, ref, qb, q8, p16);
                        rs.lowp_out = rl.data();
                        optim::adam_ref_step(rs, hp);
                        const QData& got = sep ? out : q;
                        if (sep) CHECK(q == q0); // inputs untouched
                        // vs the reference: codes within one step, scales within 2 ulp
                        if (q8) {
                            int64_t far = 0;
                            for (size_t i = 0; i < got.mc.size(); i++) {
                                const int a = got.mc[i], b = ref.mc[i];
                                const int ma = a & 0x7f, mb = b & 0x7f;
                                if (!((a >> 7) == (b >> 7) || ma == 0 || mb == 0) ||
                                    std::abs(ma - mb) > 1)
                                    far++;
                                if (std::abs(int(got.vc[i]) - int(ref.vc[i])) > 1) far++;
                            }
                            for (size_t b = 0; b < got.ms.size(); b++)
                                if (ulp_distance(got.ms[b], ref.ms[b]) > 2 ||
                                    ulp_distance(got.vs[b], ref.vs[b]) > 2)
                                    far++;
                            CHECK_MESSAGE(far == 0, far << " codes or scales beyond one step");
                        }
                        if (p16) { // stochastic rounding of values within 2 ulp: same or next bf16
                            int64_t far = 0;
                            for (size_t i = 0; i < got.p16.size(); i++)
                                if (std::abs(int(got.p16[i] & 0x7fff) - int(ref.p16[i] & 0x7fff)) >
                                    1)
                                    far++;
                            CHECK_MESSAGE(far == 0, far << " bf16 params beyond one step");
                        }
                        if (!variant_and_slice_bitwise(pc.name)) {
                            CHECK(got == ref); // the reference's arithmetic: bitwise
                            continue;
                        }
                        if (!scalar || pc.force == "scalar") continue;
                        // cpu_adam: every variant bitwise the scalar variant
                        AdamData f(n, seed, true);
                        QData sq0 = sq;
                        ABuf<float> qp(n), qm(n), qv(n);
                        ABuf<uint16_t> ql(n);
                        sof_optim_slice ss = optim::make_slice(n, f.p.data(), f.grad(gd), gd,
                                                               f.m.data(), f.v.data());
                        ss.index0 = s.index0;
                        ss.param_out = qp.data(), ss.slot[0].data_out = qm.data();
                        ss.slot[1].data_out = qv.data();
                        use_q(ss, sq0, sout, qb, q8, p16);
                        ss.lowp_out = ql.data();
                        scalar->step(ss, hp);
                        CHECK(got == sout);
                        CHECK(std::memcmp(l.data(), ql.data(), 2 * n) == 0);
                        if (!p16)
                            CHECK(std::memcmp(sep ? po.data() : d.p.data(), qp.data(), 4 * n) == 0);
                    }
    }
}

TEST_CASE("q8 and bf16 master: the rollback refuses them (they roll back exactly)") {
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 1);
        AdamData d(512, 3, true);
        QData q(d, 256);
        sof_optim_slice s =
            optim::make_slice(512, d.p.data(), d.g32.data(), SOF_DTYPE_F32, d.m.data(), d.v.data());
        use_q(s, q, q, 256, true, false);
        sof_optim_hparams hp =
            optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 2, SOF_ADAM_ADAMW, true, 1.0f);
        try {
            opt->rollback(s, hp);
            FAIL("a q8 rollback was accepted");
        } catch (const core::Error& e) {
            CHECK(std::string(e.what()).find("not invertible") != std::string::npos);
        }
        for (int32_t bad : {100, 320, 32, 8192}) { // not a power of two from 64 to 4096
            CAPTURE(bad);
            s.slot[0].block = bad;
            s.slot[1].block = bad;
            CHECK_THROWS_WITH_AS(opt->step(s, hp),
                                 doctest::Contains("power of two from 64 to 4096"), core::Error);
        }
    }
}

namespace {

// Inputs of a Q8 step (fp32 master): params, grads in three dtypes, Q8 codes and scales of m, v.
struct Q8In {
    int64_t n = 0;
    int32_t qb = 0;
    std::vector<float> p, g;
    std::vector<uint16_t> gb, gh; // g as bf16, as fp16
    std::vector<uint8_t> mc, vc;
    std::vector<float> ms, vs;
    Q8In(const AdamData& d, int32_t block) : n(d.n), qb(block) {
        p.assign(d.p.data(), d.p.data() + n);
        g.assign(d.g32.data(), d.g32.data() + n);
        QData q(d, qb);
        mc = q.mc, vc = q.vc, ms = q.ms, vs = q.vs;
        set_grads();
    }
    void set_grads() {
        gb.resize(g.size()), gh.resize(g.size());
        for (size_t i = 0; i < g.size(); i++)
            gb[i] = core::f32_to_bf16(g[i]), gh[i] = core::f32_to_f16(g[i]);
    }
    const void* grad(sof_dtype d) const {
        return d == SOF_DTYPE_F32 ? static_cast<const void*>(g.data())
                                  : (d == SOF_DTYPE_BF16 ? gb.data() : gh.data());
    }
};

// Outputs of a Q8 step, and how they were placed: in place, separate 64-byte aligned (cpu_adam's
// streaming stores), separate misaligned.
struct Q8Out {
    std::vector<float> p;
    std::vector<uint16_t> l;
    std::vector<uint8_t> mc, vc;
    std::vector<float> ms, vs;
    sof_optim_result r{};
};
enum class Place { InPlace, Aligned, Misaligned };

Q8Out run_q8(optim::Optimizer& opt, const Q8In& in, const sof_optim_hparams& hp, sof_dtype gd,
             int ld, Place place, int64_t index0) {
    const int64_t n = in.n, nb = static_cast<int64_t>(in.ms.size());
    const int64_t pad = place == Place::Misaligned ? 1 : 0;
    ABuf<float> p(n), po(n, pad), ms(nb), vs(nb), mso(nb, pad), vso(nb, pad);
    ABuf<uint8_t> mc(n), vc(n), mco(n, pad), vco(n, pad);
    ABuf<uint16_t> l(n, pad);
    std::memcpy(p.data(), in.p.data(), 4 * n);
    std::memcpy(mc.data(), in.mc.data(), n), std::memcpy(vc.data(), in.vc.data(), n);
    std::memcpy(ms.data(), in.ms.data(), 4 * nb), std::memcpy(vs.data(), in.vs.data(), 4 * nb);
    sof_optim_slice s = optim::make_slice(n, p.data(), in.grad(gd), gd, nullptr, nullptr);
    optim::set_q8(s, 0, in.qb, mc.data(), ms.data());
    optim::set_q8(s, 1, in.qb, vc.data(), vs.data());
    if (place != Place::InPlace) {
        s.param_out = po.data();
        s.slot[0].data_out = mco.data(), s.slot[0].scale_out = mso.data();
        s.slot[1].data_out = vco.data(), s.slot[1].scale_out = vso.data();
    }
    if (ld >= 0) s.lowp_out = l.data(), s.lowp_dtype = ld;
    s.index0 = index0;
    Q8Out o;
    o.r = opt.step(s, hp);
    auto f = [](const void* x) { return static_cast<const float*>(x); };
    auto b = [](const void* x) { return static_cast<const uint8_t*>(x); };
    o.p.assign(f(s.param_out), f(s.param_out) + n);
    o.mc.assign(b(s.slot[0].data_out), b(s.slot[0].data_out) + n);
    o.vc.assign(b(s.slot[1].data_out), b(s.slot[1].data_out) + n);
    o.ms.assign(s.slot[0].scale_out, s.slot[0].scale_out + nb);
    o.vs.assign(s.slot[1].scale_out, s.slot[1].scale_out + nb);
    if (ld >= 0) o.l.assign(l.data(), l.data() + n);
    if (place != Place::InPlace) { // inputs untouched
        CHECK(std::memcmp(p.data(), in.p.data(), 4 * n) == 0);
        CHECK(std::memcmp(mc.data(), in.mc.data(), n) == 0);
        CHECK(std::memcmp(ms.data(), in.ms.data(), 4 * nb) == 0);
    }
    return o;
}

// Elements of two outputs that differ in any bit (params, copy, codes, scales).
int64_t differences(const Q8Out& a, const Q8Out& b) {
    int64_t d = 0;
    for (size_t i = 0; i < a.p.size(); i++) {
        d += std::memcmp(&a.p[i], &b.p[i], 4) != 0;
        d += a.mc[i] != b.mc[i];
        d += a.vc[i] != b.vc[i];
    }
    d += a.l != b.l;
    for (size_t k = 0; k < a.ms.size(); k++)
        d += std::memcmp(&a.ms[k], &b.ms[k], 4) != 0 || std::memcmp(&a.vs[k], &b.vs[k], 4) != 0;
    return d;
}

// Two tiles of cpu_adam (8192 each) and a partial one of 841: its last Q8 block is short, its
// 16-lane groups end inside a statistics block (832 = 3 * 256 + 64) and 9 elements miss a group.
constexpr int64_t kQ8N = 2 * 8192 + 841;

// Edge blocks (every block size leaves blocks 0-3 whole): block 0 spans 40 binades (subnormal
// codes), block 1 is all zero (scale 0), block 2 holds a NaN moment (scale NaN, codes 0), block 3
// an Inf grad and a grad whose square overflows v, block 4 (short with 4096-blocks) huge moments
// (m ~ 1e5-1e6, v ~ 1e10-1e12: scales above 2^16 and 2^32, where AVX2's decode multiplies twice);
// the rest typical training values.
void add_edge_blocks(AdamData& d, int32_t qb) {
    auto blk = [&](int k) { return static_cast<int64_t>(k) * qb; };
    for (int64_t j = 0; j < qb && blk(4) + j < d.n; j++) {
        const float f = 1.0f + static_cast<float>(j % 10);
        d.m[blk(4) + j] = (j % 2 ? -1e5f : 1e5f) * f;
        d.v[blk(4) + j] = 1e10f * f * f;
    }
    for (int64_t j = 0; j < qb; j++) {
        d.m[j] = 0.01f * std::ldexp(1.0f, -static_cast<int>(j % 40));
        d.g32[j] = 0.02f * std::ldexp(1.0f, -static_cast<int>((j * 7) % 40));
        d.m[blk(1) + j] = d.v[blk(1) + j] = d.g32[blk(1) + j] = 0.0f;
    }
    d.m[blk(2) + 5] = NAN;
    d.g32[blk(3) + 7] = INFINITY;
    d.g32[blk(3) + 3] = 3e30f;
}

} // namespace

TEST_CASE("q8 moments: cpu_adam's AVX2/AVX-512 vector path (as the variant reports) is bitwise its "
          "scalar path: tiles, tails, streaming outputs, edge blocks, every grad/copy dtype") {
    CpuAdamVariants cv = cpu_adam_variants();
    std::unique_ptr<optim::Optimizer>& scalar = cv.scalar;
    const std::vector<PluginCase>& vec = cv.vector;
    if (!scalar || vec.empty()) {
        MESSAGE("cpu_adam with a vector variant not available here: nothing to compare");
        return;
    }
    for (const auto& pc : vec) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        // the plugin reports which path steps Q8 moments: this variant's vector code
        const std::string want = "q8 moments: " + pc.force + " vector";
        CHECK_MESSAGE(opt->info().variant.find(want) != std::string::npos,
                      "variant '" << opt->info().variant << "' does not report " << want);
        uint64_t seed = 9000;
        for (int32_t qb : {64, 256, 4096})
            for (int k = 0; k < 6; k++) {
                seed++;
                const sof_dtype gd =
                    k % 3 == 0 ? SOF_DTYPE_F32 : (k % 3 == 1 ? SOF_DTYPE_BF16 : SOF_DTYPE_F16);
                const int ld = k % 3 == 2 ? -1 : (k % 2 ? SOF_DTYPE_F16 : SOF_DTYPE_BF16);
                const Place place = static_cast<Place>(k % 3);
                const sof_adam_mode mode = k == 4 ? SOF_ADAM_L2 : SOF_ADAM_ADAMW;
                const float wd = k == 5 ? 0.0f : 0.1f;
                CAPTURE(qb);
                CAPTURE(k);
                AdamData d(kQ8N, seed, true);
                add_edge_blocks(d, qb);
                Q8In in(d, qb);
                sof_optim_hparams hp = optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, wd, 11, mode,
                                                           true, 0.37f, seed);
                Q8Out a = run_q8(*opt, in, hp, gd, ld, place, 0);
                Q8Out b = run_q8(*scalar, in, hp, gd, ld, Place::InPlace, 0);
                CHECK_MESSAGE(differences(a, b) == 0, differences(a, b) << " values differ");
                CHECK(a.r.nonfinite == 1); // the Inf grad
                // the statistics are the variant's own grad_stats (not the scalar fp64 order)
                sof_optim_result st = opt->grad_stats(in.grad(gd), gd, in.n, hp.grad_scale);
                CHECK(std::memcmp(&a.r.grad_sumsq, &st.grad_sumsq, 8) == 0);
                // the edge blocks did what they are for
                if (mode != SOF_ADAM_L2) CHECK(a.ms[1] == 0.0f); // L2: g = wd * p there
                CHECK(std::isnan(a.ms[2]));
                CHECK(std::isnan(a.vs[3]));
                CHECK(in.ms[4] > 65536.0f); // block 4: input scales past 2^16 (m), 2^32 (v)
                CHECK(in.vs[4] > 4294967296.0f);
                { // finite grads: the fused statistics equal grad_stats bit for bit
                    Q8In fin(AdamData(kQ8N, seed + 100, true), qb);
                    Q8Out f = run_q8(*opt, fin, hp, gd, ld, place, 0);
                    sof_optim_result fs = opt->grad_stats(fin.grad(gd), gd, fin.n, hp.grad_scale);
                    CHECK(f.r.nonfinite == 0);
                    CHECK(f.r.grad_sumsq > 0.0);
                    CHECK(std::memcmp(&f.r.grad_sumsq, &fs.grad_sumsq, 8) == 0);
                }
                if (k == 0) { // mutation: a scale one ulp off in one block must be seen
                    Q8In bad = in;
                    bad.vs[0] = std::nextafter(bad.vs[0], 1.0f);
                    Q8Out c = run_q8(*scalar, bad, hp, gd, ld, Place::InPlace, 0);
                    CHECK(differences(a, c) > 0);
                    bad = in;
                    bad.ms.back() = -bad.ms.back(); // a sign error of a scale, likewise
                    CHECK(differences(a, run_q8(*scalar, bad, hp, gd, ld, Place::InPlace, 0)) > 0);
                }
            }
    }
}

TEST_CASE("q8 encoding in the step: with beta1 = beta2 = 0 the new m = g and v = g*g exactly, so "
          "every plugin's codes and scales are bitwise optim::q_quantize_block of them (ties, "
          "subnormal codes)") {
    // Grads: per block one element +-1.875 * 2^e (so scale = 2^e exactly and x / scale is exact),
    // the others with 5 significant bits (half of them exact ties between two codes: 3 mantissa
    // bits kept) over 40 binades below.
    const int32_t qb = 256;
    const int64_t n = 3 * 8192 + 2 * qb + 100;
    AdamData d(n, 77, true);
    std::mt19937 rng(123);
    for (int64_t i = 0; i < n; i++) {
        const int64_t b = i / qb;
        const int e = static_cast<int>(b % 9) - 6;
        if (i % qb == static_cast<int64_t>(b % 31)) {
            d.g32[i] = (b % 2 ? -1.875f : 1.875f) * std::ldexp(1.0f, e);
        } else {
            const float mant = 1.0f + static_cast<float>(rng() % 16) / 16.0f; // odd: a tie
            const int sh = static_cast<int>(rng() % 41);
            d.g32[i] = (rng() % 2 ? -mant : mant) * std::ldexp(1.0f, e - sh);
        }
    }
    Q8In in(d, qb);
    const int64_t nb = static_cast<int64_t>(in.ms.size());
    std::vector<float> gg(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++)
        gg[i] = d.g32[i] * d.g32[i];
    std::vector<uint8_t> wm(n), wv(n);
    std::vector<float> wms(nb), wvs(nb);
    for (int64_t b = 0; b < nb; b++) {
        const int64_t i0 = b * qb, len = std::min<int64_t>(qb, n - i0);
        optim::q_quantize_block(d.g32.data() + i0, len, optim::q8_map(true), wm.data() + i0,
                                &wms[b]);
        optim::q_quantize_block(gg.data() + i0, len, optim::q8_map(false), wv.data() + i0, &wvs[b]);
    }
    int64_t subnormal = 0;
    for (int64_t i = 0; i < n; i++)
        subnormal += (wm[i] & 0x78) == 0 && (wm[i] & 7) != 0;
    CHECK(subnormal > 100);
    int64_t ties = 0; // |x| / scale exactly halfway between two codes (normal range)
    for (int64_t i = 0; i < n; i++) {
        const float y = std::fabs(d.g32[i]) / wms[i / qb];
        const float up =
            optim::q_decode(static_cast<uint8_t>((wm[i] & 0x7f) + 1), optim::q8_map(true));
        const float dn =
            optim::q_decode(static_cast<uint8_t>((wm[i] & 0x7f) - 1), optim::q8_map(true));
        const float at = optim::q_decode(static_cast<uint8_t>(wm[i] & 0x7f), optim::q8_map(true));
        ties += (wm[i] & 0x7f) > 8 && (2 * y == at + up || 2 * y == at + dn);
    }
    CHECK(ties > 1000);
    sof_optim_hparams hp =
        optim::make_hparams(1e-3f, 0.0f, 0.0f, 1e-8f, 0.0f, 3, SOF_ADAM_ADAMW, true, 1.0f);
    for (const auto& pc : host_plugin_cases()) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        for (Place place : {Place::InPlace, Place::Aligned}) {
            Q8Out a = run_q8(*opt, in, hp, SOF_DTYPE_F32, SOF_DTYPE_BF16, place, 0);
            int64_t bad = 0;
            for (int64_t i = 0; i < n; i++)
                bad += a.mc[i] != wm[i] || a.vc[i] != wv[i];
            for (int64_t b = 0; b < nb; b++)
                bad += std::memcmp(&a.ms[b], &wms[b], 4) != 0 || std::memcmp(&a.vs[b], &wvs[b], 4);
            CHECK_MESSAGE(bad == 0, bad << " codes or scales differ from q_quantize_block");
        }
    }
}

#if defined(__x86_64__) || defined(__i386__)
TEST_CASE("q8 moments: cpu_adam's vector variants under MXCSR DAZ and FTZ stay bitwise its scalar "
          "variant (the AVX2 decode/encode pass subnormal fp32 values: such tiles take the scalar "
          "path)") {
    CpuAdamVariants cv = cpu_adam_variants();
    if (!cv.scalar || cv.vector.empty()) {
        MESSAGE("cpu_adam with a vector variant not available here: nothing to compare");
        return;
    }
    std::unique_ptr<optim::Optimizer> scalar; // one thread: the step runs on this thread
    for (const auto& pc : host_plugin_cases())
        if (pc.name == "cpu_adam" && pc.force == "scalar") scalar = load_case(pc, 1);
    REQUIRE(scalar);
    const int32_t qb = 256;
    AdamData d(kQ8N, 31, true);
    add_edge_blocks(d, qb); // block 0: subnormal codes (decoded and encoded)
    const Q8In in(d, qb);
    int64_t subnormal = 0; // codes whose decode is an fp32 subnormal times 2^(127-bias) in AVX2
    for (int64_t i = 0; i < qb; i++)
        subnormal += (in.mc[i] & 0x78) == 0 && (in.mc[i] & 7) != 0;
    CHECK(subnormal > 10);
    const sof_optim_hparams hp =
        optim::make_hparams(1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 5, SOF_ADAM_ADAMW, true, 0.37f, 3);
    const unsigned csr = _mm_getcsr();
    for (const auto& pc : cv.vector) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 1);
        for (unsigned mode : {0x0040u, 0x8000u, 0x8040u}) { // DAZ, FTZ, both
            CAPTURE(mode);
            _mm_setcsr(csr | mode);
            Q8Out a = run_q8(*opt, in, hp, SOF_DTYPE_F32, SOF_DTYPE_BF16, Place::Aligned, 0);
            Q8Out b = run_q8(*scalar, in, hp, SOF_DTYPE_F32, SOF_DTYPE_BF16, Place::Aligned, 0);
            _mm_setcsr(csr);
            // (without the scalar fallback DAZ reads those codes as 0 and FTZ flushes the new
            // subnormal codes: both differ here)
            CHECK_MESSAGE(differences(a, b) == 0, differences(a, b) << " values differ");
        }
    }
}
#endif
