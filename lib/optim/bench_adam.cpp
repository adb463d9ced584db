// Adam kernel benchmark: memory ceiling (Adam's streams with trivial arithmetic) and the plugin
// step, in place and with separate outputs, measured in one run with the same threads.
#include "optim/bench_adam.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/error.h"
#include "core/strfmt.h"
#include "core/timer.h"

namespace sof::optim {

namespace {

constexpr int64_t kTile = 8192; // same tile as cpu_adam: the unit of OpenMP work
// Software prefetch distance (elements) of the ceiling's input streams, as cpu_adam's default
// (SOF_CPU_ADAM_PREFETCH): without it a plugin that prefetches beats the "ceiling".
constexpr int64_t kPrefetch = 1024;

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

double mem_available_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    double kb = 0;
    std::string unit;
    while (f >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024.0;
    return 0;
}

// The buffers of one benchmark: inputs (set A), separate outputs (set B), bf16 copy.
struct BenchBuffers {
    int64_t n = 0;
    Mem p, g, m, v, po, mo, vo, lowp;
    float* P() { return static_cast<float*>(p.get()); }
    float* G() { return static_cast<float*>(g.get()); }
    float* M() { return static_cast<float*>(m.get()); }
    float* V() { return static_cast<float*>(v.get()); }
    float* PO() { return static_cast<float*>(po.get()); }
    float* MO() { return static_cast<float*>(mo.get()); }
    float* VO() { return static_cast<float*>(vo.get()); }
    uint16_t* L() { return static_cast<uint16_t*>(lowp.get()); }
};

// ---- ceiling: read p, g, m, v; write p, m, v (+ 2-byte copy); trivial arithmetic ----

#if defined(__x86_64__)
#define SOF_BENCH_AVX2 __attribute__((target("avx2")))

template <bool NT, bool LOWP>
SOF_BENCH_AVX2 void ceiling_tile_avx2(const float* p, const float* g, const float* m,
                                      const float* v, float* po, float* mo, float* vo, uint16_t* l,
                                      int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm_prefetch(reinterpret_cast<const char*>(p + i + kPrefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(g + i + kPrefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(m + i + kPrefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(v + i + kPrefetch), _MM_HINT_T0);
        __m256 g0 = _mm256_loadu_ps(g + i), g1 = _mm256_loadu_ps(g + i + 8);
        __m256 p0 = _mm256_add_ps(_mm256_loadu_ps(p + i), g0);
        __m256 p1 = _mm256_add_ps(_mm256_loadu_ps(p + i + 8), g1);
        __m256 m0 = _mm256_add_ps(_mm256_loadu_ps(m + i), g0);
        __m256 m1 = _mm256_add_ps(_mm256_loadu_ps(m + i + 8), g1);
        __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(v + i), g0);
        __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(v + i + 8), g1);
        if constexpr (NT) {
            _mm256_stream_ps(po + i, p0);
            _mm256_stream_ps(po + i + 8, p1);
            _mm256_stream_ps(mo + i, m0);
            _mm256_stream_ps(mo + i + 8, m1);
            _mm256_stream_ps(vo + i, v0);
            _mm256_stream_ps(vo + i + 8, v1);
        } else {
            _mm256_storeu_ps(po + i, p0);
            _mm256_storeu_ps(po + i + 8, p1);
            _mm256_storeu_ps(mo + i, m0);
            _mm256_storeu_ps(mo + i + 8, m1);
            _mm256_storeu_ps(vo + i, v0);
            _mm256_storeu_ps(vo + i + 8, v1);
        }
        if constexpr (LOWP) { // truncating bf16: the cheapest 2-byte copy
            __m256i h = _mm256_packus_epi32(_mm256_srli_epi32(_mm256_castps_si256(p0), 16),
                                            _mm256_srli_epi32(_mm256_castps_si256(p1), 16));
            h = _mm256_permute4x64_epi64(h, 0xD8);
            if constexpr (NT)
                _mm256_stream_si256(reinterpret_cast<__m256i*>(l + i), h);
            else
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(l + i), h);
        }
    }
    for (; i < n; i++) {
        po[i] = p[i] + g[i];
        mo[i] = m[i] + g[i];
        vo[i] = v[i] + g[i];
        if constexpr (LOWP) {
            uint32_t u;
            std::memcpy(&u, &po[i], 4);
            l[i] = static_cast<uint16_t>(u >> 16);
        }
    }
    if constexpr (NT) _mm_sfence();
}
#endif

template <bool LOWP>
void ceiling_tile_plain(const float* p, const float* g, const float* m, const float* v, float* po,
                        float* mo, float* vo, uint16_t* l, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        po[i] = p[i] + g[i];
        mo[i] = m[i] + g[i];
        vo[i] = v[i] + g[i];
        if constexpr (LOWP) {
            uint32_t u;
            std::memcpy(&u, &po[i], 4);
            l[i] = static_cast<uint16_t>(u >> 16);
        }
    }
}

using CeilingFn = void (*)(const float*, const float*, const float*, const float*, float*, float*,
                           float*, uint16_t*, int64_t);

CeilingFn ceiling_fn(bool separate, bool lowp) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        if (separate) return lowp ? ceiling_tile_avx2<true, true> : ceiling_tile_avx2<true, false>;
        return lowp ? ceiling_tile_avx2<false, true> : ceiling_tile_avx2<false, false>;
    }
#endif
    (void)separate;
    return lowp ? ceiling_tile_plain<true> : ceiling_tile_plain<false>;
}

double run_ceiling(BenchBuffers& b, bool separate, bool lowp, int threads) {
    CeilingFn fn = ceiling_fn(separate, lowp);
    float* po = separate ? b.PO() : b.P();
    float* mo = separate ? b.MO() : b.M();
    float* vo = separate ? b.VO() : b.V();
    int64_t ntiles = (b.n + kTile - 1) / kTile;
    core::Timer t;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t k = 0; k < ntiles; k++) {
        int64_t o = k * kTile, len = std::min(kTile, b.n - o);
        fn(b.P() + o, b.G() + o, b.M() + o, b.V() + o, po + o, mo + o, vo + o,
           lowp ? b.L() + o : nullptr, len);
    }
    return t.seconds();
}

double run_step(Optimizer& opt, BenchBuffers& b, bool separate, bool lowp) {
    sof_adam_slice s = make_slice(b.n, b.P(), b.G(), SOF_DTYPE_F32, b.M(), b.V());
    if (separate) {
        s.param_out = b.PO();
        s.exp_avg_out = b.MO();
        s.exp_avg_sq_out = b.VO();
    }
    if (lowp) {
        s.lowp_out = b.L();
        s.lowp_dtype = SOF_DTYPE_BF16;
    }
    sof_adam_hparams hp =
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
        }
    }
}

} // namespace

BenchAdamOptions parse_bench_adam_args(int argc, char** argv) {
    BenchAdamOptions o;
    const char* usage = "usage: superoffload bench adam --params N [--plugin NAME] "
                        "[--plugin-dir DIR] [--threads T] [--bf16-copy on|off] [--reps R] [--json]";
    if (argc < 1 || std::strcmp(argv[0], "adam") != 0)
        SOF_FAIL(Usage, "bench: expected the benchmark name 'adam' first\n%s", usage);
    auto value = [&](int& i) -> std::string {
        if (i + 1 >= argc) SOF_FAIL(Usage, "bench adam: %s needs a value\n%s", argv[i], usage);
        return argv[++i];
    };
    auto as_int = [&](const std::string& flag, const std::string& s, int64_t lo) -> int64_t {
        char* end = nullptr;
        double d =
            std::strtod(s.c_str(), &end); // accepts 268435456, 2.68e8 and 256M (binary K/M/G)
        if (end && end != s.c_str() && end[0] && !end[1]) {
            const char* units = "KMG";
            for (int u = 0; u < 3; u++)
                if (*end == units[u] || *end == units[u] + ('a' - 'A')) {
                    d *= static_cast<double>(int64_t{1} << (10 * (u + 1)));
                    end++;
                    break;
                }
        }
        if (!end || *end || d < static_cast<double>(lo) || d > 9e15 || d != static_cast<int64_t>(d))
            SOF_FAIL(Usage,
                     "bench adam: %s '%s' must be an integer >= %lld (K, M, G suffixes allowed)",
                     flag.c_str(), s.c_str(), static_cast<long long>(lo));
        return static_cast<int64_t>(d);
    };
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--params") {
            o.params = as_int(a, value(i), 1);
        } else if (a == "--plugin") {
            o.plugin = value(i);
        } else if (a == "--plugin-dir") {
            o.plugin_dir = value(i);
        } else if (a == "--threads") {
            o.threads = static_cast<int>(as_int(a, value(i), 1));
        } else if (a == "--reps") {
            o.reps = static_cast<int>(as_int(a, value(i), 1));
        } else if (a == "--bf16-copy") {
            std::string v = value(i);
            if (v != "on" && v != "off")
                SOF_FAIL(Usage, "bench adam: --bf16-copy '%s' must be on or off", v.c_str());
            o.lowp_copy = v == "on";
        } else if (a == "--json") {
            o.json = true;
        } else {
            SOF_FAIL(Usage, "bench adam: unknown argument '%s'\n%s", a.c_str(), usage);
        }
    }
    if (o.params <= 0) SOF_FAIL(Usage, "bench adam: --params N is required\n%s", usage);
    return o;
}

BenchAdamReport bench_adam(const BenchAdamOptions& opt) {
    BenchAdamReport r;
    r.params = opt.params;
    r.threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
    r.lowp_copy = opt.lowp_copy;
    r.bytes_per_param = opt.lowp_copy ? 30.0 : 28.0;
    // ~1 s of traffic per measurement at 30 GB/s, at least 3 and at most 50 repetitions
    r.reps = opt.reps > 0
                 ? opt.reps
                 : static_cast<int>(std::clamp(3e10 / (r.bytes_per_param * opt.params), 3.0, 50.0));

    double need = 30.0 * static_cast<double>(opt.params);
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
    b.p = alloc_buffer(f4, "params");
    b.g = alloc_buffer(f4, "grads");
    b.m = alloc_buffer(f4, "exp_avg");
    b.v = alloc_buffer(f4, "exp_avg_sq");
    b.po = alloc_buffer(f4, "params (separate output)");
    b.mo = alloc_buffer(f4, "exp_avg (separate output)");
    b.vo = alloc_buffer(f4, "exp_avg_sq (separate output)");
    b.lowp = alloc_buffer(2 * b.n, "bf16 copy");
    init_buffers(b, r.threads);

    for (bool separate : {false, true}) {
        BenchModeResult m;
        m.mode = separate ? "separate" : "in_place";
        // warm-up pass of each, then alternate ceiling and step; keep the best of each
        run_ceiling(b, separate, opt.lowp_copy, r.threads);
        run_step(*o, b, separate, opt.lowp_copy);
        m.ceiling_seconds = m.step_seconds = 1e30;
        for (int k = 0; k < r.reps; k++) {
            m.ceiling_seconds =
                std::min(m.ceiling_seconds, run_ceiling(b, separate, opt.lowp_copy, r.threads));
            m.step_seconds = std::min(m.step_seconds, run_step(*o, b, separate, opt.lowp_copy));
        }
        double n = static_cast<double>(opt.params);
        m.ceiling_params_per_s = n / m.ceiling_seconds;
        m.params_per_s = n / m.step_seconds;
        m.ceiling_gbps = m.ceiling_params_per_s * r.bytes_per_param / 1e9;
        m.gbps = m.params_per_s * r.bytes_per_param / 1e9;
        m.fraction_of_ceiling = m.params_per_s / m.ceiling_params_per_s;
        r.modes.push_back(m);
    }
    return r;
}

std::string bench_adam_text(const BenchAdamReport& r) {
    std::string s = core::strfmt("bench adam: %lld params, plugin %s (%s), %d threads, bf16 copy "
                                 "%s (%.0f B/param), best of %d\n",
                                 static_cast<long long>(r.params), r.plugin.name.c_str(),
                                 r.plugin.variant.c_str(), r.threads, r.lowp_copy ? "on" : "off",
                                 r.bytes_per_param, r.reps);
    s += core::strfmt("%-10s %18s %10s %18s %10s %10s\n", "mode", "ceiling Gparam/s", "GB/s",
                      "plugin Gparam/s", "GB/s", "fraction");
    for (const auto& m : r.modes)
        s += core::strfmt("%-10s %18.3f %10.1f %18.3f %10.1f %9.1f%%\n", m.mode.c_str(),
                          m.ceiling_params_per_s / 1e9, m.ceiling_gbps, m.params_per_s / 1e9,
                          m.gbps, 100.0 * m.fraction_of_ceiling);
    return s;
}

std::string bench_adam_json(const BenchAdamReport& r) {
    std::string s = core::strfmt(
        "{\"benchmark\": \"adam\", \"params\": %lld, \"plugin\": \"%s\", \"variant\": \"%s\", "
        "\"threads\": %d, \"bf16_copy\": %s, \"bytes_per_param\": %.0f, \"reps\": %d, \"modes\": {",
        static_cast<long long>(r.params), r.plugin.name.c_str(), r.plugin.variant.c_str(),
        r.threads, r.lowp_copy ? "true" : "false", r.bytes_per_param, r.reps);
    for (size_t i = 0; i < r.modes.size(); i++) {
        const auto& m = r.modes[i];
        s += core::strfmt(
            "%s\"%s\": {\"ceiling_params_per_s\": %.6g, \"ceiling_gbps\": %.4g, "
            "\"ceiling_seconds\": %.6g, \"params_per_s\": %.6g, \"gbps\": %.4g, \"seconds\": %.6g, "
            "\"fraction_of_ceiling\": %.4f}",
            i ? ", " : "", m.mode.c_str(), m.ceiling_params_per_s, m.ceiling_gbps,
            m.ceiling_seconds, m.params_per_s, m.gbps, m.step_seconds, m.fraction_of_ceiling);
    }
    s += "}}\n";
    return s;
}

} // namespace sof::optim
