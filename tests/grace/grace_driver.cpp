// grace_adam conformance driver, cross-built for aarch64 and run under qemu at several SVE lengths.
// Usage: grace_driver EXPECTED_VL_BITS [DIGEST_FILE]; exit 0 = pass; prints a digest of all
// outputs.
#include <arm_sve.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "grace/adam_twin.h"

extern "C" const sof_optim_plugin* sof_optim_plugin_get(void);

namespace {

using sof::test::twin_rollback;
using sof::test::twin_stats;
using sof::test::twin_step;
using sof::test::ulp_distance;

int g_failures = 0;
uint64_t g_digest = 1469598103934665603ull; // FNV-1a over every output the plugin wrote

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            g_failures++;                                                                          \
            std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                            \
            std::printf(__VA_ARGS__);                                                              \
            std::printf("\n");                                                                     \
        }                                                                                          \
    } while (0)

void digest(const void* data, size_t bytes) {
    const unsigned char* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; i++)
        g_digest = (g_digest ^ b[i]) * 1099511628211ull;
}

uint64_t rng_next(uint64_t& s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
float uniform(uint64_t& s, float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(rng_next(s) >> 40) * (1.0f / 16777216.0f);
}

struct Case {
    int64_t n = 17;
    int32_t gdt = SOF_DTYPE_F32;
    float wd = 0.0f;
    int64_t step = 1;
    float scale = 1.0f;
    bool separate = false;
    int32_t ldt = -1; // -1: no low-precision copy
    int32_t mode = SOF_ADAM_ADAMW;
    bool bias = true;
    int threads = 1;
};

std::string describe(const Case& c) {
    char buf[200];
    std::snprintf(
        buf, sizeof(buf),
        "n=%lld gdt=%d wd=%g step=%lld scale=%g separate=%d ldt=%d mode=%d bias=%d thr=%d",
        static_cast<long long>(c.n), c.gdt, c.wd, static_cast<long long>(c.step), c.scale,
        c.separate, c.ldt, c.mode, c.bias, c.threads);
    return buf;
}

// State of one slice: inputs, plugin outputs, reference outputs.
struct State {
    std::vector<float> p, m, v, g32;      // (n) inputs
    std::vector<uint16_t> g16;            // (n) bf16/fp16 grads
    std::vector<float> po, mo, vo;        // (n) plugin outputs (separate mode)
    std::vector<uint16_t> lowp, ref_lowp; // (n) low-precision copies
    std::vector<float> rp, rm, rv;        // (n) reference outputs
};

State make_state(const Case& c, uint64_t seed) {
    State s;
    size_t n = static_cast<size_t>(c.n);
    s.p.resize(n), s.m.resize(n), s.v.resize(n), s.g32.resize(n), s.g16.resize(n);
    for (size_t i = 0; i < n; i++) {
        s.p[i] = uniform(seed, -1.0f, 1.0f);
        s.m[i] = uniform(seed, -0.01f, 0.01f);
        s.v[i] = uniform(seed, 0.0f, 1e-4f);
        float g = uniform(seed, -0.05f, 0.05f);
        s.g16[i] = c.gdt == SOF_DTYPE_F16 ? sof::core::f32_to_f16(g) : sof::core::f32_to_bf16(g);
        s.g32[i] = g;
    }
    s.po.assign(n, 0.0f), s.mo.assign(n, 0.0f), s.vo.assign(n, 0.0f);
    s.lowp.assign(n, 0), s.ref_lowp.assign(n, 0);
    s.rp.assign(n, 0.0f), s.rm.assign(n, 0.0f), s.rv.assign(n, 0.0f);
    return s;
}

sof_optim_hparams hparams_of(const Case& c) {
    sof_optim_hparams hp{};
    hp.struct_size = sizeof(hp);
    hp.lr = 1e-3f, hp.beta1 = 0.9f, hp.beta2 = 0.999f, hp.eps = 1e-8f;
    hp.weight_decay = c.wd, hp.step = c.step, hp.mode = c.mode, hp.bias_correction = c.bias;
    hp.grad_scale = c.scale;
    return hp;
}

const void* grads(const Case& c, const State& s) {
    return c.gdt == SOF_DTYPE_F32 ? static_cast<const void*>(s.g32.data())
                                  : static_cast<const void*>(s.g16.data());
}

// The plugin's slice (in place: writes p/m/v; separate: writes po/mo/vo).
sof_optim_slice plugin_slice(const Case& c, State& s) {
    sof_optim_slice sl{};
    sl.struct_size = sizeof(sl);
    sl.n = c.n;
    sl.param = s.p.data(), sl.grad = grads(c, s), sl.grad_dtype = c.gdt;
    sl.num_slots = 2;
    sl.slot[0].data = s.m.data(), sl.slot[1].data = s.v.data();
    sl.param_out = c.separate ? s.po.data() : s.p.data();
    sl.slot[0].data_out = c.separate ? s.mo.data() : s.m.data();
    sl.slot[1].data_out = c.separate ? s.vo.data() : s.v.data();
    sl.lowp_dtype = c.ldt < 0 ? SOF_DTYPE_BF16 : c.ldt;
    sl.lowp_out = c.ldt < 0 ? nullptr : static_cast<void*>(s.lowp.data());
    return sl;
}

// The reference's slice: reads the inputs, writes rp/rm/rv.
sof_optim_slice ref_slice(const Case& c, State& s) {
    sof_optim_slice sl = plugin_slice(c, s);
    sl.param_out = s.rp.data(), sl.slot[0].data_out = s.rm.data(),
    sl.slot[1].data_out = s.rv.data();
    sl.lowp_out = c.ldt < 0 ? nullptr : static_cast<void*>(s.ref_lowp.data());
    return sl;
}

int64_t max_ulp(const std::vector<float>& a, const std::vector<float>& b) {
    int64_t w = 0;
    for (size_t i = 0; i < a.size(); i++)
        w = std::max(w, ulp_distance(a[i], b[i]));
    return w;
}

sof_optim_ctx* make_ctx(const sof_optim_plugin* api, int threads) {
    sof_optim_init init{sizeof(sof_optim_init), threads, 0};
    sof_optim_ctx* ctx = nullptr;
    if (api->create(&init, &ctx) != SOF_OK) {
        std::printf("FAIL: grace_adam create failed\n");
        std::exit(1);
    }
    return ctx;
}

// One step against the reference: outputs bitwise, statistics bitwise vs the twin's order and
// within 1e-12 of the index-order reference sum.
void check_case(const sof_optim_plugin* api, const Case& c) {
    sof_optim_ctx* ctx = make_ctx(api, c.threads);
    State s = make_state(c, static_cast<uint64_t>(c.n) * 131 + c.gdt);
    sof_optim_hparams hp = hparams_of(c);
    sof_optim_slice rs = ref_slice(c, s);
    sof_optim_result want_ref = sof::optim::adam_ref_step(rs, hp);
    sof_optim_result want = twin_stats(grads(c, s), c.gdt, c.n, c.scale);
    std::vector<float> p0 = s.p, m0 = s.m, v0 = s.v;
    sof_optim_slice ps = plugin_slice(c, s);
    sof_optim_result got{};
    EXPECT(api->step(ctx, &ps, &hp, &got, nullptr) == SOF_OK, "%s", describe(c).c_str());
    const std::vector<float>& gp = c.separate ? s.po : s.p;
    const std::vector<float>& gm = c.separate ? s.mo : s.m;
    const std::vector<float>& gv = c.separate ? s.vo : s.v;
    int64_t up = max_ulp(gp, s.rp), um = max_ulp(gm, s.rm), uv = max_ulp(gv, s.rv);
    EXPECT(up == 0 && um == 0 && uv == 0, "%s: ulp p=%lld m=%lld v=%lld", describe(c).c_str(),
           static_cast<long long>(up), static_cast<long long>(um), static_cast<long long>(uv));
    if (c.ldt >= 0) EXPECT(s.lowp == s.ref_lowp, "%s: lowp copy differs", describe(c).c_str());
    if (c.separate)
        EXPECT(s.p == p0 && s.m == m0 && s.v == v0, "%s: inputs modified", describe(c).c_str());
    EXPECT(got.grad_sumsq == want.grad_sumsq && got.nonfinite == want.nonfinite,
           "%s: sumsq %.17g vs twin %.17g", describe(c).c_str(), got.grad_sumsq, want.grad_sumsq);
    EXPECT(std::fabs(got.grad_sumsq - want_ref.grad_sumsq) <= 1e-12 * want_ref.grad_sumsq,
           "%s: sumsq %.17g vs reference %.17g", describe(c).c_str(), got.grad_sumsq,
           want_ref.grad_sumsq);
    digest(gp.data(), gp.size() * 4), digest(gm.data(), gm.size() * 4);
    digest(gv.data(), gv.size() * 4), digest(s.lowp.data(), s.lowp.size() * 2);
    digest(&got.grad_sumsq, 8);
    api->destroy(ctx);
}

void conformance(const sof_optim_plugin* api) {
    const int64_t sizes[] = {1, 7, 15, 16, 17, 63, 64, 65, 1023, 4099, 16385};
    int cases = 0;
    for (int64_t n : sizes)
        for (int32_t gdt : {SOF_DTYPE_F32, SOF_DTYPE_BF16})
            for (float wd : {0.0f, 0.1f})
                for (int64_t step : {int64_t{1}, int64_t{1000}})
                    for (int variant = 0; variant < 2; variant++) {
                        Case c;
                        c.n = n, c.gdt = gdt, c.wd = wd, c.step = step;
                        c.scale = variant ? 0.37f : 1.0f;
                        c.separate = variant == 1;
                        c.ldt = variant ? SOF_DTYPE_BF16 : -1;
                        check_case(api, c), cases++;
                    }
    // One ~100k slice on 1 and 2 threads; L2 mode, no bias correction, fp16 grads and copy.
    for (int threads : {1, 2}) {
        Case c;
        c.n = 100003, c.wd = 0.1f, c.step = 1000, c.scale = 0.5f, c.separate = threads == 2;
        c.gdt = SOF_DTYPE_BF16, c.ldt = SOF_DTYPE_BF16, c.threads = threads;
        check_case(api, c), cases++;
    }
    for (int64_t n : {int64_t{5}, int64_t{4099}}) {
        Case c;
        c.n = n, c.wd = 0.01f, c.mode = SOF_ADAM_L2, c.bias = false, c.step = 3;
        c.gdt = SOF_DTYPE_F16, c.ldt = SOF_DTYPE_F16, c.scale = 2.0f;
        check_case(api, c), cases++;
    }
    std::printf("conformance: %d cases\n", cases);
}

// 100 steps in place against 100 reference steps, bitwise; then rollback of the last step.
void drift_and_rollback(const sof_optim_plugin* api) {
    sof_optim_ctx* ctx = make_ctx(api, 1);
    Case c;
    c.n = 1029, c.wd = 0.1f, c.gdt = SOF_DTYPE_BF16, c.ldt = SOF_DTYPE_BF16;
    State s = make_state(c, 99);
    std::vector<float> rp = s.p, rm = s.m, rv = s.v;
    sof_optim_hparams hp{};
    for (int64_t t = 1; t <= 100; t++) {
        c.step = t;
        hp = hparams_of(c);
        sof_optim_slice ps = plugin_slice(c, s);
        EXPECT(api->step(ctx, &ps, &hp, nullptr, nullptr) == SOF_OK, "drift step");
        sof_optim_slice rs = ps;
        rs.param = rs.param_out = rp.data(), rs.slot[0].data = rs.slot[0].data_out = rm.data();
        rs.slot[1].data = rs.slot[1].data_out = rv.data(), rs.lowp_out = s.ref_lowp.data();
        sof::optim::adam_ref_step(rs, hp);
    }
    EXPECT(max_ulp(s.p, rp) == 0 && max_ulp(s.m, rm) == 0 && max_ulp(s.v, rv) == 0,
           "100-step drift differs from the reference");
    EXPECT(s.lowp == s.ref_lowp, "100-step lowp differs");
    for (int32_t mode : {SOF_ADAM_ADAMW, SOF_ADAM_L2}) {
        c.mode = mode;
        hp = hparams_of(c);
        std::vector<float> p0 = s.p, m0 = s.m;
        sof_optim_slice ps = plugin_slice(c, s);
        api->step(ctx, &ps, &hp, nullptr, nullptr);
        std::vector<float> sp = s.p, sm = s.m, sv = s.v;
        EXPECT(api->rollback(ctx, &ps, &hp, nullptr) == SOF_OK, "rollback");
        sof_optim_slice rs = ps;
        rs.param = rs.param_out = sp.data(), rs.slot[0].data = rs.slot[0].data_out = sm.data();
        rs.slot[1].data = rs.slot[1].data_out = sv.data(), rs.lowp_out = s.ref_lowp.data();
        twin_rollback(rs, hp);
        EXPECT(max_ulp(s.p, sp) == 0 && max_ulp(s.m, sm) == 0 && max_ulp(s.v, sv) == 0,
               "rollback differs from the reference rollback (mode %d)", mode);
        double worst = 0;
        for (size_t i = 0; i < p0.size(); i++)
            worst = std::max(worst,
                             std::fabs(double(s.p[i]) - p0[i]) + std::fabs(double(s.m[i]) - m0[i]));
        EXPECT(worst < 1e-6, "rollback far from the old state: %g", worst);
        digest(s.p.data(), s.p.size() * 4), digest(s.v.data(), s.v.size() * 4);
    }
    api->destroy(ctx);
}

// Several slices in one call, non-finite grads, grad_stats, NaN kept in the copy, bad arguments.
void multi_and_stats(const sof_optim_plugin* api) {
    sof_optim_ctx* ctx = make_ctx(api, 2);
    std::vector<Case> cases(5);
    std::vector<State> states;
    std::vector<sof_optim_slice> slices;
    std::vector<sof_optim_hparams> hps;
    for (int i = 0; i < 5; i++) {
        Case& c = cases[i];
        c.n = 1 + i * 3001, c.gdt = i % 2 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32, c.step = 1 + 10 * i;
        c.wd = i % 2 ? 0.0f : 0.05f, c.separate = i % 2 == 0, c.ldt = i == 3 ? SOF_DTYPE_F16 : -1;
        states.push_back(make_state(c, 500 + i));
    }
    double want = 0;
    for (int i = 0; i < 5; i++) {
        slices.push_back(plugin_slice(cases[i], states[i]));
        hps.push_back(hparams_of(cases[i]));
        sof_optim_slice rs = ref_slice(cases[i], states[i]);
        want += twin_step(rs, hps[i]).grad_sumsq;
    }
    sof_optim_result got{};
    EXPECT(api->step_multi(ctx, slices.data(), hps.data(), 5, &got, nullptr) == SOF_OK, "multi");
    EXPECT(got.grad_sumsq == want && got.nonfinite == 0, "multi sumsq %.17g vs %.17g",
           got.grad_sumsq, want);
    for (int i = 0; i < 5; i++) {
        const Case& c = cases[i];
        State& s = states[i];
        EXPECT(max_ulp(c.separate ? s.po : s.p, s.rp) == 0 &&
                   max_ulp(c.separate ? s.vo : s.v, s.rv) == 0,
               "multi slice %d differs", i);
        if (c.ldt >= 0) EXPECT(s.lowp == s.ref_lowp, "multi slice %d lowp differs", i);
    }
    // Non-finite grads and grad_stats.
    State& s = states[4];
    s.g32[7777] = std::numeric_limits<float>::infinity();
    sof_optim_result st{};
    EXPECT(api->grad_stats(ctx, s.g32.data(), SOF_DTYPE_F32, cases[4].n, 0.5f, &st, nullptr) ==
               SOF_OK,
           "grad_stats");
    EXPECT(st.nonfinite == 1, "inf grad not flagged");
    s.g32[7777] = 0.25f;
    sof_optim_result w = twin_stats(s.g32.data(), SOF_DTYPE_F32, cases[4].n, 0.5f);
    api->grad_stats(ctx, s.g32.data(), SOF_DTYPE_F32, cases[4].n, 0.5f, &st, nullptr);
    EXPECT(st.nonfinite == 0 && st.grad_sumsq == w.grad_sumsq, "grad_stats %.17g vs %.17g",
           st.grad_sumsq, w.grad_sumsq);
    // NaN and specials in the low-precision copies.
    Case c;
    c.n = 9, c.ldt = SOF_DTYPE_BF16;
    State z = make_state(c, 1);
    z.p[1] = -std::numeric_limits<float>::quiet_NaN();
    z.p[2] = std::numeric_limits<float>::infinity();
    z.p[3] = 70000.0f, z.p[4] = 3e-6f, z.p[5] = -1e-8f;
    for (int32_t ldt : {SOF_DTYPE_BF16, SOF_DTYPE_F16}) {
        c.ldt = ldt;
        State t = z;
        sof_optim_slice ps = plugin_slice(c, t);
        sof_optim_hparams hp = hparams_of(c);
        api->step(ctx, &ps, &hp, nullptr, nullptr);
        sof_optim_slice rs = ref_slice(c, t);
        rs.param = z.p.data(), rs.slot[0].data = z.m.data(), rs.slot[1].data = z.v.data();
        sof::optim::adam_ref_step(rs, hp);
        EXPECT(t.lowp == t.ref_lowp, "special-value lowp (dtype %d) differs", ldt);
        EXPECT((t.lowp[1] & 0x7fffu) > (ldt == SOF_DTYPE_BF16 ? 0x7f80u : 0x7c00u) &&
                   (t.lowp[1] & 0x8000u),
               "NaN not kept (dtype %d): %04x", ldt, t.lowp[1]);
        digest(t.lowp.data(), t.lowp.size() * 2);
    }
    // Partial overlap is rejected with a message.
    sof_optim_slice bad = slices[1];
    bad.param_out = const_cast<float*>(static_cast<const float*>(bad.param)) + 1;
    EXPECT(api->step(ctx, &bad, &hps[1], nullptr, nullptr) == SOF_ERR_INVALID_ARGUMENT,
           "partial overlap accepted");
    EXPECT(std::string(api->last_error(ctx)).find("overlap") != std::string::npos, "error text");
    // Betas outside [0, 1) are refused by the same check (sof_optim_check.h), step and rollback.
    for (float b : {1.0f, -0.5f, std::nanf("")}) {
        sof_optim_hparams hb = hps[1];
        hb.beta1 = b;
        EXPECT(api->step(ctx, &slices[1], &hb, nullptr, nullptr) == SOF_ERR_INVALID_ARGUMENT,
               "beta1 %g accepted", static_cast<double>(b));
        EXPECT(std::string(api->last_error(ctx)).find("betas must lie in [0, 1)") !=
                   std::string::npos,
               "error text");
        hb = hps[1];
        hb.beta2 = b;
        EXPECT(api->rollback(ctx, &slices[1], &hb, nullptr) == SOF_ERR_INVALID_ARGUMENT,
               "beta2 %g accepted by the rollback", static_cast<double>(b));
    }
    api->destroy(ctx);
}

// optimizer.state_dtype: bf16: moments stored as bf16 (widened, the fp32 step, rounded to nearest
// even), bitwise the reference's bf16-state step, in place and separate, every dtype and mode.
void bf16_state(const sof_optim_plugin* api) {
    sof_optim_ctx* ctx = make_ctx(api, 2);
    uint64_t seed = 7000;
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{4099}, int64_t{40000}})
        for (int32_t gdt : {SOF_DTYPE_F32, SOF_DTYPE_BF16})
            for (int32_t mode : {SOF_ADAM_ADAMW, SOF_ADAM_L2})
                for (bool sep : {false, true}) {
                    Case c;
                    c.n = n, c.gdt = gdt, c.mode = mode, c.separate = sep, c.wd = 0.05f;
                    c.step = 9, c.scale = 0.5f, c.ldt = SOF_DTYPE_BF16;
                    State s = make_state(c, seed++);
                    size_t un = static_cast<size_t>(n);
                    std::vector<uint16_t> m16(un), v16(un), mo16(un), vo16(un), rm16(un), rv16(un);
                    for (size_t i = 0; i < un; i++) {
                        m16[i] = sof::core::f32_to_bf16(s.m[i]);
                        v16[i] = sof::core::f32_to_bf16(s.v[i]);
                    }
                    std::vector<uint16_t> m0 = m16, v0 = v16;
                    sof_optim_slice ps = plugin_slice(c, s);
                    ps.slot[0].format = ps.slot[1].format = SOF_STATE_BF16;
                    ps.slot[0].data = m16.data(), ps.slot[1].data = v16.data();
                    ps.slot[0].data_out = sep ? mo16.data() : m16.data();
                    ps.slot[1].data_out = sep ? vo16.data() : v16.data();
                    sof_optim_slice rs = ref_slice(c, s);
                    rs.slot[0].format = rs.slot[1].format = SOF_STATE_BF16;
                    rs.slot[0].data = m0.data(), rs.slot[1].data = v0.data();
                    rs.slot[0].data_out = rm16.data(), rs.slot[1].data_out = rv16.data();
                    sof_optim_hparams hp = hparams_of(c);
                    sof::optim::adam_ref_step(rs, hp);
                    sof_optim_result r{};
                    EXPECT(api->step(ctx, &ps, &hp, &r, nullptr) == SOF_OK, "bf16 state step");
                    EXPECT(max_ulp(sep ? s.po : s.p, s.rp) == 0, "bf16 state: p differs (%s)",
                           describe(c).c_str());
                    EXPECT((sep ? mo16 : m16) == rm16 && (sep ? vo16 : v16) == rv16,
                           "bf16 state: moments differ (%s)", describe(c).c_str());
                    EXPECT(s.lowp == s.ref_lowp, "bf16 state: lowp differs (%s)",
                           describe(c).c_str());
                    if (sep) EXPECT(m16 == m0 && v16 == v0, "bf16 state: inputs written");
                    digest(sep ? mo16.data() : m16.data(), un * 2);
                    digest(sep ? vo16.data() : v16.data(), un * 2);
                }
    api->destroy(ctx);
}

// Q8 moments (optim/qstate.h) and bf16 master params (stochastic rounding): quantized state of
// random blocks, block sizes 64/256/4096, sizes hitting partial blocks and vector tails, in place
// and separate, every grad dtype and mode; codes, scales, params and copies bitwise the
// reference's (the lanes do the reference's operations, the encoding is exact integer work),
// then 30 steps in place against 30 reference steps.
struct QState {
    std::vector<uint8_t> mc, vc; // codes
    std::vector<float> ms, vs;   // scales
    std::vector<uint16_t> p16;   // bf16 master
};

QState make_q(const State& s, int64_t n, int32_t qb) {
    QState q;
    size_t un = static_cast<size_t>(n), nb = static_cast<size_t>((n + qb - 1) / qb);
    q.mc.resize(un), q.vc.resize(un), q.ms.resize(nb), q.vs.resize(nb), q.p16.resize(un);
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * qb, len = std::min<size_t>(qb, un - i0);
        sof::optim::q_quantize_block(s.m.data() + i0, len, sof::optim::q8_map(true),
                                     q.mc.data() + i0, &q.ms[b]);
        sof::optim::q_quantize_block(s.v.data() + i0, len, sof::optim::q8_map(false),
                                     q.vc.data() + i0, &q.vs[b]);
    }
    for (size_t i = 0; i < un; i++)
        q.p16[i] = sof::core::f32_to_bf16(s.p[i]);
    return q;
}

// Points slice sl at q (in) and o (out; == q for in place), Q8 slots of block qb, bf16 master
// when p16.
void use_q(sof_optim_slice& sl, QState& q, QState& o, int32_t qb, bool q8, bool p16) {
    if (q8) {
        sof_state_slot* k = sl.slot;
        k[0].format = k[1].format = SOF_STATE_Q8, k[0].block = k[1].block = qb;
        k[0].data = q.mc.data(), k[0].data_out = o.mc.data();
        k[1].data = q.vc.data(), k[1].data_out = o.vc.data();
        k[0].scale = q.ms.data(), k[0].scale_out = o.ms.data();
        k[1].scale = q.vs.data(), k[1].scale_out = o.vs.data();
    }
    if (p16) {
        sl.param_dtype = SOF_DTYPE_BF16;
        sl.param = q.p16.data(), sl.param_out = o.p16.data();
    }
}

bool same_q(const QState& a, const QState& b, bool q8, bool p16) {
    return (!q8 || (a.mc == b.mc && a.vc == b.vc &&
                    std::memcmp(a.ms.data(), b.ms.data(), a.ms.size() * 4) == 0 &&
                    std::memcmp(a.vs.data(), b.vs.data(), a.vs.size() * 4) == 0)) &&
           (!p16 || a.p16 == b.p16);
}

void digest_q(const QState& q) {
    digest(q.mc.data(), q.mc.size()), digest(q.vc.data(), q.vc.size());
    digest(q.ms.data(), q.ms.size() * 4), digest(q.vs.data(), q.vs.size() * 4);
    digest(q.p16.data(), q.p16.size() * 2);
}

void q8_and_bf16_master(const sof_optim_plugin* api) {
    sof_optim_ctx* ctx = make_ctx(api, 2);
    uint64_t seed = 9000;
    int cases = 0;
    for (int32_t qb : {64, 256, 4096})
        for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{300}, int64_t{4099}, int64_t{40000}})
            for (int fmt = 0; fmt < 3; fmt++) // Q8 + fp32 master, Q8 + bf16, fp32 moments + bf16
                for (bool sep : {false, true}) {
                    const bool q8 = fmt<2, p16 = fmt> 0;
                    Case c;
                    c.n = n, c.gdt = (seed & 1) ? SOF_DTYPE_BF16 : SOF_DTYPE_F32;
                    c.mode = (seed & 2) ? SOF_ADAM_L2 : SOF_ADAM_ADAMW, c.separate = sep;
                    c.wd = 0.05f, c.step = 7, c.scale = 0.5f, c.ldt = SOF_DTYPE_BF16;
                    State s = make_state(c, seed++);
                    s.v[static_cast<size_t>(n / 2)] = 0.0f; // a zero, and a wide range
                    s.m[0] *= 1e-6f;
                    QState q = make_q(s, n, qb), q0 = q, out = q, ref = q;
                    sof_optim_hparams hp = hparams_of(c);
                    hp.seed = 0x1234567890abcdefull + seed;
                    sof_optim_slice ps = plugin_slice(c, s);
                    ps.index0 = 1000003 * static_cast<int64_t>(seed);
                    use_q(ps, q, sep ? out : q, qb, q8, p16);
                    sof_optim_slice rs = ref_slice(c, s);
                    rs.index0 = ps.index0;
                    use_q(rs, q0, ref, qb, q8, p16);
                    sof::optim::adam_ref_step(rs, hp);
                    sof_optim_result r{};
                    EXPECT(api->step(ctx, &ps, &hp, &r, nullptr) == SOF_OK, "q8 step: %s",
                           api->last_error(ctx));
                    const QState& got = sep ? out : q;
                    EXPECT(same_q(got, ref, q8, p16),
                           "q8/bf16 master: state differs (%s qb=%d "
                           "fmt=%d)",
                           describe(c).c_str(), qb, fmt);
                    if (!p16)
                        EXPECT(max_ulp(sep ? s.po : s.p, s.rp) == 0, "q8: p differs (%s)",
                               describe(c).c_str());
                    if (!q8)
                        EXPECT(max_ulp(sep ? s.mo : s.m, s.rm) == 0 &&
                                   max_ulp(sep ? s.vo : s.v, s.rv) == 0,
                               "bf16 master: moments differ (%s)", describe(c).c_str());
                    EXPECT(s.lowp == s.ref_lowp, "q8/bf16 master: lowp differs (%s)",
                           describe(c).c_str());
                    if (sep) EXPECT(same_q(q, q0, q8, p16), "q8: inputs written");
                    digest_q(got), digest(s.lowp.data(), s.lowp.size() * 2);
                    cases++;
                }
    // 30 steps in place, Q8 + bf16 master, against 30 reference steps
    Case c;
    c.n = 5000, c.gdt = SOF_DTYPE_BF16, c.wd = 0.1f, c.ldt = SOF_DTYPE_BF16;
    State s = make_state(c, 77);
    QState q = make_q(s, c.n, 256), ref = q;
    for (int64_t t = 1; t <= 30; t++) {
        c.step = t;
        for (size_t i = 0; i < s.g32.size(); i++) // new grads each step
            s.g16[i] = sof::core::f32_to_bf16(0.02f * std::sin(0.37f * i + t));
        sof_optim_hparams hp = hparams_of(c);
        hp.seed = 42;
        sof_optim_slice ps = plugin_slice(c, s);
        use_q(ps, q, q, 256, true, true);
        sof_optim_slice rs = ps;
        use_q(rs, ref, ref, 256, true, true);
        rs.lowp_out = s.ref_lowp.data();
        EXPECT(api->step(ctx, &ps, &hp, nullptr, nullptr) == SOF_OK, "q8 drift step");
        sof::optim::adam_ref_step(rs, hp);
    }
    EXPECT(same_q(q, ref, true, true), "30 steps of q8 + bf16 master differ from the reference");
    digest_q(q);
    // the rollback refuses quantized state and bf16 masters (they roll back exactly instead)
    sof_optim_slice ps = plugin_slice(c, s);
    use_q(ps, q, q, 256, true, false);
    sof_optim_hparams hp = hparams_of(c);
    EXPECT(api->rollback(ctx, &ps, &hp, nullptr) == SOF_ERR_UNSUPPORTED, "q8 rollback accepted");
    std::printf("q8 / bf16 master: %d cases\n", cases);
    api->destroy(ctx);
}

} // namespace

int main(int argc, char** argv) {
    int expected = argc > 1 ? std::atoi(argv[1]) : 0;
    int bits = static_cast<int>(svcntw() * 32);
    const sof_optim_plugin* api = sof_optim_plugin_get();
    std::printf("grace_adam: SVE vector length %d bits (svcntw = %d), variant %s, score %d\n", bits,
                static_cast<int>(svcntw()), api->variant(), api->score());
    if (expected && bits != expected) {
        std::printf("FAIL: expected a %d-bit vector length (check the qemu -cpu option)\n",
                    expected);
        return 1;
    }
    if (api->score() <= 0) {
        std::printf("FAIL: grace_adam scores 0 on an SVE CPU\n");
        return 1;
    }
    conformance(api);
    drift_and_rollback(api);
    multi_and_stats(api);
    bf16_state(api);
    q8_and_bf16_master(api);
    std::printf("digest %016llx\n", static_cast<unsigned long long>(g_digest));
    if (argc > 2) {
        FILE* f = std::fopen(argv[2], "w");
        if (f) {
            std::fprintf(f, "%016llx\n", static_cast<unsigned long long>(g_digest));
            std::fclose(f);
        }
    }
    std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "PASSED", g_failures);
    return g_failures ? 1 : 0;
}
