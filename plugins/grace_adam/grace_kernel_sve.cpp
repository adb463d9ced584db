// grace_adam SVE kernels: vector-length-agnostic AdamW/Adam step, rollback and grad statistics.
// Built with -march=armv8.2-a+sve -ffp-contract=off: every lane does the scalar reference's ops.
#include <arm_sve.h>

#include <cfloat>

#include "grace_kernel.h"

namespace sof::grace_adam {
namespace {

constexpr int64_t kAhead = 1024; // prefetch distance in elements

// Grads [i, i + active lanes) as fp32 in 32-bit lanes.
inline svfloat32_t load_grad(svbool_t pg, const void* g, int32_t gdt, int64_t i) {
    if (gdt == 0) return svld1_f32(pg, static_cast<const float*>(g) + i);
    svuint32_t h = svld1uh_u32(pg, static_cast<const uint16_t*>(g) + i);
    if (gdt == 1) return svreinterpret_f32_u32(svlsl_n_u32_x(pg, h, 16));
    return svcvt_f32_f16_x(pg, svreinterpret_f16_u32(h));
}

// Grads [i, i + active lanes) as fp32 in the low half of 64-bit containers (for fp64 statistics).
inline svfloat32_t load_grad_wide(svbool_t pd, const void* g, int32_t gdt, int64_t i) {
    if (gdt == 0)
        return svreinterpret_f32_u64(svld1uw_u64(pd, static_cast<const uint32_t*>(g) + i));
    svuint64_t h = svld1uh_u64(pd, static_cast<const uint16_t*>(g) + i);
    if (gdt == 1) return svreinterpret_f32_u64(svlsl_n_u64_x(pd, h, 16));
    return svcvt_f32_f16_x(pd, svreinterpret_f16_u64(h));
}

// Low-precision copy of p: bf16 with round-to-nearest-even and NaN kept (sign | quiet bit), or
// IEEE fp16 through FCVT (round to nearest even, NaN kept quiet).
inline void store_lowp(svbool_t pg, void* out, int32_t ldt, int64_t i, svfloat32_t p) {
    uint16_t* o = static_cast<uint16_t*>(out) + i;
    if (ldt == 1) {
        svuint32_t u = svreinterpret_u32_f32(p);
        svuint32_t hi = svlsr_n_u32_x(pg, u, 16);
        svuint32_t bias = svadd_n_u32_x(pg, svand_n_u32_x(pg, hi, 1u), 0x7fffu);
        svuint32_t r = svlsr_n_u32_x(pg, svadd_u32_x(pg, u, bias), 16);
        svuint32_t nanv = svorr_n_u32_x(pg, hi, 0x40u);
        r = svsel_u32(svcmpuo_f32(pg, p, p), nanv, r);
        svst1h_u32(pg, o, r);
    } else {
        svst1h_u32(pg, o, svreinterpret_u32_f16(svcvt_f16_f32_x(pg, p)));
    }
}

// Moments [i, i + active lanes) of dtype sdt (fp32, or bf16 widened exactly) as fp32.
inline svfloat32_t load_state(svbool_t pg, const void* x, int32_t sdt, int64_t i) {
    return load_grad(pg, x, sdt, i); // fp32 and bf16 widen exactly as grads do
}

// Stores moments of dtype sdt: fp32, or bf16 rounded to nearest even (store_lowp's conversion).
inline void store_state(svbool_t pg, void* out, int32_t sdt, int64_t i, svfloat32_t x,
                        bool streaming) {
    if (sdt == 0) {
        if (streaming)
            svstnt1_f32(pg, static_cast<float*>(out) + i, x);
        else
            svst1_f32(pg, static_cast<float*>(out) + i, x);
    } else {
        store_lowp(pg, out, 1, i, x);
    }
}

inline void store(svbool_t pg, float* out, int64_t i, svfloat32_t x, bool streaming) {
    if (streaming)
        svstnt1_f32(pg, out + i, x);
    else
        svst1_f32(pg, out + i, x);
}

inline void prefetch_row(const Buffers& b, int64_t i) {
    svbool_t all = svptrue_b8();
    int64_t sbytes = optim::state_elem_bytes(b.sdt);
    int64_t pbytes = b.pdt == 0 ? 4 : 2;
    svprfb(all, static_cast<const char*>(b.p) + (i + kAhead) * pbytes, SV_PLDL1STRM);
    svprfb(all, static_cast<const char*>(b.m) + (i + kAhead) * sbytes, SV_PLDL1STRM);
    svprfb(all, static_cast<const char*>(b.v) + (i + kAhead) * sbytes, SV_PLDL1STRM);
    int64_t gbytes = b.gdt == 0 ? 4 : 2;
    svprfb(all, static_cast<const char*>(b.g) + (i + kAhead) * gbytes, SV_PLDL1STRM);
}

// ---- Q8 moments and bf16 master params (optim/qstate.h, lane by lane) ----

// Philox4x32-10 word (index & 3) of draw (index >> 2) at counter (.., step, kSrStream) under key
// seed, for index = first + lane; the top 16 bits (optim::sr_bits).
inline svuint32_t sr_bits16(svbool_t pg, uint64_t seed, int64_t step, uint64_t first) {
    const svuint32_t lane = svindex_u32(0, 1);
    const svuint32_t lo = svadd_n_u32_x(pg, lane, static_cast<uint32_t>(first));
    const svuint32_t carry = svsel_u32(svcmplt_u32(pg, lo, lane), svdup_n_u32(1), svdup_n_u32(0));
    const svuint32_t hi = svadd_n_u32_x(pg, carry, static_cast<uint32_t>(first >> 32));
    svuint32_t c0 = svorr_u32_x(pg, svlsr_n_u32_x(pg, lo, 2), svlsl_n_u32_x(pg, hi, 30));
    svuint32_t c1 = svlsr_n_u32_x(pg, hi, 2);
    svuint32_t c2 = svdup_n_u32(static_cast<uint32_t>(step));
    svuint32_t c3 = svdup_n_u32(optim::kSrStream);
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    const svuint32_t m0 = svdup_n_u32(0xD2511F53u), m1 = svdup_n_u32(0xCD9E8D57u);
    for (int round = 0; round < 10; ++round) {
        svuint32_t hi0 = svmulh_u32_x(pg, m0, c0), lo0 = svmul_u32_x(pg, m0, c0);
        svuint32_t hi1 = svmulh_u32_x(pg, m1, c2), lo1 = svmul_u32_x(pg, m1, c2);
        c0 = sveor_n_u32_x(pg, sveor_u32_x(pg, hi1, c1), k0);
        c1 = lo1;
        c2 = sveor_n_u32_x(pg, sveor_u32_x(pg, hi0, c3), k1);
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    const svuint32_t sel = svand_n_u32_x(pg, lo, 3u);
    svuint32_t w = svsel_u32(svcmpeq_n_u32(pg, sel, 1u), c1, c0);
    w = svsel_u32(svcmpeq_n_u32(pg, sel, 2u), c2, w);
    w = svsel_u32(svcmpeq_n_u32(pg, sel, 3u), c3, w);
    return svlsr_n_u32_x(pg, w, 16);
}

// Master params [i, i + lanes) as fp32 (bf16 widened exactly).
inline svfloat32_t load_param(svbool_t pg, const Buffers& b, int64_t i) {
    if (b.pdt == 0) return svld1_f32(pg, static_cast<const float*>(b.p) + i);
    return load_grad(pg, b.p, 1, i);
}

// Stores new params: fp32, or bf16 stochastically rounded (optim::f32_to_bf16_sr); returns the
// stored values as fp32 (what the low-precision copy converts).
inline svfloat32_t store_param(svbool_t pg, const Buffers& b, int64_t i, svfloat32_t p) {
    if (b.pdt == 0) {
        store(pg, static_cast<float*>(b.po), i, p, b.streaming != 0);
        return p;
    }
    svuint32_t u = svreinterpret_u32_f32(p);
    svuint32_t r = svlsr_n_u32_x(
        pg, svadd_u32_x(pg, u, sr_bits16(pg, b.seed, b.step, static_cast<uint64_t>(b.index0 + i))),
        16);
    svuint32_t nanv = svorr_n_u32_x(pg, svlsr_n_u32_x(pg, u, 16), 0x40u);
    r = svsel_u32(svcmpuo_f32(pg, p, p), nanv, r);
    svst1h_u32(pg, static_cast<uint16_t*>(b.po) + i, r);
    return svreinterpret_f32_u32(svlsl_n_u32_x(pg, r, 16));
}

// Q8 codes [i, i + lanes) of one block decoded (exact) and multiplied by its scale.
inline svfloat32_t load_q8(svbool_t pg, const void* codes, int64_t i, float scale, optim::QMap q) {
    svuint32_t c = svld1ub_u32(pg, static_cast<const uint8_t*>(codes) + i);
    svuint32_t mag = q.is_signed ? svand_n_u32_x(pg, c, 0x7fu) : c;
    svuint32_t e = svlsr_n_u32_x(pg, mag, q.mbits);
    svuint32_t f = svand_n_u32_x(pg, mag, (1u << q.mbits) - 1u);
    svuint32_t mant = svsel_u32(svcmpne_n_u32(pg, e, 0u), svorr_n_u32_x(pg, f, 1u << q.mbits), f);
    svuint32_t ex = svadd_n_u32_x(pg, svmax_n_u32_x(pg, e, 1u),
                                  static_cast<uint32_t>(127 - optim::q_bias(q) - q.mbits));
    svfloat32_t v = svmul_f32_x(pg, svcvt_f32_u32_x(pg, mant),
                                svreinterpret_f32_u32(svlsl_n_u32_x(pg, ex, 23)));
    if (q.is_signed) {
        svuint32_t sign = svlsl_n_u32_x(pg, svand_n_u32_x(pg, c, 0x80u), 24);
        v = svreinterpret_f32_u32(sveor_u32_x(pg, svreinterpret_u32_f32(v), sign));
    }
    return svmul_n_f32_x(pg, v, scale);
}

// The AdamW/Adam update of one vector of scaled grads g, adam_ref's operations in its order lane
// by lane: AdamW's decay of p or Adam's L2 term on g, then m, v, and the new p (returned). The
// scalar operands are broadcast here; the compiler hoists them out of the callers' loops.
inline svfloat32_t adam_lanes(svbool_t pg, const Consts& c, svfloat32_t g, svfloat32_t p,
                              svfloat32_t& m, svfloat32_t& v) {
    if (c.wd != 0.0f) {
        if (c.l2)
            g = svadd_f32_x(pg, g, svmul_n_f32_x(pg, p, c.wd));
        else
            p = svmul_n_f32_x(pg, p, c.decay);
    }
    m = svadd_f32_x(pg, svmul_n_f32_x(pg, m, c.b1), svmul_n_f32_x(pg, g, c.omb1));
    v = svadd_f32_x(pg, svmul_n_f32_x(pg, v, c.b2),
                    svmul_f32_x(pg, svmul_n_f32_x(pg, g, c.omb2), g));
    const svfloat32_t denom =
        svadd_n_f32_x(pg, svdiv_n_f32_x(pg, svsqrt_f32_x(pg, v), c.bc2_sqrt), c.eps);
    return svsub_f32_x(pg, p, svdiv_f32_x(pg, svmul_n_f32_x(pg, m, c.step_size), denom));
}

// Quantizes the staged block x[0, len) into codes out[0, len) and *scale (q_quantize_block).
inline void quantize_block(const float* x, int64_t len, optim::QMap q, uint8_t* out, float* scale) {
    const int64_t vl = static_cast<int64_t>(svcntw());
    svuint32_t acc = svdup_n_u32(0);
    for (int64_t i = 0; i < len; i += vl) {
        svbool_t pg = svwhilelt_b32(i, len);
        svuint32_t a = svand_n_u32_x(pg, svreinterpret_u32_f32(svld1_f32(pg, x + i)), 0x7fffffffu);
        acc = svmax_u32_m(pg, acc, a);
    }
    const optim::QBlockScale bs = optim::q_block_scale(svmaxv_u32(svptrue_b32(), acc));
    *scale = bs.scale;
    // cpu_adam's q8_encode8 (kernels_avx2.cpp) lane by lane: one IEEE add rounds y = x * inv to
    // its code's multiple of 2^(e-mbits) (nearest even), one fused multiply-subtract forms the
    // fp32 whose bits are code << (23 - mbits) (+0 for a zero magnitude); no clamp, as there:
    // |y| <= 1.875 (1 + 2^-24)^2 rounds to the largest code at most.
    const int bias = optim::q_bias(q);
    const int sh = 23 - q.mbits;
    const uint32_t min_exp = static_cast<uint32_t>(128 - bias) << 23;
    const float down = core::bits_f32(static_cast<uint32_t>(bias) << 23); // 2^(bias-127)
    for (int64_t i = 0; i < len; i += vl) {
        svbool_t pg = svwhilelt_b32(i, len);
        if (!bs.ok) {
            svst1b_u32(pg, out + i, svdup_n_u32(0));
            continue;
        }
        svfloat32_t y = svmul_n_f32_x(pg, svld1_f32(pg, x + i), bs.inv);
        svuint32_t u = svreinterpret_u32_f32(y);
        svuint32_t eb = svmax_n_u32_x(pg, svand_n_u32_x(pg, u, 0x7f800000u), min_exp);
        svuint32_t big = svadd_n_u32_x(pg, eb, static_cast<uint32_t>(sh) << 23);
        if (q.is_signed) big = svorr_u32_x(pg, big, svand_n_u32_x(pg, u, 0x80000000u));
        svfloat32_t sum = svadd_f32_x(pg, y, svreinterpret_f32_u32(big));
        svuint32_t lo = svsub_n_u32_x(pg, big, static_cast<uint32_t>(127 - bias) << 23);
        svuint32_t r = svreinterpret_u32_f32(
            svnmls_n_f32_x(pg, svreinterpret_f32_u32(lo), sum, down)); // sum * down - lo
        svuint32_t code = svlsr_n_u32_x(pg, r, sh);
        if (q.is_signed) // the 7-bit magnitude and r's sign in bit 7
            code = svorr_u32_x(pg, svand_n_u32_x(pg, code, 0x7fu),
                               svand_n_u32_x(pg, svlsr_n_u32_x(pg, r, 24), 0x80u));
        svst1b_u32(pg, out + i, code);
    }
}

// The step with Q8 moments and/or bf16 master params: per row as step_tile_f32 (same lane
// arithmetic), params stored through store_param; fp32/bf16 moments stored directly, Q8 moments
// staged per block and quantized when the block ends.
TileStats step_tile_q(const Consts& c, const Buffers& b, int64_t begin, int64_t end) {
    const int64_t vl = static_cast<int64_t>(svcntw());
    const svfloat32_t vscale = svdup_n_f32(c.scale);
    const bool q8 = b.sdt == SOF_STATE_Q8;
    const optim::QMap qm = optim::q8_map(true), qv = optim::q8_map(false);
    alignas(64) float sm[optim::kQBlockMax], sv[optim::kQBlockMax];
    int64_t block0 = begin; // first element of the block being staged
    for (int64_t r0 = begin; r0 < end; r0 += kRow) {
        prefetch_row(b, r0);
        int64_t r1 = r0 + kRow < end ? r0 + kRow : end;
        for (int64_t i = r0; i < r1; i += vl) {
            svbool_t pg = svwhilelt_b32(i, r1);
            svfloat32_t g = svmul_f32_x(pg, load_grad(pg, b.g, b.gdt, i), vscale);
            svfloat32_t p = load_param(pg, b, i);
            svfloat32_t m, v;
            if (q8) {
                m = load_q8(pg, b.m, i, b.ms[i / b.qb], qm);
                v = load_q8(pg, b.v, i, b.vs[i / b.qb], qv);
            } else {
                m = load_state(pg, b.m, b.sdt, i);
                v = load_state(pg, b.v, b.sdt, i);
            }
            p = adam_lanes(pg, c, g, p, m, v);
            svfloat32_t stored = store_param(pg, b, i, p);
            if (b.lowp) store_lowp(pg, b.lowp, b.ldt, i, stored);
            if (q8) {
                svst1_f32(pg, sm + (i - block0), m);
                svst1_f32(pg, sv + (i - block0), v);
            } else {
                store_state(pg, b.mo, b.sdt, i, m, b.streaming != 0);
                store_state(pg, b.vo, b.sdt, i, v, b.streaming != 0);
            }
        }
        if (q8 && (r1 - block0 == b.qb || r1 == end)) {
            quantize_block(sm, r1 - block0, qm, static_cast<uint8_t*>(b.mo) + block0,
                           b.mso + block0 / b.qb);
            quantize_block(sv, r1 - block0, qv, static_cast<uint8_t*>(b.vo) + block0,
                           b.vso + block0 / b.qb);
            block0 = r1;
        }
    }
    return sve_stats_tile(b.g, b.gdt, c.scale, begin, end);
}

} // namespace

int sve_vector_bits() {
    return static_cast<int>(svcntb() * 8);
}

// Statistics in a vector-length-independent order: within each kBlock block, column c (0..63)
// accumulates the squares of elements c, c+64, c+128, ... in row order (fp64, exact squares);
// the block sum adds columns 0..63 in order; the tile sum adds block sums in order.
TileStats sve_stats_tile(const void* g, int32_t gdt, float scale, int64_t begin, int64_t end) {
    TileStats ts{0.0, 0};
    const int64_t vd = static_cast<int64_t>(svcntd());
    const svfloat32_t vscale = svdup_n_f32(scale);
    const svfloat32_t vmax = svdup_n_f32(FLT_MAX);
    svbool_t nonfinite = svpfalse_b();
    for (int64_t b0 = begin; b0 < end; b0 += kBlock) {
        int64_t b1 = b0 + kBlock < end ? b0 + kBlock : end;
        double acc[kRow] = {}; // per-column partial sums
        for (int64_t r0 = b0; r0 < b1; r0 += kRow) {
            int64_t rn = b1 - r0 < kRow ? b1 - r0 : kRow;
            for (int64_t c = 0; c < rn; c += vd) {
                svbool_t pd = svwhilelt_b64(c, rn);
                svfloat32_t s = svmul_f32_x(pd, load_grad_wide(pd, g, gdt, r0 + c), vscale);
                svbool_t finite = svcmple_f32(pd, svabs_f32_x(pd, s), vmax);
                nonfinite = svorr_b_z(svptrue_b8(), nonfinite, svnot_b_z(pd, finite));
                svfloat64_t d = svcvt_f64_f32_x(pd, s);
                svfloat64_t a = svld1_f64(pd, acc + c);
                svst1_f64(pd, acc + c, svadd_f64_x(pd, a, svmul_f64_x(pd, d, d)));
            }
        }
        double block = 0.0;
        for (int64_t c = 0; c < kRow; c++)
            block += acc[c];
        ts.sumsq += block;
    }
    ts.nonfinite = svptest_any(svptrue_b8(), nonfinite) ? 1 : 0;
    return ts;
}

// The fp32-master, fp32/bf16-moment step (the kernel of issue 20, unchanged).
TileStats step_tile_f32(const Consts& c, const Buffers& b, int64_t begin, int64_t end) {
    const float* bp = static_cast<const float*>(b.p);
    float* bpo = static_cast<float*>(b.po);
    const int64_t vl = static_cast<int64_t>(svcntw());
    const svfloat32_t vscale = svdup_n_f32(c.scale);
    const bool streaming = b.streaming != 0;
    for (int64_t r0 = begin; r0 < end; r0 += kRow) {
        prefetch_row(b, r0);
        int64_t r1 = r0 + kRow < end ? r0 + kRow : end;
        for (int64_t i = r0; i < r1; i += vl) {
            svbool_t pg = svwhilelt_b32(i, r1);
            svfloat32_t g = svmul_f32_x(pg, load_grad(pg, b.g, b.gdt, i), vscale);
            svfloat32_t p = svld1_f32(pg, bp + i);
            svfloat32_t m = load_state(pg, b.m, b.sdt, i);
            svfloat32_t v = load_state(pg, b.v, b.sdt, i);
            p = adam_lanes(pg, c, g, p, m, v);
            store(pg, bpo, i, p, streaming);
            store_state(pg, b.mo, b.sdt, i, m, streaming);
            store_state(pg, b.vo, b.sdt, i, v, streaming);
            if (b.lowp) store_lowp(pg, b.lowp, b.ldt, i, p);
        }
    }
    return sve_stats_tile(b.g, b.gdt, c.scale, begin, end);
}

TileStats sve_step_tile(const Consts& c, const Buffers& b, int64_t begin, int64_t end) {
    if (b.sdt == SOF_STATE_Q8 || b.pdt != 0) return step_tile_q(c, b, begin, end);
    return step_tile_f32(c, b, begin, end);
}

void sve_rollback_tile(const Consts& c, const Buffers& b, int64_t begin, int64_t end) {
    const float* bp = static_cast<const float*>(b.p);
    float* bpo = static_cast<float*>(b.po);
    const int64_t vl = static_cast<int64_t>(svcntw());
    const svfloat32_t vscale = svdup_n_f32(c.scale), vb1 = svdup_n_f32(c.b1),
                      vb2 = svdup_n_f32(c.b2), vomb1 = svdup_n_f32(c.omb1),
                      vomb2 = svdup_n_f32(c.omb2), veps = svdup_n_f32(c.eps),
                      vwd = svdup_n_f32(c.wd), vdecay = svdup_n_f32(c.decay),
                      vstep = svdup_n_f32(c.step_size), vbc2 = svdup_n_f32(c.bc2_sqrt),
                      vzero = svdup_n_f32(0.0f);
    const bool decay = c.wd != 0.0f;
    for (int64_t i = begin; i < end; i += vl) {
        svbool_t pg = svwhilelt_b32(i, end);
        svfloat32_t p = svld1_f32(pg, bp + i);
        svfloat32_t m = load_state(pg, b.m, b.sdt, i);
        svfloat32_t v = load_state(pg, b.v, b.sdt, i);
        svfloat32_t denom = svadd_f32_x(pg, svdiv_f32_x(pg, svsqrt_f32_x(pg, v), vbc2), veps);
        p = svadd_f32_x(pg, p, svdiv_f32_x(pg, svmul_f32_x(pg, vstep, m), denom));
        svfloat32_t g = svmul_f32_x(pg, load_grad(pg, b.g, b.gdt, i), vscale);
        if (decay) {
            if (c.l2)
                g = svadd_f32_x(pg, g, svmul_f32_x(pg, vwd, p));
            else
                p = svdiv_f32_x(pg, p, vdecay);
        }
        m = svdiv_f32_x(pg, svsub_f32_x(pg, m, svmul_f32_x(pg, vomb1, g)), vb1);
        v = svdiv_f32_x(pg, svsub_f32_x(pg, v, svmul_f32_x(pg, svmul_f32_x(pg, vomb2, g), g)), vb2);
        v = svsel_f32(svcmpgt_f32(pg, v, vzero), v, vzero);
        svst1_f32(pg, bpo + i, p);
        store_state(pg, b.mo, b.sdt, i, m, false);
        store_state(pg, b.vo, b.sdt, i, v, false);
        if (b.lowp) store_lowp(pg, b.lowp, b.ldt, i, p);
    }
}

} // namespace sof::grace_adam
