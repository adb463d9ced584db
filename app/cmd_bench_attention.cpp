// `superoffload bench attention [--seq T] [--channels C] [--heads NH] [--batch B] [--threads N]
// [--reps R] [--window W]`: the tiled attention op (CPU twin) against the T x T baseline, forward
// + backward (with a sliding window W: the op alone, its cost O(T W)); with --gpu 1 the CUDA
// kernels instead (bench_attention_gpu.cpp).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_attention_gpu.h"
#include "cli.h"
#include "commands.h"
#include "core/error.h"
#include "core/strfmt.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"

namespace sof::app {

namespace {

using Clock = std::chrono::steady_clock;

struct Opts {
    int T = 4096, C = 256, NH = 4, B = 1, threads = 2, reps = 3;
    int window = 0;       // --window W: sliding window (the baseline is causal only: not run)
    bool baseline = true; // --baseline 0: the tiled op alone (profiling, long T)
    // --gpu 1: the CUDA kernels (GpuAttnOpts' defaults for what is not given; --head-dim and
    // --kv-heads there, else hd = C / NH and NKV = NH)
    bool gpu = false;
    int hd = 0, NKV = 0;
    bool given_T = false, given_B = false, given_NH = false, given_C = false, given_reps = false;
};

// ---- baseline: the T x T algorithm the CPU model used before the tiled op (att (B,NH,T,T) holds
// every probability; kept here only as the yardstick of this benchmark).

void baseline_txt_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
    const int hs = C / NH;
    const size_t C3 = static_cast<size_t>(3) * C;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const size_t bt = static_cast<size_t>(b) * T;
                const float* q = qkv + (bt + t) * C3 + h * hs;
                float* row = att + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* k = qkv + (bt + t2) * C3 + C + h * hs;
                    float dot = 0.0f;
                    for (int i = 0; i < hs; i++)
                        dot += q[i] * k[i];
                    row[t2] = dot * scale;
                    maxv = std::max(maxv, row[t2]);
                }
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    row[t2] = std::exp(row[t2] - maxv);
                    sum += row[t2];
                }
                for (int t2 = 0; t2 <= t; t2++)
                    row[t2] /= sum;
                for (int t2 = t + 1; t2 < T; t2++)
                    row[t2] = 0.0f;
                float* o = out + (bt + t) * C + h * hs;
                std::fill(o, o + hs, 0.0f);
                for (int t2 = 0; t2 <= t; t2++) {
                    const float* v = qkv + (bt + t2) * C3 + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++)
                        o[i] += row[t2] * v[i];
                }
            }
        }
    }
}

void baseline_txt_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                           int B, int T, int C, int NH) {
    const int hs = C / NH;
    const size_t C3 = static_cast<size_t>(3) * C;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
    {
        std::vector<float> datt(static_cast<size_t>(T));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const size_t bt = static_cast<size_t>(b) * T;
                for (int t = 0; t < T; t++)
                    for (int part = 0; part < 3; part++)
                        std::fill_n(dqkv + (bt + t) * C3 + part * C + h * hs, hs, 0.0f);
                for (int t = 0; t < T; t++) {
                    const float* row = att + ((static_cast<size_t>(b) * NH + h) * T + t) * T;
                    const float* dd = dout + (bt + t) * C + h * hs;
                    const float* q = qkv + (bt + t) * C3 + h * hs;
                    float* dq = dqkv + (bt + t) * C3 + h * hs;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float* v = qkv + (bt + t2) * C3 + 2 * C + h * hs;
                        float* dv = dqkv + (bt + t2) * C3 + 2 * C + h * hs;
                        float dot = 0.0f;
                        for (int i = 0; i < hs; i++) {
                            dot += v[i] * dd[i];
                            dv[i] += row[t2] * dd[i];
                        }
                        datt[static_cast<size_t>(t2)] = dot;
                    }
                    float s = 0.0f;
                    for (int t2 = 0; t2 <= t; t2++)
                        s += row[t2] * datt[static_cast<size_t>(t2)];
                    for (int t2 = 0; t2 <= t; t2++) {
                        const float dpre = row[t2] * (datt[static_cast<size_t>(t2)] - s) * scale;
                        const float* k = qkv + (bt + t2) * C3 + C + h * hs;
                        float* dk = dqkv + (bt + t2) * C3 + C + h * hs;
                        for (int i = 0; i < hs; i++) {
                            dq[i] += dpre * k[i];
                            dk[i] += dpre * q[i];
                        }
                    }
                }
            }
        }
    }
}

// ---- peak memory: the kernel's high-water mark of this process's resident set, reset before
// each measured call (/proc/self/clear_refs "5"), minus the resident set at the reset.

long status_kib(const char* key) {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    const size_t n = std::strlen(key);
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, key, n) == 0) v = std::strtol(line + n, nullptr, 10);
    std::fclose(f);
    return v;
}

bool reset_peak() {
    FILE* f = std::fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    const bool ok = std::fputs("5", f) >= 0;
    return std::fclose(f) == 0 && ok;
}

struct Result {
    double best_s = 1e30;   // fastest forward + backward
    double cpu_s = 1e30;    // the least CPU time of the process (all threads) over the calls
    double peak_mib = -1.0; // high-water mark above the resident set before the call
    std::vector<float> out, dqkv;
};

// One forward + backward; every buffer the op needs beyond its inputs is allocated inside.
// The process's CPU time (every thread), seconds: the work done, which other processes sharing
// the cores do not inflate as they do the wall time.
double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs f once; keeps the least wall and CPU time in r.
template <class F> void timed(Result* r, F&& f) {
    const double c = cpu_seconds();
    const Clock::time_point t = Clock::now();
    f();
    r->best_s = std::min(r->best_s, std::chrono::duration<double>(Clock::now() - t).count());
    r->cpu_s = std::min(r->cpu_s, cpu_seconds() - c);
}

void run_tiled(const Opts& o, const std::vector<float>& qkv, const std::vector<float>& dout,
               Result* r) {
    const int hd = o.C / o.NH;
    const size_t C3 = static_cast<size_t>(3) * o.C, rows = static_cast<size_t>(o.B) * o.T;
    const kernels::AttnArgs<float> a{qkv.data(),
                                     qkv.data() + o.C,
                                     qkv.data() + 2 * o.C,
                                     C3,
                                     C3,
                                     C3,
                                     static_cast<size_t>(o.C),
                                     o.B,
                                     o.T,
                                     o.NH,
                                     o.NH,
                                     hd,
                                     nullptr,
                                     0};
    kernels::AttnArgs<float> aw = a;
    aw.window = o.window;
    std::vector<float> out(rows * o.C), lse(rows * o.NH), delta(rows * o.NH), dqkv(rows * C3);
    kernels::cpu::attention_forward(out.data(), lse.data(), aw);
    const kernels::AttnGrads<float> d{dqkv.data(), dqkv.data() + o.C, dqkv.data() + 2 * o.C, C3, C3,
                                      C3};
    kernels::cpu::attention_backward(d, dout.data(), out.data(), lse.data(), delta.data(), aw);
    r->out = std::move(out);
    r->dqkv = std::move(dqkv);
}

void run_baseline(const Opts& o, const std::vector<float>& qkv, const std::vector<float>& dout,
                  Result* r) {
    const size_t rows = static_cast<size_t>(o.B) * o.T;
    std::vector<float> out(rows * o.C), dqkv(rows * 3 * o.C);
    std::vector<float> att(static_cast<size_t>(o.B) * o.NH * o.T * o.T);
    baseline_txt_forward(out.data(), att.data(), qkv.data(), o.B, o.T, o.C, o.NH);
    baseline_txt_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), o.B, o.T, o.C, o.NH);
    r->out = std::move(out);
    r->dqkv = std::move(dqkv);
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double e = 0, m = 0;
    for (size_t i = 0; i < a.size(); i++) {
        e = std::max(e, std::fabs(static_cast<double>(a[i]) - b[i]));
        m = std::max(m, std::fabs(static_cast<double>(b[i])));
    }
    return e / std::max(m, 1e-30);
}

Opts parse(int argc, char** argv) {
    const char* usage =
        "usage: superoffload bench attention [--seq T] [--channels C] [--heads NH] "
        "[--batch B] [--threads N] [--reps R] [--baseline 0|1] [--window W] | --gpu "
        "1 [--seq T] [--batch B] [--heads NH] [--kv-heads NKV] [--head-dim hd] "
        "[--reps R] [--window W]";
    Opts o;
    CliParser p({usage, "bench attention: unknown option '%s'", [](const std::string& opt) {
                     return "bench attention: " + opt + " needs a value";
                 }});
    int baseline = 1, gpu = 0;
    const std::vector<std::pair<const char*, int*>> ints = {
        {"--seq", &o.T},           {"--channels", &o.C},      {"--heads", &o.NH},
        {"--batch", &o.B},         {"--threads", &o.threads}, {"--reps", &o.reps},
        {"--baseline", &baseline}, {"--gpu", &gpu},           {"--head-dim", &o.hd},
        {"--kv-heads", &o.NKV},    {"--window", &o.window}};
    std::vector<std::string> text(ints.size());
    for (size_t i = 0; i < ints.size(); i++)
        p.option(ints[i].first, &text[i]);
    // argv[0] is "attention"
    const std::vector<std::string> extra = p.parse(argc - 1, argv + 1);
    if (!extra.empty()) p.fail("bench attention: unknown option '" + extra[0] + "'");
    for (size_t i = 0; i < ints.size(); i++) {
        if (!p.count(ints[i].first)) continue;
        const std::string& v = text[i];
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || n < 0 || n > 10000000)
            p.fail(core::strfmt("bench attention: %s '%s' must be an integer in [0, 10000000]",
                                ints[i].first, v.c_str()));
        *ints[i].second = static_cast<int>(n);
    }
    o.baseline = baseline != 0 && o.window == 0; // the T x T baseline is causal only
    o.gpu = gpu != 0;
    o.given_T = p.count("--seq") > 0;
    o.given_C = p.count("--channels") > 0;
    o.given_NH = p.count("--heads") > 0;
    o.given_B = p.count("--batch") > 0;
    o.given_reps = p.count("--reps") > 0;
    if (o.reps < 1) p.fail("bench attention: --reps must be positive");
    if (o.gpu) {
        if (o.NH < 1) p.fail("bench attention: --heads must be positive");
        return o;
    }
    if (o.NH < 1 || o.C % o.NH != 0)
        p.fail(core::strfmt("bench attention: --channels %d is not a multiple of --heads %d", o.C,
                            o.NH));
    return o;
}

} // namespace

int cmd_bench_attention(int argc, char** argv) {
    const Opts o = parse(argc, argv);
    if (o.gpu) {
        GpuAttnOpts g;
        if (o.given_T) g.T = o.T;
        if (o.given_B) g.B = o.B;
        if (o.given_NH) g.NH = o.NH;
        if (o.given_reps) g.reps = o.reps;
        g.hd = o.hd > 0 ? o.hd : (o.given_C ? o.C / g.NH : g.hd);
        g.NKV = o.NKV > 0 ? o.NKV : g.NH;
        g.window = o.window;
        return bench_attention_gpu(g);
    }
    omp_set_num_threads(o.threads);
    kernels::cpu::use_single_threaded_blas();
    const size_t rows = static_cast<size_t>(o.B) * o.T;
    std::vector<float> qkv(rows * 3 * o.C), dout(rows * o.C);
    std::mt19937 gen(1234);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : qkv)
        x = u(gen);
    for (float& x : dout)
        x = u(gen);
    const double txt_mib =
        static_cast<double>(o.B) * o.NH * o.T * o.T * sizeof(float) / (1024.0 * 1024.0);
    std::printf("bench attention: B=%d T=%d C=%d heads=%d (hd %d), causal, window %d, fp32, "
                "forward + backward, %d threads, best of %d; T x T scores would be %.0f MiB\n",
                o.B, o.T, o.C, o.NH, o.C / o.NH, o.window, o.threads, o.reps, txt_mib);

    Result tiled, base;
    // peak memory: one call each, first thing after a warm-up on a small problem (thread pools),
    // so that no full-size buffer freed earlier is still resident and reused
    Opts small = o;
    small.T = std::min(o.T, 64);
    auto measure_peak = [&](Result* r, auto&& fn) {
        Result scratch;
        fn(small, &scratch);
        if (!reset_peak()) return;
        const long before = status_kib("VmRSS:");
        fn(o, r);
        r->peak_mib = static_cast<double>(status_kib("VmHWM:") - before) / 1024.0;
    };
    measure_peak(&tiled, [&](const Opts& x, Result* r) { run_tiled(x, qkv, dout, r); });
    if (o.baseline)
        measure_peak(&base, [&](const Opts& x, Result* r) { run_baseline(x, qkv, dout, r); });
    // time: the two alternate, so a load on the machine hits both alike
    for (int rep = 0; rep < o.reps; rep++) {
        timed(&tiled, [&] { run_tiled(o, qkv, dout, &tiled); });
        if (o.baseline) timed(&base, [&] { run_baseline(o, qkv, dout, &base); });
    }
    const double flops = 3.5 * 4.0 * o.B * o.NH * attention_pairs(o.T, o.window) * (o.C / o.NH);
    std::printf("  %-26s %10s %12s %14s %10s\n", "", "time (s)", "GFLOP/s", "peak (MiB)",
                "cpu (s)");
    std::printf("  %-26s %10.3f %12.1f %14.1f %10.3f\n", "tiled (kernels::attention)", tiled.best_s,
                flops / tiled.best_s / 1e9, tiled.peak_mib, tiled.cpu_s);
    if (o.baseline) {
        std::printf("  %-26s %10.3f %12.1f %14.1f %10.3f\n", "baseline T x T", base.best_s,
                    flops / base.best_s / 1e9, base.peak_mib, base.cpu_s);
        std::printf("  tiled vs baseline: %.2fx the speed, %.1fx less peak memory; max relative "
                    "difference out %.1e, dqkv %.1e\n",
                    base.best_s / tiled.best_s, base.peak_mib / std::max(tiled.peak_mib, 1e-3),
                    max_rel_diff(tiled.out, base.out), max_rel_diff(tiled.dqkv, base.dqkv));
    }
    std::printf("  (GFLOP/s counts the pairs computed, T(T+1)/2 causal or W(W+1)/2 + (T-W)W with a "
                "window: forward 2 and backward 5 products of pairs x hd; peak is the resident-set "
                "high-water mark above the inputs%s; cpu is the process's CPU time, all threads)\n",
                tiled.peak_mib < 0 ? ", unavailable here: /proc/self/clear_refs" : "");
    return 0;
}

} // namespace sof::app
