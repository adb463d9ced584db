// Test twin of grace_adam / gpu_adam: the scalar reference (optim/adam_ref.h) plus the grad
// statistics in grace_adam's fixed block/column order. Used by tests/grace and tests/cuda.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "optim/adam_ref.h"

namespace sof::test {

// Statistics in the grace_adam order: in each 4096-element block, column c (0..63) sums the fp64
// squares of elements c, c+64, ... in row order; block sum = columns 0..63 in order; tile sum
// (16384 elements) = its blocks in order; total = tiles in order.
inline sof_optim_result twin_stats(const void* grad, int32_t dtype, int64_t n, float scale) {
    sof_optim_result r{};
    for (int64_t t0 = 0; t0 < n; t0 += 16384) {
        double tile = 0.0;
        for (int64_t b0 = t0; b0 < n && b0 < t0 + 16384; b0 += 4096) {
            double col[64] = {};
            for (int64_t i = b0; i < n && i < b0 + 4096; i++) {
                float g = optim::adam_ref_grad(grad, dtype, i) * scale;
                col[(i - b0) % 64] += static_cast<double>(g) * static_cast<double>(g);
                if (!std::isfinite(g)) r.nonfinite = 1;
            }
            double block = 0.0;
            for (int c = 0; c < 64; c++)
                block += col[c];
            tile += block;
        }
        r.grad_sumsq += tile;
    }
    return r;
}

// A whole slice through the reference (optim/adam_ref.h), with the statistics in the grace order.
inline sof_optim_result twin_step(const sof_optim_slice& s, const sof_optim_hparams& hp) {
    optim::adam_ref_step(s, hp);
    return twin_stats(s.grad, s.grad_dtype, s.n, hp.grad_scale);
}

inline void twin_rollback(const sof_optim_slice& s, const sof_optim_hparams& hp) {
    optim::adam_ref_rollback(s, hp);
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
