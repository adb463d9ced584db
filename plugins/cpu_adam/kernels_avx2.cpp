// cpu_adam AVX2+FMA variant: 16 elements per iteration (two 8-lane vectors), scalar tail.
// Compiled with function target attributes only (no global -mavx2), so the plugin loads anywhere.
#include <immintrin.h>

#include <cstring>

#include "cpu_adam_kernels.h"

#define SOF_AVX2 __attribute__((target("avx2,fma,f16c")))
#define SOF_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace sof::cpu_adam {

namespace {

// Broadcast constants of one call.
struct V8Consts {
    __m256 scale, b1, b2, omb1, omb2, eps, wd, decay, nss, rbc2;
};

SOF_AVX2_INLINE V8Consts v8_consts(const StepConsts& c) {
    return {_mm256_set1_ps(c.scale), _mm256_set1_ps(c.b1),    _mm256_set1_ps(c.b2),
            _mm256_set1_ps(c.omb1),  _mm256_set1_ps(c.omb2),  _mm256_set1_ps(c.eps),
            _mm256_set1_ps(c.wd),    _mm256_set1_ps(c.decay), _mm256_set1_ps(c.nss),
            _mm256_set1_ps(c.rbc2)};
}

// 8 grads starting at element i, widened to fp32 (exact).
template <int GD> SOF_AVX2_INLINE __m256 load_grad8(const void* g, int64_t i) {
    if constexpr (GD == SOF_DTYPE_F32) {
        return _mm256_loadu_ps(static_cast<const float*>(g) + i);
    } else {
        __m128i h =
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(g) + i));
        if constexpr (GD == SOF_DTYPE_BF16)
            return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        else
            return _mm256_cvtph_ps(h);
    }
}

// fp32 -> bf16 bits in the low 16 bits of each 32-bit lane, round to nearest even, NaN kept
// (quiet, sign and top payload bits kept), exactly core::f32_to_bf16.
SOF_AVX2_INLINE __m256i bf16_bits8(__m256 x) {
    __m256i u = _mm256_castps_si256(x);
    __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256i qnan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(qnan), nan));
}

// 16 params -> 16 low-precision values (32 bytes), element order kept.
template <int LD> SOF_AVX2_INLINE __m256i lowp16(__m256 a, __m256 b) {
    if constexpr (LD == SOF_DTYPE_BF16) {
        __m256i pk = _mm256_packus_epi32(bf16_bits8(a), bf16_bits8(b));
        return _mm256_permute4x64_epi64(pk, 0xD8);
    } else {
        __m128i ha = _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m128i hb = _mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        return _mm256_set_m128i(hb, ha);
    }
}

// fp64 sum of squares of 8 scaled grads into two accumulators (the fallback of a block).
SOF_AVX2_INLINE void sumsq8_f64(__m256 g, __m256d& lo, __m256d& hi) {
    __m256d dl = _mm256_cvtps_pd(_mm256_castps256_ps128(g));
    __m256d dh = _mm256_cvtps_pd(_mm256_extractf128_ps(g, 1));
    lo = _mm256_fmadd_pd(dl, dl, lo);
    hi = _mm256_fmadd_pd(dh, dh, hi);
}

SOF_AVX2_INLINE double hsum(__m256d a, __m256d b, __m256d c, __m256d d) {
    __m256d s = _mm256_add_pd(_mm256_add_pd(a, b), _mm256_add_pd(c, d));
    __m128d x = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));
}

// Lanes of x that are 0 or within [kSumLo, kSumHi), as an 8-bit mask.
SOF_AVX2_INLINE int sum_ok8(__m256 x) {
    __m256 in = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(kSumLo), _CMP_GE_OQ),
                              _mm256_cmp_ps(x, _mm256_set1_ps(kSumHi), _CMP_LT_OQ));
    return _mm256_movemask_ps(_mm256_or_ps(in, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ)));
}

// Adds one block's fp32 lane sums (a: elements 0-7 of every 16, b: 8-15) into the fp64
// accumulators s[0..3]; a block with a lane outside {0} u [kSumLo, kSumHi) is summed again in
// fp64 from its grads (see kSumBlock in cpu_adam_kernels.h).
template <int GD>
SOF_AVX2_INLINE void add_block_sum(__m256 a, __m256 b, const void* g, int64_t i0, int64_t len,
                                   __m256 scale, __m256d (&s)[4]) {
    if (__builtin_expect((sum_ok8(a) & sum_ok8(b)) == 0xff, 1)) {
        s[0] = _mm256_add_pd(s[0], _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
        s[1] = _mm256_add_pd(s[1], _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
        s[2] = _mm256_add_pd(s[2], _mm256_cvtps_pd(_mm256_castps256_ps128(b)));
        s[3] = _mm256_add_pd(s[3], _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)));
        return;
    }
    for (int64_t j = 0; j < len; j += 16) {
        sumsq8_f64(_mm256_mul_ps(load_grad8<GD>(g, i0 + j), scale), s[0], s[1]);
        sumsq8_f64(_mm256_mul_ps(load_grad8<GD>(g, i0 + j + 8), scale), s[2], s[3]);
    }
}

// 16 moments from element i of a state buffer of dtype SD as two 8-lane fp32 vectors (bf16 widened
// exactly).
template <int SD>
SOF_AVX2_INLINE void load_state16(const void* x, int64_t i, __m256& a, __m256& b) {
    if constexpr (SD == SOF_DTYPE_F32) {
        a = _mm256_loadu_ps(static_cast<const float*>(x) + i);
        b = _mm256_loadu_ps(static_cast<const float*>(x) + i + 8);
    } else {
        a = load_grad8<SOF_DTYPE_BF16>(x, i);
        b = load_grad8<SOF_DTYPE_BF16>(x, i + 8);
    }
}

// Stores 16 moments at element j of a state buffer of dtype SD (bf16: rounded to nearest even).
template <int SD> SOF_AVX2_INLINE void store_state16(void* x, int64_t j, __m256 a, __m256 b) {
    if constexpr (SD == SOF_DTYPE_F32) {
        _mm256_storeu_ps(static_cast<float*>(x) + j, a);
        _mm256_storeu_ps(static_cast<float*>(x) + j + 8, b);
    } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(x) + j),
                            lowp16<SOF_DTYPE_BF16>(a, b));
    }
}

// One block of len (multiple of 16, <= kSumBlock) elements from i0 in a single pass (step_elem's
// operations on two 8-lane vectors), stored to po/mo/vo/lowp indexed from 0 (the destinations or
// L1 staging buffers; mo, vo of the state dtype SD); the fp32 lane sums of the squared grads come
// back in sa, sb.
template <int GD, int LD, int SD, bool WD, bool L2>
SOF_AVX2_INLINE void block16(const V8Consts& k, const Tile& t, int64_t i0, int64_t len, float* po,
                             void* mo, void* vo, uint16_t* lowp, __m256& sa, __m256& sb) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    for (int64_t j = 0; j < len; j += 16) {
        int64_t i = i0 + j;
        prefetch_inputs(t, i);
        __m256 g0 = _mm256_mul_ps(load_grad8<GD>(t.g, i), k.scale);
        __m256 g1 = _mm256_mul_ps(load_grad8<GD>(t.g, i + 8), k.scale);
        s0 = _mm256_fmadd_ps(g0, g0, s0);
        s1 = _mm256_fmadd_ps(g1, g1, s1);
        __m256 p0 = _mm256_loadu_ps(t.p + i), p1 = _mm256_loadu_ps(t.p + i + 8);
        if constexpr (WD && L2) {
            g0 = _mm256_fmadd_ps(k.wd, p0, g0);
            g1 = _mm256_fmadd_ps(k.wd, p1, g1);
        }
        if constexpr (WD && !L2) {
            p0 = _mm256_mul_ps(p0, k.decay);
            p1 = _mm256_mul_ps(p1, k.decay);
        }
        __m256 mi0, mi1, vi0, vi1;
        load_state16<SD>(t.m, i, mi0, mi1);
        load_state16<SD>(t.v, i, vi0, vi1);
        __m256 m0 = _mm256_fmadd_ps(k.b1, mi0, _mm256_mul_ps(k.omb1, g0));
        __m256 m1 = _mm256_fmadd_ps(k.b1, mi1, _mm256_mul_ps(k.omb1, g1));
        __m256 v0 = _mm256_fmadd_ps(k.b2, vi0, _mm256_mul_ps(_mm256_mul_ps(k.omb2, g0), g0));
        __m256 v1 = _mm256_fmadd_ps(k.b2, vi1, _mm256_mul_ps(_mm256_mul_ps(k.omb2, g1), g1));
        __m256 d0 = _mm256_fmadd_ps(_mm256_sqrt_ps(v0), k.rbc2, k.eps);
        __m256 d1 = _mm256_fmadd_ps(_mm256_sqrt_ps(v1), k.rbc2, k.eps);
        p0 = _mm256_fmadd_ps(k.nss, _mm256_div_ps(m0, d0), p0);
        p1 = _mm256_fmadd_ps(k.nss, _mm256_div_ps(m1, d1), p1);
        _mm256_storeu_ps(po + j, p0);
        _mm256_storeu_ps(po + j + 8, p1);
        store_state16<SD>(mo, j, m0, m1);
        store_state16<SD>(vo, j, v0, v1);
        if constexpr (LD != -1)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(lowp + j), lowp16<LD>(p0, p1));
    }
    sa = s0;
    sb = s1;
}

// Streams `bytes` (multiple of 64) from an L1-resident staging buffer to 32-byte aligned dst.
SOF_AVX2_INLINE void stream_out(void* dst, const void* src, int64_t bytes) {
    auto* d = static_cast<__m256i*>(dst);
    auto* s = static_cast<const __m256i*>(src);
    for (int64_t j = 0; j < bytes / 32; j += 2) {
        _mm256_stream_si256(d + j, _mm256_load_si256(s + j));
        _mm256_stream_si256(d + j + 1, _mm256_load_si256(s + j + 1));
    }
}

// Separate outputs (NT) are staged per block in L1 and streamed out in dense bursts:
// interleaving streaming stores with the arithmetic leaves the write-combining buffers half used.
template <int GD, int LD, int SD, bool NT, bool WD, bool L2>
SOF_AVX2 double step_tile_impl(const StepConsts& c, const Tile& t) {
    V8Consts k = v8_consts(c);
    __m256d s[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
    constexpr int64_t es = SD == SOF_DTYPE_F32 ? 4 : 2; // bytes per moment
    int64_t n16 = t.n & ~int64_t{15};
    uint16_t* lw = static_cast<uint16_t*>(t.lowp);
    char* mo = static_cast<char*>(t.mo);
    char* vo = static_cast<char*>(t.vo);
    for (int64_t i = 0; i < n16; i += kSumBlock) {
        int64_t len = n16 - i < kSumBlock ? n16 - i : kSumBlock;
        __m256 sa, sb;
        if constexpr (NT) {
            alignas(64) float bp[kSumBlock], bm[kSumBlock], bv[kSumBlock];
            alignas(64) uint16_t bl[kSumBlock];
            block16<GD, LD, SD, WD, L2>(k, t, i, len, bp, bm, bv, bl, sa, sb);
            int64_t full = len & ~int64_t{31}; // whole 64-byte lines of the bf16 copy too
            stream_out(t.po + i, bp, 4 * full);
            stream_out(mo + i * es, bm, es * full);
            stream_out(vo + i * es, bv, es * full);
            if constexpr (LD != -1) stream_out(lw + i, bl, 2 * full);
            for (int64_t j = full; j < len; j++) {
                t.po[i + j] = bp[j];
                std::memcpy(mo + (i + j) * es, reinterpret_cast<char*>(bm) + j * es, es);
                std::memcpy(vo + (i + j) * es, reinterpret_cast<char*>(bv) + j * es, es);
                if constexpr (LD != -1) lw[i + j] = bl[j];
            }
        } else {
            block16<GD, LD, SD, WD, L2>(k, t, i, len, t.po + i, mo + i * es, vo + i * es,
                                        LD != -1 ? lw + i : nullptr, sa, sb);
        }
        add_block_sum<GD>(sa, sb, t.g, i, len, k.scale, s);
    }
    double sumsq = hsum(s[0], s[1], s[2], s[3]);
    for (int64_t i = n16; i < t.n; i++) {
        float graw = optim::adam_ref_grad(t.g, GD, i);
        float gs = graw * c.scale;
        sumsq += static_cast<double>(gs) * static_cast<double>(gs);
        step_tile_elem(c, t, i, graw);
    }
    if constexpr (NT) _mm_sfence();
    return sumsq;
}

template <int GD, int LD, int SD, bool NT>
SOF_AVX2 double step_tile_mode(const StepConsts& c, const Tile& t) {
    if (c.wd == 0.0f) return step_tile_impl<GD, LD, SD, NT, false, false>(c, t);
    if (c.l2) return step_tile_impl<GD, LD, SD, NT, true, true>(c, t);
    return step_tile_impl<GD, LD, SD, NT, true, false>(c, t);
}

template <int GD, int LD, int SD>
SOF_AVX2 double step_tile_nt(const StepConsts& c, const Tile& t, bool nt) {
    return nt ? step_tile_mode<GD, LD, SD, true>(c, t) : step_tile_mode<GD, LD, SD, false>(c, t);
}

template <int GD, int LD>
SOF_AVX2 double step_tile_state(const StepConsts& c, const Tile& t, bool nt) {
    if (t.sd == SOF_DTYPE_BF16) return step_tile_nt<GD, LD, SOF_DTYPE_BF16>(c, t, nt);
    return step_tile_nt<GD, LD, SOF_DTYPE_F32>(c, t, nt);
}

template <int GD> SOF_AVX2 double step_tile_lowp(const StepConsts& c, const Tile& t, bool nt) {
    if (!t.lowp) return step_tile_state<GD, -1>(c, t, nt);
    if (t.ld == SOF_DTYPE_F16) return step_tile_state<GD, SOF_DTYPE_F16>(c, t, nt);
    return step_tile_state<GD, SOF_DTYPE_BF16>(c, t, nt);
}

SOF_AVX2 double step_tile_avx2(const StepConsts& c, const Tile& t, bool nt) {
    if (t.gd == SOF_DTYPE_BF16) return step_tile_lowp<SOF_DTYPE_BF16>(c, t, nt);
    if (t.gd == SOF_DTYPE_F16) return step_tile_lowp<SOF_DTYPE_F16>(c, t, nt);
    return step_tile_lowp<SOF_DTYPE_F32>(c, t, nt);
}

// The step's sum without the step: same blocks, same lane sums, same fallback, same order.
template <int GD> SOF_AVX2 double stats_impl(const void* g, int64_t n, float scale) {
    __m256 sc = _mm256_set1_ps(scale);
    __m256d s[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
    int64_t n16 = n & ~int64_t{15};
    for (int64_t i = 0; i < n16; i += kSumBlock) {
        int64_t len = n16 - i < kSumBlock ? n16 - i : kSumBlock;
        __m256 a = _mm256_setzero_ps(), b = a;
        for (int64_t j = 0; j < len; j += 16) {
            __m256 x0 = _mm256_mul_ps(load_grad8<GD>(g, i + j), sc);
            __m256 x1 = _mm256_mul_ps(load_grad8<GD>(g, i + j + 8), sc);
            a = _mm256_fmadd_ps(x0, x0, a);
            b = _mm256_fmadd_ps(x1, x1, b);
        }
        add_block_sum<GD>(a, b, g, i, len, sc, s);
    }
    double sumsq = hsum(s[0], s[1], s[2], s[3]);
    for (int64_t i = n16; i < n; i++) {
        float gs = optim::adam_ref_grad(g, GD, i) * scale;
        sumsq += static_cast<double>(gs) * static_cast<double>(gs);
    }
    return sumsq;
}

SOF_AVX2 double stats_tile_avx2(const void* g, int32_t gd, int64_t n, float scale) {
    if (gd == SOF_DTYPE_BF16) return stats_impl<SOF_DTYPE_BF16>(g, n, scale);
    if (gd == SOF_DTYPE_F16) return stats_impl<SOF_DTYPE_F16>(g, n, scale);
    return stats_impl<SOF_DTYPE_F32>(g, n, scale);
}

// Q8 moments or bf16 master: the scalar element code (step_q_elem, the same for every variant),
// with this variant's statistics (equal to its grad_stats).
SOF_AVX2 double step_q_avx2(const StepConsts& c, const Tile& t, bool) {
    double s = stats_tile_avx2(t.g, t.gd, t.n, c.scale);
    step_tile_q_scalar(c, t);
    return s;
}

} // namespace

KernelSet avx2_kernels() {
    return {"avx2", step_tile_avx2, stats_tile_avx2, step_q_avx2};
}

} // namespace sof::cpu_adam
