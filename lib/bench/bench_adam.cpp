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
// also as bf16 (g16) and bf16 moments (m16, v16, separate outputs mo16, vo16) for the variants.
struct BenchBuffers {
    int64_t n = 0;
    Mem p, g, m, v, po, mo, vo, lowp, g16, m16, v16, mo16, vo16;
    float* P() { return static_cast<float*>(p.get()); }
    float* G() { return static_cast<float*>(g.get()); }
    float* M() { return static_cast<float*>(m.get()); }
    float* V() { return static_cast<float*>(v.get()); }
    float* PO() { return static_cast<float*>(po.get()); }
    float* MO() { return static_cast<float*>(mo.get()); }
    float* VO() { return static_cast<float*>(vo.get()); }
    uint16_t* L() { return static_cast<uint16_t*>(lowp.get()); }
    uint16_t* U(Mem& x) { return static_cast<uint16_t*>(x.get()); }
};

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

// One plugin step over all params: fp32 or bf16 grads, fp32 or bf16 moments.
double run_step(Optimizer& opt, BenchBuffers& b, bool separate, bool lowp, bool g16 = false,
                bool s16 = false) {
    sof_optim_slice s =
        s16 ? make_slice(b.n, b.P(), g16 ? static_cast<const void*>(b.U(b.g16)) : b.G(),
                         g16 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32, b.U(b.m16), b.U(b.v16),
                         SOF_STATE_BF16)
            : make_slice(b.n, b.P(), g16 ? static_cast<const void*>(b.U(b.g16)) : b.G(),
                         g16 ? SOF_DTYPE_BF16 : SOF_DTYPE_F32, b.M(), b.V());
    if (separate) {
        s.param_out = b.PO();
        s.slot[0].data_out = s16 ? static_cast<void*>(b.U(b.mo16)) : b.MO();
        s.slot[1].data_out = s16 ? static_cast<void*>(b.U(b.vo16)) : b.VO();
    }
    if (lowp) {
        s.lowp_out = b.L();
        s.lowp_dtype = SOF_DTYPE_BF16;
    }
    sof_optim_hparams hp =
        make_hparams(1e-4f, 0.9f, 0.999f, 1e-8f, 0.1f, 1000, SOF_ADAM_ADAMW, true, 1.0f);
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
        }
    }
}

} // namespace

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

    double need = 40.0 * static_cast<double>(opt.params); // 30 + bf16 grads and moments
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
        // step (conservative: a noisy fast pass of either counts for the ceiling).
        // each pair also times the step with bf16 grads and with bf16 grads + bf16 moments,
        // right after the fp32 step (same minute, order alternating with the pair)
        std::vector<double> tc, ts, ratio, t16, r16, t16s, r16s;
        run_step(*o, b, separate, opt.lowp_copy, true, false); // warm-up of the variants
        run_step(*o, b, separate, opt.lowp_copy, true, true);
        for (int k = 0; k < r.pairs; k++) {
            const CeilingStrategy& first = strategies[k % 2 ? second : best];
            const CeilingStrategy& last = strategies[k % 2 ? best : second];
            double c1 = run_ceiling(cb, first, r.threads);
            double st = 0, sg = 0, ss = 0;
            if (k % 2) {
                sg = run_step(*o, b, separate, opt.lowp_copy, true, false);
                ss = run_step(*o, b, separate, opt.lowp_copy, true, true);
                st = run_step(*o, b, separate, opt.lowp_copy);
            } else {
                st = run_step(*o, b, separate, opt.lowp_copy);
                sg = run_step(*o, b, separate, opt.lowp_copy, true, false);
                ss = run_step(*o, b, separate, opt.lowp_copy, true, true);
            }
            double c2 = run_ceiling(cb, last, r.threads);
            double c = std::min(c1, c2);
            tc.push_back(c);
            ts.push_back(st);
            ratio.push_back(c / st);
            t16.push_back(sg);
            r16.push_back(st / sg);
            t16s.push_back(ss);
            r16s.push_back(st / ss);
        }
        m.bf16_grads_seconds = median(t16);
        m.bf16_grads_speedup = median(r16);
        m.bf16_state_seconds = median(t16s);
        m.bf16_state_speedup = median(r16s);
        m.ceiling_seconds = median(tc);
        m.step_seconds = median(ts);
        m.ceiling_best_seconds = *std::min_element(tc.begin(), tc.end());
        m.step_best_seconds = *std::min_element(ts.begin(), ts.end());
        double n = static_cast<double>(opt.params);
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
    s += core::strfmt("%-9s %18s %9s %24s %9s\n", "mode", "bf16 grads Gparam/s", "vs fp32",
                      "+ bf16 moments Gparam/s", "vs fp32");
    for (const auto& m : r.modes)
        s += core::strfmt("%-9s %18.3f %8.2fx %24.3f %8.2fx\n", m.mode.c_str(),
                          m.bf16_grads_params_per_s / 1e9, m.bf16_grads_speedup,
                          m.bf16_state_params_per_s / 1e9, m.bf16_state_speedup);
    s += "(vs fp32: median over the pairs of the fp32-grads step time over the variant's, the "
         "three steps run back to back)\n";
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
        s += "}}";
    }
    s += "}}\n";
    return s;
}

} // namespace sof::bench
