// The list of ops of this module (one header X.h, a CPU twin cpu/X.cpp and a CUDA twin cuda/X.cu
// each): the op driver (tests/kernels) tests every entry, the structure test checks the files.
#pragma once

namespace sof::kernels {

inline constexpr const char* kOps[] = {
    "attention", "bias_grad", "cast",         "copy",           "dropout",
    "embedding", "gelu",      "grad_stats",   "grouped_matmul", "layernorm",
    "matmul",    "moe_aux",   "moe_dispatch", "moe_router",     "residual",
    "rmsnorm",   "rope",      "swiglu",       "swiglu_clamp",   "xent",
};

} // namespace sof::kernels
