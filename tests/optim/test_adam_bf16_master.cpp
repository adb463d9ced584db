// bf16 master params (issue 28): cpu_adam's vector stochastic rounding (Philox4x32-10 in AVX2 /
// AVX-512 lanes) bitwise against its scalar path, with every moment format (fp32, bf16, q8).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "optim/qstate.h"
#include "optim_test_util.h"

using namespace sof;
using namespace sof::test;

namespace {

// Inputs of one step with a bf16 master: params, grads in three dtypes, both moments as the bytes
// of format sd (fp32 4, bf16 2, q8 1 per element, with a scale per block of qb).
struct SrIn {
    int64_t n = 0;
    int32_t sd = SOF_STATE_F32, qb = 0;
    std::vector<uint16_t> p;
    std::vector<float> g;
    std::vector<uint16_t> gb, gh; // grads as bf16, as fp16
    std::vector<uint8_t> m, v;
    std::vector<float> ms, vs;
    int64_t es() const { return optim::state_elem_bytes(sd); }
    int64_t blocks() const { return sd == SOF_STATE_Q8 ? (n + qb - 1) / qb : 0; }
    const void* grad(sof_dtype d) const {
        return d == SOF_DTYPE_F32 ? static_cast<const void*>(g.data())
                                  : (d == SOF_DTYPE_BF16 ? gb.data() : gh.data());
    }
};

// Typical training values plus edge params where the step reaches them (at elements 3..10 and the
// last ones, so both the vector groups and the scalar tail see them): NaN (quiet, and signaling
// with a payload), -NaN, +-Inf, the largest bf16 (may round up to Inf), a subnormal, -0.
SrIn make_in(int64_t n, int32_t sd, int32_t qb, uint64_t seed) {
    AdamData d(n, seed, true);
    SrIn in;
    in.n = n, in.sd = sd, in.qb = qb;
    in.p.resize(n), in.g.resize(n), in.gb.resize(n), in.gh.resize(n);
    for (int64_t i = 0; i < n; i++) {
        in.p[i] = core::f32_to_bf16(d.p[i]);
        in.g[i] = d.g32[i];
        in.gb[i] = core::f32_to_bf16(d.g32[i]), in.gh[i] = core::f32_to_f16(d.g32[i]);
    }
    const uint16_t edge[] = {0x7fc0, 0x7f81, 0xffc3, 0x7f80, 0xff80, 0x7f7f, 0x0001, 0x8000};
    for (int64_t k = 0; k < 8; k++) {
        if (3 + k < n) in.p[3 + k] = edge[k];
        if (n > 40 && k < 3) in.p[n - 1 - k] = edge[5 + k];
    }
    const int64_t es = in.es();
    in.m.resize(n * es), in.v.resize(n * es);
    if (sd == SOF_STATE_F32) {
        std::memcpy(in.m.data(), d.m.data(), 4 * n), std::memcpy(in.v.data(), d.v.data(), 4 * n);
    } else if (sd == SOF_STATE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            const uint16_t a = core::f32_to_bf16(d.m[i]), b = core::f32_to_bf16(d.v[i]);
            std::memcpy(&in.m[2 * i], &a, 2), std::memcpy(&in.v[2 * i], &b, 2);
        }
    } else {
        in.ms.resize(in.blocks()), in.vs.resize(in.blocks());
        for (int64_t b = 0; b < in.blocks(); b++) {
            const int64_t i0 = b * qb, len = std::min<int64_t>(qb, n - i0);
            optim::q_quantize_block(d.m.data() + i0, len, optim::q8_map(true), &in.m[i0],
                                    &in.ms[b]);
            optim::q_quantize_block(d.v.data() + i0, len, optim::q8_map(false), &in.v[i0],
                                    &in.vs[b]);
        }
    }
    return in;
}

struct SrOut {
    std::vector<uint16_t> p, l;
    std::vector<uint8_t> m, v;
    std::vector<float> ms, vs;
    sof_optim_result r{};
};
enum class Place { InPlace, Aligned, Misaligned };

// One step; outputs in place, separate 64-byte aligned (cpu_adam's streaming stores) or separate
// misaligned by one element.
SrOut run_sr(optim::Optimizer& opt, const SrIn& in, const sof_optim_hparams& hp, sof_dtype gd,
             int ld, Place place, int64_t index0) {
    const int64_t n = in.n, es = in.es(), nb = in.blocks(), pad = place == Place::Misaligned;
    ABuf<uint16_t> p(n), po(n, pad), l(n, pad);
    ABuf<uint8_t> m(n * es), v(n * es), mo(n * es, pad * es), vo(n * es, pad * es);
    ABuf<float> ms(nb), vs(nb), mso(nb, pad), vso(nb, pad);
    std::memcpy(p.data(), in.p.data(), 2 * n);
    std::memcpy(m.data(), in.m.data(), n * es), std::memcpy(v.data(), in.v.data(), n * es);
    if (nb > 0) // no scales but for q8 moments (memcpy from an empty vector's null: UB)
        std::memcpy(ms.data(), in.ms.data(), 4 * nb), std::memcpy(vs.data(), in.vs.data(), 4 * nb);
    const sof_state_format f = in.sd == SOF_STATE_BF16 ? SOF_STATE_BF16 : SOF_STATE_F32;
    sof_optim_slice s = optim::make_slice(n, p.data(), in.grad(gd), gd, m.data(), v.data(), f);
    s.param_dtype = SOF_DTYPE_BF16;
    if (in.sd == SOF_STATE_Q8) {
        optim::set_q8(s, 0, in.qb, m.data(), ms.data());
        optim::set_q8(s, 1, in.qb, v.data(), vs.data());
    }
    if (place != Place::InPlace) {
        s.param_out = po.data();
        s.slot[0].data_out = mo.data(), s.slot[1].data_out = vo.data();
        if (in.sd == SOF_STATE_Q8)
            s.slot[0].scale_out = mso.data(), s.slot[1].scale_out = vso.data();
    }
    if (ld >= 0) s.lowp_out = l.data(), s.lowp_dtype = ld;
    s.index0 = index0;
    SrOut o;
    o.r = opt.step(s, hp);
    auto u8 = [](const void* x) { return static_cast<const uint8_t*>(x); };
    const uint16_t* pp = static_cast<const uint16_t*>(s.param_out);
    o.p.assign(pp, pp + n);
    o.m.assign(u8(s.slot[0].data_out), u8(s.slot[0].data_out) + n * es);
    o.v.assign(u8(s.slot[1].data_out), u8(s.slot[1].data_out) + n * es);
    if (nb) {
        o.ms.assign(s.slot[0].scale_out, s.slot[0].scale_out + nb);
        o.vs.assign(s.slot[1].scale_out, s.slot[1].scale_out + nb);
    }
    if (ld >= 0) o.l.assign(l.data(), l.data() + n);
    if (place != Place::InPlace) { // inputs untouched
        CHECK(std::memcmp(p.data(), in.p.data(), 2 * n) == 0);
        CHECK(std::memcmp(m.data(), in.m.data(), n * es) == 0);
    }
    return o;
}

// Differing params (and copies), and differing moments bytes / scales, of two outputs.
struct Diff {
    int64_t params = 0, moments = 0;
};
Diff diff(const SrOut& a, const SrOut& b) {
    Diff d;
    for (size_t i = 0; i < a.p.size(); i++)
        d.params += a.p[i] != b.p[i] || (!a.l.empty() && a.l[i] != b.l[i]);
    for (size_t i = 0; i < a.m.size(); i++)
        d.moments += a.m[i] != b.m[i] || a.v[i] != b.v[i];
    for (size_t k = 0; k < a.ms.size(); k++)
        d.moments += std::memcmp(&a.ms[k], &b.ms[k], 4) != 0 || std::memcmp(&a.vs[k], &b.vs[k], 4);
    return d;
}

} // namespace

TEST_CASE("bf16 master: cpu_adam's AVX2/AVX-512 vector stochastic rounding (as the variant "
          "reports) is bitwise its scalar path: every moment format, index0 offsets and 2^32 "
          "draw carries, tails, steps, seeds, placements; a wrong counter word is seen") {
    CpuAdamVariants cv = cpu_adam_variants();
    std::unique_ptr<optim::Optimizer>& scalar = cv.scalar;
    const std::vector<PluginCase>& vec = cv.vector;
    if (!scalar || vec.empty()) {
        MESSAGE("cpu_adam with a vector variant not available here: nothing to compare");
        return;
    }
    // tails of every length class, two tiles (8192) and a partial third; index0 % 4 = 0..3, and
    // draws crossing 2^32 (counter word 1 carries) and far above it
    const int64_t sizes[] = {1, 17, 255, 1000, 8192 + 333, 2 * 8192 + 841};
    const int64_t index0s[] = {0, 1, 2, 3, 4097, (int64_t{1} << 34) - 1001, (int64_t{1} << 41) + 6};
    const int64_t steps[] = {1, 7, 1000, (int64_t{1} << 32) + 5};
    const uint64_t seeds[] = {0, 1, 0x9e3779b97f4a7c15ull, 0xffffffffull, 1ull << 32};
    for (const auto& pc : vec) {
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 2);
        const std::string want = "bf16 master: " + pc.force + " vector";
        CHECK_MESSAGE(opt->info().variant.find(want) != std::string::npos,
                      "variant '" << opt->info().variant << "' does not report " << want);
        for (int k = 0; k < 24; k++) {
            const int64_t n = sizes[k % 6], index0 = index0s[k % 7];
            const int32_t sd =
                k % 3 == 0 ? SOF_STATE_F32 : (k % 3 == 1 ? SOF_STATE_BF16 : SOF_STATE_Q8);
            const int32_t qb = k % 2 ? 64 : 256;
            const int j = (k / 3) % 3;
            const sof_dtype gd = j == 0 ? SOF_DTYPE_F32 : (j == 1 ? SOF_DTYPE_BF16 : SOF_DTYPE_F16);
            const int ld =
                (k / 2) % 3 == 0 ? -1 : ((k / 2) % 3 == 1 ? SOF_DTYPE_BF16 : SOF_DTYPE_F16);
            const Place place = static_cast<Place>((k / 4) % 3);
            const sof_adam_mode mode = k % 4 == 1 ? SOF_ADAM_L2 : SOF_ADAM_ADAMW;
            const float wd = k % 4 == 3 ? 0.0f : 0.1f;
            const uint64_t seed = seeds[k % 5];
            CAPTURE(k);
            CAPTURE(n);
            CAPTURE(index0);
            CAPTURE(sd);
            const SrIn in = make_in(n, sd, qb, 500 + k);
            const sof_optim_hparams hp = optim::make_hparams(1e-2f, 0.9f, 0.999f, 1e-8f, wd,
                                                             steps[k % 4], mode, true, 0.37f, seed);
            const SrOut a = run_sr(*opt, in, hp, gd, ld, place, index0);
            const SrOut b = run_sr(*scalar, in, hp, gd, ld, Place::InPlace, index0);
            const Diff d = diff(a, b);
            CHECK_MESSAGE(d.params == 0, d.params << " bf16 params or copies differ");
            CHECK_MESSAGE(d.moments == 0, d.moments << " moments or scales differ");
            // the step moved the params, and the statistics are the variant's grad_stats
            int64_t moved = 0;
            for (int64_t i = 0; i < n; i++)
                moved += a.p[i] != in.p[i];
            if (n > 8) CHECK(moved > n / 2);
            const sof_optim_result st = opt->grad_stats(in.grad(gd), gd, n, hp.grad_scale);
            CHECK(std::memcmp(&a.r.grad_sumsq, &st.grad_sumsq, 8) == 0);
            if (n < 8000) continue;
            // mutations of the counter: the next draw (word 0), a draw 2^32 away (word 1), the
            // neighbour's word (element offset by one), another key; each must change params
            // and nothing else
            for (int64_t wrong : {index0 + 4, index0 + (int64_t{1} << 34), index0 + 1}) {
                CAPTURE(wrong);
                const Diff w = diff(a, run_sr(*scalar, in, hp, gd, ld, Place::InPlace, wrong));
                CHECK(w.params > n / 4);
                CHECK(w.moments == 0);
            }
            sof_optim_hparams other = hp;
            other.seed ^= 1ull << 40;
            CHECK(diff(a, run_sr(*scalar, in, other, gd, ld, Place::InPlace, index0)).params >
                  n / 4);
        }
    }
}

TEST_CASE("bf16 master: the stochastic rounding is unbiased (every cpu_adam variant)") {
    // beta1 = beta2 = 0, no bias correction, no weight decay, grads +-1 (two thirds +1): m = g,
    // v = g*g, and the step is exactly p -/+ lr. Params 1 + k * 2^-7 (bf16 neighbours 2^-7 apart)
    // and lr = f * 2^-7 leave every new value between two bf16 neighbours; stochastic rounding
    // makes the mean error over 2^14 elements ~0 (sd <= 0.5 / 128 units of 2^-7). Round to
    // nearest would be off by f / 3 units (f = 0.25: 21 sd), truncation by more.
    const int64_t n = 1 << 14;
    std::vector<uint16_t> p0(n);
    std::vector<float> g(n);
    for (int64_t i = 0; i < n; i++) {
        p0[i] = core::f32_to_bf16(1.0f + static_cast<float>(1 + i % 100) * 0x1p-7f);
        g[i] = (i * 7919) % 3 ? 1.0f : -1.0f;
    }
    for (const auto& pc : host_plugin_cases()) {
        if (pc.name != "cpu_adam") continue;
        INFO("plugin " << pc.label());
        auto opt = load_case(pc, 1);
        for (float f : {0.25f, 0.6875f}) {
            CAPTURE(f);
            std::vector<uint16_t> p = p0;
            std::vector<float> m(n), v(n);
            sof_optim_slice s =
                optim::make_slice(n, p.data(), g.data(), SOF_DTYPE_F32, m.data(), v.data());
            s.param_dtype = SOF_DTYPE_BF16;
            s.index0 = 12345;
            const sof_optim_hparams hp = optim::make_hparams(f * 0x1p-7f, 0.0f, 0.0f, 1e-30f, 0.0f,
                                                             3, SOF_ADAM_ADAMW, false, 1.0f, 99);
            opt->step(s, hp);
            double err = 0.0; // sum of (rounded - exact) in units of 2^-7
            int64_t up = 0, far = 0;
            for (int64_t i = 0; i < n; i++) {
                const double exact = static_cast<double>(core::bf16_to_f32(p0[i])) -
                                     static_cast<double>(f) * 0x1p-7 * g[i];
                const double got = core::bf16_to_f32(p[i]);
                far += !(std::fabs(got - exact) < 0x1p-7); // one of the two neighbours
                err += (got - exact) * 128.0;
                up += got > exact;
            }
            // each element's error is -a with probability 1 - a, 1 - a with probability a (a its
            // distance to the lower neighbour, f or 1 - f): mean 0, sd <= 0.5 / sqrt(n) in units
            const double sd = 0.5 / std::sqrt(static_cast<double>(n));
            CHECK(far == 0);
            CHECK(std::fabs(err / n) < 4.0 * sd);
            CHECK(up > n / 5);
            CHECK(up < n - n / 5);
        }
    }
}
