// The GPU mode of `superoffload bench attention` (bench_attention_gpu.cpp): both CUDA attention
// kernels, forward and backward timed separately; scripts/bench/attention_gpu.sh runs it beside
// PyTorch's scaled_dot_product_attention.
#pragma once

namespace sof::app {

struct GpuAttnOpts {
    int B = 4, T = 4096, NH = 16, NKV = 16, hd = 128, reps = 20;
};

// Throws core::Error (Config) where no GPU is visible or the build has no CUDA.
int bench_attention_gpu(const GpuAttnOpts& o);

} // namespace sof::app
