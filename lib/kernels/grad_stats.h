// Gradient statistics for validation (STV): per piece, the sum of squares of scale*g in fp64 with
// a fixed accumulation order and a non-finite flag (+ the bf16 copy); and the rank-order chunk sum.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/exec.h"

namespace sof::kernels {

// Result of grad_prep for one piece (16 bytes; the device writes it, the host reads it).
struct GradStats {
    double sumsq;      // sum over the piece of (scale*g)^2, fp64, fixed accumulation order
    int32_t nonfinite; // 1 if any scale*g is NaN or +-Inf
    int32_t reserved;
};

// Piece length for statistics: tensors are cut into pieces of at most this many elements,
// counted from each tensor's start. Buckets only ever split a tensor at piece boundaries.
constexpr int64_t kStatPiece = 1 << 16;

// The canonical reduction of one piece: g' = scale*g[i] (rounded to bf16 and stored to
// bf16_out[i] when bf16_out is given) over n elements. Lane j accumulates the elements i with
// i % 4 == j in index order; the result is (lane0 + lane1) + (lane2 + lane3). Every path (plain,
// engine, any bucket size, both twins) reduces the same pieces this way, so the global norm is
// bitwise independent of bucketing, timing and the device.
inline GradStats piece_stats(const float* g, size_t n, float scale, uint16_t* bf16_out) {
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    bool bad = false;
    for (size_t i = 0; i < n; i++) {
        float x = g[i] * scale;
        if (bf16_out) {
            const uint16_t h = core::f32_to_bf16(x);
            bf16_out[i] = h;
            x = core::bf16_to_f32(h);
        }
        bad |= !std::isfinite(x);
        const double d = static_cast<double>(x);
        acc[i & 3] += d * d;
    }
    GradStats s;
    s.sumsq = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    s.nonfinite = bad ? 1 : 0;
    s.reserved = 0;
    return s;
}

// grad (n fp32); bounds: npieces+1 ascending offsets from 0 to n; stats (npieces) and bf16_out
// (n, may be null) in the Exec's memory. Piece i covers [bounds[i], bounds[i+1]).
// grad_prep_pieces: the same with the bounds already in the Exec's memory (uploaded once, e.g.
// the engine's piece bounds of the whole model): bounds (npieces+1) ascending, piece i covers
// grad[bounds[i] - base, bounds[i+1] - base) (base = bounds[0] for a slice of a longer list).
// Not checked by the op (device memory): check_piece_bounds them on the host before the upload.
namespace cpu {
void grad_prep(const float* grad, size_t n, const std::vector<int64_t>& bounds, float scale,
               GradStats* stats, uint16_t* bf16_out);
void grad_prep_pieces(const float* grad, const int64_t* bounds, int64_t npieces, int64_t base,
                      float scale, GradStats* stats, uint16_t* bf16_out);
// out[i] = (((chunks[0][i] + chunks[1][i]) + chunks[2][i]) + ...) over nchunks chunks of n.
// out may alias chunks (the first chunk).
void sum_chunks(const float* chunks, int nchunks, size_t n, float* out);
} // namespace cpu

namespace cuda {
// Same sums bitwise (explicit _rn intrinsics, the same lane order), on the current device (the
// caller has set it). grad_prep copies the host bounds into the stream's scratch first
// (bounds_scratch_bytes).
void grad_prep(const float* grad, size_t n, const std::vector<int64_t>& bounds, float scale,
               GradStats* stats, uint16_t* bf16_out, void* stream, Scratch* scratch);
void grad_prep_pieces(const float* grad, const int64_t* bounds, int64_t npieces, int64_t base,
                      float scale, GradStats* stats, uint16_t* bf16_out, void* stream);
void sum_chunks(const float* chunks, int nchunks, size_t n, float* out, void* stream);
} // namespace cuda

void check_piece_bounds(const std::vector<int64_t>& bounds, size_t n); // throws Internal

inline void grad_prep(const Exec& ex, const float* grad, size_t n,
                      const std::vector<int64_t>& bounds, float scale, GradStats* stats,
                      uint16_t* bf16_out) {
    check_piece_bounds(bounds, n);
    SOF_KERNEL_DISPATCH(
        ex, float, "grad_prep", (cpu::grad_prep(grad, n, bounds, scale, stats, bf16_out)),
        (cuda::grad_prep(grad, n, bounds, scale, stats, bf16_out, ex.stream, ex.scratch)));
}

inline void grad_prep_pieces(const Exec& ex, const float* grad, const int64_t* bounds,
                             int64_t npieces, int64_t base, float scale, GradStats* stats,
                             uint16_t* bf16_out) {
    SOF_KERNEL_DISPATCH(
        ex, float, "grad_prep",
        (cpu::grad_prep_pieces(grad, bounds, npieces, base, scale, stats, bf16_out)),
        (cuda::grad_prep_pieces(grad, bounds, npieces, base, scale, stats, bf16_out, ex.stream)));
}

inline void sum_chunks(const Exec& ex, const float* chunks, int nchunks, size_t n, float* out) {
    SOF_KERNEL_DISPATCH(ex, float, "sum_chunks", (cpu::sum_chunks(chunks, nchunks, n, out)),
                        (cuda::sum_chunks(chunks, nchunks, n, out, ex.stream)));
}

} // namespace sof::kernels
