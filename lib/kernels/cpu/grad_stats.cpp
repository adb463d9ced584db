// CPU twin of grad_stats.h: piece_stats per piece in order, and the rank-order chunk sum. Serial:
// the host device runs them on a stream's worker thread, beside the trainer's OpenMP threads.
#include "kernels/grad_stats.h"

namespace sof::kernels::cpu {

void grad_prep_pieces(const float* grad, const int64_t* bounds, int64_t npieces, int64_t base,
                      float scale, GradStats* stats, uint16_t* bf16_out) {
    for (int64_t i = 0; i < npieces; i++) {
        const size_t a = static_cast<size_t>(bounds[i] - base);
        const size_t b = static_cast<size_t>(bounds[i + 1] - base);
        stats[i] = piece_stats(grad + a, b - a, scale, bf16_out ? bf16_out + a : nullptr);
    }
}

void grad_prep(const float* grad, size_t n, const std::vector<int64_t>& bounds, float scale,
               GradStats* stats, uint16_t* bf16_out) {
    (void)n;
    grad_prep_pieces(grad, bounds.data(), static_cast<int64_t>(bounds.size()) - 1, 0, scale, stats,
                     bf16_out);
}

void sum_chunks(const float* chunks, int nchunks, size_t n, float* out) {
    for (size_t i = 0; i < n; i++) {
        float a = chunks[i];
        for (int q = 1; q < nchunks; q++)
            a += chunks[static_cast<size_t>(q) * n + i];
        out[i] = a;
    }
}

} // namespace sof::kernels::cpu
