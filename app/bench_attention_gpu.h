// The GPU mode of `superoffload bench attention` (bench_attention_gpu.cpp): both CUDA attention
// kernels, forward and backward timed separately; scripts/bench/attention_gpu.sh runs it beside
// PyTorch's scaled_dot_product_attention.
#pragma once

namespace sof::app {

struct GpuAttnOpts {
    int B = 4, T = 4096, NH = 16, NKV = 16, hd = 128, reps = 20;
    int window = 0; // sliding window W (0: full causal)
};

// (query, key) pairs attention computes per head over T positions: T (T + 1) / 2 causal, with a
// sliding window W < T: W (W + 1) / 2 + (T - W) W.
inline double attention_pairs(int T, int window) {
    const double t = T, w = window;
    if (window <= 0 || window >= T) return t * (t + 1) / 2;
    return w * (w + 1) / 2 + (t - w) * w;
}

// Throws core::Error (Config) where no GPU is visible or the build has no CUDA.
int bench_attention_gpu(const GpuAttnOpts& o);

} // namespace sof::app
