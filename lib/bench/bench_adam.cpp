// Adam kernel benchmark: memory ceiling (best access strategy for Adam's streams, trivial
// arithmetic) and the plugin step, in place and separate outputs, paired on the same buffers.
#include "bench/bench_adam.h"

#include "bench/bench_ceiling.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "core/dtype.h"
#include "core/error.h"
#include "core/strfmt.h"
#include "core/timer.h"
#include "optim/qstate.h"

namespace sof::bench {

using optim::make_hparams;
using optim::make_slice;
using optim::Optimizer;

namespace {

constexpr int64_t kTile = 8192;  // same tile as cpu_adam: the unit of OpenMP work
constexpr size_t kFinalists = 3; // ceiling strategies measured again in calibration stage 2
constexpr int kFinalReps = 4;    // stage-2 passes per finalist

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};
using Mem = std::unique_ptr<void, FreeDeleter>;

Mem alloc_buffer(int64_t bytes, const char* what) {
    size_t sz = (static_cast<size_t>(bytes) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    void* p = std::aligned_alloc(2u << 20, sz); // 2 MiB aligned: transparent huge pages
    if (!p)
        SOF_FAIL(Runtime, "bench adam: cannot allocate %s for %s: reduce --params",
                 core::format_bytes(static_cast<double>(sz)).c_str(), what);
    madvise(p, sz, MADV_HUGEPAGE);
    return Mem(p);
}

// AnonHugePages of this process in bytes (-1 when /proc/self/smaps_rollup is unreadable).
double anon_huge_bytes() {
    std::ifstream f("/proc/self/smaps_rollup");
    std::string key;
    while (f >> key) {
        if (key == "AnonHugePages:") {
            double kb = 0;
            f >> kb;
            return kb * 1024.0;
        }
        std::getline(f, key);
    }
    return -1;
}

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    size_t k = x.size();
    return k % 2 ? x[k / 2] : 0.5 * (x[k / 2 - 1] + x[k / 2]);
}

double mem_available_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    double kb = 0;
    std::string unit;
    while (f >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024.0;
    return 0;
}

// The buffers of one benchmark: inputs (set A), separate outputs (set B), bf16 copy; the grads
// also as bf16 (g16), bf16 moments (m16, v16, separate outputs mo16, vo16), q8 moments (codes mq,
// vq and their scales msc, vsc; separate outputs mqo, vqo, msco, vsco) and a bf16 master (p16,
// separate output po16) for the other formats.
struct BenchBuffers {
    int64_t n = 0;
    Mem p, g, m, v, po, mo, vo, lowp, g16, m16, v16, mo16, vo16;
    Mem mq, vq, mqo, vqo, msc, vsc, msco, vsco, p16, po16;
    float* P() { return static_cast<float*>(p.get()); }
    float* G() { return static_cast<float*>(g.get()); }
    float* M() { return static_cast<float*>(m.get()); }
    float* V() { return static_cast<float*>(v.get()); }
    float* PO() { return static_cast<float*>(po.get()); }
    float* MO() { return static_cast<float*>(mo.get()); }
    float* VO() { return static_cast<float*>(vo.get()); }
    uint16_t* L() { return static_cast<uint16_t*>(lowp.get()); }
    uint16_t* U(Mem& x) { return static_cast<uint16_t*>(x.get()); }
    uint8_t* B(Mem& x) { return static_cast<uint8_t*>(x.get()); }
    float* F(Mem& x) { return static_cast<float*>(x.get()); }
};

// One step configuration timed in every pair; kKinds[0] is the fp32 step compared with the
// ceiling, the others are compared with it.
struct StepKind {
    const char* name;
    sof_dtype gd; // grads
    int32_t sd;   // moments' state format
    sof_dtype pd; // master params
};
constexpr StepKind kKinds[] = {
    {"fp32", SOF_DTYPE_F32, SOF_STATE_F32, SOF_DTYPE_F32},
    {"bf16 grads", SOF_DTYPE_BF16, SOF_STATE_F32, SOF_DTYPE_F32},
    {"bf16 grads + bf16 moments", SOF_DTYPE_BF16, SOF_STATE_BF16, SOF_DTYPE_F32},
    {"bf16 moments", SOF_DTYPE_F32, SOF_STATE_BF16, SOF_DTYPE_F32},
    {"q8 moments", SOF_DTYPE_F32, SOF_STATE_Q8, SOF_DTYPE_F32},
    {"bf16 master", SOF_DTYPE_F32, SOF_STATE_F32, SOF_DTYPE_BF16},
    {"bf16 master + bf16 moments", SOF_DTYPE_F32, SOF_STATE_BF16, SOF_DTYPE_BF16},
    {"bf16 master + q8 moments", SOF_DTYPE_F32, SOF_STATE_Q8, SOF_DTYPE_BF16},
};
constexpr size_t kNumKinds = sizeof(kKinds) / sizeof(kKinds[0]);
constexpr size_t kKindBf16Grads = 1, kKindBf16State = 2, kKindQ8 = 4;

CeilingBuffers ceiling_buffers(BenchBuffers& b, bool separate, bool lowp) {
    CeilingBuffers c;
    c.n = b.n;
    c.p = b.P();
    c.g = b.G();
    c.m = b.M();
    c.v = b.V();
    c.po = separate ? b.PO() : b.P();
    c.mo = separate ? b.MO() : b.M();
    c.vo = separate ? b.VO() : b.V();
    c.lowp = lowp ? b.L() : nullptr;
    return c;
}

// One plugin step of kind k over all params; the bf16 copy (lowp) only with an fp32 master.
double run_step(Optimizer& opt, BenchBuffers& b, bool separate, bool lowp,
                const StepKind& k = kKinds[0]) {
    const void* g = k.gd == SOF_DTYPE_BF16 ? static_cast<const void*>(b.U(b.g16)) : b.G();
    sof_optim_slice s = make_slice(b.n, b.P(), g, k.gd, b.M(), b.V());
    if (k.sd == SOF_STATE_BF16)
        s = make_slice(b.n, b.P(), g, k.gd, b.U(b.m16), b.U(b.v16), SOF_STATE_BF16);
    if (k.sd == SOF_STATE_Q8) {
        optim::set_q8(s, 0, kBenchAdamQ8Block, b.B(b.mq), b.F(b.msc));
        optim::set_q8(s, 1, kBenchAdamQ8Block, b.B(b.vq), b.F(b.vsc));
    }
    if (k.pd == SOF_DTYPE_BF16) {
        s.param_dtype = SOF_DTYPE_BF16;
        s.param = s.param_out = b.U(b.p16);
    }
    if (separate) {
        s.param_out = k.pd == SOF_DTYPE_BF16 ? static_cast<void*>(b.U(b.po16)) : b.PO();
        void* mo = k.sd == SOF_STATE_F32
                       ? static_cast<void*>(b.MO())
                       : (k.sd == SOF_STATE_BF16 ? static_cast<void*>(b.U(b.mo16)) : b.B(b.mqo));
        void* vo = k.sd == SOF_STATE_F32
                       ? static_cast<void*>(b.VO())
                       : (k.sd == SOF_STATE_BF16 ? static_cast<void*>(b.U(b.vo16)) : b.B(b.vqo));
        s.slot[0].data_out = mo;
        s.slot[1].data_out = vo;
        if (k.sd == SOF_STATE_Q8) {
            s.slot[0].scale_out = b.F(b.msco);
            s.slot[1].scale_out = b.F(b.vsco);
        }
    }
    if (lowp && k.pd == SOF_DTYPE_F32) {
        s.lowp_out = b.L();
        s.lowp_dtype = SOF_DTYPE_BF16;
    }
    sof_optim_hparams hp =
        make_hparams(1e-4f, 0.9f, 0.999f, 1e-8f, 0.1f, 1000, SOF_ADAM_ADAMW, true, 1.0f, 1);
    core::Timer t;
    opt.step(s, hp);
    return t.seconds();
}

// Parallel first touch with the measuring threads' static partition; values stay small and
// finite over repeated in-place passes.
void init_buffers(BenchBuffers& b, int threads) {
    int64_t ntiles = (b.n + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t k = 0; k < ntiles; k++) {
        int64_t o = k * kTile, e = std::min(b.n, o + kTile);
        for (int64_t i = o; i < e; i++) {
            float x = static_cast<float>(i % 1021) * 1e-4f - 0.05f;
            b.P()[i] = x;
            b.G()[i] = 1e-6f * static_cast<float>(i % 17) - 8e-6f;
            b.M()[i] = 0.0f;
            b.V()[i] = 1e-9f;
            b.PO()[i] = b.MO()[i] = b.VO()[i] = 0.0f;
            b.L()[i] = 0;
            b.U(b.g16)[i] = core::f32_to_bf16(b.G()[i]);
            b.U(b.m16)[i] = 0;
            b.U(b.v16)[i] = core::f32_to_bf16(1e-9f);
            b.U(b.mo16)[i] = b.U(b.vo16)[i] = 0;
            b.U(b.p16)[i] = b.U(b.po16)[i] = core::f32_to_bf16(x);
            b.B(b.mqo)[i] = b.B(b.vqo)[i] = 0;
        }
        // q8 moments: m = 0 and v = 1e-9 quantized block by block (tiles hold whole blocks)
        constexpr int32_t qb = kBenchAdamQ8Block;
        for (int64_t i = o; i < e; i += qb) {
            const int64_t len = std::min<int64_t>(qb, e - i);
            optim::q_quantize_block(b.M() + i, len, optim::q8_map(true), b.B(b.mq) + i,
                                    b.F(b.msc) + i / qb);
            optim::q_quantize_block(b.V() + i, len, optim::q8_map(false), b.B(b.vq) + i,
                                    b.F(b.vsc) + i / qb);
            b.F(b.msco)[i / qb] = b.F(b.vsco)[i / qb] = 0.0f;
        }
    }
}

} // namespace

double step_bytes_per_param(int32_t grad_dtype, int32_t state_format, int32_t param_dtype,
                            bool lowp_copy, int32_t block) {
    const double p = param_dtype == SOF_DTYPE_F32 ? 4.0 : 2.0;
    const double g = grad_dtype == SOF_DTYPE_F32 ? 4.0 : 2.0;
    double mv = state_format == SOF_STATE_F32 ? 4.0 : 2.0;
    if (state_format == SOF_STATE_Q8) mv = 1.0 + 4.0 / static_cast<double>(block);
    const double copy = lowp_copy && param_dtype == SOF_DTYPE_F32 ? 2.0 : 0.0;
    return 2.0 * p + g + 2.0 * 2.0 * mv + copy;
}

BenchAdamReport bench_adam(const BenchAdamOptions& opt) {
    BenchAdamReport r;
    r.params = opt.params;
    r.threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
    r.lowp_copy = opt.lowp_copy;
    r.bytes_per_param = opt.lowp_copy ? 30.0 : 28.0;
    // calibration stage 1: ~0.15 s of traffic per strategy at 30 GB/s, 1 to 10 passes each
    r.reps = opt.reps > 0
                 ? opt.reps
                 : static_cast<int>(std::clamp(5e9 / (r.bytes_per_param * opt.params), 1.0, 10.0));
    r.pairs = opt.pairs > 0 ? opt.pairs : 11;
    r.ceiling_isa = ceiling_isa();

    // 30 + bf16 grads and moments + q8 codes (4) + bf16 master (4) per param
    double need = 48.2 * static_cast<double>(opt.params);
    double avail = mem_available_bytes();
    if (avail > 0 && need > 0.85 * avail)
        SOF_FAIL(Runtime,
                 "bench adam: %lld params need %s of memory, only %s available: reduce --params",
                 static_cast<long long>(opt.params), core::format_bytes(need).c_str(),
                 core::format_bytes(avail).c_str());

    auto o = Optimizer::load(opt.plugin_dir, opt.plugin, SOF_TARGET_HOST, r.threads);
    r.plugin = o->info();

    BenchBuffers b;
    b.n = opt.params;
    int64_t f4 = 4 * b.n;
    double huge0 = anon_huge_bytes();
    b.p = alloc_buffer(f4, "params");
    b.g = alloc_buffer(f4, "grads");
    b.m = alloc_buffer(f4, "exp_avg");
    b.v = alloc_buffer(f4, "exp_avg_sq");
    b.po = alloc_buffer(f4, "params (separate output)");
    b.mo = alloc_buffer(f4, "exp_avg (separate output)");
    b.vo = alloc_buffer(f4, "exp_avg_sq (separate output)");
    b.lowp = alloc_buffer(2 * b.n, "bf16 copy");
    b.g16 = alloc_buffer(2 * b.n, "bf16 grads");
    b.m16 = alloc_buffer(2 * b.n, "bf16 exp_avg");
    b.v16 = alloc_buffer(2 * b.n, "bf16 exp_avg_sq");
    b.mo16 = alloc_buffer(2 * b.n, "bf16 exp_avg (separate output)");
    b.vo16 = alloc_buffer(2 * b.n, "bf16 exp_avg_sq (separate output)");
    const int64_t nsc = 4 * ((b.n + kBenchAdamQ8Block - 1) / kBenchAdamQ8Block);
    b.mq = alloc_buffer(b.n, "q8 exp_avg");
    b.vq = alloc_buffer(b.n, "q8 exp_avg_sq");
    b.mqo = alloc_buffer(b.n, "q8 exp_avg (separate output)");
    b.vqo = alloc_buffer(b.n, "q8 exp_avg_sq (separate output)");
    b.msc = alloc_buffer(nsc, "q8 exp_avg scales");
    b.vsc = alloc_buffer(nsc, "q8 exp_avg_sq scales");
    b.msco = alloc_buffer(nsc, "q8 exp_avg scales (separate output)");
    b.vsco = alloc_buffer(nsc, "q8 exp_avg_sq scales (separate output)");
    b.p16 = alloc_buffer(2 * b.n, "bf16 master params");
    b.po16 = alloc_buffer(2 * b.n, "bf16 master params (separate output)");
    init_buffers(b, r.threads);
    if (huge0 >= 0) r.huge_page_fraction = std::clamp((anon_huge_bytes() - huge0) / need, 0.0, 1.0);

    const std::vector<CeilingStrategy> strategies = ceiling_strategies();
    for (bool separate : {false, true}) {
        BenchModeResult m;
        m.mode = separate ? "separate" : "in_place";
        CeilingBuffers cb = ceiling_buffers(b, separate, opt.lowp_copy);
        run_ceiling(cb, strategies.front(), r.threads); // warm-up of both
        run_step(*o, b, separate, opt.lowp_copy);
        // calibration, round robin so that a slow minute of the VM hits every strategy alike:
        // stage 1 every strategy r.reps times; stage 2 the kFinalists fastest (median) kFinalReps
        // more times each; the finalist with the lowest median becomes the ceiling.
        const size_t ns = strategies.size();
        std::vector<std::vector<double>> times(ns);
        for (int rep = 0; rep < r.reps; rep++)
            for (size_t k = 0; k < ns; k++)
                times[k].push_back(run_ceiling(cb, strategies[k], r.threads));
        std::vector<size_t> order(ns);
        for (size_t k = 0; k < ns; k++)
            order[k] = k;
        std::sort(order.begin(), order.end(),
                  [&](size_t x, size_t y) { return median(times[x]) < median(times[y]); });
        order.resize(std::min(ns, kFinalists));
        for (int rep = 0; rep < kFinalReps; rep++)
            for (size_t k : order)
                times[k].push_back(run_ceiling(cb, strategies[k], r.threads));
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t x, size_t y) { return median(times[x]) < median(times[y]); });
        const size_t best = order[0], second = order.size() > 1 ? order[1] : order[0];
        for (size_t k = 0; k < ns; k++)
            m.tries.push_back({strategies[k].name(), median(times[k])});
        m.ceiling_strategy = strategies[best].name();
        m.ceiling_strategy2 = strategies[second].name();
        // pairs in alternating order: the ratio of each pair shares the same minute of the VM.
        // The ceiling of a pair is the faster of the two finalists, run before and after the
        // steps (conservative: a noisy fast pass of either counts for the ceiling). Between them
        // every step kind runs once, back to back, in kKinds order on even pairs and reversed on
        // odd ones; each kind's ratios are taken against the fp32 step and the ceiling of the
        // same pair.
        const double cbytes = r.bytes_per_param;
        std::vector<double> tc, ratio;
        std::vector<std::vector<double>> tk(kNumKinds), speed(kNumKinds), frac(kNumKinds);
        for (size_t q = 1; q < kNumKinds; q++) // warm-up of the other kinds
            run_step(*o, b, separate, opt.lowp_copy, kKinds[q]);
        for (int k = 0; k < r.pairs; k++) {
            const CeilingStrategy& first = strategies[k % 2 ? second : best];
            const CeilingStrategy& last = strategies[k % 2 ? best : second];
            double c1 = run_ceiling(cb, first, r.threads);
            std::vector<double> t(kNumKinds);
            for (size_t q = 0; q < kNumKinds; q++) {
                size_t kind = k % 2 ? kNumKinds - 1 - q : q;
                t[kind] = run_step(*o, b, separate, opt.lowp_copy, kKinds[kind]);
            }
            double c2 = run_ceiling(cb, last, r.threads);
            double c = std::min(c1, c2);
            tc.push_back(c);
            ratio.push_back(c / t[0]);
            for (size_t q = 0; q < kNumKinds; q++) {
                const StepKind& kd = kKinds[q];
                double bytes =
                    step_bytes_per_param(kd.gd, kd.sd, kd.pd, opt.lowp_copy, kBenchAdamQ8Block);
                tk[q].push_back(t[q]);
                speed[q].push_back(t[0] / t[q]);
                frac[q].push_back((bytes / t[q]) / (cbytes / c));
            }
        }
        double n = static_cast<double>(opt.params);
        for (size_t q = 0; q < kNumKinds; q++) {
            const StepKind& kd = kKinds[q];
            BenchFormatResult f;
            f.format = kd.name;
            f.bytes_per_param =
                step_bytes_per_param(kd.gd, kd.sd, kd.pd, opt.lowp_copy, kBenchAdamQ8Block);
            f.seconds = median(tk[q]);
            f.params_per_s = n / f.seconds;
            f.ns_per_param = 1e9 * f.seconds / n;
            f.speedup = median(speed[q]);
            f.bandwidth_fraction = median(frac[q]);
            m.formats.push_back(f);
        }
        m.bf16_grads_seconds = m.formats[kKindBf16Grads].seconds;
        m.bf16_grads_speedup = m.formats[kKindBf16Grads].speedup;
        m.bf16_state_seconds = m.formats[kKindBf16State].seconds;
        m.bf16_state_speedup = m.formats[kKindBf16State].speedup;
        m.q8_speedup = m.formats[kKindQ8].speedup;
        m.ceiling_seconds = median(tc);
        m.step_seconds = median(tk[0]);
        m.ceiling_best_seconds = *std::min_element(tc.begin(), tc.end());
        m.step_best_seconds = *std::min_element(tk[0].begin(), tk[0].end());
        m.ceiling_params_per_s = n / m.ceiling_seconds;
        m.params_per_s = n / m.step_seconds;
        m.ceiling_gbps = m.ceiling_params_per_s * r.bytes_per_param / 1e9;
        m.gbps = m.params_per_s * r.bytes_per_param / 1e9;
        m.fraction_of_ceiling = median(ratio);
        m.fraction_min = *std::min_element(ratio.begin(), ratio.end());
        m.fraction_max = *std::max_element(ratio.begin(), ratio.end());
        m.bf16_grads_params_per_s = n / m.bf16_grads_seconds;
        m.bf16_state_params_per_s = n / m.bf16_state_seconds;
        r.modes.push_back(m);
    }
    return r;
}

std::string bench_adam_text(const BenchAdamReport& r) {
    std::string s = core::strfmt(
        "bench adam: %lld params, plugin %s (%s), %d threads, bf16 copy %s (%.0f B/param)\n"
        "ceiling: best of %zu strategies (%s loops, %d+ calibration passes each), then %d "
        "pairs (ceiling, plugin, ceiling); medians, fraction = median of per-pair ratios\n",
        static_cast<long long>(r.params), r.plugin.name.c_str(), r.plugin.variant.c_str(),
        r.threads, r.lowp_copy ? "on" : "off", r.bytes_per_param,
        r.modes.empty() ? size_t{0} : r.modes[0].tries.size(), r.ceiling_isa.c_str(), r.reps,
        r.pairs);
    if (r.huge_page_fraction >= 0)
        s += core::strfmt("buffers on transparent huge pages: %.0f%%\n",
                          100.0 * r.huge_page_fraction);
    s += core::strfmt("%-9s %-26s %9s %7s %9s %7s %9s %15s\n", "mode", "ceiling strategy",
                      "Gparam/s", "GB/s", "plugin", "GB/s", "fraction", "(min-max)");
    for (const auto& m : r.modes)
        s += core::strfmt("%-9s %-26s %9.3f %7.1f %9.3f %7.1f %8.1f%% %6.1f-%5.1f%%\n",
                          m.mode.c_str(), m.ceiling_strategy.c_str(), m.ceiling_params_per_s / 1e9,
                          m.ceiling_gbps, m.params_per_s / 1e9, m.gbps,
                          100.0 * m.fraction_of_ceiling, 100.0 * m.fraction_min,
                          100.0 * m.fraction_max);
    for (const auto& m : r.modes)
        s += core::strfmt("%s: ceiling per pair = faster of '%s' and '%s'\n", m.mode.c_str(),
                          m.ceiling_strategy.c_str(), m.ceiling_strategy2.c_str());
    s += core::strfmt("%-9s %-26s %8s %9s %9s %8s %10s\n", "mode", "format (same pairs)", "B/param",
                      "Gparam/s", "ns/param", "vs fp32", "of ceiling");
    for (const auto& m : r.modes)
        for (const auto& f : m.formats)
            s += core::strfmt("%-9s %-26s %8.2f %9.3f %9.3f %7.2fx %9.1f%%\n", m.mode.c_str(),
                              f.format.c_str(), f.bytes_per_param, f.params_per_s / 1e9,
                              f.ns_per_param, f.speedup, 100.0 * f.bandwidth_fraction);
    s +=
        core::strfmt("(fp32 grads unless named; q8 blocks of %d; every format's step runs in every "
                     "pair between the two ceiling passes; vs fp32 = median over the pairs of the "
                     "fp32 step's time over the format's; of ceiling = median over the pairs of "
                     "the format's bytes/s over the ceiling's %.0f B/param per its time)\n",
                     kBenchAdamQ8Block, r.bytes_per_param);
    for (const auto& m : r.modes)
        s += core::strfmt("%s: q8 moments %.2fx faster per parameter than fp32 (bytes %.2f vs "
                          "%.2f: %.2fx at the memory bound; goal >= 1.5x)\n",
                          m.mode.c_str(), m.q8_speedup, m.formats[kKindQ8].bytes_per_param,
                          m.formats[0].bytes_per_param,
                          m.formats[0].bytes_per_param / m.formats[kKindQ8].bytes_per_param);
    return s;
}

std::string bench_adam_json(const BenchAdamReport& r) {
    std::string s = core::strfmt(
        "{\"benchmark\": \"adam\", \"params\": %lld, \"plugin\": \"%s\", \"variant\": \"%s\", "
        "\"threads\": %d, \"bf16_copy\": %s, \"bytes_per_param\": %.0f, \"reps\": %d, "
        "\"pairs\": %d, \"ceiling_isa\": \"%s\", \"huge_page_fraction\": %.3f, \"modes\": {",
        static_cast<long long>(r.params), r.plugin.name.c_str(), r.plugin.variant.c_str(),
        r.threads, r.lowp_copy ? "true" : "false", r.bytes_per_param, r.reps, r.pairs,
        r.ceiling_isa.c_str(), r.huge_page_fraction);
    for (size_t i = 0; i < r.modes.size(); i++) {
        const auto& m = r.modes[i];
        s += core::strfmt(
            "%s\"%s\": {\"ceiling_strategy\": \"%s\", \"ceiling_strategy2\": \"%s\", "
            "\"ceiling_params_per_s\": %.6g, "
            "\"ceiling_gbps\": %.4g, \"ceiling_seconds\": %.6g, \"ceiling_best_seconds\": %.6g, "
            "\"params_per_s\": %.6g, \"gbps\": %.4g, \"seconds\": %.6g, \"best_seconds\": %.6g, "
            "\"fraction_of_ceiling\": %.4f, \"fraction_min\": %.4f, \"fraction_max\": %.4f, "
            "\"bf16_grads_params_per_s\": %.6g, \"bf16_grads_speedup\": %.4f, "
            "\"bf16_state_params_per_s\": %.6g, \"bf16_state_speedup\": %.4f, "
            "\"ceiling_tries\": {",
            i ? ", " : "", m.mode.c_str(), m.ceiling_strategy.c_str(), m.ceiling_strategy2.c_str(),
            m.ceiling_params_per_s, m.ceiling_gbps, m.ceiling_seconds, m.ceiling_best_seconds,
            m.params_per_s, m.gbps, m.step_seconds, m.step_best_seconds, m.fraction_of_ceiling,
            m.fraction_min, m.fraction_max, m.bf16_grads_params_per_s, m.bf16_grads_speedup,
            m.bf16_state_params_per_s, m.bf16_state_speedup);
        for (size_t k = 0; k < m.tries.size(); k++)
            s += core::strfmt("%s\"%s\": %.6g", k ? ", " : "", m.tries[k].strategy.c_str(),
                              m.tries[k].seconds);
        s += core::strfmt("}, \"q8_speedup\": %.4f, \"formats\": {", m.q8_speedup);
        for (size_t k = 0; k < m.formats.size(); k++) {
            const auto& f = m.formats[k];
            s += core::strfmt("%s\"%s\": {\"bytes_per_param\": %.4f, \"seconds\": %.6g, "
                              "\"params_per_s\": %.6g, \"ns_per_param\": %.5f, \"speedup\": %.4f, "
                              "\"bandwidth_fraction\": %.4f}",
                              k ? ", " : "", f.format.c_str(), f.bytes_per_param, f.seconds,
                              f.params_per_s, f.ns_per_param, f.speedup, f.bandwidth_fraction);
        }
        s += "}}";
    }
    s += "}}\n";
    return s;
}

} // namespace sof::bench
