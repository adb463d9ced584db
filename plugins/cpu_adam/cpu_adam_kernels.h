// cpu_adam kernel interface: one tile of an AdamW/Adam step (or of grad statistics) per call,
// implemented once per instruction set (scalar, AVX2+FMA, AVX-512) and picked at run time.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "optim/adam_ref.h"
#include "optim/qstate.h"

namespace sof::cpu_adam {

// One tile of a slice: n elements starting at the same offset in every buffer (a tile of a
// slice with Q8 slots starts at a block boundary).
struct Tile {
    int64_t n;
    const float* p;      // (n) fp32 params, read (pd fp32)
    const void* g;       // (n) grads of dtype gd, read
    const void* m;       // (n) exp_avg of format sd, read
    const void* v;       // (n) exp_avg_sq of format sd, read
    float* po;           // (n) fp32 params out (== p in place)
    void* mo;            // (n) exp_avg out (format sd)
    void* vo;            // (n) exp_avg_sq out (format sd)
    void* lowp;          // (n) bf16/fp16 copy of the new params, or nullptr
    int32_t gd;          // grad dtype (sof_dtype)
    int32_t ld;          // lowp dtype (sof_dtype)
    int32_t sd;          // state format of m, v (sof_state_format: F32, BF16 or Q8)
    int32_t pd;          // master dtype: SOF_DTYPE_F32 (p, po) or SOF_DTYPE_BF16 (p16, po16)
    const uint16_t* p16; // (n) bf16 master params, read (pd bf16)
    uint16_t* po16;      // (n) bf16 master params out
    const float* ms;     // Q8: (ceil(n/qb)) scales of m, read
    const float* vs;     // Q8: scales of v, read
    float* mso;          // Q8: scales of m out
    float* vso;          // Q8: scales of v out
    int32_t qb;          // Q8: elements per scale (a power of two, 64..4096), else 0
    int64_t index0;      // number of element 0 in the flat parameter space (stochastic rounding)
};

// The tile needs the quantized / bf16-master kernel (KernelSet::step_q), not the fp32 one.
inline bool tile_needs_q(const Tile& t) {
    return t.sd == SOF_STATE_Q8 || t.pd == SOF_DTYPE_BF16;
}

// Per-call constants of cpu_adam's arithmetic: optim::adam_consts (the decimals PyTorch would
// use, rounded once to fp32) plus nss = -step_size and rbc2 = fp32(1 / sqrt(1 - b2^t)) (1 without
// bias correction), so that the element needs one divide.
struct StepConsts {
    float scale, b1, b2, omb1, omb2, eps, wd, decay;
    float nss;     // -lr / (1 - b1^t)
    float rbc2;    // 1 / sqrt(1 - b2^t)
    bool l2;       // Adam with L2 penalty (g += wd*p) instead of AdamW (p *= decay)
    uint64_t seed; // stochastic rounding of bf16 master params: Philox key
    int64_t step;  // and the step its counter holds
};

inline StepConsts step_consts(const sof_optim_hparams& hp) {
    optim::AdamConsts a = optim::adam_consts(hp);
    StepConsts c{};
    c.scale = a.scale;
    c.b1 = a.b1;
    c.b2 = a.b2;
    c.omb1 = a.omb1;
    c.omb2 = a.omb2;
    c.eps = a.eps;
    c.wd = a.wd;
    c.decay = a.decay;
    c.nss = -a.step_size;
    c.l2 = a.l2;
    c.seed = hp.seed;
    c.step = hp.step;
    c.rbc2 = 1.0f;
    if (hp.bias_correction) {
        double b2 = optim::hparam_decimal(hp.beta2);
        c.rbc2 =
            static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(b2, static_cast<double>(hp.step))));
    }
    return c;
}

// cpu_adam's element arithmetic, the same in every variant (vector lanes and scalar tails), each
// line one IEEE fp32 operation, fma = fused multiply-add (one rounding):
//   g     = graw * scale
//   AdamW: p = p * decay                     L2: g = fma(wd, p, g)      (only when wd != 0)
//   m     = fma(b1, m, omb1 * g)
//   v     = fma(b2, v, (omb2 * g) * g)
//   denom = fma(sqrt(v), rbc2, eps)
//   p     = fma(nss, m / denom, p)
// One divide and one square root (optim::adam_ref_elem, the exact PyTorch order, has two divides
// and no FMA); results are within the conformance tolerance of adam_ref_elem (tests/optim) and
// bitwise the same in every variant, for any tiling and thread count.
inline void step_elem(const StepConsts& c, float& p, float& m, float& v, float graw) {
    float g = graw * c.scale;
    if (c.wd != 0.0f) {
        if (c.l2)
            g = std::fma(c.wd, p, g);
        else
            p = p * c.decay;
    }
    m = std::fma(c.b1, m, c.omb1 * g);
    v = std::fma(c.b2, v, (c.omb2 * g) * g);
    float denom = std::fma(std::sqrt(v), c.rbc2, c.eps);
    p = std::fma(c.nss, m / denom, p);
}

// The vector q8 decode's per-block factor (kernels_avx2.cpp's Q8Factor, the AVX-512 twin
// broadcasts the same): the code shifted into an fp32 times f is q_decode(c) * scale with one
// rounding, f = scale * 2^(127-bias); where f overflows (a finite scale >= 2^(1+bias)) the
// decode multiplies twice, by f = 2^(127-bias) (exact) and then by s = scale.
struct Q8FactorScalars {
    float f = 0, s = 1;
    bool twice = false;
};

template <bool SIGNED> inline Q8FactorScalars q8_factor_scalars(float scale) {
    constexpr int bias = optim::q_bias(optim::q8_map(SIGNED));
    const float up = core::bits_f32(static_cast<uint32_t>(254 - bias) << 23); // 2^(127-bias)
    const float f = scale * up;
    if (std::isinf(f) && !std::isinf(scale)) return {up, scale, true};
    return {f, 1.0f, false};
}

// Arithmetic inverse of step_elem (p, m, v hold the stepped values on entry), for adam_rollback:
//   denom = fma(sqrt(v), rbc2, eps);   p = fma(-nss, m / denom, p);   g = graw * scale
//   L2: g = fma(wd, p, g) (with the recovered p)      AdamW: p = p / decay
//   m = (m - omb1 * g) / b1;   v = max(0, (v - (omb2 * g) * g) / b2)
// Not bitwise (see docs/optimizer-plugins.md for the bound); after a first step from m = v = 0
// the moments come back exactly.
inline void rollback_elem(const StepConsts& c, float& p, float& m, float& v, float graw) {
    float denom = std::fma(std::sqrt(v), c.rbc2, c.eps);
    p = std::fma(-c.nss, m / denom, p);
    float g = graw * c.scale;
    if (c.wd != 0.0f) {
        if (c.l2)
            g = std::fma(c.wd, p, g);
        else
            p = p / c.decay;
    }
    m = (m - c.omb1 * g) / c.b1;
    v = (v - (c.omb2 * g) * g) / c.b2;
    v = v > 0.0f ? v : 0.0f;
}

// Sum of squares of the scaled grads in the vector variants: per block of kSumBlock elements
// (counted from the tile start) each of 16 fp32 lanes sums the squares of 16 elements with FMA;
// the 16 lane sums are widened and added into fp64 accumulators, combined in a fixed order at
// the end of the tile. Relative error <= 16 * 2^-24 (~1e-6) of the exact sum. A block whose lane
// sums are not all 0 or within [kSumLo, kSumHi) (a NaN/Inf or huge grad, or squares near the
// fp32 underflow) is summed again in fp64 from its grads, so non-finite grads and grads whose
// squares overflow fp32 are still reported exactly as in fp64. Deterministic: depends only on
// the tile's grads, never on threads or timing; grad_stats uses the same blocks.
constexpr int64_t kSumBlock = 256;
constexpr float kSumLo = 0x1p-100f;
constexpr float kSumHi = 0x1p100f;

// Software prefetch distance in elements for the input streams p, g, m, v (0 = none), issued
// once per 16 elements; see docs/performance.md.
#ifndef SOF_CPU_ADAM_PREFETCH
#define SOF_CPU_ADAM_PREFETCH 512
#endif
constexpr int64_t kPrefetch = SOF_CPU_ADAM_PREFETCH;

// Prefetches the lines holding element i + kPrefetch of every input stream of t (no faults: a
// prefetch past the end of a buffer is dropped). GD, PD: the grads' and the master's dtypes, SB:
// bytes per moment (fp32 4, bf16 2, Q8 1), compile-time so that the loop reads no format from t.
template <int GD, int PD, int SB> inline void prefetch_inputs(const Tile& t, int64_t i) {
    if constexpr (kPrefetch > 0) {
        int64_t k = i + kPrefetch;
        if constexpr (PD == SOF_DTYPE_F32)
            __builtin_prefetch(t.p + k, 0, 3);
        else
            __builtin_prefetch(t.p16 + k, 0, 3);
        __builtin_prefetch(static_cast<const char*>(t.m) + k * SB, 0, 3);
        __builtin_prefetch(static_cast<const char*>(t.v) + k * SB, 0, 3);
        __builtin_prefetch(static_cast<const char*>(t.g) + k * (GD == SOF_DTYPE_F32 ? 4 : 2), 0, 3);
    }
}

// The scalar element of a tile in every variant (tails and the scalar kernel): element i through
// step_elem, moments widened from / rounded to the state format (bf16: nearest even); fp32 master,
// fp32/bf16 moments (tile_needs_q false).
inline void step_tile_elem(const StepConsts& c, const Tile& t, int64_t i, float graw) {
    float p = t.p[i], m = optim::adam_ref_state(t.m, t.sd, i);
    float v = optim::adam_ref_state(t.v, t.sd, i);
    step_elem(c, p, m, v, graw);
    t.po[i] = p;
    optim::adam_ref_store_state(t.mo, t.sd, i, m);
    optim::adam_ref_store_state(t.vo, t.sd, i, v);
    if (t.lowp) static_cast<uint16_t*>(t.lowp)[i] = optim::adam_ref_lowp(p, t.ld);
}

// The stochastic-rounding bits of consecutive elements (optim::sr_bits): one Philox4x32-10 draw
// serves four elements (words index % 4 of draw index / 4), so it is computed once per four.
struct SrCache {
    uint64_t draw = ~uint64_t{0}; // draw index held in d
    core::Philox4 d{};
    uint32_t bits(uint64_t seed, int64_t step, uint64_t index) {
        if ((index >> 2) != draw) {
            draw = index >> 2;
            d = core::philox_draw(seed, draw, static_cast<uint32_t>(step), optim::kSrStream);
        }
        return d.v[index & 3u] >> 16;
    }
};

// The scalar element of a tile that needs step_q (tails and the scalar kernel): loads p (fp32 or
// bf16), m and v (Q8: decoded times the block's scale), runs step_elem, stores the param (bf16:
// stochastically rounded, optim::f32_to_bf16_sr) and the copy; returns the new m, v, which the
// caller stores (fp32/bf16) or stages for the block's quantization (Q8).
inline void step_q_elem(const StepConsts& c, const Tile& t, int64_t i, float graw, float* mo,
                        float* vo, SrCache* sr = nullptr) {
    float p = t.pd == SOF_DTYPE_F32 ? t.p[i] : core::bf16_to_f32(t.p16[i]);
    float m, v;
    if (t.sd == SOF_STATE_Q8) {
        m = optim::q_value(static_cast<const uint8_t*>(t.m)[i], t.ms[i / t.qb],
                           optim::q8_map(true));
        v = optim::q_value(static_cast<const uint8_t*>(t.v)[i], t.vs[i / t.qb],
                           optim::q8_map(false));
    } else {
        m = optim::adam_ref_state(t.m, t.sd, i);
        v = optim::adam_ref_state(t.v, t.sd, i);
    }
    step_elem(c, p, m, v, graw);
    float stored = p;
    if (t.pd == SOF_DTYPE_F32) {
        t.po[i] = p;
    } else {
        const uint64_t e = static_cast<uint64_t>(t.index0 + i);
        uint16_t h = optim::f32_to_bf16_sr(p, sr ? sr->bits(c.seed, c.step, e)
                                                 : optim::sr_bits(c.seed, c.step, e));
        t.po16[i] = h;
        stored = core::bf16_to_f32(h);
    }
    if (t.lowp) static_cast<uint16_t*>(t.lowp)[i] = optim::adam_ref_lowp(stored, t.ld);
    *mo = m;
    *vo = v;
}

// Stores the new moments of element i of a tile with fp32/bf16 slots (step_q_elem's outputs).
inline void store_mv_elem(const Tile& t, int64_t i, float m, float v) {
    optim::adam_ref_store_state(t.mo, t.sd, i, m);
    optim::adam_ref_store_state(t.vo, t.sd, i, v);
}

// Step one tile and return the sum of squares of the scaled grads (NaN/Inf when a scaled grad
// is not finite). `nt`: write outputs with streaming stores (separate-output mode; the caller
// guarantees po/mo/vo and lowp are 64-byte aligned at the tile start).
using StepTileFn = double (*)(const StepConsts& c, const Tile& t, bool nt);
// Sum of squares of scale*g over one tile, accumulated in the same order as StepTileFn of the
// same variant (so grad_stats and adam_step report bitwise equal statistics).
using StatsTileFn = double (*)(const void* g, int32_t gd, int64_t n, float scale);

// The scalar step of a tile that needs step_q (the scalar variant's step_q; the vector variants'
// step_q paths match it bitwise and use step_q_elem for the tile's last len % 16 elements): per
// element in index order the fp64 sum of squares, step_q_elem, and the moments stored
// (fp32/bf16) or staged per block and quantized when the block is complete
// (optim::q_quantize_block).
inline double step_tile_q_scalar(const StepConsts& c, const Tile& t) {
    double sumsq = 0.0;
    const bool q8 = t.sd == SOF_STATE_Q8;
    alignas(64) float sm[optim::kQBlockMax], sv[optim::kQBlockMax];
    const int64_t chunk = q8 ? t.qb : optim::kQBlockMax;
    SrCache sr;
    for (int64_t i0 = 0; i0 < t.n; i0 += chunk) {
        const int64_t len = t.n - i0 < chunk ? t.n - i0 : chunk;
        for (int64_t j = 0; j < len; j++) {
            const int64_t i = i0 + j;
            float graw = optim::adam_ref_grad(t.g, t.gd, i);
            float gs = graw * c.scale;
            sumsq += static_cast<double>(gs) * static_cast<double>(gs);
            float m, v;
            step_q_elem(c, t, i, graw, &m, &v, &sr);
            if (q8) {
                sm[j] = m;
                sv[j] = v;
            } else {
                store_mv_elem(t, i, m, v);
            }
        }
        if (q8) {
            optim::q_quantize_block(sm, len, optim::q8_map(true), static_cast<uint8_t*>(t.mo) + i0,
                                    t.mso + i0 / t.qb);
            optim::q_quantize_block(sv, len, optim::q8_map(false), static_cast<uint8_t*>(t.vo) + i0,
                                    t.vso + i0 / t.qb);
        }
    }
    return sumsq;
}

struct KernelSet {
    const char* name; // "scalar", "avx2", "avx512"
    StepTileFn step;  // fp32 master, fp32/bf16 moments
    StatsTileFn stats;
    StepTileFn step_q; // Q8 moments or bf16 master (tile_needs_q); same statistics as step
    const char* q8;    // instruction set of step_q's Q8 moments (decode, step, encode)
    const char* sr;    // instruction set of step_q's bf16 master (Philox, stochastic rounding)
};

KernelSet scalar_kernels();
KernelSet avx2_kernels();
KernelSet avx512_kernels();

} // namespace sof::cpu_adam
