// cpu_adam AVX2+FMA variant: 16 elements per iteration (two 8-lane vectors), scalar tail.
// Compiled with function target attributes only (no global -mavx2), so the plugin loads anywhere.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "dispatch.h"

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

// Weight decay on two 8-lane groups: L2 adds wd * p to the grads, AdamW scales p by decay.
template <bool WD, bool L2>
SOF_AVX2_INLINE void weight_decay16(const V8Consts& k, __m256& p0, __m256& p1, __m256& g0,
                                    __m256& g1) {
    if constexpr (WD && L2) {
        g0 = _mm256_fmadd_ps(k.wd, p0, g0);
        g1 = _mm256_fmadd_ps(k.wd, p1, g1);
    }
    if constexpr (WD && !L2) {
        p0 = _mm256_mul_ps(p0, k.decay);
        p1 = _mm256_mul_ps(p1, k.decay);
    }
}

// One block of len (multiple of 16, <= kSumBlock) elements from i0 in a single pass (step_elem's
// operations on two 8-lane vectors), stored to po/mo/vo/lowp indexed from 0 (the destinations or
// L1 staging buffers; mo, vo of the state dtype SD); the fp32 lane sums of the squared grads come
// back in sa, sb.
// The Adam update of 16 lanes (two vectors) after weight decay: m, v in place from their old
// values and the scaled grads g, then p += -step_size * m / (sqrt(v) / bc2_sqrt + eps).
SOF_AVX2_INLINE void adam16(const V8Consts& k, __m256 g0, __m256 g1, __m256& m0, __m256& m1,
                            __m256& v0, __m256& v1, __m256& p0, __m256& p1) {
    m0 = _mm256_fmadd_ps(k.b1, m0, _mm256_mul_ps(k.omb1, g0));
    m1 = _mm256_fmadd_ps(k.b1, m1, _mm256_mul_ps(k.omb1, g1));
    v0 = _mm256_fmadd_ps(k.b2, v0, _mm256_mul_ps(_mm256_mul_ps(k.omb2, g0), g0));
    v1 = _mm256_fmadd_ps(k.b2, v1, _mm256_mul_ps(_mm256_mul_ps(k.omb2, g1), g1));
    const __m256 d0 = _mm256_fmadd_ps(_mm256_sqrt_ps(v0), k.rbc2, k.eps);
    const __m256 d1 = _mm256_fmadd_ps(_mm256_sqrt_ps(v1), k.rbc2, k.eps);
    p0 = _mm256_fmadd_ps(k.nss, _mm256_div_ps(m0, d0), p0);
    p1 = _mm256_fmadd_ps(k.nss, _mm256_div_ps(m1, d1), p1);
}

template <int GD, int LD, int SD, bool WD, bool L2>
SOF_AVX2_INLINE void block16(const V8Consts& k, const Tile& t, int64_t i0, int64_t len, float* po,
                             void* mo, void* vo, uint16_t* lowp, __m256& sa, __m256& sb) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    for (int64_t j = 0; j < len; j += 16) {
        int64_t i = i0 + j;
        prefetch_inputs<GD, SOF_DTYPE_F32, SD == SOF_DTYPE_F32 ? 4 : 2>(t, i);
        __m256 g0 = _mm256_mul_ps(load_grad8<GD>(t.g, i), k.scale);
        __m256 g1 = _mm256_mul_ps(load_grad8<GD>(t.g, i + 8), k.scale);
        s0 = _mm256_fmadd_ps(g0, g0, s0);
        s1 = _mm256_fmadd_ps(g1, g1, s1);
        __m256 p0 = _mm256_loadu_ps(t.p + i), p1 = _mm256_loadu_ps(t.p + i + 8);
        weight_decay16<WD, L2>(k, p0, p1, g0, g1);
        __m256 m0, m1, v0, v1; // the old moments, then the new
        load_state16<SD>(t.m, i, m0, m1);
        load_state16<SD>(t.v, i, v0, v1);
        adam16(k, g0, g1, m0, m1, v0, v1, p0, p1);
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

// The plain tile kernel as dispatch.h calls it (PD: fp32 always).
struct Avx2Tile {
    template <int GD, int LD, int SD, int PD, bool NT, bool WD, bool L2>
    static double run(const StepConsts& c, const Tile& t) {
        return step_tile_impl<GD, LD, SD, NT, WD, L2>(c, t);
    }
};

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

// ---- Q8 moments, fp32 master: dequantize -> step_elem -> requantize inside the kernel ----
// The same operations as the scalar path (step_tile_q_scalar: optim::q_value, step_elem,
// optim::q_quantize_block), each an exact integer op or the same IEEE fp32 op per lane, so the
// codes, scales, params and copies are bitwise the scalar variant's.

// Decoding a Q8 slot: code c (magnitude e << mbits | f) shifted left by 23 - mbits is the bit
// pattern of an fp32 x with exponent field e and mantissa f: 2^(e-127) * (1 + f/8) for e > 0 and
// the fp32 subnormal f * 2^-149 * 2^20 = f * 2^-129 for e = 0; times 2^(127-bias) that is exactly
// optim::q_decode(c) in both ranges (m's sign bit moved to bit 31). The element is decode(c) *
// scale, one rounding: x * (scale * 2^(127-bias)) is the same real product, so the same fp32
// whenever scale * 2^(127-bias) is exact, i.e. does not overflow (|scale| < 2^(1+bias), NaN/Inf
// and 0 included); a block with a larger scale multiplies twice (x * 2^(127-bias), exact, then
// * scale). The subnormal x needs MXCSR's DAZ off (dispatch_step checks).
struct Q8Factor {
    __m256 f;   // scale * 2^(127-bias), or 2^(127-bias) when twice
    __m256 s;   // scale (twice only)
    bool twice; // scale * 2^(127-bias) overflows
};

template <bool SIGNED> SOF_AVX2_INLINE Q8Factor q8_factor(float scale) {
    const Q8FactorScalars q = q8_factor_scalars<SIGNED>(scale);
    return {_mm256_set1_ps(q.f), _mm256_set1_ps(q.s), q.twice};
}

// The fp32 x of 8 codes from element i (see Q8Factor): decode(c) = x * 2^(127-bias) exactly.
template <bool SIGNED> SOF_AVX2_INLINE __m256 q8_bits8(const uint8_t* codes, int64_t i) {
    constexpr int sh = 23 - optim::q8_map(SIGNED).mbits;
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i));
    if constexpr (SIGNED) // sign-extended: bits sh + 7 .. 31 hold the sign; keep bit 31 only
        return _mm256_castsi256_ps(_mm256_and_si256(
            _mm256_slli_epi32(_mm256_cvtepi8_epi32(b), sh),
            _mm256_set1_epi32(static_cast<int>(0x80000000u | ((1u << (sh + 7)) - 1u)))));
    else
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu8_epi32(b), sh));
}

// 16 elements from element i of a Q8 slot: decode(c) * scale (optim::q_value), bitwise.
template <bool SIGNED>
SOF_AVX2_INLINE void load_q8x16(const uint8_t* codes, int64_t i, const Q8Factor& k, __m256& a,
                                __m256& b) {
    a = _mm256_mul_ps(q8_bits8<SIGNED>(codes, i), k.f);
    b = _mm256_mul_ps(q8_bits8<SIGNED>(codes, i + 8), k.f);
    if (__builtin_expect(k.twice, 0)) {
        a = _mm256_mul_ps(a, k.s);
        b = _mm256_mul_ps(b, k.s);
    }
}

// Codes of 8 values x of a block with encoding factor inv (optim::q_encode(x * inv)) in the low
// bits of each lane: v's code, m's (sign << 11) | magnitude code (pack_codes32 merges the two).
// One formula for both ranges: y = x * inv is rounded (nearest even, one IEEE add, symmetric in
// the sign) to a multiple of 2^(e-mbits), e = max(exponent of |y|, 1 - bias), by adding B =
// +-2^(e + 23 - mbits) with y's sign; r = s - B is then the rounded fp8 value and r *
// 2^(bias-127) the fp32 whose bits are code << (23 - mbits) (a normal code: exponent e + bias; a
// subnormal one: an fp32 subnormal), formed exactly by one FMA, s * 2^(bias-127) - B *
// 2^(bias-127) (B's exponent lowered by an integer add). An r of 0 comes out +0 (an exact
// cancellation rounds to +0), so m's sign goes with a nonzero magnitude only, as in q_encode.
// This is q_encode_mag's integer rounding and its 2^23 addition scaled by powers of two: the same
// single rounding, the same bits. No clamp is needed: |x| <= amax and inv = fp32(1.875 / amax)
// give |y| <= 1.875 (1 + 2^-24)^2, which rounds to 1.875 at most, the largest code. v's y is never
// negative (v = b2 * v + (omb2 * g) * g from +0 up; a NaN, whatever its sign, makes the block's
// scale NaN and its codes 0). The subnormal results need MXCSR's FTZ off (dispatch_step checks).
template <bool SIGNED> SOF_AVX2_INLINE __m256i q8_encode8(__m256 x, __m256 inv) {
    constexpr optim::QMap q = optim::q8_map(SIGNED);
    constexpr int bias = optim::q_bias(q), sh = 23 - q.mbits;
    const __m256 y = _mm256_mul_ps(x, inv);
    const __m256i u = _mm256_castps_si256(y);
    const __m256i eb = _mm256_max_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7f800000)),
                                        _mm256_set1_epi32((128 - bias) << 23));
    __m256i big = _mm256_add_epi32(eb, _mm256_set1_epi32(sh << 23));
    if constexpr (SIGNED)
        big = _mm256_or_si256(big, _mm256_and_si256(u, _mm256_set1_epi32(INT32_MIN)));
    const __m256 s = _mm256_add_ps(y, _mm256_castsi256_ps(big));
    const __m256i lo = _mm256_add_epi32(big, _mm256_set1_epi32((bias - 127) * (1 << 23)));
    const float down = core::bits_f32(static_cast<uint32_t>(bias) << 23); // 2^(bias-127)
    const __m256 r = _mm256_fmsub_ps(s, _mm256_set1_ps(down), _mm256_castsi256_ps(lo));
    return _mm256_srli_epi32(_mm256_castps_si256(r), sh);
}

// 16 codes of m and 16 of v (q8_encode8's lanes, two vectors of 8 each in element order) as 32
// bytes: m's 16 in element order in the low half, v's in the high half. m's (sign << 11) | mag
// becomes mag + 128 * sign with one multiply-add of its two bytes (weights 1 and 16).
SOF_AVX2_INLINE __m256i pack_codes32(__m256i m0, __m256i m1, __m256i v0, __m256i v1) {
    const __m256i pm = _mm256_maddubs_epi16(_mm256_packus_epi32(m0, m1), _mm256_set1_epi16(0x1001));
    const __m256i pv = _mm256_packus_epi32(v0, v1);
    // dwords: m0[0-3] m1[0-3] v0[0-3] v1[0-3] | m0[4-7] m1[4-7] v0[4-7] v1[4-7]
    const __m256i b = _mm256_packus_epi16(pm, pv);
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Largest |x| bit pattern of 8 lanes folded into acc (optim::q_quantize_block's amax). SIGNED
// false (v: never negative, see q8_encode8) takes the bits as they are: a NaN with its sign bit
// set compares above 0x7f800000 as well, so q_block_scale gives the same NaN scale.
template <bool SIGNED> SOF_AVX2_INLINE __m256i amax8(__m256i acc, __m256 x) {
    const __m256i u = _mm256_castps_si256(x);
    return _mm256_max_epu32(acc, SIGNED ? _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)) : u);
}

SOF_AVX2_INLINE uint32_t hmax8(__m256i a) {
    __m128i x = _mm_max_epu32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0xB1));
    return static_cast<uint32_t>(_mm_cvtsi128_si32(x));
}

// The codes of staged elements j .. j + 15 of m (xm, factor im) and v (xv, iv): pack_codes32's
// 32 bytes, each half and-ed with keep (zero for a zero or non-finite block).
SOF_AVX2_INLINE __m256i codes16(const float* xm, const float* xv, int64_t j, __m256 im, __m256 iv,
                                __m256i keep) {
    return _mm256_and_si256(keep, pack_codes32(q8_encode8<true>(_mm256_load_ps(xm + j), im),
                                               q8_encode8<true>(_mm256_load_ps(xm + j + 8), im),
                                               q8_encode8<false>(_mm256_load_ps(xv + j), iv),
                                               q8_encode8<false>(_mm256_load_ps(xv + j + 8), iv)));
}

// Largest |x| bit pattern of x[from, len) folded into the vector maximum acc (reduced).
SOF_AVX2_INLINE uint32_t amax_tail(__m256i acc, const float* x, int64_t from, int64_t len) {
    uint32_t amax = hmax8(acc);
    for (int64_t j = from; j < len; j++) {
        const uint32_t a = optim::q_f32_bits(x[j]) & 0x7fffffffu;
        amax = a > amax ? a : amax;
    }
    return amax;
}

// Quantizes the staged block of both moments, xm[0, len) and xv[0, len) (optim::q_quantize_block
// of each), into mc[0, len), vc[0, len) and *msc, *vsc; am16, av16 hold the bit-pattern maxima of
// the first len & ~15 elements. A zero or non-finite block gets code 0 everywhere (its lanes
// masked). The codes are written with ordinary stores also when the step's other outputs are
// streamed: measured faster on the AVX2 development VM at the memory bound (separate outputs
// 0.85x -> 0.93x fp32, docs/performance.md), though their lines are read for ownership.
SOF_AVX2_INLINE void q8_quantize2(const float* xm, const float* xv, int64_t len, __m256i am16,
                                  __m256i av16, uint8_t* mc, uint8_t* vc, float* msc, float* vsc) {
    const int64_t len16 = len & ~int64_t{15};
    const optim::QBlockScale bm = optim::q_block_scale(amax_tail(am16, xm, len16, len));
    const optim::QBlockScale bv = optim::q_block_scale(amax_tail(av16, xv, len16, len));
    *msc = bm.scale;
    *vsc = bv.scale;
    const __m256 im = _mm256_set1_ps(bm.inv), iv = _mm256_set1_ps(bv.inv);
    const __m256i keep =
        _mm256_setr_epi64x(bm.ok ? -1 : 0, bm.ok ? -1 : 0, bv.ok ? -1 : 0, bv.ok ? -1 : 0);
    // whole 64-byte lines of codes stored line by line, m's then v's
    const int64_t len64 = len & ~int64_t{63};
    for (int64_t j = 0; j < len64; j += 64) {
        const __m256i c0 = codes16(xm, xv, j, im, iv, keep),
                      c1 = codes16(xm, xv, j + 16, im, iv, keep),
                      c2 = codes16(xm, xv, j + 32, im, iv, keep),
                      c3 = codes16(xm, xv, j + 48, im, iv, keep);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(mc + j),
                            _mm256_permute2x128_si256(c0, c1, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(mc + j + 32),
                            _mm256_permute2x128_si256(c2, c3, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(vc + j),
                            _mm256_permute2x128_si256(c0, c1, 0x31));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(vc + j + 32),
                            _mm256_permute2x128_si256(c2, c3, 0x31));
    }
    for (int64_t j = len64; j < len16; j += 16) { // the last partial line (a short block)
        const __m256i c = codes16(xm, xv, j, im, iv, keep);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(mc + j), _mm256_castsi256_si128(c));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(vc + j), _mm256_extracti128_si256(c, 1));
    }
    for (int64_t j = len16; j < len; j++) {
        mc[j] = bm.ok ? optim::q_encode(xm[j] * bm.inv, optim::q8_map(true)) : uint8_t{0};
        vc[j] = bv.ok ? optim::q_encode(xv[j] * bv.inv, optim::q8_map(false)) : uint8_t{0};
    }
}

// The grad statistics of a Q8 tile, fused into its step: the same kSumBlock blocks from the tile
// start, the same fp32 lane sums, fallback and fp64 order as stats_impl (so equal to grad_stats).
struct Sums8 {
    int64_t n16;  // elements in 16-lane groups
    __m256 a, b;  // lane sums of the current block (elements 0-7, 8-15 of 16)
    __m256d s[4]; // fp64 accumulators
    SOF_AVX2_INLINE explicit Sums8(int64_t n) : n16(n) {
        a = b = _mm256_setzero_ps();
        s[0] = s[1] = s[2] = s[3] = _mm256_setzero_pd();
    }
    // After the group ending at element `end`: a completed block goes into the fp64 sums.
    template <int GD> SOF_AVX2_INLINE void flush(const Tile& t, int64_t end, __m256 scale) {
        if (end % kSumBlock != 0 && end != n16) return;
        const int64_t i0 = (end - 1) & ~(kSumBlock - 1);
        add_block_sum<GD>(a, b, t.g, i0, end - i0, scale, s);
        a = b = _mm256_setzero_ps();
    }
};

// ---- bf16 master params: stochastic rounding with Philox4x32-10 in vector lanes ----
// optim::sr_bits of consecutive elements, four draws (16 elements) per vector: a draw's counter
// words sit in the low halves of one 64-bit lane, where one vpmuludq forms the whole 32x32 ->
// 64-bit product (lo in the low half, hi moved down by one shift; the high halves carry bits no
// later operation reads). The lanes hold draws {0, 2, 1, 3} of a group, so that one blend per
// word pair and one unpack leave the words in element order. Every operation is the scalar
// generator's (core::philox4x32) on the same 32-bit words: the same bits.

// What round r xors into counter words 0 and 2: the round key (k0 + r * Weyl0, k1 + r * Weyl1);
// rounds 0 and 1 also fold in the counter words that are the same for every draw (the step, the
// stream word kSrStream and hi/lo of Mul1 * step).
struct SrKeys {
    __m256i a[core::kPhiloxRounds], b[core::kPhiloxRounds];
};

SOF_AVX2_INLINE void sr_keys(const StepConsts& c, SrKeys& k) {
    const uint32_t k0 = static_cast<uint32_t>(c.seed), k1 = static_cast<uint32_t>(c.seed >> 32);
    const uint64_t p1 = uint64_t{core::kPhiloxMul1} * static_cast<uint32_t>(c.step);
    for (int r = 0; r < core::kPhiloxRounds; r++) {
        uint32_t a = k0 + static_cast<uint32_t>(r) * core::kPhiloxWeyl0;
        uint32_t b = k1 + static_cast<uint32_t>(r) * core::kPhiloxWeyl1;
        if (r == 0) a ^= static_cast<uint32_t>(p1 >> 32), b ^= optim::kSrStream;
        if (r == 1) a ^= static_cast<uint32_t>(p1);
        k.a[r] = _mm256_set1_epi32(static_cast<int>(a));
        k.b[r] = _mm256_set1_epi32(static_cast<int>(b));
    }
}

// out[0, 32) = the stochastic-rounding bits (word >> 16) of elements 4d .. 4d + 31, i.e. words
// 0-3 of draws d .. d + 7 (two independent groups of four, interleaved for the multipliers).
SOF_AVX2_INLINE void sr_draws8(const SrKeys& k, uint64_t d, uint32_t* out) {
    const __m256i m0 = _mm256_set1_epi32(static_cast<int>(core::kPhiloxMul0));
    const __m256i m1 = _mm256_set1_epi32(static_cast<int>(core::kPhiloxMul1));
    const __m256i lanes = _mm256_set_epi64x(3, 1, 2, 0);
    __m256i c0[2], c1[2], c2[2], c3[2];
    for (int h = 0; h < 2; h++) {
        const __m256i ctr =
            _mm256_add_epi64(_mm256_set1_epi64x(static_cast<long long>(d + 4u * h)), lanes);
        // round 0: words 2, 3 (step, stream) and hence Mul1 * word 2 are constants
        const __m256i p0 = _mm256_mul_epu32(ctr, m0);
        c0[h] = _mm256_xor_si256(_mm256_srli_epi64(ctr, 32), k.a[0]);
        c2[h] = _mm256_xor_si256(_mm256_srli_epi64(p0, 32), k.b[0]);
        c3[h] = p0;
        // round 1: word 1 is the constant lo(Mul1 * step), folded into k.a[1]
        const __m256i q0 = _mm256_mul_epu32(c0[h], m0), q1 = _mm256_mul_epu32(c2[h], m1);
        c0[h] = _mm256_xor_si256(_mm256_srli_epi64(q1, 32), k.a[1]);
        c1[h] = q1;
        c2[h] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(q0, 32), c3[h]), k.b[1]);
        c3[h] = q0;
    }
    for (int r = 2; r < core::kPhiloxRounds; r++)
        for (int h = 0; h < 2; h++) {
            const __m256i q0 = _mm256_mul_epu32(c0[h], m0), q1 = _mm256_mul_epu32(c2[h], m1);
            c0[h] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(q1, 32), c1[h]), k.a[r]);
            c1[h] = q1;
            c2[h] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(q0, 32), c3[h]), k.b[r]);
            c3[h] = q0;
        }
    for (int h = 0; h < 2; h++) {
        // 64-bit lane j: words (0, 1) and (2, 3) of its draw; unpack: draws 0, 1 | 2, 3
        const __m256i w01 = _mm256_blend_epi32(c0[h], _mm256_slli_epi64(c1[h], 32), 0xAA);
        const __m256i w23 = _mm256_blend_epi32(c2[h], _mm256_slli_epi64(c3[h], 32), 0xAA);
        __m256i* o = reinterpret_cast<__m256i*>(out + 16 * h);
        _mm256_storeu_si256(o, _mm256_srli_epi32(_mm256_unpacklo_epi64(w01, w23), 16));
        _mm256_storeu_si256(o + 1, _mm256_srli_epi32(_mm256_unpackhi_epi64(w01, w23), 16));
    }
}

// Capacity of the bits of one sub-chunk: kSumBlock elements from any e0 (3 words before it, the
// rest of the last 32).
constexpr int64_t kSrWords = kSumBlock + 32;

// sr[w] = optim::sr_bits(seed, step, (e0 & ~3) + w) for w < (e0 & 3) + n (n <= kSumBlock; written
// up to the next multiple of 32): element e0 + j's bits are sr[(e0 & 3) + j].
SOF_AVX2_INLINE void sr_fill(const SrKeys& k, uint64_t e0, int64_t n, uint32_t* sr) {
    const int64_t words = static_cast<int64_t>(e0 & 3u) + n;
    for (int64_t w = 0; w < words; w += 32)
        sr_draws8(k, (e0 >> 2) + static_cast<uint64_t>(w / 4), sr + w);
}

// 8 params stochastically rounded to bf16 with their bits r (optim::f32_to_bf16_sr), in the low
// 16 bits of each lane; a NaN as core::f32_to_bf16 (quiet, sign and top payload bits kept).
SOF_AVX2_INLINE __m256i bf16_sr8(__m256 x, __m256i r) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i s = _mm256_srli_epi32(_mm256_add_epi32(u, r), 16);
    const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(s), _mm256_castsi256_ps(qnan),
                                                _mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
}

// ---- the step of Q8 moments and/or bf16 master params (step_q) ----

// Streams n (multiple of 16) 2-byte values from L1 staging to dst (32-byte aligned): whole
// 64-byte lines streamed, the last 16 values (half a line) stored.
SOF_AVX2_INLINE void stream_out16(uint16_t* dst, const uint16_t* src, int64_t n) {
    const int64_t full = n & ~int64_t{31};
    stream_out(dst, src, 2 * full);
    if (full < n)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + full),
                            _mm256_load_si256(reinterpret_cast<const __m256i*>(src + full)));
}

// Per-tile scratch: separate outputs (NT) of one kSumBlock sub-chunk staged in L1, and the
// stochastic-rounding bits of the sub-chunk.
struct QScratch {
    alignas(64) float p[kSumBlock]; // fp32 params, or bf16 ones in the first half
    alignas(64) float m[kSumBlock]; // fp32/bf16 moments (Q8 ones are staged whole in sm, sv)
    alignas(64) float v[kSumBlock];
    alignas(64) uint16_t l[kSumBlock]; // the copy
    alignas(64) uint32_t sr[kSrWords];
};

// One chunk of len elements from tile element b0: a Q8 block (len <= qb) or, with fp32/bf16
// moments, up to kQBlockMax elements. Steps 16 elements at a time (block16's operations, PD the
// master's dtype, SD the moments' format: Q8 decoded from its codes), per kSumBlock sub-chunk:
// a bf16 master's stochastic-rounding bits first (sr_fill), the new params stochastically
// rounded (bf16_sr8); the new params, the copy and fp32/bf16 moments stored (NT: staged per
// sub-chunk in L1 and streamed); Q8 moments staged in sm, sv (64-byte aligned) with their amax.
// The last len % 16 elements through step_q_elem; then Q8 slots quantized.
template <int GD, int LD, int SD, int PD, bool NT, bool WD, bool L2>
SOF_AVX2_INLINE void q_block(const StepConsts& c, const V8Consts& k, const SrKeys& keys,
                             const Tile& tile, int64_t b0, int64_t len, float* sm, float* sv,
                             QScratch& x, Sums8& st) {
    constexpr bool q8 = SD == SOF_STATE_Q8;
    const Tile t = tile; // a local copy: its pointers stay in registers across the stores
    const int64_t bi = q8 ? b0 / t.qb : 0; // the Q8 block's number
    const uint8_t* mc = static_cast<const uint8_t*>(t.m);
    const uint8_t* vc = static_cast<const uint8_t*>(t.v);
    const Q8Factor ms = q8_factor<true>(q8 ? t.ms[bi] : 0.0f);
    const Q8Factor vs = q8_factor<false>(q8 ? t.vs[bi] : 0.0f);
    uint16_t* lw = static_cast<uint16_t*>(t.lowp);
    uint16_t* xp16 = reinterpret_cast<uint16_t*>(x.p);
    __m256i am = _mm256_setzero_si256(), av = am;
    const int64_t len16 = len & ~int64_t{15};
    for (int64_t c0 = 0; c0 < len16; c0 += kSumBlock) {
        const int64_t c1 = len16 - c0 < kSumBlock ? len16 : c0 + kSumBlock;
        const uint64_t e0 = static_cast<uint64_t>(t.index0 + b0 + c0);
        if constexpr (PD == SOF_DTYPE_BF16) sr_fill(keys, e0, c1 - c0, x.sr);
        const uint32_t* sr = x.sr + (e0 & 3u); // bits of sub-chunk element s at sr[s]
        for (int64_t j = c0; j < c1; j += 16) {
            const int64_t i = b0 + j, s = j - c0;
            prefetch_inputs<GD, PD, SD == SOF_STATE_Q8 ? 1 : (SD == SOF_STATE_F32 ? 4 : 2)>(t, i);
            __m256 g0 = _mm256_mul_ps(load_grad8<GD>(t.g, i), k.scale);
            __m256 g1 = _mm256_mul_ps(load_grad8<GD>(t.g, i + 8), k.scale);
            st.a = _mm256_fmadd_ps(g0, g0, st.a);
            st.b = _mm256_fmadd_ps(g1, g1, st.b);
            st.flush<GD>(t, i + 16, k.scale);
            __m256 p0, p1;
            if constexpr (PD == SOF_DTYPE_F32)
                p0 = _mm256_loadu_ps(t.p + i), p1 = _mm256_loadu_ps(t.p + i + 8);
            else
                load_state16<SOF_DTYPE_BF16>(t.p16, i, p0, p1);
            weight_decay16<WD, L2>(k, p0, p1, g0, g1);
            __m256 m0, m1, v0, v1; // the old moments, then the new
            if constexpr (q8) {
                load_q8x16<true>(mc, i, ms, m0, m1);
                load_q8x16<false>(vc, i, vs, v0, v1);
            } else {
                load_state16<SD>(t.m, i, m0, m1);
                load_state16<SD>(t.v, i, v0, v1);
            }
            adam16(k, g0, g1, m0, m1, v0, v1, p0, p1);
            if constexpr (PD == SOF_DTYPE_F32) {
                float* po = NT ? x.p + s : t.po + i;
                _mm256_storeu_ps(po, p0);
                _mm256_storeu_ps(po + 8, p1);
                if constexpr (LD != -1)
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(NT ? x.l + s : lw + i),
                                        lowp16<LD>(p0, p1));
            } else {
                const __m256i r0 =
                    bf16_sr8(p0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sr + s)));
                const __m256i r1 =
                    bf16_sr8(p1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sr + s + 8)));
                const __m256i h = _mm256_permute4x64_epi64(_mm256_packus_epi32(r0, r1), 0xD8);
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(NT ? xp16 + s : t.po16 + i), h);
                if (lw) // the copy of the stored bf16 values: bf16 is h itself (exact)
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(NT ? x.l + s : lw + i),
                                        t.ld == SOF_DTYPE_BF16
                                            ? h
                                            : lowp16<SOF_DTYPE_F16>(
                                                  _mm256_castsi256_ps(_mm256_slli_epi32(r0, 16)),
                                                  _mm256_castsi256_ps(_mm256_slli_epi32(r1, 16))));
            }
            if constexpr (q8) {
                _mm256_store_ps(sm + j, m0);
                _mm256_store_ps(sm + j + 8, m1);
                _mm256_store_ps(sv + j, v0);
                _mm256_store_ps(sv + j + 8, v1);
                am = amax8<true>(amax8<true>(am, m0), m1);
                av = amax8<false>(amax8<false>(av, v0), v1);
            } else if constexpr (NT) {
                store_state16<SD>(x.m, s, m0, m1);
                store_state16<SD>(x.v, s, v0, v1);
            } else {
                store_state16<SD>(t.mo, i, m0, m1);
                store_state16<SD>(t.vo, i, v0, v1);
            }
        }
        if constexpr (NT) {
            const int64_t n = c1 - c0, o = b0 + c0;
            if constexpr (PD == SOF_DTYPE_F32)
                stream_out(t.po + o, x.p, 4 * n);
            else
                stream_out16(t.po16 + o, xp16, n);
            if (lw) stream_out16(lw + o, x.l, n);
            if constexpr (SD == SOF_STATE_F32) {
                stream_out(static_cast<float*>(t.mo) + o, x.m, 4 * n);
                stream_out(static_cast<float*>(t.vo) + o, x.v, 4 * n);
            } else if constexpr (SD == SOF_STATE_BF16) {
                stream_out16(static_cast<uint16_t*>(t.mo) + o, reinterpret_cast<uint16_t*>(x.m), n);
                stream_out16(static_cast<uint16_t*>(t.vo) + o, reinterpret_cast<uint16_t*>(x.v), n);
            }
        }
    }
    for (int64_t j = len16; j < len; j++) {
        float m, v;
        step_q_elem(c, tile, b0 + j, optim::adam_ref_grad(t.g, GD, b0 + j), &m, &v);
        if constexpr (q8)
            sm[j] = m, sv[j] = v;
        else
            store_mv_elem(t, b0 + j, m, v);
    }
    if constexpr (q8) {
        q8_quantize2(sm, sv, len, am, av, static_cast<uint8_t*>(t.mo) + b0,
                     static_cast<uint8_t*>(t.vo) + b0, t.mso + bi, t.vso + bi);
    }
}

template <int GD, int LD, int SD, int PD, bool NT, bool WD, bool L2>
SOF_AVX2 double step_q_impl(const StepConsts& c, const Tile& t) {
    const V8Consts k = v8_consts(c);
    SrKeys keys;
    if constexpr (PD == SOF_DTYPE_BF16) sr_keys(c, keys);
    constexpr int64_t stage = SD == SOF_STATE_Q8 ? optim::kQBlockMax : 16;
    alignas(64) float sm[stage], sv[stage];
    QScratch x;
    Sums8 st(t.n & ~int64_t{15});
    const int64_t chunk = SD == SOF_STATE_Q8 ? t.qb : optim::kQBlockMax;
    for (int64_t b0 = 0; b0 < t.n; b0 += chunk)
        q_block<GD, LD, SD, PD, NT, WD, L2>(c, k, keys, t, b0, t.n - b0 < chunk ? t.n - b0 : chunk,
                                            sm, sv, x, st);
    double sumsq = hsum(st.s[0], st.s[1], st.s[2], st.s[3]);
    for (int64_t i = st.n16; i < t.n; i++) { // stats_impl's tail, in index order
        float gs = optim::adam_ref_grad(t.g, GD, i) * c.scale;
        sumsq += static_cast<double>(gs) * static_cast<double>(gs);
    }
    if constexpr (NT) _mm_sfence();
    return sumsq;
}

// The quantized kernel as dispatch.h calls it.
struct Avx2Q {
    template <int GD, int LD, int SD, int PD, bool NT, bool WD, bool L2>
    static double run(const StepConsts& c, const Tile& t) {
        return step_q_impl<GD, LD, SD, PD, NT, WD, L2>(c, t);
    }
};

// Every tile: fp32 master with fp32/bf16 moments, or Q8 moments and/or a bf16 master (bitwise
// step_tile_q_scalar's results). Statistics: this variant's (equal to its grad_stats).
double step_avx2(const StepConsts& c, const Tile& t, bool nt) {
    return dispatch_step<Avx2Tile, Avx2Q>(c, t, nt, stats_tile_avx2);
}

} // namespace

KernelSet avx2_kernels() {
    return {"avx2", step_avx2, stats_tile_avx2, step_avx2, "avx2", "avx2"};
}

} // namespace sof::cpu_adam
