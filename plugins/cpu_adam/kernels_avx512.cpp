// cpu_adam AVX-512 variant: 16 elements (one zmm, one 64-byte line of each fp32 stream) per
// iteration, scalar tail. Compiled with function target attributes only (no global -mavx512f).
#include <immintrin.h>

#include "cpu_adam_kernels.h"

#define SOF_AVX512 __attribute__((target("avx512f")))
#define SOF_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) inline

namespace sof::cpu_adam {

namespace {

struct V16Consts {
    __m512 scale, b1, b2, omb1, omb2, eps, wd, decay, step_size, bc2_sqrt;
};

SOF_AVX512_INLINE V16Consts v16_consts(const optim::AdamConsts& c) {
    return {_mm512_set1_ps(c.scale),   _mm512_set1_ps(c.b1),    _mm512_set1_ps(c.b2),
            _mm512_set1_ps(c.omb1),    _mm512_set1_ps(c.omb2),  _mm512_set1_ps(c.eps),
            _mm512_set1_ps(c.wd),      _mm512_set1_ps(c.decay), _mm512_set1_ps(c.step_size),
            _mm512_set1_ps(c.bc2_sqrt)};
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

SOF_AVX512_INLINE void sumsq16(__m512 g, __m512d& lo, __m512d& hi) {
    __m512i gi = _mm512_castps_si512(g);
    __m512d dl = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_castsi512_si256(gi)));
    __m512d dh = _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(gi, 1)));
    lo = _mm512_fmadd_pd(dl, dl, lo);
    hi = _mm512_fmadd_pd(dh, dh, hi);
}

SOF_AVX512_INLINE double hsum(__m512d a, __m512d b) {
    return _mm512_reduce_add_pd(_mm512_add_pd(a, b));
}

// Elements per block; the same two-pass structure and staging as the AVX2 variant (see
// kernels_avx2.cpp): pass A computes g, m, v and upd = (step_size*m)/denom into an L1 buffer,
// pass B p = p*decay - upd and the low-precision copy; separate outputs are staged in L1 and
// streamed out in dense bursts. Same operations as adam_ref_elem, no FMA.
constexpr int64_t kBlock = 256;

template <int GD, int LD, bool WD, bool L2>
SOF_AVX512_INLINE void block16(const V16Consts& k, const Tile& t, int64_t i0, int64_t len,
                               float* po, float* mo, float* vo, uint16_t* lowp, float* upd,
                               __m512d& s0, __m512d& s1) {
    for (int64_t j = 0; j < len; j += 16) {
        int64_t i = i0 + j;
        prefetch_inputs(t, i);
        __m512 g = _mm512_mul_ps(load_grad16<GD>(t.g, i), k.scale);
        sumsq16(g, s0, s1);
        if constexpr (WD && L2) g = _mm512_add_ps(g, _mm512_mul_ps(k.wd, _mm512_loadu_ps(t.p + i)));
        __m512 m =
            _mm512_add_ps(_mm512_mul_ps(k.b1, _mm512_loadu_ps(t.m + i)), _mm512_mul_ps(k.omb1, g));
        __m512 v = _mm512_add_ps(_mm512_mul_ps(k.b2, _mm512_loadu_ps(t.v + i)),
                                 _mm512_mul_ps(_mm512_mul_ps(k.omb2, g), g));
        _mm512_storeu_ps(mo + j, m);
        _mm512_storeu_ps(vo + j, v);
        __m512 d = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), k.bc2_sqrt), k.eps);
        _mm512_store_ps(upd + j, _mm512_div_ps(_mm512_mul_ps(k.step_size, m), d));
    }
    for (int64_t j = 0; j < len; j += 16) {
        __m512 p = _mm512_loadu_ps(t.p + i0 + j);
        if constexpr (WD && !L2) p = _mm512_mul_ps(p, k.decay);
        p = _mm512_sub_ps(p, _mm512_load_ps(upd + j));
        _mm512_storeu_ps(po + j, p);
        if constexpr (LD != -1)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(lowp + j), lowp16<LD>(p));
    }
}

// Streams `bytes` (multiple of 64) from an L1-resident staging buffer to 64-byte aligned dst.
SOF_AVX512_INLINE void stream_out(void* dst, const void* src, int64_t bytes) {
    auto* d = static_cast<__m512i*>(dst);
    auto* s = static_cast<const __m512i*>(src);
    for (int64_t j = 0; j < bytes / 64; j++)
        _mm512_stream_si512(d + j, _mm512_load_si512(s + j));
}

template <int GD, int LD, bool NT, bool WD, bool L2>
SOF_AVX512 double step_tile_impl(const optim::AdamConsts& c, const Tile& t) {
    V16Consts k = v16_consts(c);
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    int64_t n16 = t.n & ~int64_t{15};
    uint16_t* lw = static_cast<uint16_t*>(t.lowp);
    alignas(64) float upd[kBlock];
    for (int64_t i = 0; i < n16; i += kBlock) {
        int64_t len = n16 - i < kBlock ? n16 - i : kBlock;
        if constexpr (NT) {
            alignas(64) float bp[kBlock], bm[kBlock], bv[kBlock];
            alignas(64) uint16_t bl[kBlock];
            block16<GD, LD, WD, L2>(k, t, i, len, bp, bm, bv, bl, upd, s0, s1);
            int64_t full = len & ~int64_t{31}; // whole 64-byte lines of the bf16 copy too
            stream_out(t.po + i, bp, 4 * full);
            stream_out(t.mo + i, bm, 4 * full);
            stream_out(t.vo + i, bv, 4 * full);
            if constexpr (LD != -1) stream_out(lw + i, bl, 2 * full);
            for (int64_t j = full; j < len; j++) {
                t.po[i + j] = bp[j];
                t.mo[i + j] = bm[j];
                t.vo[i + j] = bv[j];
                if constexpr (LD != -1) lw[i + j] = bl[j];
            }
        } else {
            block16<GD, LD, WD, L2>(k, t, i, len, t.po + i, t.mo + i, t.vo + i,
                                    LD != -1 ? lw + i : nullptr, upd, s0, s1);
        }
    }
    double sumsq = hsum(s0, s1);
    for (int64_t i = n16; i < t.n; i++) {
        float graw = optim::adam_ref_grad(t.g, GD, i);
        float gs = graw * c.scale;
        sumsq += static_cast<double>(gs) * static_cast<double>(gs);
        float p = t.p[i], m = t.m[i], v = t.v[i];
        optim::adam_ref_elem(c, p, m, v, graw);
        t.po[i] = p;
        t.mo[i] = m;
        t.vo[i] = v;
        if constexpr (LD != -1) lw[i] = optim::adam_ref_lowp(p, LD);
    }
    if constexpr (NT) _mm_sfence();
    return sumsq;
}

template <int GD, int LD, bool NT>
SOF_AVX512 double step_tile_mode(const optim::AdamConsts& c, const Tile& t) {
    if (c.wd == 0.0f) return step_tile_impl<GD, LD, NT, false, false>(c, t);
    if (c.l2) return step_tile_impl<GD, LD, NT, true, true>(c, t);
    return step_tile_impl<GD, LD, NT, true, false>(c, t);
}

template <int GD, int LD>
SOF_AVX512 double step_tile_nt(const optim::AdamConsts& c, const Tile& t, bool nt) {
    return nt ? step_tile_mode<GD, LD, true>(c, t) : step_tile_mode<GD, LD, false>(c, t);
}

template <int GD>
SOF_AVX512 double step_tile_lowp(const optim::AdamConsts& c, const Tile& t, bool nt) {
    if (!t.lowp) return step_tile_nt<GD, -1>(c, t, nt);
    if (t.ld == SOF_DTYPE_F16) return step_tile_nt<GD, SOF_DTYPE_F16>(c, t, nt);
    return step_tile_nt<GD, SOF_DTYPE_BF16>(c, t, nt);
}

SOF_AVX512 double step_tile_avx512(const optim::AdamConsts& c, const Tile& t, bool nt) {
    if (t.gd == SOF_DTYPE_BF16) return step_tile_lowp<SOF_DTYPE_BF16>(c, t, nt);
    if (t.gd == SOF_DTYPE_F16) return step_tile_lowp<SOF_DTYPE_F16>(c, t, nt);
    return step_tile_lowp<SOF_DTYPE_F32>(c, t, nt);
}

template <int GD> SOF_AVX512 double stats_impl(const void* g, int64_t n, float scale) {
    __m512 sc = _mm512_set1_ps(scale);
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    int64_t n16 = n & ~int64_t{15};
    for (int64_t i = 0; i < n16; i += 16)
        sumsq16(_mm512_mul_ps(load_grad16<GD>(g, i), sc), s0, s1);
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

} // namespace

KernelSet avx512_kernels() {
    return {"avx512", step_tile_avx512, stats_tile_avx512};
}

} // namespace sof::cpu_adam
