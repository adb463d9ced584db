// Scalar twin of the grace_adam / gpu_adam kernels: the reference AdamW/Adam order, one element at
// a time, used by tests/grace (cross-built for aarch64) and tests/cuda. Build with -ffp-contract=off.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "optim/sof_optim_abi.h"

namespace sof::test {

// Per-slice constants, computed in double and rounded to float (as both plugins do).
struct TwinConsts {
    float scale;     // grad_scale
    float b1, b2;    // betas
    float omb1, omb2; // 1 - betas
    float eps;
    float wd;        // weight decay (0: none)
    float decay;     // 1 - lr*wd
    float step_size; // lr / (1 - b1^t), or lr
    float bc2_sqrt;  // sqrt(1 - b2^t), or 1
    bool l2;         // Adam with L2 penalty instead of decoupled decay
};

inline TwinConsts twin_consts(const sof_adam_hparams& hp) {
    TwinConsts c{};
    double lr = hp.lr, b1 = hp.beta1, b2 = hp.beta2, wd = hp.weight_decay;
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

inline float twin_grad(const void* g, int32_t dtype, int64_t i) {
    if (dtype == SOF_DTYPE_F32) return static_cast<const float*>(g)[i];
    uint16_t h = static_cast<const uint16_t*>(g)[i];
    return dtype == SOF_DTYPE_BF16 ? core::bf16_to_f32(h) : core::f16_to_f32(h);
}

inline uint16_t twin_lowp(float p, int32_t dtype) {
    return dtype == SOF_DTYPE_BF16 ? core::f32_to_bf16(p) : core::f32_to_f16(p);
}

// One element: p *= 1-lr*wd (AdamW) or g += wd*p (L2); m = b1*m + (1-b1)*g;
// v = b2*v + (1-b2)*g*g; denom = sqrt(v)/sqrt(bc2) + eps; p -= (lr/bc1)*m/denom.
inline void twin_elem(const TwinConsts& c, float& p, float& m, float& v, float graw, float& gs) {
    float g = graw * c.scale;
    gs = g;
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

// Arithmetic inverse of twin_elem (p, m, v are the stepped values on entry).
inline void twin_rollback_elem(const TwinConsts& c, float& p, float& m, float& v, float graw) {
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

// Statistics in the grace_adam order: fp64 partial per 64-element tile (elements in index
// order), tiles summed in index order.
inline sof_adam_result twin_stats(const void* grad, int32_t dtype, int64_t n, float scale) {
    sof_adam_result r{};
    for (int64_t t0 = 0; t0 < n; t0 += 64) {
        double tile = 0.0;
        for (int64_t i = t0; i < n && i < t0 + 64; i++) {
            float g = twin_grad(grad, dtype, i) * scale;
            tile += static_cast<double>(g) * static_cast<double>(g);
            if (!std::isfinite(g)) r.nonfinite = 1;
        }
        r.grad_sumsq += tile;
    }
    return r;
}

// A whole slice, reading inputs and writing outputs like the plugins (in place or separate).
inline sof_adam_result twin_step(const sof_adam_slice& s, const sof_adam_hparams& hp) {
    TwinConsts c = twin_consts(hp);
    for (int64_t i = 0; i < s.n; i++) {
        float p = s.param[i], m = s.exp_avg[i], v = s.exp_avg_sq[i], gs;
        twin_elem(c, p, m, v, twin_grad(s.grad, s.grad_dtype, i), gs);
        s.param_out[i] = p;
        s.exp_avg_out[i] = m;
        s.exp_avg_sq_out[i] = v;
        if (s.lowp_out) static_cast<uint16_t*>(s.lowp_out)[i] = twin_lowp(p, s.lowp_dtype);
    }
    return twin_stats(s.grad, s.grad_dtype, s.n, hp.grad_scale);
}

inline void twin_rollback(const sof_adam_slice& s, const sof_adam_hparams& hp) {
    TwinConsts c = twin_consts(hp);
    for (int64_t i = 0; i < s.n; i++) {
        float p = s.param[i], m = s.exp_avg[i], v = s.exp_avg_sq[i];
        twin_rollback_elem(c, p, m, v, twin_grad(s.grad, s.grad_dtype, i));
        s.param_out[i] = p;
        s.exp_avg_out[i] = m;
        s.exp_avg_sq_out[i] = v;
        if (s.lowp_out) static_cast<uint16_t*>(s.lowp_out)[i] = twin_lowp(p, s.lowp_dtype);
    }
}

// Distance in units in the last place between two floats (0 for identical bits, NaN == NaN).
inline int64_t ulp_distance(float a, float b) {
    if (std::isnan(a) && std::isnan(b)) return 0;
    if (std::isnan(a) || std::isnan(b)) return INT64_MAX;
    int32_t ia, ib;
    std::memcpy(&ia, &a, 4);
    std::memcpy(&ib, &b, 4);
    int64_t la = ia < 0 ? static_cast<int64_t>(INT32_MIN) - ia : ia;
    int64_t lb = ib < 0 ? static_cast<int64_t>(INT32_MIN) - ib : ib;
    return la > lb ? la - lb : lb - la;
}

} // namespace sof::test
