// The canonical host reduction for gradient statistics: sum of squares in fp64 with a fixed
// 4-lane accumulation order and a non-finite flag. Shared by the host device and the plain path.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "device/device.h"

namespace sof::device {

// Stats of g' = scale*g[i] (rounded to bf16 and stored to bf16_out[i] when bf16_out is given)
// over n elements. Lane j accumulates elements i with i % 4 == j in index order; the result is
// (lane0 + lane1) + (lane2 + lane3). Every path (plain, engine, any bucket size) reduces the same
// pieces with this function, so the global norm is bitwise independent of bucketing and timing.
inline GradStats piece_stats(const float* g, size_t n, float scale, uint16_t* bf16_out) {
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    bool bad = false;
    for (size_t i = 0; i < n; i++) {
        float x = g[i] * scale;
        if (bf16_out) {
            uint16_t h = core::f32_to_bf16(x);
            bf16_out[i] = h;
            x = core::bf16_to_f32(h);
        }
        bad |= !std::isfinite(x);
        double d = static_cast<double>(x);
        acc[i & 3] += d * d;
    }
    GradStats s;
    s.sumsq = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    s.nonfinite = bad ? 1 : 0;
    s.reserved = 0;
    return s;
}

// Piece length for statistics: tensors are cut into pieces of at most this many elements,
// counted from each tensor's start. Buckets only ever split a tensor at piece boundaries.
constexpr int64_t kStatPiece = 1 << 16;

} // namespace sof::device
