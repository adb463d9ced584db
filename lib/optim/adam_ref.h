// Scalar reference AdamW/Adam step: the exact float arithmetic every optimizer plugin must match.
// Header-only (used by tests, benchmarks and plugins' scalar tails); compile with
// -ffp-contract=off.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/dtype.h"
#include "optim/qstate.h"
#include "optim/sof_optim_abi.h"
#include "optim/sof_optim_check.h"

namespace sof::optim {

// The decimal a user most likely wrote for an fp32 hyperparameter: the shortest decimal that
// rounds to x (0.999f -> 0.999), as a double. The ABI carries fp32 hparams, while PyTorch keeps
// them as Python doubles and forms 1-beta2, lr*wd, beta1^t in double; recovering the decimal
// reproduces PyTorch's constants exactly (1-0.999f in double is 1.3e-5 relatively off 1-0.999).
inline double hparam_decimal(float x) {
    if (!std::isfinite(x)) return x;
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(x));
        if (std::strtof(buf, nullptr) == x) return std::strtod(buf, nullptr);
    }
    return x;
}

// Per-call constants. Computed in double from the hparams' decimals (hparam_decimal) and rounded
// once to float, the way torch.optim.AdamW turns its Python-float scalars into fp32 operands:
//   decay     = 1 - lr*wd            (AdamW only)
//   omb1/omb2 = 1 - beta1, 1 - beta2
//   step_size = lr / (1 - b1^t)      (lr when bias correction is off)
//   bc2_sqrt  = sqrt(1 - b2^t)       (1 when bias correction is off)
// b1, b2, eps, wd and scale are used as the fp32 values given.
struct AdamConsts {
    float scale;      // grad_scale, applied to every grad before use
    float b1, b2;     // betas
    float omb1, omb2; // 1 - beta1, 1 - beta2
    float eps;
    float wd;        // weight decay; 0 disables both decay modes
    float decay;     // 1 - lr*wd
    float step_size; // lr / bc1
    float bc2_sqrt;  // sqrt(bc2)
    bool l2;         // true: Adam with L2 penalty (g += wd*p); false: AdamW (p *= decay)
};

inline AdamConsts adam_consts(const sof_optim_hparams& hp) {
    AdamConsts c{};
    double lr = hparam_decimal(hp.lr), b1 = hparam_decimal(hp.beta1);
    double b2 = hparam_decimal(hp.beta2), wd = hparam_decimal(hp.weight_decay);
    c.scale = hp.grad_scale;
    c.b1 = hp.beta1;
    c.b2 = hp.beta2;
    c.omb1 = static_cast<float>(1.0 - b1);
    c.omb2 = static_cast<float>(1.0 - b2);
    c.eps = hp.eps;
    c.wd = hp.weight_decay;
    c.decay = static_cast<float>(1.0 - lr * wd);
    if (hp.bias_correction) {
        double t = static_cast<double>(hp.step);
        c.step_size = static_cast<float>(lr / (1.0 - std::pow(b1, t)));
        c.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, t)));
    } else {
        c.step_size = hp.lr;
        c.bc2_sqrt = 1.0f;
    }
    c.l2 = hp.mode == SOF_ADAM_L2;
    return c;
}

// One element, in this exact order of fp32 operations (each rounded, no fused multiply-add):
//   g      = graw * scale
//   AdamW: p = p * decay            L2: g = g + wd * p          (only when wd != 0)
//   m      = b1 * m + omb1 * g
//   v      = b2 * v + (omb2 * g) * g
//   denom  = sqrt(v) / bc2_sqrt + eps
//   p      = p - (step_size * m) / denom
// This is torch.optim.AdamW (1.13, foreach=False): mul_(1-lr*wd); exp_avg.mul_(b1).add_(g, 1-b1);
// exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2); denom = sqrt(v)/bc2_sqrt + eps;
// p.addcdiv_(m, denom, -step_size), which evaluates p + (-step_size * m) / denom.
inline void adam_ref_elem(const AdamConsts& c, float& p, float& m, float& v, float graw) {
    float g = graw * c.scale;
    if (c.wd != 0.0f) {
        if (c.l2)
            g = g + c.wd * p;
        else
            p = p * c.decay;
    }
    m = c.b1 * m + c.omb1 * g;
    v = c.b2 * v + (c.omb2 * g) * g;
    float denom = std::sqrt(v) / c.bc2_sqrt + c.eps;
    p = p - (c.step_size * m) / denom;
}

// Arithmetic inverse of adam_ref_elem (p, m, v are the stepped values on entry); not bitwise:
// see docs/optimizer-plugins.md for the bound. v is clamped at 0.
inline void adam_ref_rollback_elem(const AdamConsts& c, float& p, float& m, float& v, float graw) {
    float denom = std::sqrt(v) / c.bc2_sqrt + c.eps;
    p = p + (c.step_size * m) / denom;
    float g = graw * c.scale;
    if (c.wd != 0.0f) {
        if (c.l2)
            g = g + c.wd * p;
        else
            p = p / c.decay;
    }
    m = (m - c.omb1 * g) / c.b1;
    v = (v - (c.omb2 * g) * g) / c.b2;
    v = v > 0.0f ? v : 0.0f;
}

inline float adam_ref_grad(const void* g, int32_t dtype, int64_t i) {
    if (dtype == SOF_DTYPE_F32) return static_cast<const float*>(g)[i];
    uint16_t h = static_cast<const uint16_t*>(g)[i];
    return dtype == SOF_DTYPE_BF16 ? core::bf16_to_f32(h) : core::f16_to_f32(h);
}

// Adam's state slots: m (either sign, Q8 map s1e4m3) and v (never negative, Q8 map e5m3).
inline const sof_slot_info* adam_slots() {
    static const sof_slot_info kSlots[2] = {{"exp_avg", 1, 0}, {"exp_avg_sq", 0, 0}};
    return kSlots;
}
constexpr int32_t kAdamSlots = 2;

// Master param i of dtype dt (fp32, or bf16 widened exactly).
inline float ref_param(const void* p, int32_t dt, int64_t i) {
    if (dt == SOF_DTYPE_F32) return static_cast<const float*>(p)[i];
    return core::bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

// Stores the new master param i of slice s: fp32 as is, bf16 stochastically rounded (qstate.h:
// Philox keyed by hp.seed, hp.step and the element's number s.index0 + i). Returns the value as
// stored (what the low-precision copy converts).
inline float ref_store_param(const sof_optim_slice& s, const sof_optim_hparams& hp, int64_t i,
                             float p) {
    if (s.param_dtype == SOF_DTYPE_F32) {
        static_cast<float*>(s.param_out)[i] = p;
        return p;
    }
    uint16_t h = f32_to_bf16_sr(p, sr_bits(hp.seed, hp.step, static_cast<uint64_t>(s.index0 + i)));
    static_cast<uint16_t*>(s.param_out)[i] = h;
    return core::bf16_to_f32(h);
}

// Moment i of a fp32/bf16 state buffer of format f (bf16 widened exactly).
inline float adam_ref_state(const void* x, int32_t f, int64_t i) {
    if (f == SOF_STATE_F32) return static_cast<const float*>(x)[i];
    return core::bf16_to_f32(static_cast<const uint16_t*>(x)[i]);
}

// Stores moment i into a fp32/bf16 state buffer of format f (bf16: rounded to nearest even).
inline void adam_ref_store_state(void* x, int32_t f, int64_t i, float val) {
    if (f == SOF_STATE_F32)
        static_cast<float*>(x)[i] = val;
    else
        static_cast<uint16_t*>(x)[i] = core::f32_to_bf16(val);
}

// Element i of state slot q (is_signed: the slot's sign, picks the Q8 map), as fp32: the value,
// the bf16 widened, or the Q8 code decoded times its block's scale.
inline float ref_slot_load(const sof_state_slot& q, bool is_signed, int64_t i) {
    if (q.format != SOF_STATE_Q8) return adam_ref_state(q.data, q.format, i);
    return q_value(static_cast<const uint8_t*>(q.data)[i], q.scale[i / q.block], q8_map(is_signed));
}

// Stores new values vals[0..len) of elements [i0, i0 + len) into slot q's outputs. Q8: i0 starts a
// block and len is the block's length (a whole block is quantized at once).
inline void ref_slot_store(const sof_state_slot& q, bool is_signed, int64_t i0, int64_t len,
                           const float* vals) {
    if (q.format != SOF_STATE_Q8) {
        for (int64_t j = 0; j < len; j++)
            adam_ref_store_state(q.data_out, q.format, i0 + j, vals[j]);
        return;
    }
    q_quantize_block(vals, len, q8_map(is_signed), static_cast<uint8_t*>(q.data_out) + i0,
                     q.scale_out + i0 / q.block);
}

// Elements per chunk of a slice: the quantized slots' block (they share one), else 256 (any
// chunking gives the same result for per-element formats).
inline int64_t ref_chunk(const sof_optim_slice& s) {
    for (int k = 0; k < s.num_slots; k++)
        if (s.slot[k].format == SOF_STATE_Q8) return s.slot[k].block;
    return 256;
}

inline uint16_t adam_ref_lowp(float p, int32_t dtype) {
    return dtype == SOF_DTYPE_BF16 ? core::f32_to_bf16(p) : core::f32_to_f16(p);
}

// Statistics of the scaled grads: sum of (scale*g)^2 in fp64 (index order) and non-finite flag.
inline sof_optim_result adam_ref_stats(const void* grad, int32_t dtype, int64_t n, float scale) {
    sof_optim_result r{};
    for (int64_t i = 0; i < n; i++) {
        float g = adam_ref_grad(grad, dtype, i) * scale;
        r.grad_sumsq += static_cast<double>(g) * static_cast<double>(g);
        if (!std::isfinite(g)) r.nonfinite = 1;
    }
    return r;
}

// A whole slice, reading the inputs and writing the outputs (in place or separate), lowp copy
// of the new params when lowp_out is set. Per chunk (a Q8 block): every element steps in fp32
// from its loaded params and moments (adam_ref_elem), the param is stored (bf16 master:
// stochastically rounded), then each slot stores the chunk's new moments (bf16: nearest even,
// Q8: the block quantized).
inline sof_optim_result adam_ref_step(const sof_optim_slice& s, const sof_optim_hparams& hp) {
    AdamConsts c = adam_consts(hp);
    const sof_slot_info* info = adam_slots();
    const int64_t chunk = ref_chunk(s);
    float mv[2][kQBlockMax];
    for (int64_t i0 = 0; i0 < s.n; i0 += chunk) {
        const int64_t len = s.n - i0 < chunk ? s.n - i0 : chunk;
        for (int64_t j = 0; j < len; j++) {
            const int64_t i = i0 + j;
            float p = ref_param(s.param, s.param_dtype, i);
            float m = ref_slot_load(s.slot[0], info[0].is_signed, i);
            float v = ref_slot_load(s.slot[1], info[1].is_signed, i);
            adam_ref_elem(c, p, m, v, adam_ref_grad(s.grad, s.grad_dtype, i));
            float stored = ref_store_param(s, hp, i, p);
            if (s.lowp_out)
                static_cast<uint16_t*>(s.lowp_out)[i] = adam_ref_lowp(stored, s.lowp_dtype);
            mv[0][j] = m;
            mv[1][j] = v;
        }
        ref_slot_store(s.slot[0], info[0].is_signed, i0, len, mv[0]);
        ref_slot_store(s.slot[1], info[1].is_signed, i0, len, mv[1]);
    }
    return adam_ref_stats(s.grad, s.grad_dtype, s.n, hp.grad_scale);
}

// In-place rollback of a slice (param and the fp32/bf16 slots hold the stepped state).
inline void adam_ref_rollback(const sof_optim_slice& s, const sof_optim_hparams& hp) {
    AdamConsts c = adam_consts(hp);
    float* pp = static_cast<float*>(s.param_out);
    for (int64_t i = 0; i < s.n; i++) {
        float p = pp[i], m = adam_ref_state(s.slot[0].data, s.slot[0].format, i);
        float v = adam_ref_state(s.slot[1].data, s.slot[1].format, i);
        adam_ref_rollback_elem(c, p, m, v, adam_ref_grad(s.grad, s.grad_dtype, i));
        pp[i] = p;
        adam_ref_store_state(s.slot[0].data_out, s.slot[0].format, i, m);
        adam_ref_store_state(s.slot[1].data_out, s.slot[1].format, i, v);
        if (s.lowp_out) static_cast<uint16_t*>(s.lowp_out)[i] = adam_ref_lowp(p, s.lowp_dtype);
    }
}

} // namespace sof::optim
