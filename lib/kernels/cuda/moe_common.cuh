// Device helpers shared by the MoE twins (moe_router.cu, moe_aux.cu): one warp per token row,
// lane l holding the experts l, l + 32, ... of the row in registers.
#pragma once

#include "kernels/cuda/reduce.cuh"
#include "kernels/moe_router.h"

namespace sof::kernels::cuda {

constexpr int kRowPerLane = kMaxExperts / 32; // experts per lane, at most

// v[t] = expert lane + 32 t of row (E), -inf past E (unrolled: registers, no local memory).
template <class D>
__device__ __forceinline__ void load_row(float (&v)[kRowPerLane], const D* row, int E, int lane) {
#pragma unroll
    for (int t = 0; t < kRowPerLane; t++) {
        const int j = lane + 32 * t;
        v[t] = j < E ? to_float(row[j]) : -INFINITY;
    }
}

// The row's maximum m and sum s of exp(v - m) (every lane gets the same bits).
__device__ __forceinline__ void row_softmax_stats(const float (&v)[kRowPerLane], int E, int lane,
                                                  float* m, float* s) {
    float mx = -INFINITY;
#pragma unroll
    for (int t = 0; t < kRowPerLane; t++)
        if (lane + 32 * t < E) mx = fmaxf(mx, v[t]);
    mx = warp_max(mx);
    float acc = 0.0f;
#pragma unroll
    for (int t = 0; t < kRowPerLane; t++)
        if (lane + 32 * t < E) acc += expf(v[t] - mx);
    *m = mx;
    *s = warp_sum(acc);
}

// Launch shape of the one-warp-per-row kernels.
constexpr int kRowWarps = 8; // rows per block of 256 threads
inline unsigned row_blocks(int rows) {
    return static_cast<unsigned>((rows + kRowWarps - 1) / kRowWarps);
}

} // namespace sof::kernels::cuda
