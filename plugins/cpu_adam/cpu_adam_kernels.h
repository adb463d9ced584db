// cpu_adam kernel interface: one tile of an AdamW/Adam step (or of grad statistics) per call,
// implemented once per instruction set (scalar, AVX2+FMA, AVX-512) and picked at run time.
#pragma once

#include <cstdint>

#include "optim/adam_ref.h"

namespace sof::cpu_adam {

// One tile of a slice: n elements starting at the same offset in every buffer.
struct Tile {
    int64_t n;
    const float* p; // (n) params, read
    const void* g;  // (n) grads of dtype gd, read
    const float* m; // (n) exp_avg, read
    const float* v; // (n) exp_avg_sq, read
    float* po;      // (n) params out (== p in place)
    float* mo;      // (n) exp_avg out
    float* vo;      // (n) exp_avg_sq out
    void* lowp;     // (n) bf16/fp16 copy of the new params, or nullptr
    int32_t gd;     // grad dtype (sof_dtype)
    int32_t ld;     // lowp dtype (sof_dtype)
};

// Step one tile and return the fp64 sum of squares of the scaled grads (NaN/Inf when a scaled
// grad is not finite). `nt`: write outputs with streaming stores (separate-output mode; the
// caller guarantees po/mo/vo are 64-byte and lowp 32-byte aligned at the tile start).
// Every variant follows optim::adam_ref_elem exactly (no FMA), so all give bitwise equal p/m/v.
// Software prefetch distance in elements for the input streams p, g, m, v (0 = none). Issued
// once per 16 elements in the first pass of a block, it starts the misses of p (only read in the
// second pass) and of the next blocks while the divider works; see docs/performance.md.
#ifndef SOF_CPU_ADAM_PREFETCH
#define SOF_CPU_ADAM_PREFETCH 1024
#endif
constexpr int64_t kPrefetch = SOF_CPU_ADAM_PREFETCH;

// Prefetches the lines holding element i + kPrefetch of every input stream of t (no faults: a
// prefetch past the end of a buffer is dropped).
inline void prefetch_inputs(const Tile& t, int64_t i) {
    if constexpr (kPrefetch > 0) {
        int64_t k = i + kPrefetch;
        __builtin_prefetch(t.p + k, 0, 3);
        __builtin_prefetch(t.m + k, 0, 3);
        __builtin_prefetch(t.v + k, 0, 3);
        __builtin_prefetch(static_cast<const char*>(t.g) + k * (t.gd == SOF_DTYPE_F32 ? 4 : 2), 0,
                           3);
    }
}

using StepTileFn = double (*)(const optim::AdamConsts& c, const Tile& t, bool nt);
// Sum of squares of scale*g over one tile, accumulated in the same order as StepTileFn of the
// same variant (so grad_stats and adam_step report bitwise equal statistics).
using StatsTileFn = double (*)(const void* g, int32_t gd, int64_t n, float scale);

struct KernelSet {
    const char* name; // "scalar", "avx2", "avx512"
    StepTileFn step;
    StatsTileFn stats;
};

KernelSet scalar_kernels();
KernelSet avx2_kernels();
KernelSet avx512_kernels();

} // namespace sof::cpu_adam
