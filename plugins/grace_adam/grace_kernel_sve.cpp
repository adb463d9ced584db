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
    int64_t sbytes = b.sdt == 0 ? 4 : 2;
    svprfw(all, b.p + i + kAhead, SV_PLDL1STRM);
    svprfb(all, static_cast<const char*>(b.m) + (i + kAhead) * sbytes, SV_PLDL1STRM);
    svprfb(all, static_cast<const char*>(b.v) + (i + kAhead) * sbytes, SV_PLDL1STRM);
    int64_t gbytes = b.gdt == 0 ? 4 : 2;
    svprfb(all, static_cast<const char*>(b.g) + (i + kAhead) * gbytes, SV_PLDL1STRM);
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

TileStats sve_step_tile(const Consts& c, const Buffers& b, int64_t begin, int64_t end) {
    const int64_t vl = static_cast<int64_t>(svcntw());
    const svfloat32_t vscale = svdup_n_f32(c.scale), vb1 = svdup_n_f32(c.b1),
                      vb2 = svdup_n_f32(c.b2), vomb1 = svdup_n_f32(c.omb1),
                      vomb2 = svdup_n_f32(c.omb2), veps = svdup_n_f32(c.eps),
                      vwd = svdup_n_f32(c.wd), vdecay = svdup_n_f32(c.decay),
                      vstep = svdup_n_f32(c.step_size), vbc2 = svdup_n_f32(c.bc2_sqrt);
    const bool decay = c.wd != 0.0f;
    const bool streaming = b.streaming != 0;
    for (int64_t r0 = begin; r0 < end; r0 += kRow) {
        prefetch_row(b, r0);
        int64_t r1 = r0 + kRow < end ? r0 + kRow : end;
        for (int64_t i = r0; i < r1; i += vl) {
            svbool_t pg = svwhilelt_b32(i, r1);
            svfloat32_t g = svmul_f32_x(pg, load_grad(pg, b.g, b.gdt, i), vscale);
            svfloat32_t p = svld1_f32(pg, b.p + i);
            svfloat32_t m = load_state(pg, b.m, b.sdt, i);
            svfloat32_t v = load_state(pg, b.v, b.sdt, i);
            if (decay) {
                if (c.l2)
                    g = svadd_f32_x(pg, g, svmul_f32_x(pg, vwd, p));
                else
                    p = svmul_f32_x(pg, p, vdecay);
            }
            m = svadd_f32_x(pg, svmul_f32_x(pg, vb1, m), svmul_f32_x(pg, vomb1, g));
            v = svadd_f32_x(pg, svmul_f32_x(pg, vb2, v),
                            svmul_f32_x(pg, svmul_f32_x(pg, vomb2, g), g));
            svfloat32_t denom = svadd_f32_x(pg, svdiv_f32_x(pg, svsqrt_f32_x(pg, v), vbc2), veps);
            p = svsub_f32_x(pg, p, svdiv_f32_x(pg, svmul_f32_x(pg, vstep, m), denom));
            store(pg, b.po, i, p, streaming);
            store_state(pg, b.mo, b.sdt, i, m, streaming);
            store_state(pg, b.vo, b.sdt, i, v, streaming);
            if (b.lowp) store_lowp(pg, b.lowp, b.ldt, i, p);
        }
    }
    return sve_stats_tile(b.g, b.gdt, c.scale, begin, end);
}

void sve_rollback_tile(const Consts& c, const Buffers& b, int64_t begin, int64_t end) {
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
        svfloat32_t p = svld1_f32(pg, b.p + i);
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
        svst1_f32(pg, b.po + i, p);
        store_state(pg, b.mo, b.sdt, i, m, false);
        store_state(pg, b.vo, b.sdt, i, v, false);
        if (b.lowp) store_lowp(pg, b.lowp, b.ldt, i, p);
    }
}

} // namespace sof::grace_adam
