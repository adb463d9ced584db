// Ceiling loops of `superoffload bench adam`: AVX-512 / AVX2 / scalar bodies, ordinary, streaming
// and staged-streaming stores, run-time prefetch distance, optional thread pinning.
#include "bench/bench_ceiling.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/strfmt.h"
#include "core/timer.h"

namespace sof::bench {

namespace {

constexpr int64_t kTile = 8192; // OpenMP work unit, as cpu_adam's tile
constexpr int64_t kStage = 256; // elements per staged burst, as cpu_adam's block
constexpr int64_t kPrefetches[] = {0, 512, 1024, 2048};

using TileFn = void (*)(const CeilingBuffers& b, int64_t o, int64_t n, int64_t pf);

template <bool LOWP> void tile_scalar(const CeilingBuffers& b, int64_t o, int64_t n, int64_t) {
    for (int64_t i = o; i < o + n; i++) {
        float gi = b.g[i];
        float p = b.p[i] + gi;
        b.po[i] = p;
        b.mo[i] = b.m[i] + gi;
        b.vo[i] = b.v[i] + gi;
        if constexpr (LOWP) {
            uint32_t u;
            std::memcpy(&u, &p, 4);
            b.lowp[i] = static_cast<uint16_t>(u >> 16);
        }
    }
}

#if defined(__x86_64__)
#define SOF_CEIL_AVX512 __attribute__((target("avx512f")))
#define SOF_CEIL_AVX2 __attribute__((target("avx2")))

// 16 elements per step; Stores as CeilingStores; staged: results of kStage elements go to L1
// buffers and are then streamed out in one burst per stream.
template <int ST, bool LOWP>
SOF_CEIL_AVX512 void tile_avx512(const CeilingBuffers& b, int64_t o, int64_t n, int64_t pf) {
    alignas(64) float sp[kStage], sm[kStage], sv[kStage];
    alignas(64) uint16_t sl[kStage];
    int64_t end = o + n, i = o;
    for (; i + kStage <= end; i += kStage) {
        for (int64_t j = 0; j < kStage; j += 16) {
            int64_t k = i + j;
            if (pf) {
                _mm_prefetch(reinterpret_cast<const char*>(b.p + k + pf), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(b.g + k + pf), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(b.m + k + pf), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(b.v + k + pf), _MM_HINT_T0);
            }
            __m512 g = _mm512_loadu_ps(b.g + k);
            __m512 p = _mm512_add_ps(_mm512_loadu_ps(b.p + k), g);
            __m512 m = _mm512_add_ps(_mm512_loadu_ps(b.m + k), g);
            __m512 v = _mm512_add_ps(_mm512_loadu_ps(b.v + k), g);
            __m256i l = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(p), 16));
            if constexpr (ST == static_cast<int>(CeilingStores::Ordinary)) {
                _mm512_storeu_ps(b.po + k, p);
                _mm512_storeu_ps(b.mo + k, m);
                _mm512_storeu_ps(b.vo + k, v);
                if constexpr (LOWP) _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.lowp + k), l);
            } else if constexpr (ST == static_cast<int>(CeilingStores::Streaming)) {
                _mm512_stream_ps(b.po + k, p);
                _mm512_stream_ps(b.mo + k, m);
                _mm512_stream_ps(b.vo + k, v);
                if constexpr (LOWP) _mm256_stream_si256(reinterpret_cast<__m256i*>(b.lowp + k), l);
            } else {
                _mm512_store_ps(sp + j, p);
                _mm512_store_ps(sm + j, m);
                _mm512_store_ps(sv + j, v);
                if constexpr (LOWP) _mm256_store_si256(reinterpret_cast<__m256i*>(sl + j), l);
            }
        }
        if constexpr (ST == static_cast<int>(CeilingStores::StreamingStaged)) {
            for (int64_t j = 0; j < kStage; j += 16)
                _mm512_stream_ps(b.po + i + j, _mm512_load_ps(sp + j));
            for (int64_t j = 0; j < kStage; j += 16)
                _mm512_stream_ps(b.mo + i + j, _mm512_load_ps(sm + j));
            for (int64_t j = 0; j < kStage; j += 16)
                _mm512_stream_ps(b.vo + i + j, _mm512_load_ps(sv + j));
            if constexpr (LOWP)
                for (int64_t j = 0; j < kStage; j += 32)
                    _mm512_stream_si512(
                        reinterpret_cast<__m512i*>(b.lowp + i + j),
                        _mm512_load_si512(reinterpret_cast<const __m512i*>(sl + j)));
        }
    }
    if (i < end) tile_scalar<LOWP>(b, i, end - i, 0);
    if constexpr (ST != static_cast<int>(CeilingStores::Ordinary)) _mm_sfence();
}

// 16 elements per step as two 8-lane vectors; same strategies as tile_avx512.
template <int ST, bool LOWP>
SOF_CEIL_AVX2 void tile_avx2(const CeilingBuffers& b, int64_t o, int64_t n, int64_t pf) {
    alignas(64) float sp[kStage], sm[kStage], sv[kStage];
    alignas(64) uint16_t sl[kStage];
    int64_t end = o + n, i = o;
    for (; i + kStage <= end; i += kStage) {
        for (int64_t j = 0; j < kStage; j += 16) {
            int64_t k = i + j;
            if (pf) {
                _mm_prefetch(reinterpret_cast<const char*>(b.p + k + pf), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(b.g + k + pf), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(b.m + k + pf), _MM_HINT_T0);
                _mm_prefetch(reinterpret_cast<const char*>(b.v + k + pf), _MM_HINT_T0);
            }
            __m256 r[6];
            for (int h = 0; h < 2; h++) {
                __m256 g = _mm256_loadu_ps(b.g + k + 8 * h);
                r[h] = _mm256_add_ps(_mm256_loadu_ps(b.p + k + 8 * h), g);
                r[2 + h] = _mm256_add_ps(_mm256_loadu_ps(b.m + k + 8 * h), g);
                r[4 + h] = _mm256_add_ps(_mm256_loadu_ps(b.v + k + 8 * h), g);
            }
            __m256i l = _mm256_permute4x64_epi64(
                _mm256_packus_epi32(_mm256_srli_epi32(_mm256_castps_si256(r[0]), 16),
                                    _mm256_srli_epi32(_mm256_castps_si256(r[1]), 16)),
                0xD8);
            for (int h = 0; h < 2; h++) {
                if constexpr (ST == static_cast<int>(CeilingStores::Ordinary)) {
                    _mm256_storeu_ps(b.po + k + 8 * h, r[h]);
                    _mm256_storeu_ps(b.mo + k + 8 * h, r[2 + h]);
                    _mm256_storeu_ps(b.vo + k + 8 * h, r[4 + h]);
                } else if constexpr (ST == static_cast<int>(CeilingStores::Streaming)) {
                    _mm256_stream_ps(b.po + k + 8 * h, r[h]);
                    _mm256_stream_ps(b.mo + k + 8 * h, r[2 + h]);
                    _mm256_stream_ps(b.vo + k + 8 * h, r[4 + h]);
                } else {
                    _mm256_store_ps(sp + j + 8 * h, r[h]);
                    _mm256_store_ps(sm + j + 8 * h, r[2 + h]);
                    _mm256_store_ps(sv + j + 8 * h, r[4 + h]);
                }
            }
            if constexpr (LOWP) {
                if constexpr (ST == static_cast<int>(CeilingStores::Ordinary))
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.lowp + k), l);
                else if constexpr (ST == static_cast<int>(CeilingStores::Streaming))
                    _mm256_stream_si256(reinterpret_cast<__m256i*>(b.lowp + k), l);
                else
                    _mm256_store_si256(reinterpret_cast<__m256i*>(sl + j), l);
            }
        }
        if constexpr (ST == static_cast<int>(CeilingStores::StreamingStaged)) {
            for (int64_t j = 0; j < kStage; j += 8) {
                _mm256_stream_ps(b.po + i + j, _mm256_load_ps(sp + j));
                _mm256_stream_ps(b.mo + i + j, _mm256_load_ps(sm + j));
                _mm256_stream_ps(b.vo + i + j, _mm256_load_ps(sv + j));
            }
            if constexpr (LOWP)
                for (int64_t j = 0; j < kStage; j += 16)
                    _mm256_stream_si256(
                        reinterpret_cast<__m256i*>(b.lowp + i + j),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(sl + j)));
        }
    }
    if (i < end) tile_scalar<LOWP>(b, i, end - i, 0);
    if constexpr (ST != static_cast<int>(CeilingStores::Ordinary)) _mm_sfence();
}

template <int ST> TileFn pick_x86(bool avx512, bool lowp) {
    if (avx512) return lowp ? tile_avx512<ST, true> : tile_avx512<ST, false>;
    return lowp ? tile_avx2<ST, true> : tile_avx2<ST, false>;
}
#endif

bool has_avx512() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

bool has_avx2() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

TileFn tile_fn(CeilingStores st, bool lowp) {
#if defined(__x86_64__)
    bool avx512 = has_avx512();
    if (avx512 || has_avx2()) {
        switch (st) {
        case CeilingStores::Ordinary:
            return pick_x86<static_cast<int>(CeilingStores::Ordinary)>(avx512, lowp);
        case CeilingStores::Streaming:
            return pick_x86<static_cast<int>(CeilingStores::Streaming)>(avx512, lowp);
        case CeilingStores::StreamingStaged:
            return pick_x86<static_cast<int>(CeilingStores::StreamingStaged)>(avx512, lowp);
        }
    }
#endif
    (void)st;
    return lowp ? tile_scalar<true> : tile_scalar<false>;
}

// CPUs this process may run on.
std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
    return cpus;
}

} // namespace

std::string CeilingStrategy::name() const {
    const char* st = stores == CeilingStores::Ordinary    ? "ordinary"
                     : stores == CeilingStores::Streaming ? "stream"
                                                          : "stream-staged";
    return core::strfmt("%s pf%lld%s", st, static_cast<long long>(prefetch), pin ? " pinned" : "");
}

std::vector<CeilingStrategy> ceiling_strategies() {
    std::vector<CeilingStrategy> out;
    bool can_pin = allowed_cpus().size() > 1;
    for (CeilingStores st :
         {CeilingStores::Ordinary, CeilingStores::Streaming, CeilingStores::StreamingStaged})
        for (int64_t pf : kPrefetches)
            for (bool pin : {false, true})
                if (!pin || can_pin) out.push_back({st, pf, pin});
    return out;
}

const char* ceiling_isa() {
    if (has_avx512()) return "avx512";
    if (has_avx2()) return "avx2";
    return "scalar";
}

double run_ceiling(const CeilingBuffers& b, const CeilingStrategy& s, int threads) {
    TileFn fn = tile_fn(s.stores, b.lowp != nullptr);
    int64_t ntiles = (b.n + kTile - 1) / kTile;
    std::vector<int> cpus = s.pin ? allowed_cpus() : std::vector<int>{};
    core::Timer t;
#pragma omp parallel num_threads(threads)
    {
        cpu_set_t old;
        bool pinned = false;
        if (!cpus.empty() && pthread_getaffinity_np(pthread_self(), sizeof old, &old) == 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpus[static_cast<size_t>(omp_get_thread_num()) % cpus.size()], &one);
            pinned = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
        }
#pragma omp for schedule(static)
        for (int64_t k = 0; k < ntiles; k++) {
            int64_t o = k * kTile;
            fn(b, o, std::min(kTile, b.n - o), s.prefetch);
        }
        if (pinned) pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    }
    return t.seconds();
}

} // namespace sof::bench
