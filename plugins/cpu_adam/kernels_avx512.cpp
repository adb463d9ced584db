// cpu_adam AVX-512 variant: 16 elements (one zmm, one 64-byte line of each fp32 stream) per
// iteration, scalar tail. Compiled with function target attributes only (no global -mavx512f).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "dispatch.h"

#define SOF_AVX512 __attribute__((target("avx512f,avx512bw")))
#define SOF_AVX512_INLINE __attribute__((target("avx512f,avx512bw"), always_inline)) inline

namespace sof::cpu_adam {

namespace {

struct V16Consts {
    __m512 scale, b1, b2, omb1, omb2, eps, wd, decay, nss, rbc2;
};

SOF_AVX512_INLINE V16Consts v16_consts(const StepConsts& c) {
    return {_mm512_set1_ps(c.scale), _mm512_set1_ps(c.b1),    _mm512_set1_ps(c.b2),
            _mm512_set1_ps(c.omb1),  _mm512_set1_ps(c.omb2),  _mm512_set1_ps(c.eps),
            _mm512_set1_ps(c.wd),    _mm512_set1_ps(c.decay), _mm512_set1_ps(c.nss),
            _mm512_set1_ps(c.rbc2)};
}

// 16 grads starting at element i, widened to fp32 (exact).
template <int GD> SOF_AVX512_INLINE __m512 load_grad16(const void* g, int64_t i) {
    if constexpr (GD == SOF_DTYPE_F32) {
        return _mm512_loadu_ps(static_cast<const float*>(g) + i);
    } else {
        __m256i h = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(g) + i));
        if constexpr (GD == SOF_DTYPE_BF16)
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        else
            return _mm512_cvtph_ps(h);
    }
}

// 16 params -> 16 low-precision values (32 bytes): bf16 exactly as core::f32_to_bf16 (RNE,
// NaN kept quiet with sign and top payload bits), fp16 by vcvtps2ph with RNE.
template <int LD> SOF_AVX512_INLINE __m256i lowp16(__m512 x) {
    if constexpr (LD == SOF_DTYPE_BF16) {
        __m512i u = _mm512_castps_si512(x);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_srli_epi32(
            _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
        __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
        __m512i qnan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
        return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, qnan));
    } else {
        return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
}

// fp64 sum of squares of 16 scaled grads into two accumulators (the fallback of a block).
SOF_AVX512_INLINE void sumsq16_f64(__m512 g, __m512d& lo, __m512d& hi) {
    __m512i gi = _mm512_castps_si512(g);
    __m512d dl = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_castsi512_si256(gi)));
    __m512d dh = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(gi, 1)));
    lo = _mm512_fmadd_pd(dl, dl, lo);
    hi = _mm512_fmadd_pd(dh, dh, hi);
}

// Adds one block's fp32 lane sums s (of the squares of the len scaled grads from element i0)
// into the fp64 accumulators; a block with a lane outside {0} u [kSumLo, kSumHi) is summed
// again in fp64 from its grads (see kSumBlock).
template <int GD>
SOF_AVX512_INLINE void add_block_sum(__m512 s, const void* g, int64_t i0, int64_t len, __m512 scale,
                                     __m512d& lo, __m512d& hi) {
    __mmask16 ok = _mm512_cmp_ps_mask(s, _mm512_set1_ps(kSumLo), _CMP_GE_OQ) &
                   _mm512_cmp_ps_mask(s, _mm512_set1_ps(kSumHi), _CMP_LT_OQ);
    ok |= _mm512_cmp_ps_mask(s, _mm512_setzero_ps(), _CMP_EQ_OQ);
    if (__builtin_expect(ok == 0xffff, 1)) {
        __m512i si = _mm512_castps_si512(s);
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_castsi512_si256(si))));
        hi = _mm512_add_pd(hi,
                           _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(si, 1))));
        return;
    }
    for (int64_t j = 0; j < len; j += 16)
        sumsq16_f64(_mm512_mul_ps(load_grad16<GD>(g, i0 + j), scale), lo, hi);
}

SOF_AVX512_INLINE double hsum(__m512d a, __m512d b) {
    return _mm512_reduce_add_pd(_mm512_add_pd(a, b));
}

// 16 moments from element i of a state buffer of dtype SD as fp32 (bf16 widened exactly).
template <int SD> SOF_AVX512_INLINE __m512 load_state16(const void* x, int64_t i) {
    if constexpr (SD == SOF_DTYPE_F32)
        return _mm512_loadu_ps(static_cast<const float*>(x) + i);
    else
        return load_grad16<SOF_DTYPE_BF16>(x, i);
}

// Stores 16 moments at element j of a state buffer of dtype SD (bf16: rounded to nearest even).
template <int SD> SOF_AVX512_INLINE void store_state16(void* x, int64_t j, __m512 a) {
    if constexpr (SD == SOF_DTYPE_F32)
        _mm512_storeu_ps(static_cast<float*>(x) + j, a);
    else
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(x) + j),
                            lowp16<SOF_DTYPE_BF16>(a));
}

// One block of len (multiple of 16, <= kSumBlock) elements from i0 in a single pass: g, its
// square into the lane sums, m, v, p (step_elem's operations) and the low-precision copy, stored
// to po/mo/vo/lowp (indexed from 0: the destinations or L1 staging buffers; mo, vo of the state
// dtype SD).
template <int GD, int LD, int SD, bool WD, bool L2>
SOF_AVX512_INLINE __m512 block16(const V16Consts& k, const Tile& t, int64_t i0, int64_t len,
                                 float* po, void* mo, void* vo, uint16_t* lowp) {
    __m512 s = _mm512_setzero_ps();
    for (int64_t j = 0; j < len; j += 16) {
        int64_t i = i0 + j;
        prefetch_inputs<GD, SOF_DTYPE_F32, SD == SOF_DTYPE_F32 ? 4 : 2>(t, i);
        __m512 g = _mm512_mul_ps(load_grad16<GD>(t.g, i), k.scale);
        s = _mm512_fmadd_ps(g, g, s);
        __m512 p = _mm512_loadu_ps(t.p + i);
        if constexpr (WD && L2) g = _mm512_fmadd_ps(k.wd, p, g);
        if constexpr (WD && !L2) p = _mm512_mul_ps(p, k.decay);
        __m512 m = _mm512_fmadd_ps(k.b1, load_state16<SD>(t.m, i), _mm512_mul_ps(k.omb1, g));
        __m512 v = _mm512_fmadd_ps(k.b2, load_state16<SD>(t.v, i),
                                   _mm512_mul_ps(_mm512_mul_ps(k.omb2, g), g));
        __m512 d = _mm512_fmadd_ps(_mm512_sqrt_ps(v), k.rbc2, k.eps);
        p = _mm512_fmadd_ps(k.nss, _mm512_div_ps(m, d), p);
        _mm512_storeu_ps(po + j, p);
        store_state16<SD>(mo, j, m);
        store_state16<SD>(vo, j, v);
        if constexpr (LD != -1)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(lowp + j), lowp16<LD>(p));
    }
    return s;
}

// Streams `bytes` (multiple of 64) from an L1-resident staging buffer to 64-byte aligned dst.
SOF_AVX512_INLINE void stream_out(void* dst, const void* src, int64_t bytes) {
    auto* d = static_cast<__m512i*>(dst);
    auto* s = static_cast<const __m512i*>(src);
    for (int64_t j = 0; j < bytes / 64; j++)
        _mm512_stream_si512(d + j, _mm512_load_si512(s + j));
}

// Separate outputs (NT) are staged per block in L1 and streamed out in dense bursts:
// interleaving streaming stores with the arithmetic leaves the write-combining buffers half used.
template <int GD, int LD, int SD, bool NT, bool WD, bool L2>
SOF_AVX512 double step_tile_impl(const StepConsts& c, const Tile& t) {
    V16Consts k = v16_consts(c);
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    constexpr int64_t es = SD == SOF_DTYPE_F32 ? 4 : 2; // bytes per moment
    int64_t n16 = t.n & ~int64_t{15};
    uint16_t* lw = static_cast<uint16_t*>(t.lowp);
    char* mo = static_cast<char*>(t.mo);
    char* vo = static_cast<char*>(t.vo);
    for (int64_t i = 0; i < n16; i += kSumBlock) {
        int64_t len = n16 - i < kSumBlock ? n16 - i : kSumBlock;
        __m512 s;
        if constexpr (NT) {
            alignas(64) float bp[kSumBlock], bm[kSumBlock], bv[kSumBlock];
            alignas(64) uint16_t bl[kSumBlock];
            s = block16<GD, LD, SD, WD, L2>(k, t, i, len, bp, bm, bv, bl);
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
            s = block16<GD, LD, SD, WD, L2>(k, t, i, len, t.po + i, mo + i * es, vo + i * es,
                                            LD != -1 ? lw + i : nullptr);
        }
        add_block_sum<GD>(s, t.g, i, len, k.scale, s0, s1);
    }
    double sumsq = hsum(s0, s1);
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
struct Avx512Tile {
    template <int GD, int LD, int SD, int PD, bool NT, bool WD, bool L2>
    static double run(const StepConsts& c, const Tile& t) {
        return step_tile_impl<GD, LD, SD, NT, WD, L2>(c, t);
    }
};

// The step's sum without the step: same blocks, same lane sums, same fallback, same order.
template <int GD> SOF_AVX512 double stats_impl(const void* g, int64_t n, float scale) {
    __m512 sc = _mm512_set1_ps(scale);
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    int64_t n16 = n & ~int64_t{15};
    for (int64_t i = 0; i < n16; i += kSumBlock) {
        int64_t len = n16 - i < kSumBlock ? n16 - i : kSumBlock;
        __m512 s = _mm512_setzero_ps();
        for (int64_t j = 0; j < len; j += 16) {
            __m512 x = _mm512_mul_ps(load_grad16<GD>(g, i + j), sc);
            s = _mm512_fmadd_ps(x, x, s);
        }
        add_block_sum<GD>(s, g, i, len, sc, s0, s1);
    }
    double sumsq = hsum(s0, s1);
    for (int64_t i = n16; i < n; i++) {
        float gs = optim::adam_ref_grad(g, GD, i) * scale;
        sumsq += static_cast<double>(gs) * static_cast<double>(gs);
    }
    return sumsq;
}

SOF_AVX512 double stats_tile_avx512(const void* g, int32_t gd, int64_t n, float scale) {
    if (gd == SOF_DTYPE_BF16) return stats_impl<SOF_DTYPE_BF16>(g, n, scale);
    if (gd == SOF_DTYPE_F16) return stats_impl<SOF_DTYPE_F16>(g, n, scale);
    return stats_impl<SOF_DTYPE_F32>(g, n, scale);
}

// ---- Q8 moments, fp32 master: dequantize -> step_elem -> requantize inside the kernel ----
// kernels_avx2.cpp's Q8 path on 16-lane vectors: the same exact integer ops and IEEE fp32 ops
// per lane as the scalar path (step_tile_q_scalar), so the results are bitwise the scalar
// variant's.

// Decoding, as kernels_avx2.cpp's Q8Factor: the code shifted left by 23 - mbits (m's sign at bit
// 31) is an fp32 whose value times 2^(127-bias) is optim::q_decode(c) exactly (an fp32 subnormal
// for the subnormal codes), so one multiply by scale * 2^(127-bias) is q_decode(c) * scale with
// the scalar path's single rounding; a scale whose factor overflows multiplies twice. Needs
// MXCSR's DAZ off (dispatch_step checks).
struct Q8Factor {
    __m512 f;   // scale * 2^(127-bias), or 2^(127-bias) when twice
    __m512 s;   // scale (twice only)
    bool twice; // scale * 2^(127-bias) overflows
};

template <bool SIGNED> SOF_AVX512_INLINE Q8Factor q8_factor(float scale) {
    const Q8FactorScalars q = q8_factor_scalars<SIGNED>(scale);
    return {_mm512_set1_ps(q.f), _mm512_set1_ps(q.s), q.twice};
}

// 16 codes from element i of a Q8 slot decoded times the block's scale (optim::q_value), bitwise.
template <bool SIGNED>
SOF_AVX512_INLINE __m512 load_q8x16(const uint8_t* codes, int64_t i, const Q8Factor& k) {
    constexpr int sh = 23 - optim::q8_map(SIGNED).mbits;
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i));
    __m512i x;
    if constexpr (SIGNED) // sign-extended: bits sh + 7 .. 31 hold the sign; keep bit 31 only
        x = _mm512_and_si512(
            _mm512_slli_epi32(_mm512_cvtepi8_epi32(b), sh),
            _mm512_set1_epi32(static_cast<int>(0x80000000u | ((1u << (sh + 7)) - 1u))));
    else
        x = _mm512_slli_epi32(_mm512_cvtepu8_epi32(b), sh);
    const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(x), k.f);
    return __builtin_expect(k.twice, 0) ? _mm512_mul_ps(v, k.s) : v;
}

// Codes of 16 values x of a block with encoding factor inv (optim::q_encode(x * inv)), one per
// lane: kernels_avx2.cpp's q8_encode8 on 16 lanes (one IEEE add rounds y = x * inv to its code's
// multiple of 2^(e-mbits), one FMA forms the fp32 whose bits are the code << (23 - mbits), an
// exact +0 for a zero magnitude; no clamp: |y| <= 1.875 (1 + 2^-24)^2). m's sign (bit 31) is
// moved to bit 7 by one bitwise select: its magnitude has 7 bits, so bits 27..30 are zero. The
// subnormal codes need MXCSR's FTZ off (dispatch_step checks).
template <bool SIGNED> SOF_AVX512_INLINE __m512i q8_code16(__m512 x, __m512 inv) {
    constexpr optim::QMap q = optim::q8_map(SIGNED);
    constexpr int bias = optim::q_bias(q), sh = 23 - q.mbits;
    const __m512 y = _mm512_mul_ps(x, inv);
    const __m512i u = _mm512_castps_si512(y);
    const __m512i eb = _mm512_max_epi32(_mm512_and_si512(u, _mm512_set1_epi32(0x7f800000)),
                                        _mm512_set1_epi32((128 - bias) << 23));
    __m512i big = _mm512_add_epi32(eb, _mm512_set1_epi32(sh << 23));
    if constexpr (SIGNED) // big | (u & sign)
        big = _mm512_ternarylogic_epi32(big, u, _mm512_set1_epi32(INT32_MIN), 0xF8);
    const __m512 s = _mm512_add_ps(y, _mm512_castsi512_ps(big));
    const __m512i lo = _mm512_add_epi32(big, _mm512_set1_epi32((bias - 127) * (1 << 23)));
    const float down = core::bits_f32(static_cast<uint32_t>(bias) << 23); // 2^(bias-127)
    const __m512i r =
        _mm512_castps_si512(_mm512_fmsub_ps(s, _mm512_set1_ps(down), _mm512_castsi512_ps(lo)));
    __m512i code = _mm512_srli_epi32(r, sh);
    if constexpr (SIGNED) // 0x7f ? code : r >> 24 (bit by bit)
        code = _mm512_ternarylogic_epi32(_mm512_set1_epi32(0x7f), code, _mm512_srli_epi32(r, 24),
                                         0xCA);
    return code;
}

// Largest |x| bit pattern of 16 lanes folded into acc (optim::q_quantize_block's amax). SIGNED
// false (v: never negative, see kernels_avx2.cpp's q8_encode8) takes the bits as they are: a NaN
// with its sign bit set compares above 0x7f800000 as well, so q_block_scale gives the same NaN.
template <bool SIGNED> SOF_AVX512_INLINE __m512i amax16(__m512i acc, __m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    return _mm512_max_epu32(acc, SIGNED ? _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)) : u);
}

// 64 codes (four q8_code16 results, values < 256) as 64 bytes in element order: two dword-to-word
// packs and one word-to-byte pack leave 128-bit lane k holding group k of each input; one dword
// permutation puts the groups in order.
SOF_AVX512_INLINE __m512i pack_codes64(__m512i c0, __m512i c1, __m512i c2, __m512i c3) {
    const __m512i b = _mm512_packus_epi16(_mm512_packus_epi32(c0, c1), _mm512_packus_epi32(c2, c3));
    return _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), b);
}

// Largest |x| bit pattern of x[0, len): the vector maximum acc of x[0, len & ~15) reduced, then
// the tail.
SOF_AVX512_INLINE uint32_t amax_block(__m512i acc, const float* x, int64_t len) {
    uint32_t amax = _mm512_reduce_max_epu32(acc);
    for (int64_t j = len & ~int64_t{15}; j < len; j++) {
        const uint32_t a = optim::q_f32_bits(x[j]) & 0x7fffffffu;
        amax = a > amax ? a : amax;
    }
    return amax;
}

// A staged Q8 block of both moments whose scales are stored and whose codes are written one
// block later (q_block): the encode then no longer waits on the block's maximum and the two
// divisions of its scale, it overlaps the next block's step. (The AVX2 variant encodes at once:
// deferred, it measured 2 % slower; here the encoding factor is kept as one float, 0 for a block
// of zero codes: a QBlockScale in its place measured 5 % slower, docs/performance.md.)
struct QPending {
    const float* x[2] = {nullptr, nullptr}; // staged m, v (len each)
    uint8_t* codes[2] = {nullptr, nullptr};
    float inv[2] = {0.0f, 0.0f}; // encoding factors (> 0: 1.875 / amax, amax <= FLT_MAX); 0: a
                                 // zero or non-finite block (codes 0)
    int64_t len = 0;             // 0: nothing pending
};

// Sets *scale of the staged block x[0, len) (optim::q_quantize_block; acc holds the bit-pattern
// maximum of x[0, len & ~15)) and returns its encoding factor (0 when its codes are all 0).
SOF_AVX512_INLINE float q8_scale(const float* x, int64_t len, __m512i acc, float* scale) {
    const optim::QBlockScale bs = optim::q_block_scale(amax_block(acc, x, len));
    *scale = bs.scale;
    return bs.ok ? bs.inv : 0.0f;
}

// The codes of the staged block x[0, len) with encoding factor inv (q8_scale) into codes[0, len).
// Whole 64-code lines are packed and stored at once; the codes take ordinary stores also when the
// step's other outputs are streamed (as kernels_avx2.cpp's q8_quantize2, measured faster there).
template <bool SIGNED>
SOF_AVX512_INLINE void q8_encode_block(const float* x, int64_t len, float inv_s, uint8_t* codes) {
    constexpr optim::QMap q = optim::q8_map(SIGNED);
    if (inv_s == 0.0f) {
        std::memset(codes, 0, static_cast<size_t>(len));
        return;
    }
    const __m512 inv = _mm512_set1_ps(inv_s);
    const int64_t len64 = len & ~int64_t{63}, len16 = len & ~int64_t{15};
    for (int64_t j = 0; j < len64; j += 64)
        _mm512_storeu_si512(codes + j,
                            pack_codes64(q8_code16<SIGNED>(_mm512_load_ps(x + j), inv),
                                         q8_code16<SIGNED>(_mm512_load_ps(x + j + 16), inv),
                                         q8_code16<SIGNED>(_mm512_load_ps(x + j + 32), inv),
                                         q8_code16<SIGNED>(_mm512_load_ps(x + j + 48), inv)));
    for (int64_t j = len64; j < len16; j += 16)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + j),
                         _mm512_cvtepi32_epi8(q8_code16<SIGNED>(_mm512_load_ps(x + j), inv)));
    for (int64_t j = len16; j < len; j++)
        codes[j] = optim::q_encode(x[j] * inv_s, q);
}

// Writes the pending block's codes (if any) and clears it.
SOF_AVX512_INLINE void q8_flush(QPending& pd) {
    if (pd.len == 0) return;
    q8_encode_block<true>(pd.x[0], pd.len, pd.inv[0], pd.codes[0]);
    q8_encode_block<false>(pd.x[1], pd.len, pd.inv[1], pd.codes[1]);
    pd.len = 0;
}

// The grad statistics of a Q8 tile, fused into its step: stats_impl's blocks, lane sums,
// fallback and fp64 order (so equal to grad_stats).
struct Sums16 {
    int64_t n16; // elements in 16-lane groups
    __m512 a;    // lane sums of the current block
    __m512d lo, hi;
    SOF_AVX512_INLINE explicit Sums16(int64_t n) : n16(n) {
        a = _mm512_setzero_ps();
        lo = hi = _mm512_setzero_pd();
    }
    template <int GD> SOF_AVX512_INLINE void flush(const Tile& t, int64_t end, __m512 scale) {
        if (end % kSumBlock != 0 && end != n16) return;
        const int64_t i0 = (end - 1) & ~(kSumBlock - 1);
        add_block_sum<GD>(a, t.g, i0, end - i0, scale, lo, hi);
        a = _mm512_setzero_ps();
    }
};

// ---- bf16 master params: stochastic rounding with Philox4x32-10 in vector lanes ----
// kernels_avx2.cpp's scheme on 8 draws (32 elements) per zmm: a draw's counter words in the low
// halves of one 64-bit lane (vpmuludq: the whole 32x32 -> 64-bit product), three-way xors in one
// vpternlog; the lanes hold draws {0, 4, 1, 5, 2, 6, 3, 7} of a group so that one blend per word
// pair and one unpack leave the words in element order. The same 32-bit operations as
// core::philox4x32: the same bits.

// What round r xors into counter words 0 and 2 (kernels_avx2.cpp's SrKeys).
struct SrKeys {
    __m512i a[core::kPhiloxRounds], b[core::kPhiloxRounds];
};

SOF_AVX512_INLINE void sr_keys(const StepConsts& c, SrKeys& k) {
    const uint32_t k0 = static_cast<uint32_t>(c.seed), k1 = static_cast<uint32_t>(c.seed >> 32);
    const uint64_t p1 = uint64_t{core::kPhiloxMul1} * static_cast<uint32_t>(c.step);
    for (int r = 0; r < core::kPhiloxRounds; r++) {
        uint32_t a = k0 + static_cast<uint32_t>(r) * core::kPhiloxWeyl0;
        uint32_t b = k1 + static_cast<uint32_t>(r) * core::kPhiloxWeyl1;
        if (r == 0) a ^= static_cast<uint32_t>(p1 >> 32), b ^= optim::kSrStream;
        if (r == 1) a ^= static_cast<uint32_t>(p1);
        k.a[r] = _mm512_set1_epi32(static_cast<int>(a));
        k.b[r] = _mm512_set1_epi32(static_cast<int>(b));
    }
}

SOF_AVX512_INLINE __m512i xor3(__m512i a, __m512i b, __m512i c) {
    return _mm512_ternarylogic_epi64(a, b, c, 0x96);
}

// out[0, 64) = the stochastic-rounding bits (word >> 16) of elements 4d .. 4d + 63: words 0-3 of
// draws d .. d + 15 (two independent groups of eight, interleaved for the multipliers).
SOF_AVX512_INLINE void sr_draws16(const SrKeys& k, uint64_t d, uint32_t* out) {
    const __m512i m0 = _mm512_set1_epi32(static_cast<int>(core::kPhiloxMul0));
    const __m512i m1 = _mm512_set1_epi32(static_cast<int>(core::kPhiloxMul1));
    const __m512i lanes = _mm512_set_epi64(7, 3, 6, 2, 5, 1, 4, 0);
    __m512i c0[2], c1[2], c2[2], c3[2];
    for (int h = 0; h < 2; h++) {
        const __m512i ctr =
            _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(d + 8u * h)), lanes);
        // round 0: words 2, 3 (step, stream) and hence Mul1 * word 2 are constants
        const __m512i p0 = _mm512_mul_epu32(ctr, m0);
        c0[h] = _mm512_xor_si512(_mm512_srli_epi64(ctr, 32), k.a[0]);
        c2[h] = _mm512_xor_si512(_mm512_srli_epi64(p0, 32), k.b[0]);
        c3[h] = p0;
        // round 1: word 1 is the constant lo(Mul1 * step), folded into k.a[1]
        const __m512i q0 = _mm512_mul_epu32(c0[h], m0), q1 = _mm512_mul_epu32(c2[h], m1);
        c0[h] = _mm512_xor_si512(_mm512_srli_epi64(q1, 32), k.a[1]);
        c1[h] = q1;
        c2[h] = xor3(_mm512_srli_epi64(q0, 32), c3[h], k.b[1]);
        c3[h] = q0;
    }
    for (int r = 2; r < core::kPhiloxRounds; r++)
        for (int h = 0; h < 2; h++) {
            const __m512i q0 = _mm512_mul_epu32(c0[h], m0), q1 = _mm512_mul_epu32(c2[h], m1);
            c0[h] = xor3(_mm512_srli_epi64(q1, 32), c1[h], k.a[r]);
            c1[h] = q1;
            c2[h] = xor3(_mm512_srli_epi64(q0, 32), c3[h], k.b[r]);
            c3[h] = q0;
        }
    for (int h = 0; h < 2; h++) {
        // 64-bit lane j: words (0, 1) and (2, 3) of its draw; unpack: draws 0-3 | 4-7
        const __m512i w01 = _mm512_mask_blend_epi32(0xAAAA, c0[h], _mm512_slli_epi64(c1[h], 32));
        const __m512i w23 = _mm512_mask_blend_epi32(0xAAAA, c2[h], _mm512_slli_epi64(c3[h], 32));
        _mm512_storeu_si512(out + 32 * h, _mm512_srli_epi32(_mm512_unpacklo_epi64(w01, w23), 16));
        _mm512_storeu_si512(out + 32 * h + 16,
                            _mm512_srli_epi32(_mm512_unpackhi_epi64(w01, w23), 16));
    }
}

// Capacity of the bits of one sub-chunk: kSumBlock elements from any e0 (3 words before it, the
// rest of the last 64).
constexpr int64_t kSrWords = kSumBlock + 64;

// sr[w] = optim::sr_bits(seed, step, (e0 & ~3) + w) for w < (e0 & 3) + n (n <= kSumBlock; written
// up to the next multiple of 64): element e0 + j's bits are sr[(e0 & 3) + j].
SOF_AVX512_INLINE void sr_fill(const SrKeys& k, uint64_t e0, int64_t n, uint32_t* sr) {
    const int64_t words = static_cast<int64_t>(e0 & 3u) + n;
    for (int64_t w = 0; w < words; w += 64)
        sr_draws16(k, (e0 >> 2) + static_cast<uint64_t>(w / 4), sr + w);
}

// 16 params stochastically rounded to bf16 with their bits r (optim::f32_to_bf16_sr); a NaN as
// core::f32_to_bf16 (quiet, sign and top payload bits kept). Also returns the 32-bit lanes.
SOF_AVX512_INLINE __m256i bf16_sr16(__m512 x, __m512i r, __m512i& lanes) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i s = _mm512_srli_epi32(_mm512_add_epi32(u, r), 16);
    const __m512i qnan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    lanes = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), s, qnan);
    return _mm512_cvtepi32_epi16(lanes);
}

// ---- the step of Q8 moments and/or bf16 master params (step_q) ----

// Streams n (multiple of 16) 2-byte values from L1 staging to dst (32-byte aligned): whole
// 64-byte lines streamed, the last 16 values (half a line) stored.
SOF_AVX512_INLINE void stream_out16(uint16_t* dst, const uint16_t* src, int64_t n) {
    const int64_t full = n & ~int64_t{31};
    stream_out(dst, src, 2 * full);
    if (full < n)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + full),
                            _mm256_load_si256(reinterpret_cast<const __m256i*>(src + full)));
}

// Per-tile scratch (kernels_avx2.cpp's QScratch).
struct QScratch {
    alignas(64) float p[kSumBlock]; // fp32 params, or bf16 ones in the first half
    alignas(64) float m[kSumBlock]; // fp32/bf16 moments (Q8 ones are staged whole in sm, sv)
    alignas(64) float v[kSumBlock];
    alignas(64) uint16_t l[kSumBlock]; // the copy
    alignas(64) uint32_t sr[kSrWords];
};

// One chunk of len elements from tile element b0 (kernels_avx2.cpp's q_block, 16 lanes).
template <int GD, int LD, int SD, int PD, bool NT, bool WD, bool L2>
SOF_AVX512_INLINE void q_block(const StepConsts& c, const V16Consts& k, const SrKeys& keys,
                               const Tile& t, int64_t b0, int64_t len, float* sm, float* sv,
                               QScratch& x, Sums16& st, QPending& pd) {
    constexpr bool q8 = SD == SOF_STATE_Q8;
    const uint8_t* mc = static_cast<const uint8_t*>(t.m);
    const uint8_t* vc = static_cast<const uint8_t*>(t.v);
    const Q8Factor ms = q8_factor<true>(q8 ? t.ms[b0 / t.qb] : 0.0f);
    const Q8Factor vs = q8_factor<false>(q8 ? t.vs[b0 / t.qb] : 0.0f);
    uint16_t* lw = static_cast<uint16_t*>(t.lowp);
    uint16_t* xp16 = reinterpret_cast<uint16_t*>(x.p);
    __m512i am = _mm512_setzero_si512(), av = am;
    const int64_t len16 = len & ~int64_t{15};
    for (int64_t c0 = 0; c0 < len16; c0 += kSumBlock) {
        const int64_t c1 = len16 - c0 < kSumBlock ? len16 : c0 + kSumBlock;
        const uint64_t e0 = static_cast<uint64_t>(t.index0 + b0 + c0);
        if constexpr (PD == SOF_DTYPE_BF16) sr_fill(keys, e0, c1 - c0, x.sr);
        const uint32_t* sr = x.sr + (e0 & 3u); // bits of sub-chunk element s at sr[s]
        for (int64_t j = c0; j < c1; j += 16) {
            const int64_t i = b0 + j, s = j - c0;
            prefetch_inputs<GD, PD, SD == SOF_STATE_Q8 ? 1 : (SD == SOF_STATE_F32 ? 4 : 2)>(t, i);
            __m512 g = _mm512_mul_ps(load_grad16<GD>(t.g, i), k.scale);
            st.a = _mm512_fmadd_ps(g, g, st.a);
            st.flush<GD>(t, i + 16, k.scale);
            __m512 p;
            if constexpr (PD == SOF_DTYPE_F32)
                p = _mm512_loadu_ps(t.p + i);
            else
                p = load_state16<SOF_STATE_BF16>(t.p16, i);
            if constexpr (WD && L2) g = _mm512_fmadd_ps(k.wd, p, g);
            if constexpr (WD && !L2) p = _mm512_mul_ps(p, k.decay);
            __m512 mi, vi;
            if constexpr (q8)
                mi = load_q8x16<true>(mc, i, ms), vi = load_q8x16<false>(vc, i, vs);
            else
                mi = load_state16<SD>(t.m, i), vi = load_state16<SD>(t.v, i);
            __m512 m = _mm512_fmadd_ps(k.b1, mi, _mm512_mul_ps(k.omb1, g));
            __m512 v = _mm512_fmadd_ps(k.b2, vi, _mm512_mul_ps(_mm512_mul_ps(k.omb2, g), g));
            __m512 d = _mm512_fmadd_ps(_mm512_sqrt_ps(v), k.rbc2, k.eps);
            p = _mm512_fmadd_ps(k.nss, _mm512_div_ps(m, d), p);
            if constexpr (PD == SOF_DTYPE_F32) {
                _mm512_storeu_ps(NT ? x.p + s : t.po + i, p);
                if constexpr (LD != -1)
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(NT ? x.l + s : lw + i),
                                        lowp16<LD>(p));
            } else {
                __m512i r;
                const __m256i h = bf16_sr16(p, _mm512_loadu_si512(sr + s), r);
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(NT ? xp16 + s : t.po16 + i), h);
                if (lw) // the copy of the stored bf16 values: bf16 is h itself (exact)
                    _mm256_storeu_si256(
                        reinterpret_cast<__m256i*>(NT ? x.l + s : lw + i),
                        t.ld == SOF_DTYPE_BF16
                            ? h
                            : lowp16<SOF_DTYPE_F16>(_mm512_castsi512_ps(_mm512_slli_epi32(r, 16))));
            }
            if constexpr (q8) {
                _mm512_store_ps(sm + j, m);
                _mm512_store_ps(sv + j, v);
                am = amax16<true>(am, m);
                av = amax16<false>(av, v);
            } else if constexpr (NT) {
                store_state16<SD>(x.m, s, m);
                store_state16<SD>(x.v, s, v);
            } else {
                store_state16<SD>(t.mo, i, m);
                store_state16<SD>(t.vo, i, v);
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
        step_q_elem(c, t, b0 + j, optim::adam_ref_grad(t.g, GD, b0 + j), &m, &v);
        if constexpr (q8)
            sm[j] = m, sv[j] = v;
        else
            store_mv_elem(t, b0 + j, m, v);
    }
    if constexpr (q8) { // this block's scales now, its codes after the next block's step
        q8_flush(pd);
        pd.inv[0] = q8_scale(sm, len, am, t.mso + b0 / t.qb);
        pd.inv[1] = q8_scale(sv, len, av, t.vso + b0 / t.qb);
        pd.x[0] = sm, pd.x[1] = sv;
        pd.codes[0] = static_cast<uint8_t*>(t.mo) + b0;
        pd.codes[1] = static_cast<uint8_t*>(t.vo) + b0;
        pd.len = len;
    }
}

template <int GD, int LD, int SD, int PD, bool NT, bool WD, bool L2>
SOF_AVX512 double step_q_impl(const StepConsts& c, const Tile& t) {
    const V16Consts k = v16_consts(c);
    SrKeys keys;
    if constexpr (PD == SOF_DTYPE_BF16) sr_keys(c, keys);
    // Q8: two staging buffers per moment, the pending block's and the current one's
    constexpr int64_t stage = SD == SOF_STATE_Q8 ? optim::kQBlockMax : 16;
    alignas(64) float sm[2][stage], sv[2][stage];
    QScratch x;
    QPending pd;
    Sums16 st(t.n & ~int64_t{15});
    const int64_t chunk = SD == SOF_STATE_Q8 ? t.qb : optim::kQBlockMax;
    for (int64_t b0 = 0, k2 = 0; b0 < t.n; b0 += chunk, k2 ^= 1)
        q_block<GD, LD, SD, PD, NT, WD, L2>(c, k, keys, t, b0, t.n - b0 < chunk ? t.n - b0 : chunk,
                                            sm[k2], sv[k2], x, st, pd);
    q8_flush(pd);
    double sumsq = hsum(st.lo, st.hi);
    for (int64_t i = st.n16; i < t.n; i++) { // stats_impl's tail, in index order
        float gs = optim::adam_ref_grad(t.g, GD, i) * c.scale;
        sumsq += static_cast<double>(gs) * static_cast<double>(gs);
    }
    if constexpr (NT) _mm_sfence();
    return sumsq;
}

// The quantized kernel as dispatch.h calls it.
struct Avx512Q {
    template <int GD, int LD, int SD, int PD, bool NT, bool WD, bool L2>
    static double run(const StepConsts& c, const Tile& t) {
        return step_q_impl<GD, LD, SD, PD, NT, WD, L2>(c, t);
    }
};

// Every tile: fp32 master with fp32/bf16 moments, or Q8 moments and/or a bf16 master (bitwise
// step_tile_q_scalar's results). Statistics: this variant's (equal to its grad_stats).
double step_avx512(const StepConsts& c, const Tile& t, bool nt) {
    return dispatch_step<Avx512Tile, Avx512Q>(c, t, nt, stats_tile_avx512);
}

} // namespace

KernelSet avx512_kernels() {
    return {"avx512", step_avx512, stats_tile_avx512, step_avx512, "avx512", "avx512"};
}

} // namespace sof::cpu_adam
